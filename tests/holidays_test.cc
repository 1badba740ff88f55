#include "core/holidays.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/time/civil_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

namespace phasor {
namespace {

using absl::CivilDay;

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
  EXPECT_THAT(ValidateHolidaysBlock(Block({}), p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".dates"));
  EXPECT_THAT(ValidateHolidaysBlock(Block({"2026-01-01", "2026-1-2"}), p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".dates[1]"));
  EXPECT_THAT(ValidateHolidaysBlock(
                  Block({"2026-01-01"}, HolidayKernel::kExponential, 0), p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".alpha"));
  EXPECT_THAT(ValidateHolidaysBlock(
                  Block({"2026-01-01"}, HolidayKernel::kSquaredExponential, NAN),
                  p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".alpha"));
}

}  // namespace
}  // namespace phasor
