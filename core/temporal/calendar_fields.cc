#include "core/temporal/calendar_fields.h"

#include <array>
#include <cassert>
#include <cmath>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "core/math/exact_angle.h"

namespace phasor {

absl::string_view CalendarFieldName(CalendarField field) {
  switch (field) {
    case CalendarField::kSecondOfMinute:
      return "second_of_minute";
    case CalendarField::kMinuteOfHour:
      return "minute_of_hour";
    case CalendarField::kHourOfDay:
      return "hour_of_day";
    case CalendarField::kDayOfWeek:
      return "day_of_week";
    case CalendarField::kDayOfMonth:
      return "day_of_month";
    case CalendarField::kDayOfYear:
      return "day_of_year";
    case CalendarField::kWeekOfYear:
      return "week_of_year";
    case CalendarField::kMonthOfYear:
      return "month_of_year";
    case CalendarField::kQuarter:
      return "quarter";
    case CalendarField::kYear:
      return "year";
    case CalendarField::kIsoYear:
      return "iso_year";
    case CalendarField::kIsWeekend:
      return "is_weekend";
    case CalendarField::kIsMonthStart:
      return "is_month_start";
    case CalendarField::kIsMonthEnd:
      return "is_month_end";
    case CalendarField::kIsQuarterStart:
      return "is_quarter_start";
    case CalendarField::kIsQuarterEnd:
      return "is_quarter_end";
  }
  return "unknown";
}

namespace calendar_internal {

void ExactCycle(int64_t numerator, int64_t denominator, double* out) {
  assert(numerator >= 0 && denominator > 0);
  using u128 = unsigned __int128;
  const auto den = static_cast<u128>(denominator);
  // (numerator mod denominator)·2^64 < 2^127; a result of 2^64 (a full
  // turn) wraps to 0.
  const auto turns = static_cast<uint64_t>(
      ((static_cast<u128>(numerator % denominator) << 64) + den / 2) / den);
  ExactAngle::CosSinOfTurns(turns, &out[1], &out[0]);
}

namespace {

// sin/cos of 2π·x/P for x = 0..P−1, [sin, cos] pairs: the CYCLIC clock
// fields' columns, computed once per process (immutable afterwards) instead
// of once per request. kExact: ExactCycle's values (float64 outputs).
template <int kPeriod, bool kExact = false>
std::array<double, 2 * kPeriod> MakeClockCycles() {
  std::array<double, 2 * kPeriod> table{};
  for (int x = 0; x < kPeriod; ++x) {
    if (kExact) {
      ExactCycle(x, kPeriod, &table[2 * x]);
    } else {
      table[2 * x] = std::sin(kTwoPi * x / kPeriod);
      table[2 * x + 1] = std::cos(kTwoPi * x / kPeriod);
    }
  }
  return table;
}

template <bool kExact>
const std::array<double, 2 * 60>& ClockCycles60() {
  static const std::array<double, 2 * 60> table = MakeClockCycles<60, kExact>();
  return table;
}

template <bool kExact>
const std::array<double, 2 * 24>& ClockCycles24() {
  static const std::array<double, 2 * 24> table = MakeClockCycles<24, kExact>();
  return table;
}

// The same tables for the day-level fields of fixed period (day_of_week 7,
// month_of_year 12, quarter 4), indexed by x; null for the fields whose
// period is calendar-true (day_of_month, day_of_year, week_of_year) and the
// clock fields. The entries are the bits EncodeField computes.
template <bool kExact>
const double* FixedDayCyclesOf(CalendarField field) {
  static const std::array<double, 2 * 7> week = MakeClockCycles<7, kExact>();
  static const std::array<double, 2 * 12> year = MakeClockCycles<12, kExact>();
  static const std::array<double, 2 * 4> quarters = MakeClockCycles<4, kExact>();
  switch (field) {
    case CalendarField::kDayOfWeek:
      return week.data();
    case CalendarField::kMonthOfYear:
      return year.data();
    case CalendarField::kQuarter:
      return quarters.data();
    default:
      return nullptr;
  }
}

}  // namespace

const double* ClockCycles(int period, bool exact) {
  assert(period == 60 || period == 24);
  if (period == 60) return exact ? ClockCycles60<true>().data() : ClockCycles60<false>().data();
  return exact ? ClockCycles24<true>().data() : ClockCycles24<false>().data();
}

const double* FixedDayCycles(CalendarField field, bool exact) {
  return exact ? FixedDayCyclesOf<true>(field) : FixedDayCyclesOf<false>(field);
}

}  // namespace calendar_internal
}  // namespace phasor
