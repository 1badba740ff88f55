// Local time (core/temporal/local_time.h): LocalTimeAt and the cursor
// against Python's zoneinfo (tests/data/calendar_expected.tsv) and against
// absl's civil time, over DST changes, odd offsets, leap days, ISO week 53,
// centuries and the int64 extremes.
#include "core/temporal/local_time.h"

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

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "core/temporal/calendar.h"
#include "core/temporal/local_time.h"
#include "core/temporal/time_zone.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/calendar_test_data.h"
#include "tests/status_matchers.h"

namespace phasor {
namespace {

using ::testing::HasSubstr;

using testing::Expected;
using testing::ExpectedRows;
using testing::RowsByZone;
using testing::UtcNs;

absl::TimeZone Zone(const std::string& name) {
  absl::StatusOr<absl::TimeZone> zone = LoadIanaTimeZone(name, "zone");
  EXPECT_TRUE(zone.ok()) << zone.status();
  return zone.ok() ? *zone : absl::UTCTimeZone();
}

void ExpectMatches(const LocalTime& t, const Expected& e) {
  SCOPED_TRACE(::testing::Message() << e.zone << " @ " << e.unix_ns << " ns");
  EXPECT_EQ(t.date.year(), e.year);
  EXPECT_EQ(t.date.month(), e.month);
  EXPECT_EQ(t.date.day(), e.day);
  EXPECT_EQ(t.hour, e.hour);
  EXPECT_EQ(t.minute, e.minute);
  EXPECT_EQ(t.second, e.second);
  EXPECT_EQ(t.subsecond_ns, e.subsecond_ns);
  EXPECT_EQ(t.weekday, e.weekday);
  EXPECT_EQ(t.day_of_year, e.day_of_year);
  EXPECT_EQ(t.iso_year, e.iso_year);
  EXPECT_EQ(t.iso_week, e.iso_week);
  EXPECT_EQ(t.iso_weeks_in_year, e.iso_weeks_in_year);
  EXPECT_EQ(t.days_in_month, e.days_in_month);
  EXPECT_EQ(t.days_in_year, e.days_in_year);
  EXPECT_EQ(t.utc_offset_seconds, e.utc_offset_seconds);
  EXPECT_EQ(t.is_dst, e.is_dst);
}

bool SameLocalTime(const LocalTime& a, const LocalTime& b) {
  return a.date == b.date && a.day_number == b.day_number && a.hour == b.hour &&
         a.minute == b.minute &&
         a.second == b.second && a.subsecond_ns == b.subsecond_ns &&
         a.weekday == b.weekday && a.day_of_year == b.day_of_year &&
         a.iso_year == b.iso_year && a.iso_week == b.iso_week &&
         a.iso_weeks_in_year == b.iso_weeks_in_year &&
         a.days_in_month == b.days_in_month &&
         a.days_in_year == b.days_in_year &&
         a.utc_offset_seconds == b.utc_offset_seconds && a.is_dst == b.is_dst;
}

LocalTime In(const std::string& zone, int64_t unix_ns) {
  return LocalTimeAt(Zone(zone), unix_ns);
}

TEST(CalendarExpectedData, CoversZonesYearsAndEdges) {
  const auto by_zone = RowsByZone();
  EXPECT_GE(ExpectedRows().size(), 3000u);
  for (const char* zone :
       {"UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe",
        "Asia/Kathmandu", "America/St_Johns", "Pacific/Chatham",
        "Pacific/Apia"}) {
    ASSERT_TRUE(by_zone.count(zone)) << zone;
    const auto& rows = by_zone.at(zone);
    EXPECT_GE(rows.size(), 300u) << zone;
    bool before_1970 = false, after_2100 = false, week53 = false, leap = false;
    for (const Expected& e : rows) {
      before_1970 |= e.unix_ns < 0;
      after_2100 |= e.year > 2100;
      week53 |= e.iso_week == 53;
      leap |= e.month == 2 && e.day == 29;
    }
    EXPECT_TRUE(before_1970 && after_2100 && week53 && leap) << zone;
  }
}

TEST(LocalTimeAt, MatchesPythonZoneinfo) {
  for (const auto& [zone, rows] : RowsByZone()) {
    const absl::TimeZone tz = Zone(zone);
    for (const Expected& e : rows) ExpectMatches(LocalTimeAt(tz, e.unix_ns), e);
  }
}

TEST(LocalTimeCursor, MatchesPythonZoneinfoInTimeOrder) {
  for (const auto& [zone, rows] : RowsByZone()) {
    LocalTimeCursor cursor(Zone(zone));
    for (const Expected& e : rows) ExpectMatches(cursor.At(e.unix_ns), e);
  }
}

TEST(LocalTimeCursor, MatchesDirectLookupOnDenseSweeps) {
  // Every 7 min 13 s plus a varying nanosecond part through whole years,
  // crossing every transition, in order and then in a shuffled order (the
  // cache must be right for any sequence, only faster for sorted ones).
  std::mt19937_64 rng(7);
  for (const char* name : {"America/New_York", "Australia/Lord_Howe",
                           "Europe/London", "Pacific/Apia", "Pacific/Chatham"}) {
    const absl::TimeZone zone = Zone(name);
    for (int64_t year : {1944, 2011, 2026, 2199}) {
      std::vector<int64_t> times;
      for (int64_t t = UtcNs(year, 1, 1); t < UtcNs(year + 1, 1, 2);
           t += 433 * int64_t{1000000000} + static_cast<int64_t>(rng() % 1000000000)) {
        times.push_back(t);
      }
      LocalTimeCursor sorted(zone);
      int mismatches = 0;
      for (int64_t t : times) {
        mismatches += !SameLocalTime(sorted.At(t), LocalTimeAt(zone, t));
      }
      std::shuffle(times.begin(), times.end(), rng);
      LocalTimeCursor shuffled(zone);
      for (size_t i = 0; i < 20000; ++i) {
        mismatches += !SameLocalTime(shuffled.At(times[i]),
                                     LocalTimeAt(zone, times[i]));
      }
      EXPECT_EQ(mismatches, 0) << name << " " << year;
    }
  }
}

TEST(LocalTimeCursor, MatchesDirectLookupOnLongSortedRuns) {
  // Between two transitions a new day is arithmetic on the cached offset,
  // and the year- and month-level date fields are carried from the previous
  // day: sorted runs over decades, hourly-ish and in jumps of days, through
  // ISO-year and leap-year changes, in zones with and without transitions.
  std::mt19937_64 rng(17);
  for (const char* name : {"America/New_York", "Europe/London", "UTC",
                           "Asia/Kolkata", "Pacific/Apia"}) {
    const absl::TimeZone zone = Zone(name);
    for (int64_t step_s : {int64_t{3600}, int64_t{19 * 3600 + 17},
                           int64_t{3 * 86400 + 77}}) {
      LocalTimeCursor cursor(zone);
      int mismatches = 0;
      int64_t rows = 0;
      for (int64_t t = UtcNs(1995, 12, 20); t < UtcNs(2031, 1, 10);
           t += step_s * int64_t{1000000000} +
                static_cast<int64_t>(rng() % 3600000000000)) {
        mismatches += !SameLocalTime(cursor.At(t), LocalTimeAt(zone, t));
        ++rows;
      }
      EXPECT_EQ(mismatches, 0) << name << " step " << step_s << " s, " << rows
                               << " rows";
    }
  }
}

TEST(LocalTimeCursor, MatchesDirectLookupDayByDayOverCenturies) {
  // A new local day on every row, as in daily data: the cursor fills most
  // dates from the year it cached (a table lookup and a weekday), the days
  // whose ISO week belongs to the year next door and each new year from
  // scratch. A row a day from 1900 to 2180 (a day skipped about once in
  // 288, when the drift crosses midnight) at a drifting clock time, so rows
  // land on every day of the year, either side of every ISO-year change,
  // in leap and common years and centuries.
  std::mt19937_64 rng(29);
  for (const char* name : {"America/New_York", "UTC", "Asia/Tokyo"}) {
    const absl::TimeZone zone = Zone(name);
    LocalTimeCursor cursor(zone);
    int mismatches = 0;
    int64_t rows = 0;
    for (int64_t t = UtcNs(1900, 1, 1); t < UtcNs(2180, 1, 1);
         t += 86400 * int64_t{1000000000} + static_cast<int64_t>(rng() % 600000000000)) {
      mismatches += !SameLocalTime(cursor.At(t), LocalTimeAt(zone, t));
      ++rows;
    }
    EXPECT_EQ(mismatches, 0) << name << ", " << rows << " rows";
  }
}

TEST(LocalTimeCursor, NewYorkSpringForward2026SkipsTwoOClock) {
  // 2026-03-08: 02:00 EST jumps to 03:00 EDT at 07:00Z.
  const LocalTime before = In("America/New_York", UtcNs(2026, 3, 8, 6, 59, 59));
  EXPECT_EQ(before.hour, 1);
  EXPECT_EQ(before.minute, 59);
  EXPECT_EQ(before.utc_offset_seconds, -5 * 3600);
  EXPECT_FALSE(before.is_dst);
  const LocalTime after = In("America/New_York", UtcNs(2026, 3, 8, 7, 0, 0));
  EXPECT_EQ(after.hour, 3);
  EXPECT_EQ(after.minute, 0);
  EXPECT_EQ(after.utc_offset_seconds, -4 * 3600);
  EXPECT_TRUE(after.is_dst);
  // Minute by minute through the local day: hour 2 never shows, and the day
  // has 23 hours of minutes.
  LocalTimeCursor cursor(Zone("America/New_York"));
  int minutes_in_day = 0;
  for (int64_t t = UtcNs(2026, 3, 8, 0); t < UtcNs(2026, 3, 9, 12);
       t += 60 * int64_t{1000000000}) {
    const LocalTime& local = cursor.At(t);
    if (local.date != LocalDate(2026, 3, 8)) continue;
    ++minutes_in_day;
    EXPECT_NE(local.hour, 2);
  }
  EXPECT_EQ(minutes_in_day, 23 * 60);
}

TEST(LocalTimeCursor, NewYorkFallBack2026RepeatsOneOClock) {
  // 2026-11-01: 02:00 EDT falls back to 01:00 EST at 06:00Z.
  const LocalTime first = In("America/New_York", UtcNs(2026, 11, 1, 5, 30));
  const LocalTime second = In("America/New_York", UtcNs(2026, 11, 1, 6, 30));
  EXPECT_EQ(first.hour, 1);
  EXPECT_EQ(second.hour, 1);
  EXPECT_EQ(first.minute, 30);
  EXPECT_EQ(second.minute, 30);
  EXPECT_TRUE(first.is_dst);
  EXPECT_FALSE(second.is_dst);
  EXPECT_EQ(first.utc_offset_seconds, -4 * 3600);
  EXPECT_EQ(second.utc_offset_seconds, -5 * 3600);
  LocalTimeCursor cursor(Zone("America/New_York"));
  int one_oclock_minutes = 0;
  int minutes_in_day = 0;
  for (int64_t t = UtcNs(2026, 11, 1, 0); t < UtcNs(2026, 11, 2, 12);
       t += 60 * int64_t{1000000000}) {
    const LocalTime& local = cursor.At(t);
    if (local.date != LocalDate(2026, 11, 1)) continue;
    ++minutes_in_day;
    one_oclock_minutes += local.hour == 1;
  }
  EXPECT_EQ(one_oclock_minutes, 120);
  EXPECT_EQ(minutes_in_day, 25 * 60);
}

TEST(LocalTimeCursor, LordHoweHalfHourDaylightSaving) {
  // 2026-04-05 02:00 +11:00 falls back to 01:30 +10:30 (at 15:00Z on the 4th).
  const LocalTime before =
      In("Australia/Lord_Howe", UtcNs(2026, 4, 4, 14, 59, 59));
  const LocalTime after = In("Australia/Lord_Howe", UtcNs(2026, 4, 4, 15, 0, 0));
  EXPECT_EQ(before.utc_offset_seconds, 11 * 3600);
  EXPECT_TRUE(before.is_dst);
  EXPECT_EQ(before.hour, 1);
  EXPECT_EQ(before.minute, 59);
  EXPECT_EQ(after.utc_offset_seconds, 10 * 3600 + 1800);
  EXPECT_FALSE(after.is_dst);
  EXPECT_EQ(after.hour, 1);
  EXPECT_EQ(after.minute, 30);
}

TEST(LocalTimeCursor, KathmanduQuarterHourOffset) {
  const LocalTime t = In("Asia/Kathmandu", UtcNs(2026, 1, 1, 0, 0, 0));
  EXPECT_EQ(t.utc_offset_seconds, 5 * 3600 + 45 * 60);
  EXPECT_EQ(t.hour, 5);
  EXPECT_EQ(t.minute, 45);
  EXPECT_EQ(t.date, LocalDate(2026, 1, 1));
  // 18:15Z is local midnight of the next day.
  EXPECT_EQ(In("Asia/Kathmandu", UtcNs(2026, 1, 1, 18, 14, 59)).date,
            LocalDate(2026, 1, 1));
  EXPECT_EQ(In("Asia/Kathmandu", UtcNs(2026, 1, 1, 18, 15, 0)).date,
            LocalDate(2026, 1, 2));
}

TEST(LocalTimeCursor, LondonSummerTime) {
  const LocalTime gmt = In("Europe/London", UtcNs(2026, 3, 29, 0, 59, 59));
  const LocalTime bst = In("Europe/London", UtcNs(2026, 3, 29, 1, 0, 0));
  EXPECT_EQ(gmt.hour, 0);
  EXPECT_EQ(gmt.utc_offset_seconds, 0);
  EXPECT_FALSE(gmt.is_dst);
  EXPECT_EQ(bst.hour, 2);
  EXPECT_EQ(bst.utc_offset_seconds, 3600);
  EXPECT_TRUE(bst.is_dst);
}

TEST(LocalTimeCursor, LeapDays) {
  const LocalTime d2024 = In("UTC", UtcNs(2024, 2, 29, 12));
  EXPECT_EQ(d2024.day_of_year, 60);
  EXPECT_EQ(d2024.days_in_month, 29);
  EXPECT_EQ(d2024.days_in_year, 366);
  EXPECT_EQ(In("UTC", UtcNs(2000, 2, 29)).days_in_year, 366);  // Divisible by 400.
  // 1900 and 2100 are not leap years: February 28 is followed by March 1.
  for (int64_t year : {1900, 2100}) {
    const LocalTime feb28 = In("UTC", UtcNs(year, 2, 28, 12));
    const LocalTime next = In("UTC", UtcNs(year, 2, 28, 12) + 86400 * int64_t{1000000000});
    EXPECT_EQ(feb28.days_in_month, 28) << year;
    EXPECT_EQ(feb28.days_in_year, 365) << year;
    EXPECT_EQ(next.date, LocalDate(year, 3, 1)) << year;
    EXPECT_EQ(next.day_of_year, 60) << year;
  }
}

TEST(LocalTimeCursor, IsoWeek53) {
  struct Case {
    int64_t y;
    int m, d;
    int64_t iso_year;
    int week, weeks;
  };
  // 2015, 2020 and 2026 start on a Thursday (2020 is a leap year starting on
  // Wednesday): they have 53 ISO weeks. 2024-12-30 belongs to 2025's week 1.
  for (const Case& c : {Case{2015, 12, 31, 2015, 53, 53},
                        Case{2016, 1, 3, 2015, 53, 53},
                        Case{2020, 12, 31, 2020, 53, 53},
                        Case{2021, 1, 3, 2020, 53, 53},
                        Case{2021, 1, 4, 2021, 1, 52},
                        Case{2026, 12, 31, 2026, 53, 53},
                        Case{2027, 1, 1, 2026, 53, 53},
                        Case{2024, 12, 30, 2025, 1, 52}}) {
    const LocalTime t = In("UTC", UtcNs(c.y, c.m, c.d, 12));
    EXPECT_EQ(t.iso_year, c.iso_year) << c.y << "-" << c.m << "-" << c.d;
    EXPECT_EQ(t.iso_week, c.week) << c.y << "-" << c.m << "-" << c.d;
    EXPECT_EQ(t.iso_weeks_in_year, c.weeks) << c.y << "-" << c.m << "-" << c.d;
  }
}

TEST(LocalTimeCursor, BeforeEpochAndAfter2100) {
  // One nanosecond before the epoch: floor division, not truncation.
  const LocalTime t = In("UTC", -1);
  EXPECT_EQ(t.date, LocalDate(1969, 12, 31));
  EXPECT_EQ(t.hour, 23);
  EXPECT_EQ(t.second, 59);
  EXPECT_EQ(t.subsecond_ns, 999999999);
  // 1900-01-01 was a Monday.
  EXPECT_EQ(In("UTC", UtcNs(1900, 1, 1)).weekday, 0);
  // 2199-12-31 is a Tuesday; New York keeps its DST rule in 2150.
  EXPECT_EQ(In("UTC", UtcNs(2199, 12, 31, 23, 59, 59)).weekday, 1);
  EXPECT_TRUE(In("America/New_York", UtcNs(2150, 7, 4, 12)).is_dst);
  EXPECT_FALSE(In("America/New_York", UtcNs(2150, 1, 4, 12)).is_dst);
}

// Guards against signed overflow at the ends of int64 nanoseconds: the
// subsecond part was computed as unix_ns − seconds·1e9, and for instants
// before −9223372036 s (INT64_MIN up to INT64_MIN + 145224191 ns) that product
// is below INT64_MIN — undefined behaviour that -fsanitize=undefined reports.
// The expected civil times come from absl's own conversion of the instant.
TEST(LocalTimeAt, ExtremeInt64TimestampsMatchAbslCivilTime) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (const char* zone_name : {"UTC", "America/New_York", "Asia/Kolkata"}) {
    const absl::TimeZone zone = *LoadIanaTimeZone(zone_name, "zone");
    LocalTimeCursor cursor(zone);
    for (const int64_t ns : {kMin, kMin + 1, kMin + 145224191, kMin + 145224192,
                             int64_t{-1}, int64_t{0}, kMax - 1, kMax}) {
      const absl::Time instant = absl::FromUnixNanos(ns);
      const absl::TimeZone::CivilInfo info = zone.At(instant);
      // absl::ToUnixSeconds rounds toward the infinite past.
      const int64_t whole_ns = absl::ToInt64Nanoseconds(
          instant - absl::FromUnixSeconds(absl::ToUnixSeconds(instant)));
      for (const LocalTime& t : {LocalTimeAt(zone, ns), cursor.At(ns)}) {
        EXPECT_EQ(t.date, LocalDate(info.cs.year(), info.cs.month(), info.cs.day()))
            << zone_name << " " << ns;
        EXPECT_EQ(t.hour, info.cs.hour()) << zone_name << " " << ns;
        EXPECT_EQ(t.minute, info.cs.minute()) << zone_name << " " << ns;
        EXPECT_EQ(t.second, info.cs.second()) << zone_name << " " << ns;
        EXPECT_EQ(t.subsecond_ns, whole_ns) << zone_name << " " << ns;
        EXPECT_EQ(t.utc_offset_seconds, info.offset) << zone_name << " " << ns;
      }
    }
  }
  // The two ends spelled out (UTC).
  const LocalTime min = LocalTimeAt(absl::UTCTimeZone(), kMin);
  EXPECT_EQ(min.date, LocalDate(1677, 9, 21));
  EXPECT_EQ(min.hour * 3600 + min.minute * 60 + min.second, 12 * 60 + 43);
  EXPECT_EQ(min.subsecond_ns, 145224192);
  EXPECT_EQ(LocalTimeAt(absl::UTCTimeZone(), kMin + 1).subsecond_ns, 145224193);
  const LocalTime max = LocalTimeAt(absl::UTCTimeZone(), kMax);
  EXPECT_EQ(max.date, LocalDate(2262, 4, 11));
  EXPECT_EQ(max.hour * 3600 + max.minute * 60 + max.second, 23 * 3600 + 47 * 60 + 16);
  EXPECT_EQ(max.subsecond_ns, 854775807);
}

// The date fields come from day-number arithmetic; absl's civil-time
// functions are the oracle, for every day int64 nanoseconds reach (UTC noon
// of 1677-09-21 .. 2262-04-11), through the direct lookup and, in order and
// every seventh day, through the cursor's arithmetic path.
TEST(LocalTimeAt, EveryDateMatchesAbslCivilTime) {
  const absl::CivilDay first(1677, 9, 21);
  const absl::CivilDay last(2262, 4, 11);
  const absl::CivilDay epoch(1970, 1, 1);
  int mismatches = 0;
  for (int stride : {1, 7}) {
    LocalTimeCursor cursor(absl::UTCTimeZone());
    for (absl::CivilDay day = first; day <= last; day += stride) {
      const int64_t ns = ((day - epoch) * 86400 + 12 * 3600) * int64_t{1000000000};
      const LocalTime direct = LocalTimeAt(absl::UTCTimeZone(), ns);
      const LocalTime& sorted = cursor.At(ns);
      const int weekday = (static_cast<int>(absl::GetWeekday(day)));  // Monday = 0.
      const absl::CivilDay thursday = day + (3 - weekday);
      const absl::CivilDay december28(thursday.year(), 12, 28);
      const absl::CivilDay december28_thursday =
          december28 + (3 - static_cast<int>(absl::GetWeekday(december28)));
      const absl::CivilMonth month(day);
      for (const LocalTime* t : {&direct, &sorted}) {
        const bool same =
            t->date == LocalDate(day.year(), day.month(), day.day()) &&
            t->day_number == day - epoch && t->weekday == weekday &&
            t->day_of_year == absl::GetYearDay(day) && t->iso_year == thursday.year() &&
            t->iso_week == (absl::GetYearDay(thursday) - 1) / 7 + 1 &&
            t->iso_weeks_in_year == (absl::GetYearDay(december28_thursday) - 1) / 7 + 1 &&
            t->days_in_month == absl::CivilDay(month + 1) - absl::CivilDay(month) &&
            t->days_in_year == absl::GetYearDay(absl::CivilDay(day.year(), 12, 31));
        if (!same && ++mismatches <= 5) ADD_FAILURE() << day << " stride " << stride;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace phasor
