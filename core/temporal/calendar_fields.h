// -----------------------------------------------------------------------------
// File: core/temporal/calendar_fields.h
// -----------------------------------------------------------------------------
//
// The calendar fields (CalendarField) and their definitions, shared by the
// encoder and its per-thread writer (core/temporal/calendar.cc) and the
// fields' cycle tables (calendar_fields.cc): each field's civil value v, its
// zero-based x = v − base, its GluonTS count n and its calendar-true period
// P (defined in proto/phasor/v1/encoder.proto, message CalendarBlock), the elapsed fraction of its unit
// by the local clock, and the angle 2π·((k·x) mod P)/P of harmonic k.
// core/temporal/calendar_angles.cc spells the same operations out per field
// in vectors; a change here is a change there.
//
// Besides the field enum and its names, internal to the calendar: names live
// in phasor::calendar_internal.
//
// Thread-safety: constants and pure functions; the cycle tables are built
// once per process (thread-safe statics) and immutable afterwards.
//
// Example:
//
//   const int x = CivilValue(CalendarField::kDayOfMonth, local) -
//                 FieldBase(CalendarField::kDayOfMonth);  // day − 1
#ifndef PHASOR_CORE_TEMPORAL_CALENDAR_FIELDS_H_
#define PHASOR_CORE_TEMPORAL_CALENDAR_FIELDS_H_

#include <cmath>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "core/temporal/local_time.h"

