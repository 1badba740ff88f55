#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/temporal/calendar.h"
#include "core/temporal/compose.h"
#include "core/temporal/local_time.h"
#include "core/temporal/time_zone.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/hwy_targets.h"
#include "tests/quad_reference.h"
#include "tests/calendar_test_data.h"
#include "tests/float64_instants.h"
#include "tests/status_matchers.h"

namespace phasor {
namespace {

using ::testing::HasSubstr;

constexpr double kTwoPi = 6.283185307179586476925286766559;

using testing::EncodeCalendar;
using testing::Expected;
using testing::ExpectedRows;
using testing::RowsByZone;
using testing::UtcNs;


std::vector<double> EncodeCalendar64(const CalendarBlock& block,
                                     const std::vector<int64_t>& times,
                                     int64_t* width) {
  return EncodeCalendar<double>(block, times, width);
}

const std::vector<CalendarField>& AllFields() {
  static const std::vector<CalendarField> fields = {
      CalendarField::kSecondOfMinute, CalendarField::kMinuteOfHour,
      CalendarField::kHourOfDay,      CalendarField::kDayOfWeek,
      CalendarField::kDayOfMonth,     CalendarField::kDayOfYear,
      CalendarField::kWeekOfYear,     CalendarField::kMonthOfYear,
      CalendarField::kQuarter};
  return fields;
}

// Civil value, zero-based x, GluonTS n and calendar-true P from the expected
// (Python) values, per the table in calendar.h.
struct FieldTruth {
  int value;
  int x;
  int n;
  int period;
};
FieldTruth Truth(CalendarField f, const Expected& e) {
  switch (f) {
    case CalendarField::kSecondOfMinute:
      return {e.second, e.second, 60, 60};
    case CalendarField::kMinuteOfHour:
      return {e.minute, e.minute, 60, 60};
    case CalendarField::kHourOfDay:
      return {e.hour, e.hour, 24, 24};
    case CalendarField::kDayOfWeek:
      return {e.weekday, e.weekday, 7, 7};
    case CalendarField::kDayOfMonth:
      return {e.day, e.day - 1, 31, e.days_in_month};
    case CalendarField::kDayOfYear:
      return {e.day_of_year, e.day_of_year - 1, 366, e.days_in_year};
    case CalendarField::kWeekOfYear:
      return {e.iso_week, e.iso_week - 1, 53, e.iso_weeks_in_year};
    case CalendarField::kMonthOfYear:
      return {e.month, e.month - 1, 12, 12};
    case CalendarField::kQuarter:
      return {(e.month - 1) / 3 + 1, (e.month - 1) / 3, 4, 4};
    default:  // Years and flags: tested on their own.
      break;
  }
  return {0, 0, 1, 1};
}

TEST(CalendarEncoder, IndexEncodingMatchesZoneinfo) {
  for (const auto& [zone, rows] : RowsByZone()) {
    CalendarBlock block;
    block.time_zone = zone;
    block.fields = AllFields();
    block.encoding = CalendarEncoding::kIndex;
    block.include_utc_offset = true;
    block.include_dst = true;
    std::vector<int64_t> times;
    for (const Expected& e : rows) times.push_back(e.unix_ns);
    int64_t width = 0;
    const std::vector<float> out = EncodeCalendar(block, times, &width);
    ASSERT_EQ(width, 9 + 2);
    for (size_t r = 0; r < rows.size(); ++r) {
      const Expected& e = rows[r];
      for (size_t f = 0; f < AllFields().size(); ++f) {
        EXPECT_EQ(out[r * width + f], Truth(AllFields()[f], e).value)
            << zone << " " << e.unix_ns << " field " << f;
      }
      EXPECT_FLOAT_EQ(out[r * width + 9], e.utc_offset_seconds / 3600.0f);
      EXPECT_EQ(out[r * width + 10], e.is_dst ? 1.0f : 0.0f);
    }
  }
}

TEST(CalendarEncoder, CyclicUsesCalendarTruePeriods) {
  for (const auto& [zone, rows] : RowsByZone()) {
    CalendarBlock block;
    block.time_zone = zone;
    block.fields = AllFields();
    block.encoding = CalendarEncoding::kCyclic;
    std::vector<int64_t> times;
    for (const Expected& e : rows) times.push_back(e.unix_ns);
    int64_t width = 0;
    const std::vector<float> out = EncodeCalendar(block, times, &width);
    ASSERT_EQ(width, 18);
    double worst = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
      for (size_t f = 0; f < AllFields().size(); ++f) {
        const FieldTruth truth = Truth(AllFields()[f], rows[r]);
        const double angle = kTwoPi * truth.x / truth.period;
        worst = std::max(worst, std::fabs(out[r * width + 2 * f] - std::sin(angle)));
        worst = std::max(worst, std::fabs(out[r * width + 2 * f + 1] - std::cos(angle)));
      }
    }
    EXPECT_LT(worst, 1e-7) << zone;
  }
  // The period really follows the calendar: day 29 of February 2024 (P = 29)
  // and day 29 of March 2024 (P = 31) encode differently.
  CalendarBlock block;
  block.fields = {CalendarField::kDayOfMonth};
  int64_t width = 0;
  const std::vector<float> out =
      EncodeCalendar(block, {UtcNs(2024, 2, 29), UtcNs(2024, 3, 29)}, &width);
  EXPECT_NEAR(out[0], std::sin(kTwoPi * 28 / 29), 1e-7);
  EXPECT_NEAR(out[2], std::sin(kTwoPi * 28 / 31), 1e-7);
}

TEST(CalendarEncoder, LinearIsGluonTsFormula) {
  // gluonts/time_feature/_base.py: e.g. DayOfMonth (day − 1)/30 − 0.5,
  // WeekOfYear (isocalendar().week − 1)/52 − 0.5.
  const auto by_zone = RowsByZone();
  const auto& rows = by_zone.at("America/New_York");
  CalendarBlock block;
  block.time_zone = "America/New_York";
  block.fields = AllFields();
  block.encoding = CalendarEncoding::kLinear;
  std::vector<int64_t> times;
  for (const Expected& e : rows) times.push_back(e.unix_ns);
  int64_t width = 0;
  const std::vector<float> out = EncodeCalendar(block, times, &width);
  ASSERT_EQ(width, 9);
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t f = 0; f < AllFields().size(); ++f) {
      const FieldTruth truth = Truth(AllFields()[f], rows[r]);
      EXPECT_NEAR(out[r * width + f],
                  static_cast<double>(truth.x) / (truth.n - 1) - 0.5, 1e-7);
    }
  }
  // Spot values: hour 23 → 0.5, Monday → −0.5, December → 0.5.
  block.time_zone = "UTC";
  block.fields = {CalendarField::kHourOfDay, CalendarField::kDayOfWeek,
                  CalendarField::kMonthOfYear};
  const std::vector<float> spot =
      EncodeCalendar(block, {UtcNs(2026, 12, 28, 23)}, &width);
  EXPECT_FLOAT_EQ(spot[0], 0.5f);
  EXPECT_FLOAT_EQ(spot[1], -0.5f);
  EXPECT_FLOAT_EQ(spot[2], 0.5f);
}

