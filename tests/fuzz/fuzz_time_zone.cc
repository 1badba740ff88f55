// libFuzzer target: time-zone names from clients (calendar.time_zone). The
// input is the name; LoadIanaTimeZone (core/calendar.h) must accept it or
// say why, never crash, and an accepted zone must convert a few instants and
// pass calendar-block validation. Seeds are in corpus/time_zone/
// (gen_corpus.py).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "core/temporal/calendar.h"
#include "core/temporal/time_zone.h"
#include "core/temporal/local_time.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name(reinterpret_cast<const char*>(data), size);
  const auto zone = phasor::LoadIanaTimeZone(name, "calendar.time_zone");

  phasor::CalendarBlock block;
  block.time_zone = name;
  block.fields = {phasor::CalendarField::kHourOfDay};
  const absl::Status valid = phasor::ValidateCalendarBlock(block, "calendar");
  if (zone.ok() != valid.ok()) {
    std::fprintf(stderr, "fuzz_time_zone: LoadIanaTimeZone %s but validation %s\n",
                 zone.ok() ? "accepts" : "rejects", valid.ok() ? "accepts" : "rejects");
    std::abort();
  }
  if (!zone.ok()) return 0;
  // 1677-09-22, the epoch, 2026, 2262-04-11: the ends of int64 nanoseconds.
  for (const int64_t instant :
       {INT64_MIN + 1, int64_t{0}, int64_t{1'780'000'000'000'000'000}, INT64_MAX}) {
    const phasor::LocalTime local = phasor::LocalTimeAt(*zone, instant);
    if (local.hour < 0 || local.hour > 23 || local.day_of_year < 1 ||
        local.day_of_year > 366) {
      std::fprintf(stderr, "fuzz_time_zone: bad local time in %s\n", name.c_str());
      std::abort();
    }
  }
  return 0;
}
