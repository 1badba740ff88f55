// -----------------------------------------------------------------------------
// File: core/temporal/civil_date.h
// -----------------------------------------------------------------------------
//
// Proleptic Gregorian dates as day numbers (days since 1970-01-01), with
// no time zone: the date arithmetic under the calendar features.
//
//   day number → (year, month, day, day of year, weekday)   CivilFromDays
//   weekday: Monday = 0 .. Sunday = 6                        WeekdayOf
//   leap year: divisible by 4, and not by 100 unless by 400  IsLeapYear
//   ISO 8601 week count of a year (52 or 53)                 IsoWeeksInYear
//
// CivilFromDays follows C. Neri and L. Schneider, "Euclidean affine
// functions and their application to calendar algorithms", Softw. Pract.
// Exper. 53(4), 2023, §5: a few multiplies and shifts in 32-bit arithmetic
// where absl's civil arithmetic normalises field by field (~0.1 µs for a date
// one day later). Valid for |day_number| <= 2^28 (int64 nanoseconds reach
// ±106,752 days).
//
// Thread-safety: constants and pure functions.
//
// Example:
//
//   const CivilDate date = CivilFromDays(19723);  // 2024-01-01, a Monday.
//   // date.year == 2024, date.month == 1, date.day == 1, date.weekday == 0.
#ifndef PHASOR_CORE_TEMPORAL_CIVIL_DATE_H_
#define PHASOR_CORE_TEMPORAL_CIVIL_DATE_H_

#include <array>
#include <cstdint>

#include "absl/time/civil_time.h"

namespace phasor {

// A proleptic Gregorian date whose fields are already in range: the
// accessors of absl::CivilDay without its constructor's normalisation.
class LocalDate {
 public:
  LocalDate() = default;
  LocalDate(int64_t year, int month, int day) : year_(year), month_(month), day_(day) {}
  int64_t year() const { return year_; }
  int month() const { return month_; }  // 1..12.
  int day() const { return day_; }      // 1..31.
  friend bool operator==(const LocalDate& a, const LocalDate& b) {
    return a.year_ == b.year_ && a.month_ == b.month_ && a.day_ == b.day_;
  }
  friend bool operator!=(const LocalDate& a, const LocalDate& b) { return !(a == b); }

 private:
  int64_t year_ = 1970;
  int month_ = 1;
  int day_ = 1;
};

// Days since 1970-01-01: the day numbers of holiday lists, of
// HolidayCalendar::Write and of the calendar's LocalTime::day_number.
int64_t DayOrdinal(absl::CivilDay day);

// a / b rounded toward −∞ (b > 0).
inline int64_t FloorDiv(int64_t a, int64_t b) { return a / b - (a % b < 0 ? 1 : 0); }

// Divisible by 4, and not by 100 unless by 400 (= by 100 and by 16).
inline bool IsLeapYear(int64_t y) { return (y & 3) == 0 && (y % 100 != 0 || (y & 15) == 0); }

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
inline constexpr int kDaysInMonth[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

// ISO 8601 weeks of the ISO year whose January 1 falls on
// `january1_weekday` (Monday = 0): 53 when that is a Thursday, or a
// Wednesday in a leap year (its December 28 then lies in week 53).
inline int IsoWeeksInYear(int january1_weekday, bool leap) {
  return january1_weekday == 3 || (january1_weekday == 2 && leap) ? 53 : 52;
}

// Monday = 0 .. Sunday = 6 of the day `day_number` days after 1970-01-01.
// REQUIRES: |day_number| <= 2^28.
inline int WeekdayOf(int64_t day_number) {
  // 1970-01-01 (n ≡ 1 mod 7: 146097 days are whole weeks) was a Thursday.
  const auto n = static_cast<uint32_t>(day_number + 719468 + 146097 * 2000);
  return static_cast<int>((n + 2) % 7);
}

// REQUIRES: |day_number| <= 2^28 (int64 nanoseconds reach ±106,752 days).
CivilDate CivilFromDays(int64_t day_number);

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

inline constexpr std::array<std::array<MonthDay, 366>, 2> kMonthDays = MakeMonthDays();

}  // namespace phasor

#endif  // PHASOR_CORE_TEMPORAL_CIVIL_DATE_H_