TEST(CalendarEncoder, FractionalFollowsTheLocalClock) {
  CalendarBlock block;
  block.time_zone = "America/New_York";
  block.fields = {CalendarField::kHourOfDay, CalendarField::kDayOfWeek,
                  CalendarField::kMinuteOfHour};
  block.fractional = true;
  // Tuesday 2026-07-07 09:30:15 EDT = 13:30:15Z.
  int64_t width = 0;
  const std::vector<float> out =
      EncodeCalendar(block, {UtcNs(2026, 7, 7, 13, 30, 15)}, &width);
  const double hour = 9 + 30 / 60.0 + 15 / 3600.0;
  const double weekday = 1 + hour / 24;
  const double minute = 30 + 15 / 60.0;
  EXPECT_NEAR(out[0], std::sin(kTwoPi * hour / 24), 1e-7);
  EXPECT_NEAR(out[1], std::cos(kTwoPi * hour / 24), 1e-7);
  EXPECT_NEAR(out[2], std::sin(kTwoPi * weekday / 7), 1e-7);
  EXPECT_NEAR(out[4], std::sin(kTwoPi * minute / 60), 1e-7);
  // LINEAR fractional: x/(n−1) − 0.5 with x = 9.504…
  block.encoding = CalendarEncoding::kLinear;
  const std::vector<float> linear =
      EncodeCalendar(block, {UtcNs(2026, 7, 7, 13, 30, 15)}, &width);
  EXPECT_NEAR(linear[0], hour / 23 - 0.5, 1e-7);
}

TEST(CalendarEncoder, UtcOffsetAndDstColumns) {
  CalendarBlock block;
  block.time_zone = "Asia/Kathmandu";
  block.include_utc_offset = true;
  block.include_dst = true;
  int64_t width = 0;
  const std::vector<float> out = EncodeCalendar(block, {UtcNs(2026, 6, 1)}, &width);
  ASSERT_EQ(width, 2);
  EXPECT_FLOAT_EQ(out[0], 5.75f);
  EXPECT_EQ(out[1], 0.0f);
}

TEST(CalendarEncoder, HolidaysUseTheLocalDate) {
  // 2026-07-04 03:30Z is still July 3 (23:30 EDT) in New York.
  CalendarBlock block;
  block.holidays = HolidaysBlock{{"2026-07-04"}, HolidayKernel::kIndicator, 1.0};
  int64_t width = 0;
  block.time_zone = "UTC";
  EXPECT_EQ(EncodeCalendar(block, {UtcNs(2026, 7, 4, 3, 30)}, &width)[0], 1.0f);
  block.time_zone = "America/New_York";
  EXPECT_EQ(EncodeCalendar(block, {UtcNs(2026, 7, 4, 3, 30)}, &width)[0], 0.0f);
  block.holidays->kernel = HolidayKernel::kExponential;
  block.holidays->alpha = 0.5;
  EXPECT_FLOAT_EQ(EncodeCalendar(block, {UtcNs(2026, 7, 4, 3, 30)}, &width)[0],
                  static_cast<float>(std::exp(-0.5)));
}