namespace phasor {

enum class CalendarField {
  kSecondOfMinute,
  kMinuteOfHour,
  kHourOfDay,
  kDayOfWeek,
  kDayOfMonth,
  kDayOfYear,
  kWeekOfYear,
  kMonthOfYear,
  kQuarter,
  kYear,
  kIsoYear,
  kIsWeekend,
  kIsMonthStart,
  kIsMonthEnd,
  kIsQuarterStart,
  kIsQuarterEnd,
};
// "hour_of_day", ... as the proto spells the field.
absl::string_view CalendarFieldName(CalendarField field);

namespace calendar_internal {

// A row's local clock, shared by its fractional fields.
struct RowClock {
  double seconds;       // second + subsecond, in seconds.
  double day_fraction;  // Elapsed part of the local day.
};

inline constexpr double kTwoPi = 6.283185307179586476925286766559;
inline constexpr int64_t kNanosPerSecond = 1000000000;
inline constexpr int kNumFieldKinds = 16;
// The first nine kinds are the cyclic fields; then the years; then the flags.
inline constexpr int kNumCyclicKinds = 9;

inline bool IsCyclicField(CalendarField field) {
  return static_cast<int>(field) < kNumCyclicKinds;
}

inline bool IsYearField(CalendarField field) {
  return field == CalendarField::kYear || field == CalendarField::kIsoYear;
}

inline bool IsFlagField(CalendarField field) {
  return static_cast<int>(field) > static_cast<int>(CalendarField::kIsoYear);
}

inline bool IsClockField(CalendarField field) {
  return field == CalendarField::kSecondOfMinute ||
         field == CalendarField::kMinuteOfHour ||
         field == CalendarField::kHourOfDay;
}

// The civil value v (INDEX) of a field.
inline int CivilValue(CalendarField field, const LocalTime& t) {
  switch (field) {
    case CalendarField::kSecondOfMinute:
      return t.second;
    case CalendarField::kMinuteOfHour:
      return t.minute;
    case CalendarField::kHourOfDay:
      return t.hour;
    case CalendarField::kDayOfWeek:
      return t.weekday;
    case CalendarField::kDayOfMonth:
      return t.date.day();
    case CalendarField::kDayOfYear:
      return t.day_of_year;
    case CalendarField::kWeekOfYear:
      return t.iso_week;
    case CalendarField::kMonthOfYear:
      return t.date.month();
    case CalendarField::kQuarter:
      return (t.date.month() - 1) / 3 + 1;
    case CalendarField::kYear:
      return static_cast<int>(t.date.year());
    case CalendarField::kIsoYear:
      return static_cast<int>(t.iso_year);
    // pandas/_libs/tslibs/fields.pyx get_start_end_field on the local date.
    case CalendarField::kIsWeekend:
      return t.weekday >= 5 ? 1 : 0;
    case CalendarField::kIsMonthStart:
      return t.date.day() == 1 ? 1 : 0;
    case CalendarField::kIsMonthEnd:
      return t.date.day() == t.days_in_month ? 1 : 0;
    case CalendarField::kIsQuarterStart:
      return t.date.day() == 1 && (t.date.month() - 1) % 3 == 0 ? 1 : 0;
    case CalendarField::kIsQuarterEnd:
      return t.date.day() == t.days_in_month && t.date.month() % 3 == 0 ? 1 : 0;
  }
  return 0;
}

// v − x: 1 for the fields numbered from 1 (the years' x is v − min_year,
// handled by the encoder).
inline int FieldBase(CalendarField field) {
  switch (field) {
    case CalendarField::kDayOfMonth:
    case CalendarField::kDayOfYear:
    case CalendarField::kWeekOfYear:
    case CalendarField::kMonthOfYear:
    case CalendarField::kQuarter:
      return 1;
    default:
      return 0;
  }
}

// GluonTS's n (LINEAR divides by n − 1).
inline int LinearCount(CalendarField field) {
  switch (field) {
    case CalendarField::kSecondOfMinute:
    case CalendarField::kMinuteOfHour:
      return 60;
    case CalendarField::kHourOfDay:
      return 24;
    case CalendarField::kDayOfWeek:
      return 7;
    case CalendarField::kDayOfMonth:
      return 31;
    case CalendarField::kDayOfYear:
      return 366;
    case CalendarField::kWeekOfYear:
      return 53;
    case CalendarField::kMonthOfYear:
      return 12;
    case CalendarField::kQuarter:
      return 4;
    default:  // Years (own range) and flags (0/1).
      return 2;
  }
}

// The largest civil value (sizes the SUM tables).
inline int MaxCivilValue(CalendarField field) {
  return LinearCount(field) - 1 + FieldBase(field);
}

// Calendar-true CYCLIC period.
inline int CyclePeriod(CalendarField field, const LocalTime& t) {
  switch (field) {
    case CalendarField::kDayOfMonth:
      return t.days_in_month;
    case CalendarField::kDayOfYear:
      return t.days_in_year;
    case CalendarField::kWeekOfYear:
      return t.iso_weeks_in_year;
    default:
      return LinearCount(field);
  }
}


inline RowClock ClockOf(const LocalTime& t) {
  const double seconds = t.second + static_cast<double>(t.subsecond_ns) * 1e-9;
  return {seconds, (t.hour * 3600.0 + t.minute * 60.0 + seconds) / 86400.0};
}

// The elapsed part of the field's unit by the local clock, in [0, 1).
// core/temporal/calendar_angles.cc spells the same operations out per field for
// EncodeRows' vectors; a change here is a change there.
inline double FieldFraction(CalendarField field, const LocalTime& t,
                     const RowClock& clock) {
  const double seconds = clock.seconds;
  const double day_fraction = clock.day_fraction;
  switch (field) {
    case CalendarField::kSecondOfMinute:
      return static_cast<double>(t.subsecond_ns) * 1e-9;
    case CalendarField::kMinuteOfHour:
      return seconds / 60.0;
    case CalendarField::kHourOfDay:
      return (t.minute * 60.0 + seconds) / 3600.0;
    case CalendarField::kDayOfWeek:
    case CalendarField::kDayOfMonth:
    case CalendarField::kDayOfYear:
      return day_fraction;
    case CalendarField::kWeekOfYear:
      return (t.weekday + day_fraction) / 7.0;
    case CalendarField::kMonthOfYear:
      return (t.date.day() - 1 + day_fraction) / t.days_in_month;
    case CalendarField::kQuarter:
      return ((t.date.month() - 1) % 3 +
              (t.date.day() - 1 + day_fraction) / t.days_in_month) /
             3.0;
    case CalendarField::kYear:
      return (t.day_of_year - 1 + day_fraction) / t.days_in_year;
    case CalendarField::kIsoYear:
      return ((t.iso_week - 1) * 7 + t.weekday + day_fraction) /
             (7.0 * t.iso_weeks_in_year);
    default:  // Flags.
      return 0.0;
  }
}

// The angle of harmonic k of a cyclic field at x in [0, period): 2π·x'/P
// with x' = (k·x) mod P, exact (fmod is), a smaller angle.
// core/temporal/calendar_angles.cc computes it likewise, in vectors.
inline double HarmonicAngle(double x, int period, int64_t k) {
  const double kx = k == 1 ? x : std::fmod(static_cast<double>(k) * x, period);
  return kTwoPi * kx / period;
}

// The harmonics k = 1..order of a fixed-period table's entry x: entry
// (k·x) mod P, the bits EncodeField computes for harmonic k.
inline void TableHarmonics(const double* table, int x, int period, int64_t order,
                           double* out) {
  out[0] = table[2 * x];
  out[1] = table[2 * x + 1];
  for (int64_t k = 2; k <= order; ++k) {
    const auto i = static_cast<int>(k * x % period);
    out[2 * k - 2] = table[2 * i];
    out[2 * k - 1] = table[2 * i + 1];
  }
}

// sin, cos of 2π·numerator/denominator exactly reduced: the ratio as a
// fraction of 2^64 turns, rounded to nearest (≤ 2^-65 turn), then
// ExactAngle::CosSinOfTurns (≤ 1.7e-16 absolute); out = {sin, cos}.
// REQUIRES: 0 <= numerator; 0 < denominator < 2^63.
void ExactCycle(int64_t numerator, int64_t denominator, double* out);

// The [sin, cos] tables of the fields of fixed period, indexed by x, built
// once per process: the clock fields (period 60 or 24) and, for day_of_week,
// month_of_year and quarter, FixedDayCycles (null for the others). `exact`
// selects the float64 path's values (ExactCycle) over the float32 path's.
const double* ClockCycles(int period, bool exact);
const double* FixedDayCycles(CalendarField field, bool exact);

}  // namespace calendar_internal
}  // namespace phasor

#endif  // PHASOR_CORE_TEMPORAL_CALENDAR_FIELDS_H_
