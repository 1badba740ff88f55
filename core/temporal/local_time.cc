#include "core/temporal/local_time.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "core/temporal/civil_date.h"

namespace phasor {
namespace {

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

}  // namespace

LocalTime LocalTimeAt(const absl::TimeZone& zone, int64_t unix_ns) {
  const local_time_internal::SplitNs split = local_time_internal::SplitUnixNs(unix_ns);
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

}  // namespace phasor