// The same instants through the whole calendar block (INT64_MIN itself is
// NaT, which observations reject; INT64_MIN + 1 is the earliest accepted),
// with fractional fields so the subsecond part reaches the output.
TEST(CalendarEncoder, ExtremeInt64TimestampsEncode) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  CalendarBlock block;
  block.time_zone = "Europe/Paris";
  block.fields = {CalendarField::kSecondOfMinute, CalendarField::kDayOfYear};
  block.encoding = CalendarEncoding::kLinear;
  block.fractional = true;
  const std::vector<int64_t> times = {kMin + 1, kMin + 2, kMax - 1, kMax};
  int64_t width = 0;
  const std::vector<float> out = EncodeCalendar(block, times, &width);
  ASSERT_EQ(width, 2);
  const absl::TimeZone zone = *LoadIanaTimeZone(block.time_zone, "zone");
  for (size_t r = 0; r < times.size(); ++r) {
    const absl::Time instant = absl::FromUnixNanos(times[r]);
    const absl::TimeZone::CivilInfo info = zone.At(instant);
    const double fraction = absl::ToDoubleSeconds(
        instant - absl::FromUnixSeconds(absl::ToUnixSeconds(instant)));
    // GluonTS LINEAR: x/(n−1) − 0.5 with x = second + fraction, n = 60.
    EXPECT_FLOAT_EQ(out[r * width], static_cast<float>(
                                        (info.cs.second() + fraction) / 59.0 - 0.5))
        << times[r];
  }
}

TEST(ValidateCalendarBlock, ErrorPaths) {
  const std::string p = "spec.temporal.calendar";
  CalendarBlock ok;
  ok.fields = {CalendarField::kHourOfDay};
  PHASOR_ASSERT_OK(ValidateCalendarBlock(ok, p));

  CalendarBlock zone = ok;
  zone.time_zone = "Mars/Base";
  EXPECT_THAT(ValidateCalendarBlock(zone, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".time_zone"));

  CalendarBlock twice = ok;
  twice.fields = {CalendarField::kHourOfDay, CalendarField::kDayOfWeek,
                  CalendarField::kHourOfDay};
  EXPECT_THAT(ValidateCalendarBlock(twice, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".fields[2]"));

  CalendarBlock unknown = ok;
  unknown.fields = {static_cast<CalendarField>(42)};
  EXPECT_THAT(ValidateCalendarBlock(unknown, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".fields[0]"));

  CalendarBlock nothing;
  EXPECT_THAT(ValidateCalendarBlock(nothing, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".fields"));

  CalendarBlock fractional_index = ok;
  fractional_index.encoding = CalendarEncoding::kIndex;
  fractional_index.fractional = true;
  EXPECT_THAT(ValidateCalendarBlock(fractional_index, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".fractional"));

  CalendarBlock bad_holiday = ok;
  bad_holiday.holidays = HolidaysBlock{{"2026-01-01", "2026-02-30"},
                                       HolidayKernel::kIndicator, 1.0};
  EXPECT_THAT(ValidateCalendarBlock(bad_holiday, p),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           p + ".holidays.dates[1]"));
}

// Under combine SUM a field's Informer rows come from a precomputed table or
// are computed when used, depending on max_table_rows; the bits are the same,
// so chunk sizes cannot change the output.
TEST(CalendarEncoder, SumRowsWithAndWithoutTablesAreIdentical) {
  CalendarBlock block;
  block.time_zone = "America/New_York";
  block.fields = AllFields();
  const int64_t d = 64;
  const absl::TimeZone zone = *LoadIanaTimeZone(block.time_zone, "time_zone");
  // All tables; none; the first three fields' (60 + 60 + 24 rows) only.
  const CalendarEncoder tables(block, zone, d);
  const CalendarEncoder computed(block, zone, d, /*max_table_rows=*/0);
  const CalendarEncoder some(block, zone, d, /*max_table_rows=*/150);
  CalendarEncoder::Writer a(tables), b(computed), c(some);
  std::mt19937_64 rng(53);
  int64_t t = UtcNs(2026, 1, 1, 0, 0, 0);
  std::vector<double> x(d), y(d), z(d);
  for (int i = 0; i < 2000; ++i) {
    t += static_cast<int64_t>(rng() % (3 * 86400)) * 1000000000;
    a.Encode(t, x.data());
    b.Encode(t, y.data());
    c.Encode(t, z.data());
    ASSERT_EQ(std::memcmp(x.data(), y.data(), d * sizeof(double)), 0) << t;
    ASSERT_EQ(std::memcmp(x.data(), z.data(), d * sizeof(double)), 0) << t;
  }
}

