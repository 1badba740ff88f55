// Holiday columns: the existing kernel column against the new ones
// (GLUONTS distance mode, days_since / days_until, named sets), timed side
// by side in one run through EncodeObservations with a calendar block that
// holds only holidays, so the per-value cost of each configuration is
// comparable.
//
// Holidays: 12 dates a year for 1900–2200 (fixed days, an Easter-like
// moving day, a 4th-Thursday day: 3612 dates), the size of a built-in
// country calendar; sets split them into 8 lists, as one set per holiday.
// Rows, in America/New_York:
//   hourly: N = 10^6 instants from 1950-01-01, one an hour (24 a local day)
//   daily:  N = 10^5 instants from 1901-01-01 00:00 local, one a day, so
//           every row computes its day's columns
// Configurations (columns per row):
//   kernel          EXPONENTIAL, NEAREST: 1 (the existing column)
//   gluonts         EXPONENTIAL, GLUONTS: 1
//   distances       kernel + days_since + days_until: 3
//   sets8           8 named sets, kernel each: 8
//   sets8_distances 8 sets × (kernel, days_since, days_until): 24
// One thread; items_per_second is VALUES (rows × columns) per CPU second
// (CPU time: the shared 2-core machine's wall time is mostly waiting); the
// per-value
// ratio against `kernel` is in docs/BENCHMARKS.md.
//
// --phasor_dump=DIR writes the sets8_distances features of the first 10^4
// daily rows to DIR/holidays_daily_N10000.bin (float32, 24 per row).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "bench/bench_common.h"
#include "core/adapters/parallel.h"
#include "core/temporal/calendar.h"
#include "core/temporal/compose.h"
#include "core/temporal/holidays.h"
#include "core/temporal/observations.h"

namespace phasor::bench {
namespace {

constexpr int64_t kHourlyStartNs = int64_t{-631152000} * 1000000000;  // 1950-01-01Z
constexpr int64_t kHourNs = int64_t{3600} * 1000000000;

enum class Config { kKernel, kGluonTs, kDistances, kSets8, kSets8Distances };

const char* ConfigName(Config config) {
  switch (config) {
    case Config::kKernel: return "kernel";
    case Config::kGluonTs: return "gluonts";
    case Config::kDistances: return "distances";
    case Config::kSets8: return "sets8";
    case Config::kSets8Distances: return "sets8_distances";
  }
  return "";
}

// 12 holidays a year, 1900–2200; `set` in 0..7 picks one list of the 8
// (-1: all of them).
std::vector<std::string> HolidayDates(int set) {
  std::vector<std::string> out;
  for (int year = 1900; year <= 2200; ++year) {
    const absl::CivilDay nov1(year, 11, 1);
    // 4th Thursday of November (absl::Weekday counts from Monday = 0).
    const int to_thursday =
        (3 - static_cast<int>(absl::GetWeekday(nov1)) + 7) % 7;
    const absl::CivilDay days[12] = {
        absl::CivilDay(year, 1, 1),   absl::CivilDay(year, 1, 6),
        absl::CivilDay(year, 3, 22) + (year * 7) % 35,  // Easter-like, moving
        absl::CivilDay(year, 3, 22) + (year * 7) % 35 + 1,
        absl::CivilDay(year, 5, 1),   absl::CivilDay(year, 7, 4),
        absl::CivilDay(year, 8, 15),  absl::CivilDay(year, 10, 3),
        nov1 + to_thursday + 21,      absl::CivilDay(year, 12, 24),
        absl::CivilDay(year, 12, 25), absl::CivilDay(year, 12, 31)};
    for (int i = 0; i < 12; ++i) {
      if (set >= 0 && i * 8 / 12 != set) continue;
      out.push_back(absl::FormatCivilTime(days[i]));
    }
  }
  return out;
}

TemporalSpec HolidaySpec(Config config) {
  HolidaysBlock holidays;
  holidays.kernel = HolidayKernel::kExponential;
  holidays.alpha = 0.5;
  if (config == Config::kGluonTs) {
    holidays.distance_mode = HolidayDistanceMode::kGluonTs;
  }
  if (config == Config::kDistances || config == Config::kSets8Distances) {
    holidays.include_days_since = true;
    holidays.include_days_until = true;
  }
  if (config == Config::kSets8 || config == Config::kSets8Distances) {
    holidays.include_unnamed_set = false;
    for (int set = 0; set < 8; ++set) {
      holidays.sets.push_back(
          HolidaySet{absl::StrCat("holiday", set), HolidayDates(set), {}});
    }
  } else {
    holidays.dates = HolidayDates(-1);
  }
  CalendarBlock cal;
  cal.time_zone = "America/New_York";
  cal.holidays = std::move(holidays);
  TemporalSpec spec;
  spec.calendar = std::move(cal);
  return spec;
}

std::vector<int64_t> Timestamps(bool daily, int64_t n) {
  std::vector<int64_t> t(static_cast<size_t>(n));
  absl::TimeZone zone;
  if (!absl::LoadTimeZone("America/New_York", &zone)) std::abort();
  for (int64_t i = 0; i < n; ++i) {
    t[i] = daily ? absl::ToUnixNanos(absl::FromCivil(
                       absl::CivilDay(1901, 1, 1) + i, zone))
                 : kHourlyStartNs + i * kHourNs;
  }
  return t;
}

void BM_Holidays(benchmark::State& state, Config config, bool daily) {
  const std::vector<int64_t> times = Timestamps(daily, daily ? 100000 : 1000000);
  const TemporalSpec spec = HolidaySpec(config);
  ObservationsView obs;
  obs.timestamps = times;
  const int64_t width = TemporalFeatureLayout(spec, 0, 0)->width;
  std::vector<float> out(times.size() * static_cast<size_t>(width));
  const ExecutionOptions options{.max_threads = 1};
  for (auto _ : state) {
    const absl::Status status =
        EncodeObservations(spec, obs, nullptr, options, absl::MakeSpan(out), nullptr);
    if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
    benchmark::ClobberMemory();
  }
  // Values, so configurations of different widths compare per value.
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(out.size()));
  state.counters["columns"] = static_cast<double>(width);
}

void Dump(const std::string& dir) {
  const std::vector<int64_t> times = Timestamps(/*daily=*/true, 10000);
  const TemporalSpec spec = HolidaySpec(Config::kSets8Distances);
  ObservationsView obs;
  obs.timestamps = times;
  std::vector<float> out(times.size() * TemporalFeatureLayout(spec, 0, 0)->width);
  if (!EncodeObservations(spec, obs, nullptr, {}, absl::MakeSpan(out), nullptr).ok()) {
    std::abort();
  }
  WriteRaw(dir, "holidays_daily_N10000.bin", out.data(), out.size() * sizeof(float));
}

void RegisterAll(const BenchFlags& /*flags*/) {
  for (bool daily : {false, true}) {
    for (Config config : {Config::kKernel, Config::kGluonTs, Config::kDistances,
                          Config::kSets8, Config::kSets8Distances}) {
      benchmark::RegisterBenchmark(
          absl::StrCat("holidays/", ConfigName(config), "/",
                       daily ? "daily/N=100000" : "hourly/N=1000000")
              .c_str(),
          BM_Holidays, config, daily)
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace
}  // namespace phasor::bench

int main(int argc, char** argv) {
  return phasor::bench::RunBenchmarkMain(argc, argv, phasor::bench::Dump,
                                         phasor::bench::RegisterAll);
}
