#include "core/calendar.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "core/errors.h"
#include "core/exact_angle.h"
#include "core/status_macros.h"

namespace phasor {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;
constexpr int64_t kNanosPerSecond = 1000000000;
constexpr int kNumFieldKinds = 16;
// The first nine kinds are the cyclic fields; then the years; then the flags.
constexpr int kNumCyclicKinds = 9;

bool IsCyclicField(CalendarField field) {
  return static_cast<int>(field) < kNumCyclicKinds;
}

bool IsYearField(CalendarField field) {
  return field == CalendarField::kYear || field == CalendarField::kIsoYear;
}

bool IsFlagField(CalendarField field) {
  return static_cast<int>(field) > static_cast<int>(CalendarField::kIsoYear);
}

bool IsClockField(CalendarField field) {
  return field == CalendarField::kSecondOfMinute ||
         field == CalendarField::kMinuteOfHour ||
         field == CalendarField::kHourOfDay;
}

// The civil value v (INDEX) of a field.
int CivilValue(CalendarField field, const LocalTime& t) {
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
int FieldBase(CalendarField field) {
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
int LinearCount(CalendarField field) {
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
int MaxCivilValue(CalendarField field) {
  return LinearCount(field) - 1 + FieldBase(field);
}

// Calendar-true CYCLIC period.
int CyclePeriod(CalendarField field, const LocalTime& t) {
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

}  // namespace

namespace {

CalendarEncoder::RowClock ClockOf(const LocalTime& t) {
  const double seconds = t.second + static_cast<double>(t.subsecond_ns) * 1e-9;
  return {seconds, (t.hour * 3600.0 + t.minute * 60.0 + seconds) / 86400.0};
}

// The elapsed part of the field's unit by the local clock, in [0, 1).
// core/calendar_angles.cc spells the same operations out per field for
// EncodeRows' vectors; a change here is a change there.
inline double FieldFraction(CalendarField field, const LocalTime& t,
                     const CalendarEncoder::RowClock& clock) {
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

// a / b rounded toward −∞ (b > 0).
int64_t FloorDiv(int64_t a, int64_t b) { return a / b - (a % b < 0 ? 1 : 0); }

// Divisible by 4, and not by 100 unless by 400 (= by 100 and by 16).
bool IsLeapYear(int64_t y) { return (y & 3) == 0 && (y % 100 != 0 || (y & 15) == 0); }

// A proleptic Gregorian date from its day number (days since 1970-01-01).
// C. Neri and L. Schneider, "Euclidean affine functions and their
// application to calendar algorithms", Softw. Pract. Exper. 53(4), 2023,
// §5: in a calendar whose years start on March 1 of year 0, centuries,
// years, months and days are Euclidean affine functions of the day count,
// each a multiply and a shift in 32-bit arithmetic (absl's civil arithmetic
// normalises field by field: ~0.1 µs for a date one day later).
struct CivilDate {
  int64_t year;
  int month;
  int day;
  int day_of_year;  // 1..366.
  int weekday;      // Monday = 0 .. Sunday = 6.
};

// Days of each month of a common year.
constexpr int kDaysInMonth[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

// ISO 8601 weeks of the ISO year whose January 1 falls on
// `january1_weekday` (Monday = 0): 53 when that is a Thursday, or a
// Wednesday in a leap year (its December 28 then lies in week 53).
int IsoWeeksInYear(int january1_weekday, bool leap) {
  return january1_weekday == 3 || (january1_weekday == 2 && leap) ? 53 : 52;
}

// Monday = 0 .. Sunday = 6 of the day `day_number` days after 1970-01-01.
// REQUIRES: |day_number| <= 2^28.
int WeekdayOf(int64_t day_number) {
  // 1970-01-01 (n ≡ 1 mod 7: 146097 days are whole weeks) was a Thursday.
  const auto n = static_cast<uint32_t>(day_number + 719468 + 146097 * 2000);
  return static_cast<int>((n + 2) % 7);
}

// REQUIRES: |day_number| <= 2^28 (int64 nanoseconds reach ±106,752 days).
CivilDate CivilFromDays(int64_t day_number) {
  assert(day_number >= -(int64_t{1} << 28) && day_number <= (int64_t{1} << 28));
  // Days since 0000-03-01 (day −719468) plus 2000 eras of 146097 days (400
  // years each), so n > 0; with |day_number| <= 2^28, 4·n + 3 < 2^32.
  const auto n = static_cast<uint32_t>(day_number + 719468 + 146097 * 2000);
  const uint32_t n1 = 4 * n + 3;
  const uint32_t century = n1 / 146097;
  const uint32_t n2 = (n1 % 146097) | 3;  // 4·(day of century) + 3.
  const uint64_t p2 = uint64_t{2939745} * n2;
  const auto year_of_century = static_cast<uint32_t>(p2 >> 32);
  const uint32_t march_day = static_cast<uint32_t>(p2) / 2939745 / 4;  // March 1 = 0.
  const uint32_t n3 = 2141 * march_day + 197913;
  const auto month = static_cast<int>(n3 >> 16);  // March = 3 .. February = 14.
  const bool next_year = march_day >= 306;         // January or February.
  CivilDate date;
  date.year = int64_t{100} * century + year_of_century - 400 * 2000 + (next_year ? 1 : 0);
  date.month = next_year ? month - 12 : month;
  date.day = static_cast<int>((n3 & 0xFFFF) / 2141) + 1;
  // 59 days of the calendar year precede March 1, 60 in a leap year.
  date.day_of_year = static_cast<int>(
      next_year ? march_day - 305 : march_day + 60 + (IsLeapYear(date.year) ? 1 : 0));
  date.weekday = WeekdayOf(day_number);
  return date;
}

// The date fields of `t` for the local date `day_number`.
void FillDate(int64_t day_number, LocalTime* t) {
  const CivilDate date = CivilFromDays(day_number);
  const bool leap = IsLeapYear(date.year);
  const int64_t january1 = day_number - date.day_of_year + 1;
  t->date = LocalDate(date.year, date.month, date.day);
  t->day_number = day_number;
  t->weekday = date.weekday;
  t->day_of_year = date.day_of_year;
  t->days_in_month = kDaysInMonth[date.month - 1] + (date.month == 2 && leap ? 1 : 0);
  t->days_in_year = leap ? 366 : 365;
  // The ISO week belongs to the year of its Thursday (ISO 8601 §3.2.2),
  // which is at most 3 days away: this year, the one before or after.
  const int64_t thursday = day_number + 3 - t->weekday;
  int64_t iso_year = date.year;
  int64_t iso_january1 = january1;
  if (thursday < january1) {
    iso_year = date.year - 1;
    iso_january1 = january1 - (IsLeapYear(iso_year) ? 366 : 365);
  } else if (thursday >= january1 + t->days_in_year) {
    iso_year = date.year + 1;
    iso_january1 = january1 + t->days_in_year;
  }
  t->iso_year = iso_year;
  t->iso_week = static_cast<int>((thursday - iso_january1) / 7 + 1);
  // The ISO year's January 1 weekday (day_number − iso_january1 ∈
  // [−3, 368]; + 371 keeps the remainder's operand positive).
  const int january1_weekday =
      static_cast<int>((t->weekday - (day_number - iso_january1) + 371) % 7);
  const bool iso_leap = iso_year == date.year ? leap : IsLeapYear(iso_year);
  t->iso_weeks_in_year = IsoWeeksInYear(january1_weekday, iso_leap);
}

// The month, day and length of the month of each day of a year (index:
// day of year − 1), for common and leap years.
struct MonthDay {
  uint8_t month;
  uint8_t day;
  uint8_t days_in_month;
};

constexpr std::array<std::array<MonthDay, 366>, 2> MakeMonthDays() {
  std::array<std::array<MonthDay, 366>, 2> table{};
  for (int leap = 0; leap < 2; ++leap) {
    int day_of_year = 0;
    for (int month = 1; month <= 12; ++month) {
      const int days = kDaysInMonth[month - 1] + (month == 2 ? leap : 0);
      for (int day = 1; day <= days; ++day) {
        table[leap][day_of_year++] = {static_cast<uint8_t>(month), static_cast<uint8_t>(day),
                                      static_cast<uint8_t>(days)};
      }
    }
  }
  return table;
}

constexpr std::array<std::array<MonthDay, 366>, 2> kMonthDays = MakeMonthDays();

// sin, cos of 2π·numerator/denominator exactly reduced: the ratio as a
// fraction of 2^64 turns, rounded to nearest (≤ 2^-65 turn), then
// ExactAngle::CosSinOfTurns (≤ 1.7e-16 absolute).
// REQUIRES: 0 <= numerator; 0 < denominator < 2^63.
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
const double* FixedDayCycles(CalendarField field) {
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

constexpr int64_t kNanosPerDay = 86400 * int64_t{1000000000};

// The CYCLIC phase x/P of `field` at `local` as numerator/denominator in
// nanoseconds of the local clock: the ratio FieldFraction and CyclePeriod
// give in double, here exact (each denominator < 2^55: 53 ISO weeks).
void CyclePhase(CalendarField field, const LocalTime& t, bool fractional,
                int64_t* numerator, int64_t* denominator) {
  const int64_t clock_ns =
      fractional ? (t.hour * int64_t{3600} + t.minute * 60 + t.second) *
                           kNanosPerSecond +
                       t.subsecond_ns
                 : 0;
  const int64_t day = kNanosPerDay;
  switch (field) {
    case CalendarField::kSecondOfMinute:
      *numerator = t.second * kNanosPerSecond + (fractional ? t.subsecond_ns : 0);
      *denominator = 60 * kNanosPerSecond;
      return;
    case CalendarField::kMinuteOfHour:
      *numerator = (t.minute * int64_t{60} + (fractional ? t.second : 0)) *
                       kNanosPerSecond +
                   (fractional ? t.subsecond_ns : 0);
      *denominator = 3600 * kNanosPerSecond;
      return;
    case CalendarField::kHourOfDay:
      *numerator = fractional ? clock_ns : t.hour * 3600 * kNanosPerSecond;
      *denominator = day;
      return;
    case CalendarField::kDayOfWeek:
      *numerator = t.weekday * day + clock_ns;
      *denominator = 7 * day;
      return;
    case CalendarField::kDayOfMonth:
      *numerator = (t.date.day() - 1) * day + clock_ns;
      *denominator = t.days_in_month * day;
      return;
    case CalendarField::kDayOfYear:
      *numerator = (t.day_of_year - 1) * day + clock_ns;
      *denominator = t.days_in_year * day;
      return;
    case CalendarField::kWeekOfYear:
      *numerator = (t.iso_week - 1) * 7 * day +
                   (fractional ? t.weekday * day + clock_ns : 0);
      *denominator = t.iso_weeks_in_year * 7 * day;
      return;
    case CalendarField::kMonthOfYear: {
      const int64_t month_ns = t.days_in_month * day;
      *numerator = (t.date.month() - 1) * month_ns +
                   (fractional ? (t.date.day() - 1) * day + clock_ns : 0);
      *denominator = 12 * month_ns;
      return;
    }
    case CalendarField::kQuarter: {
      const int64_t month_ns = t.days_in_month * day;
      const int quarter = (t.date.month() - 1) / 3;
      *numerator =
          quarter * 3 * month_ns +
          (fractional ? ((t.date.month() - 1) % 3) * month_ns +
                            (t.date.day() - 1) * day + clock_ns
                      : 0);
      *denominator = 12 * month_ns;
      return;
    }
    default:  // Not cyclic.
      break;
  }
  *numerator = 0;
  *denominator = 1;
}

// Whole seconds (rounded toward −∞) and the nanoseconds past them, in
// [0, 1e9). Computed from C++'s truncating / and %, never as
// unix_ns − seconds·1e9: for the instants before −9223372036 s (INT64_MIN
// up to INT64_MIN + 145224191 ns, which validation accepts) that product is
// below INT64_MIN, a signed overflow.
struct SplitNs {
  int64_t seconds;
  int64_t subsecond_ns;
};

SplitNs SplitUnixNs(int64_t unix_ns) {
  int64_t seconds = unix_ns / kNanosPerSecond;
  int64_t subsecond_ns = unix_ns % kNanosPerSecond;
  if (subsecond_ns < 0) {
    --seconds;
    subsecond_ns += kNanosPerSecond;
  }
  return {seconds, subsecond_ns};
}

}  // namespace

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

namespace {

bool SafeZoneName(absl::string_view name) {
  if (name.empty() || name.front() == '/' || name == "localtime" ||
      absl::StrContains(name, "..")) {
    return false;
  }
  for (char ch : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(ch)) && ch != '/' &&
        ch != '_' && ch != '-' && ch != '+') {
      return false;
    }
  }
  return true;
}

// IANA names are short ("America/Argentina/ComodRivadavia", 32 bytes, is
// among the longest); anything longer is rejected before any lookup, and
// errors echo at most this many bytes of a name.
constexpr size_t kMaxZoneNameBytes = 64;

// `name` for an error message (core/errors.h).
std::string QuoteZoneName(absl::string_view name) {
  return QuoteForError(name, kMaxZoneNameBytes);
}

// The zoneinfo directory absl reads: $TZDIR when set and non-empty (as
// absl's FileZoneInfoSource does), else /usr/share/zoneinfo.
std::string ZoneinfoDir() {
  const char* tzdir = std::getenv("TZDIR");
  return tzdir != nullptr && *tzdir != '\0' ? std::string(tzdir)
                                            : std::string("/usr/share/zoneinfo");
}

// Zone and link names from tzdata.zi, the compact zic input tzdata ships
// beside the compiled files: "Z name ..." declares a zone, "L target name" a
// link (e.g. "L America/New_York US/Eastern").
void ReadTzdataZi(const std::string& path, std::set<std::string, std::less<>>* names) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() < 2 || line[1] != ' ' || (line[0] != 'Z' && line[0] != 'L')) {
      continue;
    }
    std::vector<absl::string_view> words =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    const size_t index = line[0] == 'Z' ? 1 : 2;
    if (words.size() > index) names->emplace(words[index]);
  }
}

// Without tzdata.zi: every compiled zone file under `dir` (TZif magic).
void WalkZoneinfo(const std::string& dir, std::set<std::string, std::less<>>* names) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::recursive_directory_iterator it(dir, error);
  const fs::recursive_directory_iterator end;
  for (; !error && it != end; it.increment(error)) {
    std::error_code entry_error;
    if (!it->is_regular_file(entry_error)) continue;
    std::ifstream file(it->path(), std::ios::binary);
    char magic[4] = {};
    if (!file.read(magic, sizeof(magic)) || std::memcmp(magic, "TZif", 4) != 0) {
      continue;
    }
    const std::string name = it->path().lexically_relative(dir).generic_string();
    if (!name.empty() && name.size() <= kMaxZoneNameBytes) names->insert(name);
  }
}

std::set<std::string, std::less<>> ReadZoneNamesInto(const std::string& dir) {
  std::set<std::string, std::less<>> names;
  ReadTzdataZi(dir + "/tzdata.zi", &names);
  if (names.empty()) WalkZoneinfo(dir, &names);
  return names;
}

// The zone names this process can load, read once. absl::LoadTimeZone keeps
// every name it is asked for in a process-wide map for good, failures
// included, so only names on this list may reach it: its map then holds at
// most the ~600 names tzdata has, whatever clients send.
const std::set<std::string, std::less<>>& KnownZoneNames() {
  // Thread-safe initialisation (C++11 magic statics); immutable afterwards.
  static const std::set<std::string, std::less<>>* const names =
      new std::set<std::string, std::less<>>(ReadZoneNamesInto(ZoneinfoDir()));
  return *names;
}

// The zone `name` names, or false with the reason in `problem` (no field
// path: callers add theirs, so the success path builds no string).
bool FindIanaTimeZone(absl::string_view name, absl::TimeZone* zone,
                      std::string* problem) {
  if (name.empty() || name == "UTC") {
    *zone = absl::UTCTimeZone();
    return true;
  }
  if (name.size() > kMaxZoneNameBytes) {
    *problem = absl::StrCat("unknown IANA time zone ", QuoteZoneName(name),
                            ": longer than any IANA name (at most ",
                            kMaxZoneNameBytes, " bytes)");
    return false;
  }
  if (!SafeZoneName(name)) {
    *problem = absl::StrCat("unknown IANA time zone ", QuoteZoneName(name),
                            " (expected a name such as \"Europe/London\"; "
                            "the server's local zone is never used)");
    return false;
  }
  const std::set<std::string, std::less<>>& known = KnownZoneNames();
  if (known.find(name) == known.end() || !absl::LoadTimeZone(name, zone)) {
    *problem = absl::StrCat("unknown IANA time zone ", QuoteZoneName(name));
    return false;
  }
  return true;
}

// Years' range, zero-based INDEX and Fourier orders.
absl::Status ValidateCalendarAdditions(const CalendarBlock& block,
                                       absl::string_view field_prefix) {
  const auto path = [&](absl::string_view name) {
    return absl::StrCat(field_prefix, ".", name);
  };
  if (block.zero_based_index && block.encoding != CalendarEncoding::kIndex) {
    return InvalidField(path("zero_based_index"),
                        "applies to INDEX encoding only");
  }
  // |year| <= 2^31 keeps x = year − min_year and the span exact.
  constexpr int64_t kYearLimit = int64_t{1} << 31;
  for (const auto& [name, year] : {std::pair{"min_year", block.min_year},
                                   std::pair{"max_year", block.max_year}}) {
    if (year.has_value() && (*year < -kYearLimit || *year > kYearLimit)) {
      return InvalidField(path(name), absl::StrCat("must be in [", -kYearLimit,
                                                   ", ", kYearLimit, "], got ", *year));
    }
  }
  if (block.max_year.has_value() && !block.min_year.has_value()) {
    return InvalidField(path("min_year"), "must be set with max_year");
  }
  if (block.min_year.has_value() && block.max_year.has_value() &&
      *block.max_year <= *block.min_year) {
    return InvalidField(path("max_year"),
                        absl::StrCat("must be > min_year (", *block.min_year,
                                     "), got ", *block.max_year));
  }
  for (size_t i = 0; i < block.fields.size(); ++i) {
    const CalendarField field = block.fields[i];
    if (!IsYearField(field)) continue;
    if (block.encoding != CalendarEncoding::kIndex && !block.max_year.has_value()) {
      return InvalidField(
          path(block.min_year.has_value() ? "max_year" : "min_year"),
          absl::StrCat("must be set: fields[", i, "] ", CalendarFieldName(field),
                       " is encoded LINEAR on the range [min_year, max_year]"));
    }
    if (block.zero_based_index && !block.min_year.has_value()) {
      return InvalidField(
          path("min_year"),
          absl::StrCat("must be set: the zero-based INDEX of fields[", i, "] ",
                       CalendarFieldName(field), " is year − min_year"));
    }
  }
  if (!block.fourier_orders.empty() &&
      block.fourier_orders.size() != block.fields.size()) {
    return InvalidField(path("fourier_orders"),
                        absl::StrCat("has ", block.fourier_orders.size(),
                                     " entries; fields has ", block.fields.size(),
                                     " (give one per field, or none)"));
  }
  for (size_t i = 0; i < block.fourier_orders.size(); ++i) {
    const int64_t order = block.fourier_orders[i];
    const std::string field = absl::StrCat(field_prefix, ".fourier_orders[", i, "]");
    if (order < 0 || order > kMaxFourierOrder) {
      return InvalidField(field, absl::StrCat("must be in [0, ", kMaxFourierOrder,
                                              "] (0 means 1), got ", order));
    }
    if (order > 1 && block.encoding != CalendarEncoding::kCyclic) {
      return InvalidField(field, absl::StrCat("order ", order,
                                              " needs CYCLIC encoding"));
    }
    if (order > 1 && !IsCyclicField(block.fields[i])) {
      return InvalidField(field, absl::StrCat("order ", order, ": ",
                                              CalendarFieldName(block.fields[i]),
                                              " has no cycle"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> ReadZoneNames(const std::string& zoneinfo_dir) {
  const std::set<std::string, std::less<>> names = ReadZoneNamesInto(zoneinfo_dir);
  return std::vector<std::string>(names.begin(), names.end());
}

absl::StatusOr<absl::TimeZone> LoadIanaTimeZone(absl::string_view name,
                                                absl::string_view field) {
  absl::TimeZone zone;
  std::string problem;
  if (!FindIanaTimeZone(name, &zone, &problem)) return InvalidField(field, problem);
  return zone;
}

absl::Status ValidateCalendarBlock(const CalendarBlock& block,
                                   absl::string_view field_prefix) {
  {
    absl::TimeZone zone;
    std::string problem;
    if (!FindIanaTimeZone(block.time_zone, &zone, &problem)) {
      return InvalidField(absl::StrCat(field_prefix, ".time_zone"), problem);
    }
  }
  bool listed[kNumFieldKinds] = {};
  for (size_t i = 0; i < block.fields.size(); ++i) {
    const int kind = static_cast<int>(block.fields[i]);
    if (kind < 0 || kind >= kNumFieldKinds) {
      return InvalidField(absl::StrCat(field_prefix, ".fields[", i, "]"),
                          absl::StrCat("unknown calendar field ", kind));
    }
    if (listed[kind]) {
      return InvalidField(absl::StrCat(field_prefix, ".fields[", i, "]"),
                          absl::StrCat(CalendarFieldName(block.fields[i]),
                                       " listed twice"));
    }
    listed[kind] = true;
  }
  if (block.fields.empty() && !block.include_utc_offset && !block.include_dst &&
      !block.holidays.has_value()) {
    return InvalidField(absl::StrCat(field_prefix, ".fields"),
                        "empty, and no utc offset, DST flag or holidays "
                        "selected: the block has no column");
  }
  if (block.fractional && block.encoding == CalendarEncoding::kIndex) {
    return InvalidField(absl::StrCat(field_prefix, ".fractional"),
                        "INDEX encoding yields integers; fractional applies "
                        "to CYCLIC and LINEAR");
  }
  PHASOR_RETURN_IF_ERROR(ValidateCalendarAdditions(block, field_prefix));
  if (block.holidays.has_value()) {
    PHASOR_RETURN_IF_ERROR(ValidateHolidaysBlock(
        *block.holidays, absl::StrCat(field_prefix, ".holidays")));
  }
  return absl::OkStatus();
}

LocalTime LocalTimeAt(const absl::TimeZone& zone, int64_t unix_ns) {
  const SplitNs split = SplitUnixNs(unix_ns);
  const absl::TimeZone::CivilInfo info =
      zone.At(absl::FromUnixSeconds(split.seconds));
  LocalTime t;
  FillDate(DayOrdinal(absl::CivilDay(info.cs)), &t);
  t.hour = info.cs.hour();
  t.minute = info.cs.minute();
  t.second = info.cs.second();
  t.subsecond_ns = split.subsecond_ns;
  t.utc_offset_seconds = info.offset;
  t.is_dst = info.is_dst;
  return t;
}

void LocalTimeCursor::SetDate(int64_t day_number) {
  // Inside the cached year, with the ISO week in the same year (all but the
  // few days around January 1 whose Thursday lies in the year next door),
  // the date fields are a table lookup and a weekday: FillDate's chain of
  // dependent multiplies was most of a new local day's cost.
  const int64_t offset = day_number - year_.january1;
  if (offset >= 0 && offset < year_.days) {
    const int weekday = WeekdayOf(day_number);
    const int64_t thursday_offset = offset + 3 - weekday;
    if (thursday_offset >= 0 && thursday_offset < year_.days) {
      const MonthDay md = kMonthDays[year_.days - 365][offset];
      local_.date = LocalDate(year_.year, md.month, md.day);
      local_.day_number = day_number;
      local_.weekday = weekday;
      local_.day_of_year = static_cast<int>(offset) + 1;
      local_.days_in_month = md.days_in_month;
      local_.days_in_year = year_.days;
      local_.iso_year = year_.year;
      local_.iso_week = static_cast<int>(thursday_offset / 7) + 1;
      local_.iso_weeks_in_year = year_.iso_weeks;
      return;
    }
  }
  FillDate(day_number, &local_);
  year_.year = local_.date.year();
  year_.january1 = day_number - local_.day_of_year + 1;
  year_.days = local_.days_in_year;
  // The calendar year's own ISO week count (SetDate uses it only for
  // dates whose ISO year is the calendar year).
  year_.iso_weeks = IsoWeeksInYear(WeekdayOf(year_.january1), year_.days == 366);
}

void LocalTimeCursor::Refill(int64_t unix_seconds) {
  if (valid_ && unix_seconds >= offset_from_s_ &&
      unix_seconds < offset_until_s_) {
    // The offset still holds: civil time is UTC + offset. |unix_seconds| <
    // 2^34 (int64 nanoseconds), so nothing here overflows.
    const int64_t local_seconds = unix_seconds + local_.utc_offset_seconds;
    const int64_t days = FloorDiv(local_seconds, 86400);
    if (days != local_.day_number) SetDate(days);
    local_midnight_s_ = days * 86400 - local_.utc_offset_seconds;
    begin_s_ = unix_seconds;
    end_s_ = std::min(local_midnight_s_ + 86400, offset_until_s_);
    return;
  }
  const absl::Time instant = absl::FromUnixSeconds(unix_seconds);
  const absl::TimeZone::CivilInfo info = zone_.At(instant);
  const int64_t day = DayOrdinal(absl::CivilDay(info.cs));
  if (!valid_ || day != local_.day_number) SetDate(day);
  local_.utc_offset_seconds = info.offset;
  local_.is_dst = info.is_dst;
  const int64_t second_of_day =
      info.cs.hour() * 3600 + info.cs.minute() * 60 + info.cs.second();
  local_midnight_s_ = unix_seconds - second_of_day;
  begin_s_ = unix_seconds;
  // Until the next local midnight at this offset, or the next transition.
  end_s_ = local_midnight_s_ + 86400;
  offset_from_s_ = unix_seconds;
  offset_until_s_ = std::numeric_limits<int64_t>::max();  // No transition.
  absl::TimeZone::CivilTransition transition;
  if (zone_.NextTransition(instant, &transition)) {
    const int64_t at = absl::ToUnixSeconds(zone_.At(transition.to).trans);
    if (at > unix_seconds && at < end_s_) end_s_ = at;
    // A transition not after this instant (never seen) disables the
    // arithmetic path: every new day then looks the zone up.
    offset_until_s_ = at > unix_seconds ? at : unix_seconds;
  }
  valid_ = true;
}

const LocalTime& LocalTimeCursor::At(int64_t unix_ns) {
  const SplitNs split = SplitUnixNs(unix_ns);
  const int64_t seconds = split.seconds;
  if (!valid_ || seconds < begin_s_ || seconds >= end_s_) Refill(seconds);
  // Within a segment the offset is constant, so the clock is plain
  // arithmetic on seconds since local midnight.
  const auto second_of_day = static_cast<int>(seconds - local_midnight_s_);
  local_.hour = second_of_day / 3600;
  local_.minute = (second_of_day / 60) % 60;
  local_.second = second_of_day % 60;
  local_.subsecond_ns = split.subsecond_ns;
  return local_;
}

CalendarEncoder::CalendarEncoder(const CalendarBlock& block,
                                 absl::TimeZone zone, int64_t sum_d_model,
                                 int64_t max_table_rows,
                                 SinusoidAccuracy accuracy)
    : encoding_(block.encoding),
      fractional_(block.fractional),
      exact_cycles_(accuracy == SinusoidAccuracy::kFloat64),
      include_utc_offset_(block.include_utc_offset),
      include_dst_(block.include_dst),
      zero_based_index_(block.zero_based_index),
      zone_(zone),
      sum_d_model_(sum_d_model) {
  if (block.holidays.has_value()) holidays_.emplace(*block.holidays);
  if (block.min_year.has_value()) min_year_ = *block.min_year;
  if (block.min_year.has_value() && block.max_year.has_value()) {
    year_span_ = *block.max_year - *block.min_year;
  }
  int64_t offset = 0;
  slots_.reserve(block.fields.size());
  for (size_t i = 0; i < block.fields.size(); ++i) {
    const CalendarField field = block.fields[i];
    const int64_t width = FieldWidth(block, i);
    // Flags are whole-day values even with `fractional`.
    const bool day_level =
        IsFlagField(field) || (!IsClockField(field) && !block.fractional);
    // CYCLIC angles evaluated a tile at a time (Writer::EncodeRows).
    const bool angles = !day_level && encoding_ == CalendarEncoding::kCyclic &&
                        fractional_ && !exact_cycles_ && IsCyclicField(field);
    slots_.push_back({field, offset, width, std::max<int64_t>(width / 2, 1),
                      day_level, angles});
    if (angles) row_angles_ += slots_.back().order;
    (day_level ? day_slots_ : row_slots_).push_back(slots_.back());
    offset += width;
  }
  int64_t run_end = -1;
  bool one_run = true;
  for (const Slot& slot : row_slots_) {
    if (!slot.angles) continue;
    if (run_end < 0) {
      angle_run_begin_ = slot.offset;
    } else if (slot.offset != run_end) {
      one_run = false;
    }
    run_end = slot.offset + 2 * slot.order;
  }
  if (!one_run) angle_run_begin_ = -1;
  if (include_utc_offset_) utc_offset_column_ = offset++;
  if (include_dst_) dst_column_ = offset++;
  if (holidays_.has_value()) {
    holiday_column_ = offset;
    offset += holidays_->width();
  }
  width_ = sum_d_model_ > 0 ? sum_d_model_ : offset;

  if (encoding_ == CalendarEncoding::kCyclic && !fractional_) {
    clock_cycle60_ = exact_cycles_ ? ClockCycles60<true>().data()
                                   : ClockCycles60<false>().data();
    clock_cycle24_ = exact_cycles_ ? ClockCycles24<true>().data()
                                   : ClockCycles24<false>().data();
  }
  if (sum_d_model_ > 0) {
    assert(sum_d_model_ % 2 == 0);
    const int64_t d = sum_d_model_;
    sum_omega_.resize(static_cast<size_t>(d / 2));
    for (int64_t i = 0; i < d / 2; ++i) {
      // Informer: div_term = exp(2i · −ln(10000)/d_model).
      sum_omega_[i] = std::exp(static_cast<double>(2 * i) * -(std::log(10000.0) / d));
    }
    sum_tables_.resize(kNumFieldKinds);
    int64_t table_rows = 0;
    for (const Slot& slot : slots_) {
      const int rows = MaxCivilValue(slot.field) + 1;
      if (table_rows + rows > max_table_rows) break;
      table_rows += rows;
      // Rows are built by AddInformerRow itself (0 + x == x), so a field
      // with a table and one without give the same bits.
      std::vector<double> table(static_cast<size_t>(rows) * d, 0.0);
      for (int v = 0; v < rows; ++v) AddInformerRow(slot.field, v, &table[v * d]);
      sum_tables_[static_cast<int>(slot.field)] = std::move(table);
    }
  }
}

void CalendarEncoder::AddInformerRow(CalendarField field, int value,
                                     double* out) const {
  const std::vector<double>& table = sum_tables_[static_cast<int>(field)];
  if (!table.empty()) {
    const double* row = table.data() + value * sum_d_model_;
    for (int64_t j = 0; j < sum_d_model_; ++j) out[j] += row[j];
    return;
  }
  // The row's angles value·ω_i through the vector kernel, kChunk at a time
  // (a libm call per value was most of such a row). The tables above are
  // built by this code, so a field with and without one gives the same bits.
  constexpr size_t kChunk = 64;
  double angle[kChunk];
  double sin_angle[kChunk];
  double cos_angle[kChunk];
  for (size_t i0 = 0; i0 < sum_omega_.size(); i0 += kChunk) {
    const size_t used = std::min(kChunk, sum_omega_.size() - i0);
    for (size_t j = 0; j < used; ++j) angle[j] = value * sum_omega_[i0 + j];
    SinCosOfAngles(absl::MakeConstSpan(angle, used), sin_angle, cos_angle);
    for (size_t j = 0; j < used; ++j) {
      out[2 * (i0 + j)] += sin_angle[j];
      out[2 * (i0 + j) + 1] += cos_angle[j];
    }
  }
}

int64_t CalendarEncoder::FieldWidth(const CalendarBlock& block, size_t i) {
  if (block.encoding != CalendarEncoding::kCyclic || !IsCyclicField(block.fields[i])) {
    return 1;
  }
  const int64_t order = i < block.fourier_orders.size() ? block.fourier_orders[i] : 0;
  return 2 * std::max<int64_t>(order, 1);
}

namespace {

// The angle of harmonic k of a cyclic field at x in [0, period): 2π·x'/P
// with x' = (k·x) mod P, exact (fmod is), a smaller angle.
// core/calendar_angles.cc computes it likewise, in vectors.
inline double HarmonicAngle(double x, int period, int64_t k) {
  const double kx = k == 1 ? x : std::fmod(static_cast<double>(k) * x, period);
  return kTwoPi * kx / period;
}

}  // namespace

void CalendarEncoder::EncodeField(const Slot& slot, const LocalTime& local,
                                  const RowClock& clock, double* out) const {
  const CalendarField field = slot.field;
  if (IsFlagField(field)) {
    out[0] = CivilValue(field, local);
    return;
  }
  if (IsYearField(field)) {
    const int64_t x = CivilValue(field, local) - min_year_;
    if (encoding_ == CalendarEncoding::kIndex) {
      out[0] = static_cast<double>(zero_based_index_ ? x : x + min_year_);
      return;
    }
    // LINEAR (also under CYCLIC: a year has no period) on the stated range.
    const double position =
        static_cast<double>(x) + (fractional_ ? FieldFraction(field, local, clock) : 0.0);
    out[0] = position / static_cast<double>(year_span_) - 0.5;
    return;
  }
  if (exact_cycles_ && encoding_ == CalendarEncoding::kCyclic) {
    EncodeExactCycle(slot, local, out);
    return;
  }
  const int value = CivilValue(field, local);
  double x = value - FieldBase(field);
  if (fractional_) x += FieldFraction(field, local, clock);
  switch (encoding_) {
    case CalendarEncoding::kCyclic: {
      // The vector kernel, as Writer::EncodeRows (the same bits).
      const int period = CyclePeriod(field, local);
      for (int64_t k = 1; k <= slot.order; ++k) {
        const double angle = HarmonicAngle(x, period, k);
        SinCosOfAngles(absl::MakeConstSpan(&angle, 1), &out[2 * k - 2],
                       &out[2 * k - 1]);
      }
      return;
    }
    case CalendarEncoding::kLinear:
      out[0] = x / (LinearCount(field) - 1) - 0.5;
      return;
    case CalendarEncoding::kIndex:
      out[0] = zero_based_index_ ? value - FieldBase(field) : value;
      return;
  }
}

namespace {


}  // namespace

void CalendarEncoder::EncodeExactCycle(const Slot& slot, const LocalTime& local,
                                       double* out) const {
  int64_t numerator = 0;
  int64_t denominator = 1;
  CyclePhase(slot.field, local, fractional_, &numerator, &denominator);
  const auto reduced = static_cast<unsigned __int128>(numerator % denominator);
  for (int64_t k = 1; k <= slot.order; ++k) {
    // (k·x mod P): exact in 128 bits (x < 2^63, k <= kMaxFourierOrder).
    const auto phase = static_cast<int64_t>(reduced * static_cast<uint64_t>(k) %
                                            static_cast<uint64_t>(denominator));
    ExactCycle(phase, denominator, out + 2 * (k - 1));
  }
}

namespace {

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

}  // namespace

CalendarEncoder::Writer::Writer(const CalendarEncoder& encoder)
    : encoder_(encoder),
      cursor_(encoder.zone_),
      day_columns_(static_cast<size_t>(encoder.width_), 0.0) {
  if (encoder.row_angles_ > 0) {
    // Whole vectors of rows where a few rows' angles fill the batch (the
    // angles are computed for many rows at once, calendar_angles.h).
    rows_per_batch_ = std::max<int64_t>(kBatchAngles / encoder.row_angles_, 1);
    if (rows_per_batch_ >= kBatchRowMultiple) {
      rows_per_batch_ = (rows_per_batch_ + kBatchRowMultiple - 1) / kBatchRowMultiple *
                        kBatchRowMultiple;
    }
    const auto angles = static_cast<size_t>(rows_per_batch_ * encoder.row_angles_);
    angles_.resize(angles);
    batch_ = calendar_internal::ClockRows(rows_per_batch_);
    sin_.resize(angles);
    cos_.resize(angles);
  }
  if (encoder.holidays_.has_value()) {
    holiday_brackets_.resize(static_cast<size_t>(encoder.holidays_->num_sets()));
    if (encoder.holidays_->clock_dependent()) {
      holidays_after_midnight_.resize(static_cast<size_t>(encoder.holidays_->width()));
    }
  }
}

void CalendarEncoder::Writer::FillDay(const LocalTime& local) {
  const CalendarEncoder& e = encoder_;
  if (e.sum_d_model_ > 0) {
    std::fill(day_columns_.begin(), day_columns_.end(), 0.0);  // A sum.
    for (const Slot& slot : e.day_slots_) {
      e.AddInformerRow(slot.field, CivilValue(slot.field, local),
                       day_columns_.data());
    }
  } else {
    // CONCAT: EncodeRow reads the day-level slots' and the holidays'
    // columns only, and each is written here. Day-level slots are flags or
    // not fractional: none reads the clock.
    const RowClock no_clock{0.0, 0.0};
    for (const Slot& slot : e.day_slots_) {
      double* column = &day_columns_[slot.offset];
      // CYCLIC, not fractional (as for the clock tables): a table lookup.
      const double* table = e.clock_cycle60_ == nullptr ? nullptr
                            : e.exact_cycles_ ? FixedDayCycles<true>(slot.field)
                                              : FixedDayCycles<false>(slot.field);
      if (table != nullptr) {
        const int x = CivilValue(slot.field, local) - FieldBase(slot.field);
        TableHarmonics(table, x, LinearCount(slot.field), slot.order, column);
      } else {
        e.EncodeField(slot, local, no_clock, column);
      }
    }
    if (e.holiday_column_ >= 0) {
      holidays_differ_after_midnight_ =
          e.holidays_->Write(local.day_number, /*at_local_midnight=*/true,
                             &day_columns_[e.holiday_column_],
                             absl::MakeSpan(holiday_brackets_));
      holidays_after_midnight_filled_ = false;
    }
  }
  day_number_ = local.day_number;
  has_day_ = true;
}

void CalendarEncoder::Writer::Encode(int64_t unix_ns, double* out) {
  EncodeRows(absl::MakeConstSpan(&unix_ns, 1), out, encoder_.width_);
}

void CalendarEncoder::Writer::KeepForAngles(int64_t r, const LocalTime& t,
                                            const RowClock& clock) {
  using B = calendar_internal::ClockRows;
  batch_.ints(B::kSecond)[r] = t.second;
  batch_.ints(B::kSubsecondNs)[r] = static_cast<int32_t>(t.subsecond_ns);
  batch_.ints(B::kMinute)[r] = t.minute;
  batch_.ints(B::kHour)[r] = t.hour;
  batch_.ints(B::kWeekday)[r] = t.weekday;
  batch_.ints(B::kDayIndex)[r] = t.date.day() - 1;
  batch_.ints(B::kDayOfYearIndex)[r] = t.day_of_year - 1;
  batch_.ints(B::kIsoWeekIndex)[r] = t.iso_week - 1;
  const int month_index = t.date.month() - 1;
  batch_.ints(B::kMonthIndex)[r] = month_index;
  batch_.ints(B::kQuarterIndex)[r] = month_index / 3;
  batch_.ints(B::kMonthInQuarter)[r] = month_index % 3;
  batch_.ints(B::kDaysInMonth)[r] = t.days_in_month;
  batch_.ints(B::kDaysInYear)[r] = t.days_in_year;
  batch_.ints(B::kIsoWeeksInYear)[r] = t.iso_weeks_in_year;
  batch_.reals(B::kSeconds)[r] = clock.seconds;
  batch_.reals(B::kDayFraction)[r] = clock.day_fraction;
}

void CalendarEncoder::Writer::EncodeRows(absl::Span<const int64_t> times_ns,
                                         double* out, int64_t row_stride) {
  const CalendarEncoder& e = encoder_;
  const auto rows = static_cast<int64_t>(times_ns.size());
  if (e.row_angles_ == 0) {
    for (int64_t r = 0; r < rows; ++r) {
      EncodeRow(times_ns[r], out + r * row_stride, /*batch_row=*/-1);
    }
    return;
  }
  // The rows' CYCLIC angles first (rows_per_batch_ rows at a time), then all
  // their sin/cos through the vector kernel together (a libm call per
  // value was most of a fractional calendar row), then scattered. A value
  // depends on its angle alone, so the batching changes no bit.
  const int64_t per_row = e.row_angles_;
  for (int64_t r0 = 0; r0 < rows; r0 += rows_per_batch_) {
    const int64_t n = std::min(rows_per_batch_, rows - r0);
    for (int64_t r = 0; r < n; ++r) {
      EncodeRow(times_ns[r0 + r], out + (r0 + r) * row_stride, /*batch_row=*/r);
    }
    // The angles a field at a time (harmonics of slot j at a_j in a row).
    int64_t a = 0;
    for (const Slot& slot : e.row_slots_) {
      if (!slot.angles) continue;
      assert(IsCyclicField(slot.field));
      calendar_internal::FieldAngles(static_cast<int>(slot.field), batch_, n, slot.order,
                                     angles_.data() + a, per_row);
      a += slot.order;
    }
    // In [0, 2π] (2π·(k·x mod P)/P): straight through the vector kernel.
    SinCosOfSmallAngles(absl::MakeConstSpan(angles_.data(), n * per_row), sin_.data(),
                        cos_.data());
    if (e.angle_run_begin_ >= 0) {
      // One run of (sin, cos) pairs per row: a plain interleave.
      for (int64_t r = 0; r < n; ++r) {
        double* pairs = out + (r0 + r) * row_stride + e.angle_run_begin_;
        const double* s = sin_.data() + r * per_row;
        const double* c = cos_.data() + r * per_row;
        for (int64_t j = 0; j < per_row; ++j) {
          pairs[2 * j] = s[j];
          pairs[2 * j + 1] = c[j];
        }
      }
      continue;
    }
    for (int64_t r = 0; r < n; ++r) {
      double* row = out + (r0 + r) * row_stride;
      const double* s = sin_.data() + r * per_row;
      const double* c = cos_.data() + r * per_row;
      for (const Slot& slot : e.row_slots_) {
        if (!slot.angles) continue;
        double* column = row + slot.offset;
        for (int64_t k = 0; k < slot.order; ++k) {
          column[2 * k] = s[k];
          column[2 * k + 1] = c[k];
        }
        s += slot.order;
        c += slot.order;
      }
    }
  }
}

void CalendarEncoder::Writer::EncodeRow(int64_t unix_ns, double* out,
                                        int64_t batch_row) {
  const CalendarEncoder& e = encoder_;
  const LocalTime& local = cursor_.At(unix_ns);
  if (!has_day_ || local.day_number != day_number_) FillDay(local);
  if (e.sum_d_model_ > 0) {
    std::memcpy(out, day_columns_.data(), day_columns_.size() * sizeof(double));
    for (const Slot& slot : e.slots_) {
      if (slot.day_level) continue;
      e.AddInformerRow(slot.field, CivilValue(slot.field, local), out);
    }
    return;
  }
  // CONCAT: every column is written once, the day-level ones copied from the
  // day's cache (column by column: a memcpy of a few doubles was a library
  // call, ~3 ns of a ~20 ns row).
  // Day-level and per-row slots are kept apart (no test per slot and row).
  const double* day = day_columns_.data();
  for (const Slot& slot : e.day_slots_) {
    const double* from = day + slot.offset;
    double* column = out + slot.offset;
    column[0] = from[0];
    if (slot.width > 1) {
      column[1] = from[1];
      for (int64_t j = 2; j < slot.width; ++j) column[j] = from[j];  // Harmonics.
    }
  }
  if (e.clock_cycle60_ != nullptr) {
    // CYCLIC integer clock fields: precomputed sin/cos. (Without
    // `fractional` the clock fields are the only per-row ones.)
    for (const Slot& slot : e.row_slots_) {
      const int x = slot.field == CalendarField::kHourOfDay     ? local.hour
                    : slot.field == CalendarField::kMinuteOfHour ? local.minute
                                                                 : local.second;
      const bool hour = slot.field == CalendarField::kHourOfDay;
      TableHarmonics(hour ? e.clock_cycle24_ : e.clock_cycle60_, x, hour ? 24 : 60,
                     slot.order, out + slot.offset);
    }
  } else {
    // Fractional fields share the row's clock (computed once, not per field).
    const RowClock clock = e.fractional_ ? ClockOf(local) : RowClock{0, 0};
    if (batch_row >= 0) KeepForAngles(batch_row, local, clock);
    for (const Slot& slot : e.row_slots_) {
      if (slot.angles && batch_row >= 0) continue;  // EncodeRows' FieldAngles.
      e.EncodeField(slot, local, clock, out + slot.offset);
    }
  }
  if (e.utc_offset_column_ >= 0) {
    out[e.utc_offset_column_] = local.utc_offset_seconds / 3600.0;
  }
  if (e.dst_column_ >= 0) out[e.dst_column_] = local.is_dst ? 1.0 : 0.0;
  if (e.holiday_column_ >= 0) {
    const bool later = holidays_differ_after_midnight_ &&
                       (local.hour != 0 || local.minute != 0 ||
                        local.second != 0 || local.subsecond_ns != 0);
    if (later && !holidays_after_midnight_filled_) {
      // Once per local day whose later rows differ (GLUONTS: a holiday
      // exactly 200 days back) and that has such a row.
      e.holidays_->Write(day_number_, /*at_local_midnight=*/false,
                         holidays_after_midnight_.data());
      holidays_after_midnight_filled_ = true;
    }
    const double* holidays =
        later ? holidays_after_midnight_.data() : day + e.holiday_column_;
    std::copy_n(holidays, e.holidays_->width(), out + e.holiday_column_);
  }
}

}  // namespace phasor