// The instants of zoneinfo rows, in order.
std::vector<int64_t> TimesOf(const std::vector<Expected>& rows) {
  std::vector<int64_t> times;
  for (const Expected& e : rows) times.push_back(e.unix_ns);
  return times;
}

const std::vector<CalendarField>& YearAndFlagFields() {
  static const std::vector<CalendarField> fields = {
      CalendarField::kYear,           CalendarField::kIsoYear,
      CalendarField::kIsWeekend,      CalendarField::kIsMonthStart,
      CalendarField::kIsMonthEnd,     CalendarField::kIsQuarterStart,
      CalendarField::kIsQuarterEnd};
  return fields;
}

// The flags from the zoneinfo row, as pandas defines them
// (pandas/_libs/tslibs/fields.pyx get_start_end_field).
std::vector<int> ExpectedFlags(const Expected& e) {
  const bool start = e.day == 1;
  const bool end = e.day == e.days_in_month;
  return {e.weekday >= 5, start, end, start && e.month % 3 == 1,
          end && e.month % 3 == 0};
}

TEST(CalendarEncoder, YearsAndFlagsMatchZoneinfo) {
  for (const auto& [zone, rows] : RowsByZone()) {
    CalendarBlock block;
    block.time_zone = zone;
    block.fields = YearAndFlagFields();
    const std::vector<int64_t> times = TimesOf(rows);
    int flags_set[5] = {};
    for (CalendarEncoding encoding : {CalendarEncoding::kIndex, CalendarEncoding::kLinear,
                                      CalendarEncoding::kCyclic}) {
      block.encoding = encoding;
      block.min_year = 1900;
      block.max_year = 2200;
      int64_t width = 0;
      const std::vector<double> out = EncodeCalendar64(block, times, &width);
      // A flag is one column under every encoding; a year too (LINEAR under
      // CYCLIC).
      ASSERT_EQ(width, 7);
      for (size_t r = 0; r < rows.size(); ++r) {
        const Expected& e = rows[r];
        SCOPED_TRACE(::testing::Message() << zone << " @ " << e.unix_ns);
        const double* row = &out[r * width];
        if (encoding == CalendarEncoding::kIndex) {
          EXPECT_EQ(row[0], e.year);
          EXPECT_EQ(row[1], e.iso_year);
        } else {
          EXPECT_NEAR(row[0], (e.year - 1900) / 300.0 - 0.5, 1e-15);
          EXPECT_NEAR(row[1], (e.iso_year - 1900) / 300.0 - 0.5, 1e-15);
        }
        const std::vector<int> flags = ExpectedFlags(e);
        for (int f = 0; f < 5; ++f) {
          EXPECT_EQ(row[2 + f], flags[f]) << CalendarFieldName(block.fields[2 + f]);
          flags_set[f] += flags[f];
        }
      }
    }
    // Every flag is seen set (and, far more often, clear) in every zone.
    for (int f = 0; f < 5; ++f) EXPECT_GT(flags_set[f], 0) << zone << " flag " << f;
  }
}

TEST(CalendarEncoder, FlagsFollowTheLocalDate) {
  // 2026-03-31T23:30-04:00 in New York is 2026-04-01T03:30Z: the local day is
  // the quarter's last (is_quarter_end, is_month_end), UTC's is a quarter
  // start; 2026-01-03 is a Saturday.
  CalendarBlock block;
  block.time_zone = "America/New_York";
  block.fields = {CalendarField::kIsQuarterEnd, CalendarField::kIsMonthEnd,
                  CalendarField::kIsQuarterStart, CalendarField::kIsWeekend};
  int64_t width = 0;
  const std::vector<float> ny = EncodeCalendar(
      block, {UtcNs(2026, 1, 3, 12), UtcNs(2026, 4, 1, 3, 30)}, &width);
  EXPECT_EQ(ny, (std::vector<float>{0, 0, 0, 1, 1, 1, 0, 0}));
  block.time_zone = "UTC";
  const std::vector<float> utc = EncodeCalendar(block, {UtcNs(2026, 4, 1, 3, 30)}, &width);
  EXPECT_EQ(utc, (std::vector<float>{0, 0, 1, 0}));
}

TEST(CalendarEncoder, FractionalYearsCountTheElapsedYear) {
  // 2024-07-02T12:00Z: day 184 of 366, so year 2024 + 183.5/366; ISO week
  // 27 (Tuesday) of 52: 2024 + (26·7 + 1 + 0.5)/364.
  CalendarBlock block;
  block.fields = {CalendarField::kYear, CalendarField::kIsoYear,
                  CalendarField::kIsMonthStart};
  block.encoding = CalendarEncoding::kLinear;
  block.fractional = true;
  block.min_year = 2000;
  block.max_year = 2050;
  int64_t width = 0;
  const std::vector<double> out =
      EncodeCalendar64(block, {UtcNs(2024, 7, 2, 12)}, &width);
  ASSERT_EQ(width, 3);
  EXPECT_NEAR(out[0], (24 + 183.5 / 366) / 50 - 0.5, 1e-15);
  EXPECT_NEAR(out[1], (24 + (26 * 7 + 1.5) / 364) / 50 - 0.5, 1e-15);
  EXPECT_EQ(out[2], 0.0);
}

