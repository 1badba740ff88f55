#include "core/temporal/holidays.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/civil_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

namespace phasor {
namespace {

using absl::CivilDay;
using ::testing::DoubleEq;
using ::testing::ElementsAre;

HolidaysBlock Block(std::vector<std::string> dates,
                    HolidayKernel kernel = HolidayKernel::kIndicator,
                    double alpha = 1.0) {
  return HolidaysBlock{std::move(dates), kernel, alpha};
}

TEST(ParseIsoDate, AcceptsOnlyRealDates) {
  ASSERT_TRUE(ParseIsoDate("2024-02-29").ok());
  EXPECT_EQ(*ParseIsoDate("2024-02-29"), CivilDay(2024, 2, 29));
  EXPECT_EQ(*ParseIsoDate("1900-12-31"), CivilDay(1900, 12, 31));
  for (const char* bad : {"2023-02-29", "2026-02-30", "2026-13-01", "2026-00-10",
                          "2026-1-01", "26-01-01", "2026/01/01", "2026-01-01T00",
                          "", "abcd-ef-gh", "1900-02-29"}) {
    EXPECT_FALSE(ParseIsoDate(bad).ok()) << bad;
  }
}

TEST(HolidayCalendar, SignedDistanceToNearestTiesToThePast) {
  // Holidays on Jan 1, Jan 5 and Dec 25 2026 (given unsorted, with a repeat).
  const HolidayCalendar cal(
      Block({"2026-12-25", "2026-01-05", "2026-01-01", "2026-01-05"}));
  EXPECT_EQ(cal.SignedDistanceDays(CivilDay(2026, 1, 1)), 0);
  EXPECT_EQ(cal.SignedDistanceDays(CivilDay(2026, 1, 2)), 1);   // after Jan 1
  EXPECT_EQ(cal.SignedDistanceDays(CivilDay(2026, 1, 3)), 2);   // tie: past wins
  EXPECT_EQ(cal.SignedDistanceDays(CivilDay(2026, 1, 4)), -1);  // before Jan 5
  EXPECT_EQ(cal.SignedDistanceDays(CivilDay(2026, 1, 5)), 0);
  EXPECT_EQ(cal.SignedDistanceDays(CivilDay(2025, 12, 30)), -2);  // none before
  EXPECT_EQ(cal.SignedDistanceDays(CivilDay(2027, 1, 10)), 16);   // none after
  // Jan 5 and Dec 25 are 354 days apart: July 1 is 177 days from both (a
  // tie, so the past wins); July 2 is nearer Dec 25.
  EXPECT_EQ(cal.SignedDistanceDays(CivilDay(2026, 6, 30)), 176);
  EXPECT_EQ(cal.SignedDistanceDays(CivilDay(2026, 7, 1)), 177);
  EXPECT_EQ(cal.SignedDistanceDays(CivilDay(2026, 7, 2)), -176);
}

TEST(HolidayCalendar, DistanceCountsCalendarDaysAcrossLeapDays) {
  const HolidayCalendar cal(Block({"2024-02-28"}));
  EXPECT_EQ(cal.SignedDistanceDays(CivilDay(2024, 3, 1)), 2);  // via Feb 29
  const HolidayCalendar cal1900(Block({"1900-02-28"}));
  EXPECT_EQ(cal1900.SignedDistanceDays(CivilDay(1900, 3, 1)), 1);
}

TEST(HolidayCalendar, Kernels) {
  const std::vector<std::string> dates = {"2026-07-04"};
  const CivilDay july4(2026, 7, 4);
  for (int d = -5; d <= 5; ++d) {
    const CivilDay day = july4 + d;
    EXPECT_EQ(HolidayCalendar(Block(dates, HolidayKernel::kIndicator)).Value(day),
              d == 0 ? 1.0 : 0.0)
        << d;
    EXPECT_DOUBLE_EQ(
        HolidayCalendar(Block(dates, HolidayKernel::kExponential, 0.7)).Value(day),
        std::exp(-0.7 * std::abs(d)))
        << d;
    EXPECT_DOUBLE_EQ(
        HolidayCalendar(Block(dates, HolidayKernel::kSquaredExponential, 0.3))
            .Value(day),
        std::exp(-0.3 * d * d))
        << d;
  }
  // Symmetric kernels, but the sign of d is kept by SignedDistanceDays.
  EXPECT_EQ(HolidayCalendar(Block(dates)).SignedDistanceDays(july4 + 3), 3);
  EXPECT_EQ(HolidayCalendar(Block(dates)).SignedDistanceDays(july4 - 3), -3);
}

TEST(ValidateHolidaysBlock, ErrorPaths) {
  const std::string p = "spec.temporal.calendar.holidays";
  PHASOR_ASSERT_OK(ValidateHolidaysBlock(Block({"2026-01-01"}), p));
  // INDICATOR ignores alpha.
  PHASOR_ASSERT_OK(
      ValidateHolidaysBlock(Block({"2026-01-01"}, HolidayKernel::kIndicator, 0), p));
  // An empty list is valid (a country with no holidays in range).
  PHASOR_ASSERT_OK(ValidateHolidaysBlock(Block({}), p));
  EXPECT_THAT(ValidateHolidaysBlock(Block({"2026-01-01", "2026-1-2"}), p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".dates[1]"));
  EXPECT_THAT(ValidateHolidaysBlock(
                  Block({"2026-01-01"}, HolidayKernel::kExponential, 0), p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".alpha"));
  EXPECT_THAT(ValidateHolidaysBlock(
                  Block({"2026-01-01"}, HolidayKernel::kSquaredExponential, NAN),
                  p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".alpha"));
  HolidaysBlock window = Block({});
  window.max_distance_days = -1;
  EXPECT_THAT(ValidateHolidaysBlock(window, p),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           p + ".max_distance_days"));
  HolidaysBlock sets = Block({});
  sets.sets = {{"christmas", {"2026-12-25"}, {}}, {"easter", {"2026-04-5"}, {}}};
  EXPECT_THAT(ValidateHolidaysBlock(sets, p),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           p + ".sets[1].dates[0]"));
  for (const char* bad : {"", "a.b", "days_since", "days_until", "x y"}) {
    sets.sets = {{"christmas", {}, {}}, {bad, {}, {}}};
    EXPECT_THAT(ValidateHolidaysBlock(sets, p),
                IsFieldError(absl::StatusCode::kInvalidArgument,
                             p + ".sets[1].name"))
        << bad;
  }
  sets.sets = {{"christmas", {}, {}}, {"christmas", {}, {}}};
  EXPECT_THAT(ValidateHolidaysBlock(sets, p),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           p + ".sets[1].name"));
  sets.sets.assign(kMaxHolidaySets + 1, HolidaySet{"x", {}, {}});
  EXPECT_THAT(ValidateHolidaysBlock(sets, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".sets"));
  HolidaysBlock none = Block({});
  none.include_unnamed_set = false;
  EXPECT_THAT(ValidateHolidaysBlock(none, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".sets"));
}

