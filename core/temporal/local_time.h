// -----------------------------------------------------------------------------
// File: core/temporal/local_time.h
// -----------------------------------------------------------------------------
//
// Local time: Civil Time = F(Absolute Time, Time Zone), through absl::TimeZone
// and the system tzdata, with every field the calendar features read (date,
// clock, weekday, day of year, ISO week and year, month and year lengths, UTC
// offset and DST flag).
//
// LocalTimeAt computes it from scratch. LocalTimeCursor caches the current
// "segment", the span of UTC seconds with one civil day and one UTC offset
// (it ends at the next local midnight or the next zone transition, whichever
// is first), and the span to the zone's next transition, so a non-decreasing
// run of timestamps costs one absl::TimeZone lookup per transition, a date
// computation per local day (core/temporal/civil_date.h) and otherwise a
// range check and integer arithmetic.
//
// Units: instants are int64 nanoseconds since the Unix epoch (UTC); UTC
// offsets in seconds east of UTC.
//
// Thread-safety: LocalTimeAt is a pure function; a LocalTimeCursor belongs
// to one thread.
//
// Example:
//
//   LocalTimeCursor cursor(zone);
//   for (int64_t t : times_ns) {
//     const LocalTime& local = cursor.At(t);  // == LocalTimeAt(zone, t)
//   }
#ifndef PHASOR_CORE_TEMPORAL_LOCAL_TIME_H_
#define PHASOR_CORE_TEMPORAL_LOCAL_TIME_H_

#include <cstdint>

#include "absl/time/time.h"
#include "core/temporal/civil_date.h"

namespace phasor {

// Everything the features need about one instant in one zone.
struct LocalTime {
  LocalDate date;           // The local date.
  int64_t day_number = 0;   // date as days since 1970-01-01.
  int hour = 0;             // 0..23 by the local clock.
  int minute = 0;
  int second = 0;
  int64_t subsecond_ns = 0; // 0..999'999'999.
  int weekday = 0;          // Monday = 0 .. Sunday = 6.
  int day_of_year = 1;      // 1..366.
  int64_t iso_year = 1970;  // ISO-8601 week-numbering year.
  int iso_week = 1;         // 1..53.
  int iso_weeks_in_year = 52;
  int days_in_month = 31;
  int days_in_year = 365;
  int utc_offset_seconds = 0;  // Local − UTC.
  bool is_dst = false;
};

namespace local_time_internal {

// Whole seconds (rounded toward −∞) and the nanoseconds past them, in
// [0, 1e9). Computed from C++'s truncating / and %, never as
// unix_ns − seconds·1e9: for the instants before −9223372036 s (INT64_MIN
// up to INT64_MIN + 145224191 ns, which validation accepts) that product is
// below INT64_MIN, a signed overflow.
struct SplitNs {
  int64_t seconds;
  int64_t subsecond_ns;
};

inline SplitNs SplitUnixNs(int64_t unix_ns) {
  int64_t seconds = unix_ns / int64_t{1000000000};
  int64_t subsecond_ns = unix_ns % int64_t{1000000000};
  if (subsecond_ns < 0) {
    --seconds;
    subsecond_ns += int64_t{1000000000};
  }
  return {seconds, subsecond_ns};
}

}  // namespace local_time_internal

// The local time of `unix_ns` in `zone`, computed from scratch (the
// reference the cursor is tested against).
LocalTime LocalTimeAt(const absl::TimeZone& zone, int64_t unix_ns);

// LocalTimeAt with the segment cache described above. Correct for any
// sequence of instants; fast for non-decreasing ones.
class LocalTimeCursor final {
 public:
  explicit LocalTimeCursor(absl::TimeZone zone) : zone_(zone) {}

  // The returned reference stays valid until the next call. Inline: the
  // calendar's writer calls it once per row, and all but a segment's first
  // row are the range check and the clock arithmetic below.
  const LocalTime& At(int64_t unix_ns) {
    const local_time_internal::SplitNs split = local_time_internal::SplitUnixNs(unix_ns);
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

 private:
  void Refill(int64_t unix_seconds);
  // local_'s date fields for the local date `day_number` (FillDate's), from
  // year_ when the date lies in it.
  void SetDate(int64_t day_number);

  absl::TimeZone zone_;
  bool valid_ = false;
  int64_t begin_s_ = 0;  // Segment [begin_s_, end_s_) in Unix seconds.
  int64_t end_s_ = 0;
  int64_t local_midnight_s_ = 0;  // The segment's local midnight minus its offset.
  // [offset_from_s_, offset_until_s_): from the last zone lookup to the
  // zone's next transition, the span in which local_'s UTC offset and DST
  // flag hold. A new local day inside it is plain arithmetic, so a
  // non-decreasing run costs one zone lookup per transition (about two a
  // year) instead of one per day (~0.3 µs with NextTransition: 8 ns a row
  // at hourly rows, bench/observations_bench.cc workload_p).
  int64_t offset_from_s_ = 0;
  int64_t offset_until_s_ = 0;
  LocalTime local_;
  // The calendar year of the last date FillDate filled: its January 1 (a
  // day number), its length and its ISO week count (none before the first).
  struct Year {
    int64_t year = 0;
    int64_t january1 = 0;
    int days = 0;
    int iso_weeks = 52;
  };
  Year year_;
};

}  // namespace phasor

#endif  // PHASOR_CORE_TEMPORAL_LOCAL_TIME_H_