TEST(CalendarEncoder, ZeroBasedIndexIsGluonTsIndex) {
  // gluonts/time_feature/_base.py: DayOfMonthIndex = day − 1,
  // MonthOfYearIndex = month − 1, WeekOfYearIndex = week − 1, ...
  for (const auto& [zone, rows] : RowsByZone()) {
    CalendarBlock block;
    block.time_zone = zone;
    block.fields = AllFields();
    block.fields.push_back(CalendarField::kYear);
    block.encoding = CalendarEncoding::kIndex;
    block.zero_based_index = true;
    block.min_year = 1900;
    const std::vector<int64_t> times = TimesOf(rows);
    int64_t width = 0;
    const std::vector<float> out = EncodeCalendar(block, times, &width);
    ASSERT_EQ(width, 10);
    for (size_t r = 0; r < rows.size(); ++r) {
      for (size_t f = 0; f < AllFields().size(); ++f) {
        EXPECT_EQ(out[r * width + f], Truth(AllFields()[f], rows[r]).x)
            << zone << " " << rows[r].unix_ns << " field " << f;
      }
      EXPECT_EQ(out[r * width + 9], rows[r].year - 1900);
    }
  }
}

TEST(CalendarEncoder, FourierHarmonicsOfEachField) {
  const auto by_zone = RowsByZone();
  for (const char* zone : {"America/New_York", "Australia/Lord_Howe", "UTC"}) {
    const std::vector<Expected>& rows = by_zone.at(zone);
    const std::vector<int64_t> times = TimesOf(rows);
    CalendarBlock block;
    block.time_zone = zone;
    block.fields = AllFields();
    block.fields.push_back(CalendarField::kIsWeekend);
    block.fourier_orders = {3, 1, 4, 3, 2, 10, 5, 6, 2, 0};
    int64_t orders = 0;
    for (int64_t k : block.fourier_orders) orders += std::max<int64_t>(k, 1);
    for (bool fractional : {false, true}) {
      block.fractional = fractional;
      int64_t width = 0;
      const std::vector<double> f64 = EncodeCalendar64(block, times, &width);
      ASSERT_EQ(width, 2 * orders - 1);  // The flag is one column.
      const std::vector<float> f32 = EncodeCalendar(block, times, &width);
      double worst64 = 0, worst32 = 0;
      for (size_t r = 0; r < rows.size(); ++r) {
        const Expected& e = rows[r];
        const double day_seconds = e.hour * 3600.0 + e.minute * 60 + e.second +
                                   e.subsecond_ns * 1e-9;
        int64_t column = 0;
        for (size_t f = 0; f < AllFields().size(); ++f) {
          const FieldTruth truth = Truth(AllFields()[f], e);
          // The fraction of the field's unit by the local clock (calendar.h).
          long double x = truth.x;
          if (fractional) {
            const long double day = day_seconds / 86400.0L;
            switch (AllFields()[f]) {
              case CalendarField::kSecondOfMinute: x += e.subsecond_ns * 1e-9L; break;
              case CalendarField::kMinuteOfHour: x += (e.second + e.subsecond_ns * 1e-9L) / 60; break;
              case CalendarField::kHourOfDay: x += (day_seconds - e.hour * 3600.0L) / 3600; break;
              case CalendarField::kWeekOfYear: x += (e.weekday + day) / 7; break;
              case CalendarField::kMonthOfYear: x += (e.day - 1 + day) / e.days_in_month; break;
              case CalendarField::kQuarter:
                x += ((e.month - 1) % 3 + (e.day - 1 + day) / e.days_in_month) / 3; break;
              default: x += day; break;
            }
          }
          const int64_t order = std::max<int64_t>(block.fourier_orders[f], 1);
          for (int64_t k = 1; k <= order; ++k, column += 2) {
            const long double angle = 2 * 3.14159265358979323846264338327950288L * k * x / truth.period;
            const long double s = std::sin(angle), c = std::cos(angle);
            const double* row = &f64[r * width + column];
            worst64 = std::max<double>(worst64, std::fabs(row[0] - s));
            worst64 = std::max<double>(worst64, std::fabs(row[1] - c));
            const float* row32 = &f32[r * width + column];
            worst32 = std::max<double>(worst32, std::fabs(row32[0] - s));
            worst32 = std::max<double>(worst32, std::fabs(row32[1] - c));
          }
        }
        EXPECT_EQ(f64[r * width + column], e.weekday >= 5 ? 1.0 : 0.0);
      }
      // long double's own sin is good to ~1e-19; the fractional x above
      // is a double sum (~1e-16 of a turn) times k <= 10.
      EXPECT_LT(worst64, fractional ? 4e-15 : 4e-16) << zone;
      EXPECT_LT(worst32, 1e-7) << zone;
    }
  }
}