// Writes one row's columns at midnight (or later) of `day`.
std::vector<double> Row(const HolidayCalendar& cal, CivilDay day,
                        bool at_local_midnight = true) {
  std::vector<double> out(static_cast<size_t>(cal.width()), -99.0);
  cal.Write(day - CivilDay(1970, 1, 1), at_local_midnight, out.data());
  return out;
}

// Far from every holiday the kernels' exp underflows; the early 0 for
// arguments below −746 must equal libm's result there and stay out of the
// way above it.
TEST(HolidayCalendar, KernelValuesMatchLibmThroughUnderflow) {
  int mismatches = 0;
  for (const double alpha : {0.5, 1.0, 0.01, 3.7}) {
    for (int64_t d = 0; d <= 200000; d = d < 3000 ? d + 1 : d * 2) {
      const auto x = static_cast<double>(d);
      for (const int64_t signed_d : {d, -d}) {
        const double exponential =
            HolidayCalendar::KernelValue(HolidayKernel::kExponential, alpha, signed_d);
        const double squared = HolidayCalendar::KernelValue(
            HolidayKernel::kSquaredExponential, alpha, signed_d);
        const double libm_exponential = std::exp(-alpha * x);
        const double libm_squared = std::exp(-alpha * (x * x));
        mismatches += std::memcmp(&exponential, &libm_exponential, sizeof(double)) != 0;
        mismatches += std::memcmp(&squared, &libm_squared, sizeof(double)) != 0;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
  // Both sides of the threshold are reached: a positive value and zeros.
  EXPECT_GT(HolidayCalendar::KernelValue(HolidayKernel::kExponential, 0.5, 1490), 0.0);
  EXPECT_EQ(HolidayCalendar::KernelValue(HolidayKernel::kExponential, 0.5, 1493), 0.0);
}

// The brackets a writer keeps between days change no value: days in runs
// (forward, backward, across holidays, onto them) and jumps, several sets
// (own dates, a shared list, an empty set), every kernel, raw distances.
TEST(HolidayCalendar, BracketsGiveTheSameColumns) {
  const HolidayDayList shared = MakeHolidayDayList(
      {CivilDay(2024, 1, 1), CivilDay(2024, 12, 25), CivilDay(2025, 1, 1)});
  std::vector<int64_t> days;
  const int64_t start = CivilDay(2023, 11, 20) - CivilDay(1970, 1, 1);
  for (int64_t d = 0; d < 500; ++d) days.push_back(start + d);        // Forward.
  for (int64_t d = 500; d > 0; d -= 3) days.push_back(start + d);     // Backward.
  for (int64_t d : {-40000, 90000, 12, 13, 12, 406, 407, 0, 5000}) days.push_back(start + d);
  int compared = 0;
  for (HolidayKernel kernel : {HolidayKernel::kIndicator, HolidayKernel::kExponential,
                               HolidayKernel::kSquaredExponential}) {
    HolidaysBlock block = Block({"2023-12-25", "2024-07-04", "2024-07-05"}, kernel, 0.3);
    block.include_days_since = true;
    block.include_days_until = true;
    block.max_distance_days = 30;
    block.sets = {HolidaySet{"shared", {"2024-02-14"}, {shared}}, HolidaySet{"none", {}, {}}};
    ASSERT_TRUE(ValidateHolidaysBlock(block, "h").ok());
    const HolidayCalendar cal(block);
    std::vector<HolidayCalendar::Bracket> brackets(static_cast<size_t>(cal.num_sets()));
    for (const int64_t day : days) {
      std::vector<double> kept(static_cast<size_t>(cal.width()), -99.0);
      std::vector<double> fresh(kept.size(), -99.0);
      cal.Write(day, true, kept.data(), absl::MakeSpan(brackets));
      cal.Write(day, true, fresh.data());
      ASSERT_EQ(kept, fresh) << "day " << day;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 3 * static_cast<int>(days.size()));
}

TEST(HolidayCalendar, EmptyListGivesZeros) {
  for (HolidayKernel kernel :
       {HolidayKernel::kIndicator, HolidayKernel::kExponential,
        HolidayKernel::kSquaredExponential}) {
    HolidaysBlock block = Block({}, kernel, 0.5);
    block.include_days_since = true;
    block.include_days_until = true;
    for (HolidayDistanceMode mode :
         {HolidayDistanceMode::kNearest, HolidayDistanceMode::kGluonTs}) {
      block.distance_mode = mode;
      const HolidayCalendar cal(block);
      ASSERT_EQ(cal.width(), 3);
      for (CivilDay day : {CivilDay(1900, 1, 1), CivilDay(2026, 7, 4)}) {
        EXPECT_THAT(Row(cal, day),
                    ElementsAre(0.0, kNoHolidayInWindow, kNoHolidayInWindow));
      }
    }
  }
}

TEST(HolidayCalendar, DaysSinceAndUntilWithinTheWindow) {
  HolidaysBlock block = Block({"2026-01-01", "2026-12-25"});
  block.include_days_since = true;
  block.include_days_until = true;
  block.max_distance_days = 200;
  const HolidayCalendar cal(block);
  ASSERT_EQ(cal.width(), 3);
  // [kernel, since, until]
  EXPECT_THAT(Row(cal, CivilDay(2026, 1, 1)), ElementsAre(1.0, 0.0, 0.0));
  EXPECT_THAT(Row(cal, CivilDay(2026, 1, 11)), ElementsAre(0.0, 10.0, -1.0));
  EXPECT_THAT(Row(cal, CivilDay(2026, 12, 20)), ElementsAre(0.0, -1.0, 5.0));
  // 200 days after Jan 1 is July 20 (in the window), 201 is not; Dec 25
  // is 158 days ahead.
  EXPECT_THAT(Row(cal, CivilDay(2026, 7, 20)), ElementsAre(0.0, 200.0, 158.0));
  EXPECT_THAT(Row(cal, CivilDay(2026, 7, 21)), ElementsAre(0.0, -1.0, 157.0));
  EXPECT_THAT(Row(cal, CivilDay(2025, 12, 31)), ElementsAre(0.0, -1.0, 1.0));
  // A window of 0 finds only the holiday itself.
  block.max_distance_days = 0;
  EXPECT_THAT(Row(HolidayCalendar(block), CivilDay(2026, 1, 2)),
              ElementsAre(0.0, -1.0, -1.0));
  EXPECT_THAT(Row(HolidayCalendar(block), CivilDay(2026, 12, 25)),
              ElementsAre(1.0, 0.0, 0.0));
}

TEST(HolidayCalendar, OneColumnGroupPerNamedSet) {
  HolidaysBlock block = Block({"2026-07-04"}, HolidayKernel::kExponential, 0.5);
  block.include_days_until = true;
  // Christmas from inline dates; "newyear" from a shared calendar list plus
  // a date of its own.
  const HolidayDayList newyear = MakeHolidayDayList(
      {CivilDay(2027, 1, 1), CivilDay(2026, 1, 1), CivilDay(2027, 1, 1)});
  ASSERT_EQ(newyear->size(), 2u);
  block.sets = {{"christmas", {"2026-12-25"}, {}},
                {"newyear", {"2028-01-01"}, {newyear}}};
  const HolidayCalendar cal(block);
  ASSERT_EQ(cal.width(), 6);
  const std::vector<HolidayColumn> columns = HolidayColumns(block);
  std::vector<std::string> names;
  for (const HolidayColumn& column : columns) names.push_back(column.name);
  EXPECT_THAT(names, ElementsAre("holidays", "holidays.days_until",
                                 "holidays.christmas",
                                 "holidays.christmas.days_until",
                                 "holidays.newyear",
                                 "holidays.newyear.days_until"));
  const CivilDay day(2026, 12, 28);
  // Nearest: July 4 is 177 days back; Dec 25 three back (none after it);
  // Jan 1 four ahead.
  EXPECT_THAT(Row(cal, day),
              ElementsAre(DoubleEq(std::exp(-0.5 * 177)), -1.0,
                          DoubleEq(std::exp(-0.5 * 3)), -1.0,
                          DoubleEq(std::exp(-0.5 * 4)), 4.0));
  // Between 2027-01-01 (calendar) and 2028-01-01 (own date): both lists
  // count.
  EXPECT_EQ(Row(cal, CivilDay(2027, 12, 30))[5], 2.0);
  // Only the sets, no unnamed column.
  block.include_unnamed_set = false;
  EXPECT_EQ(HolidayCalendar(block).width(), 4);
  EXPECT_EQ(HolidayColumns(block).front().name, "holidays.christmas");
}

// GluonTS's distance_to_holiday, written out the slow way: every holiday
// timestamp (a date's midnight) within [t − 200 d, t + 200 d] of the row's
// instant t = day + clock, and the first of them.
std::optional<int64_t> GluonTsDistance(const std::vector<CivilDay>& holidays,
                                       CivilDay day, int64_t clock_seconds) {
  const int64_t t = (day - CivilDay(1970, 1, 1)) * 86400 + clock_seconds;
  std::optional<int64_t> best;
  for (CivilDay h : holidays) {
    const int64_t ht = (h - CivilDay(1970, 1, 1)) * 86400;
    if (ht < t - 200 * 86400 || ht > t + 200 * 86400) continue;
    if (!best.has_value() || ht < *best) best = ht;
  }
  if (!best.has_value()) return std::nullopt;
  // Timedelta.days floors.
  const int64_t diff = t - *best;
  return diff >= 0 ? diff / 86400 : -((-diff + 86399) / 86400);
}

TEST(HolidayCalendar, GluonTsModeTakesTheEarliestWithin200Days) {
  // Uneven gaps, so earliest and nearest often differ.
  const std::vector<std::string> dates = {"2025-12-25", "2026-04-05",
                                          "2026-04-06", "2026-11-26",
                                          "2027-03-01"};
  std::vector<CivilDay> days;
  for (const std::string& date : dates) days.push_back(*ParseIsoDate(date));
  int differs_from_nearest = 0;
  int clipped = 0;
  int after_midnight_differs = 0;
  for (HolidayKernel kernel :
       {HolidayKernel::kIndicator, HolidayKernel::kExponential,
        HolidayKernel::kSquaredExponential}) {
    HolidaysBlock block = Block(dates, kernel, 0.1);
    block.distance_mode = HolidayDistanceMode::kGluonTs;
    const HolidayCalendar gluonts(block);
    block.distance_mode = HolidayDistanceMode::kNearest;
    const HolidayCalendar nearest(block);
    for (CivilDay day = CivilDay(2025, 4, 1); day < CivilDay(2027, 11, 1); ++day) {
      for (bool midnight : {true, false}) {
        const std::optional<int64_t> d =
            GluonTsDistance(days, day, midnight ? 0 : 13 * 3600);
        double want = 0.0;
        if (d.has_value()) {
          const auto dd = static_cast<double>(*d);
          want = kernel == HolidayKernel::kIndicator ? (*d == 0 ? 1.0 : 0.0)
                 : kernel == HolidayKernel::kExponential
                     ? std::exp(-0.1 * std::fabs(dd))
                     : std::exp(-0.1 * (dd * dd));
          if (kernel != HolidayKernel::kIndicator && want <= 1e-9) {
            want = 0.0;
            ++clipped;
          }
        }
        const double got = Row(gluonts, day, midnight)[0];
        EXPECT_EQ(got, want) << absl::FormatCivilTime(day) << " " << midnight;
        if (got != Row(nearest, day)[0]) ++differs_from_nearest;
        if (!midnight && got != Row(gluonts, day, true)[0]) ++after_midnight_differs;
      }
    }
  }
  // The cases that make the mode a mode happened.
  EXPECT_GT(differs_from_nearest, 100);
  EXPECT_GT(clipped, 100);
  EXPECT_GT(after_midnight_differs, 0);
}

}  // namespace
}  // namespace phasor
