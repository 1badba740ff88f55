// libFuzzer target: timestamps from clients. The input, read as
// little-endian 8-byte words, is converted twice: as float64 Unix seconds
// through TimestampsFromSeconds (core/observations.h), and as int64
// nanoseconds into local time, where the segment cache of LocalTimeCursor
// must agree with LocalTimeAt computed from scratch (core/calendar.h), in
// UTC and in a zone with DST. Seeds are in corpus/timestamps/ (gen_corpus.py).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/temporal/local_time.h"
#include "core/temporal/observations.h"
#include "core/temporal/time_zone.h"

namespace {

bool SameLocalTime(const phasor::LocalTime& a, const phasor::LocalTime& b) {
  return a.date == b.date && a.hour == b.hour && a.minute == b.minute &&
         a.second == b.second && a.subsecond_ns == b.subsecond_ns &&
         a.weekday == b.weekday && a.day_of_year == b.day_of_year &&
         a.iso_year == b.iso_year && a.iso_week == b.iso_week &&
         a.iso_weeks_in_year == b.iso_weeks_in_year &&
         a.days_in_month == b.days_in_month && a.days_in_year == b.days_in_year &&
         a.utc_offset_seconds == b.utc_offset_seconds && a.is_dst == b.is_dst;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const size_t count = size / 8;
  if (count == 0 || count > 4096) return -1;
  std::vector<double> seconds(count);
  std::vector<int64_t> raw_ns(count);
  std::memcpy(seconds.data(), data, count * 8);
  std::memcpy(raw_ns.data(), data, count * 8);

  // Any double: NaN, infinities and values beyond int64 nanoseconds must be
  // an error, not UB in the conversion (UBSan would catch that).
  std::vector<int64_t> ns(count);
  (void)phasor::TimestampsFromSeconds(seconds, absl::MakeSpan(ns), "timestamps");

  static const absl::TimeZone* const zones[] = {
      new absl::TimeZone(absl::UTCTimeZone()),
      new absl::TimeZone(*phasor::LoadIanaTimeZone("America/New_York", "zone")),
  };
  for (const absl::TimeZone* zone : zones) {
    phasor::LocalTimeCursor cursor(*zone);
    for (const int64_t instant : raw_ns) {
      const phasor::LocalTime& cached = cursor.At(instant);
      if (!SameLocalTime(cached, phasor::LocalTimeAt(*zone, instant))) {
        std::fprintf(stderr, "fuzz_timestamps: cursor and LocalTimeAt differ at %lld ns\n",
                     static_cast<long long>(instant));
        std::abort();
      }
    }
  }
  return 0;
}