TEST(CalendarEncoder, FirstHarmonicIsThePlainCyclicPair) {
  // Order 1 (or 0) gives the bytes the block gave before orders existed, and
  // harmonic 1 of a higher order equals them too.
  CalendarBlock plain;
  plain.time_zone = "Europe/London";
  plain.fields = AllFields();
  CalendarBlock harmonics = plain;
  harmonics.fourier_orders = {2, 2, 2, 2, 2, 2, 2, 2, 2};
  std::vector<int64_t> times;
  std::mt19937_64 rng(7);
  int64_t t = UtcNs(2020, 1, 1);
  for (int i = 0; i < 5000; ++i) {
    t += static_cast<int64_t>(rng() % (7 * 86400)) * 1000000000 + rng() % 1000000000;
    times.push_back(t);
  }
  for (bool fractional : {false, true}) {
    plain.fractional = harmonics.fractional = fractional;
    int64_t w1 = 0, w2 = 0;
    const std::vector<double> a = EncodeCalendar64(plain, times, &w1);
    const std::vector<double> b = EncodeCalendar64(harmonics, times, &w2);
    const std::vector<float> a32 = EncodeCalendar(plain, times, &w1);
    const std::vector<float> b32 = EncodeCalendar(harmonics, times, &w2);
    ASSERT_EQ(w2, 2 * w1);
    for (size_t r = 0; r < times.size(); ++r) {
      for (int f = 0; f < 9; ++f) {
        for (int j = 0; j < 2; ++j) {
          ASSERT_EQ(a[r * w1 + 2 * f + j], b[r * w2 + 4 * f + j]) << r << " " << f;
          ASSERT_EQ(a32[r * w1 + 2 * f + j], b32[r * w2 + 4 * f + j]) << r << " " << f;
        }
      }
    }
  }
}

TEST(ValidateCalendarBlock, AdditionsErrorPaths) {
  const std::string p = "spec.temporal.calendar";
  const auto expect_error = [&](const CalendarBlock& block, const std::string& field) {
    EXPECT_THAT(ValidateCalendarBlock(block, p),
                IsFieldError(absl::StatusCode::kInvalidArgument, p + field));
  };
  CalendarBlock year;
  year.fields = {CalendarField::kHourOfDay, CalendarField::kYear};
  year.encoding = CalendarEncoding::kLinear;
  expect_error(year, ".min_year");
  year.min_year = 2000;
  expect_error(year, ".max_year");
  year.max_year = 2000;
  expect_error(year, ".max_year");
  year.max_year = 2030;
  PHASOR_ASSERT_OK(ValidateCalendarBlock(year, p));
  year.min_year.reset();
  expect_error(year, ".min_year");  // max_year alone.

  CalendarBlock index;
  index.fields = {CalendarField::kIsoYear};
  index.encoding = CalendarEncoding::kIndex;
  PHASOR_ASSERT_OK(ValidateCalendarBlock(index, p));  // The civil year.
  index.zero_based_index = true;
  expect_error(index, ".min_year");
  index.min_year = 1990;
  PHASOR_ASSERT_OK(ValidateCalendarBlock(index, p));
  index.min_year = int64_t{1} << 40;
  expect_error(index, ".min_year");

  CalendarBlock zero_based;
  zero_based.fields = {CalendarField::kDayOfMonth};
  zero_based.zero_based_index = true;  // CYCLIC.
  expect_error(zero_based, ".zero_based_index");

  CalendarBlock orders;
  orders.fields = {CalendarField::kHourOfDay, CalendarField::kIsWeekend};
  orders.fourier_orders = {3};
  expect_error(orders, ".fourier_orders");
  orders.fourier_orders = {3, 2};
  expect_error(orders, ".fourier_orders[1]");
  orders.fourier_orders = {-1, 0};
  expect_error(orders, ".fourier_orders[0]");
  orders.fourier_orders = {kMaxFourierOrder + 1, 1};
  expect_error(orders, ".fourier_orders[0]");
  orders.fourier_orders = {kMaxFourierOrder, 1};
  PHASOR_ASSERT_OK(ValidateCalendarBlock(orders, p));
  orders.encoding = CalendarEncoding::kLinear;
  expect_error(orders, ".fourier_orders[0]");

  // Combine SUM: Informer's tables have no years, flags or harmonics.
  TemporalSpec sum;
  sum.combine = CombineMode::kSum;
  sum.d_model = 8;
  CalendarBlock cal;
  cal.fields = {CalendarField::kHourOfDay, CalendarField::kIsWeekend};
  sum.calendar = cal;
  EXPECT_THAT(ValidateTemporalSpec(sum),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           "spec.temporal.calendar.fields[1]"));
  cal.fields = {CalendarField::kHourOfDay};
  cal.fourier_orders = {2};
  sum.calendar = cal;
  EXPECT_THAT(ValidateTemporalSpec(sum),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           "spec.temporal.calendar.fourier_orders[0]"));
}

