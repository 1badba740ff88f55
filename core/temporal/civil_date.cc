#include "core/temporal/civil_date.h"

#include <cassert>
#include <cstdint>

#include "absl/time/civil_time.h"

namespace phasor {

int64_t DayOrdinal(absl::CivilDay day) { return day - absl::CivilDay(1970, 1, 1); }

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

}  // namespace phasor