TEST(CalendarEncoder, FractionalCyclicRowsBatchedMatchRowByRowAndExactPath) {
  // EncodeRows evaluates the fractional CYCLIC fields' sin/cos of many rows
  // through the vector kernel together: the bits do not depend on how the
  // rows are split, equal Encode's row by row, and stay within a few ulp
  // of the float64 path (exact reduction, ≤ 1.7e-16 of the true values).
  // Two layouts: the cyclic fields' columns in one run, and split by a
  // flag and a year (EncodeRows writes the two differently).
  for (const bool one_run : {true, false}) {
  SCOPED_TRACE(one_run ? "one run" : "split");
  CalendarBlock block;
  block.time_zone = "America/New_York";
  block.fields = AllFields();
  block.fourier_orders = {1, 3, 2, 1, 4, 1, 2, 1, 1};
  if (!one_run) {
    block.fields.insert(block.fields.begin() + 2, CalendarField::kIsWeekend);
    block.fields.insert(block.fields.begin() + 5, CalendarField::kYear);
    block.fourier_orders = {1, 3, 0, 2, 1, 0, 4, 1, 2, 1, 1};
    block.min_year = 1990;
    block.max_year = 2010;
  }
  block.fractional = true;
  block.include_utc_offset = true;
  const absl::TimeZone zone = *LoadIanaTimeZone(block.time_zone, "time_zone");
  const CalendarEncoder fast(block, zone, 0);
  const CalendarEncoder exact(block, zone, 0, std::numeric_limits<int64_t>::max(),
                              SinusoidAccuracy::kFloat64);
  const int64_t w = fast.width();
  ASSERT_EQ(exact.width(), w);
  std::vector<int64_t> times;
  std::mt19937_64 rng(11);
  int64_t t = UtcNs(1999, 12, 30);
  for (int i = 0; i < 3000; ++i) {
    t += static_cast<int64_t>(rng() % (2 * 86400)) * 1000000000 + rng() % 1000000000;
    times.push_back(t);
  }
  const auto n = static_cast<int64_t>(times.size());
  std::vector<double> whole(n * w), split(n * w), single(n * w), reference(n * w);
  CalendarEncoder::Writer(fast).EncodeRows(times, whole.data(), w);
  {
    // The angles and their sin/cos are vector kernels (calendar_angles.cc,
    // core/math/sincos.h): every SIMD target the binary holds gives the
    // bytes of the CPU's best.
    ASSERT_GT(hwy::SupportedAndGeneratedTargets().size(), 1u);
    OnEveryTarget([&](const char* target) {
      std::vector<double> on_target(n * w);
      CalendarEncoder::Writer(fast).EncodeRows(times, on_target.data(), w);
      ASSERT_EQ(std::memcmp(whole.data(), on_target.data(), whole.size() * sizeof(double)), 0)
          << target;
    });
  }
  CalendarEncoder::Writer splitter(fast);
  for (int64_t r = 0; r < n;) {
    const int64_t rows = std::min<int64_t>(1 + static_cast<int64_t>(rng() % 40), n - r);
    splitter.EncodeRows(absl::MakeConstSpan(times).subspan(r, rows), split.data() + r * w, w);
    r += rows;
  }
  CalendarEncoder::Writer one(fast), ref(exact);
  for (int64_t r = 0; r < n; ++r) {
    one.Encode(times[r], single.data() + r * w);
    ref.Encode(times[r], reference.data() + r * w);
  }
  ASSERT_EQ(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(double)), 0);
  ASSERT_EQ(std::memcmp(whole.data(), single.data(), whole.size() * sizeof(double)), 0);
  double worst = 0.0;
  for (int64_t k = 0; k < n * w; ++k) {
    worst = std::max(worst, std::fabs(whole[k] - reference[k]));
  }
  // The angle 2π·x/P is rounded once more than the exact phase: a few ulp
  // of a value below 2π·366.
  EXPECT_LT(worst, 1e-14);  // 3.2e-15 measured.
  EXPECT_GT(worst, 0.0);  // The two paths are distinct computations.
  }
}

// Float64 CYCLIC columns against __float128.
namespace float64_output {

using testing::Quad;
using testing::TwoPiQuad;

using testing::AbsDiff;
using testing::CivilNs;
using testing::Instants;
using testing::kF64Bound;

// x/P of a CYCLIC field in quad, from the local time (calendar.h's table).
Quad QuadPhase(CalendarField field, const LocalTime& t, bool fractional) {
  const Quad clock_s = Quad(t.hour * 3600 + t.minute * 60 + t.second) +
                       Quad(t.subsecond_ns) / Quad(1e9);
  const Quad day_fraction = fractional ? clock_s / Quad(86400) : Quad(0);
  const Quad sub = fractional ? Quad(t.subsecond_ns) / Quad(1e9) : Quad(0);
  switch (field) {
    case CalendarField::kSecondOfMinute:
      return (Quad(t.second) + sub) / Quad(60);
    case CalendarField::kMinuteOfHour:
      return (Quad(t.minute) + (fractional ? (Quad(t.second) + sub) / Quad(60) : 0)) /
             Quad(60);
    case CalendarField::kHourOfDay:
      return (Quad(t.hour) +
              (fractional ? (Quad(t.minute * 60 + t.second) + sub) / Quad(3600) : 0)) /
             Quad(24);
    case CalendarField::kDayOfWeek:
      return (Quad(t.weekday) + day_fraction) / Quad(7);
    case CalendarField::kDayOfMonth:
      return (Quad(t.date.day() - 1) + day_fraction) / Quad(t.days_in_month);
    case CalendarField::kDayOfYear:
      return (Quad(t.day_of_year - 1) + day_fraction) / Quad(t.days_in_year);
    case CalendarField::kWeekOfYear:
      return (Quad(t.iso_week - 1) +
              (fractional ? (Quad(t.weekday) + day_fraction) / Quad(7) : 0)) /
             Quad(t.iso_weeks_in_year);
    case CalendarField::kMonthOfYear:
      return (Quad(t.date.month() - 1) +
              (fractional ? (Quad(t.date.day() - 1) + day_fraction) /
                                Quad(t.days_in_month)
                          : 0)) /
             Quad(12);
    case CalendarField::kQuarter:
      return (Quad((t.date.month() - 1) / 3) +
              (fractional ? (Quad((t.date.month() - 1) % 3) +
                             (Quad(t.date.day() - 1) + day_fraction) /
                                 Quad(t.days_in_month)) /
                                Quad(3)
                          : 0)) /
             Quad(4);
    default:  // Years and flags have no cycle.
      break;
  }
  return 0;
}

TEST(CalendarFloat64, CyclicWithinFourE16OfQuadFrom1900To2200) {
  const std::vector<CalendarField> fields = {
      CalendarField::kSecondOfMinute, CalendarField::kMinuteOfHour,
      CalendarField::kHourOfDay,      CalendarField::kDayOfWeek,
      CalendarField::kDayOfMonth,     CalendarField::kDayOfYear,
      CalendarField::kWeekOfYear,     CalendarField::kMonthOfYear,
      CalendarField::kQuarter};
  const std::vector<int64_t> times = Instants(3000, 12);
  double max_error = 0;
  double max_f32_path = 0;
  int64_t checked = 0;
  for (const char* zone_name :
       {"UTC", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu"}) {
    const absl::StatusOr<absl::TimeZone> zone = LoadIanaTimeZone(zone_name, "zone");
    ASSERT_TRUE(zone.ok()) << zone_name;
    for (bool fractional : {false, true}) {
      CalendarBlock block;
      block.time_zone = zone_name;
      block.fields = fields;
      block.encoding = CalendarEncoding::kCyclic;
      block.fractional = fractional;
      const CalendarEncoder exact(block, *zone, /*sum_d_model=*/0,
                                  /*max_table_rows=*/1000, SinusoidAccuracy::kFloat64);
      const CalendarEncoder fast(block, *zone, /*sum_d_model=*/0,
                                 /*max_table_rows=*/1000, SinusoidAccuracy::kFloat32);
      CalendarEncoder::Writer writer(exact);
      CalendarEncoder::Writer fast_writer(fast);
      std::vector<double> row(exact.width());
      std::vector<double> fast_row(fast.width());
      for (int64_t t : times) {
        writer.Encode(t, row.data());
        fast_writer.Encode(t, fast_row.data());
        const LocalTime local = LocalTimeAt(*zone, t);
        for (size_t f = 0; f < fields.size(); ++f) {
          const Quad angle = TwoPiQuad() * QuadPhase(fields[f], local, fractional);
          const Quad s = sinq(angle);
          const Quad c = cosq(angle);
          const double error =
              std::max(AbsDiff(row[2 * f], s), AbsDiff(row[2 * f + 1], c));
          ASSERT_LE(error, kF64Bound)
              << zone_name << " t=" << t << " field=" << CalendarFieldName(fields[f])
              << " fractional=" << fractional;
          max_error = std::max(max_error, error);
          max_f32_path =
              std::max(max_f32_path, std::max(AbsDiff(fast_row[2 * f], s),
                                              AbsDiff(fast_row[2 * f + 1], c)));
          ++checked;
        }
      }
    }
  }
  std::printf("calendar cyclic: %lld pairs, max |float64 - quad| = %.3g "
              "(float32 path's doubles: %.3g)\n",
              static_cast<long long>(checked), max_error, max_f32_path);
  EXPECT_LE(max_error, 2e-16);
}

}  // namespace float64_output

}  // namespace
}  // namespace phasor
