// Calendar features in a DST zone: the hot path of the temporal encoder.
//
// Inputs: N = 10^6 non-decreasing timestamps in America/New_York,
//   dense:  t_i = 2026-01-01T00:00:00Z + i · 37.000000123 s (428 days, both
//           2026 DST changes, ~2300 timestamps per local day)
//   sparse: t_i = 1950-01-01T00:00:00Z + i · 3600.000000007 s (114 years,
//           24 timestamps per local day, 228 DST changes)
// Timed, one thread unless --phasor_threads says otherwise:
//   calendar/cursor/...      LocalTimeCursor::At alone (civil conversion);
//                            calendar/cursor/daily/N=100000: one timestamp
//                            per local day from 1900 (every row a new day)
//   calendar/absl_at/...     absl::TimeZone::At per timestamp plus the same
//                            field extraction, no cache (the baseline)
//   calendar/encode/...      EncodeObservations with a calendar block: hour,
//                            weekday, day of month, day of year, ISO week,
//                            month (CYCLIC, 12 columns) + UTC offset + DST
//   calendar/encode_fractional/...  the same with fractional fields
// Per-value cost of the newer calendar columns (harmonics, clock, years,
// flags, zero-based INDEX, explicit periods) next to the columns they extend,
// one thread (value_rate = output values per second; compare pairs):
//   calendar/columns/<config>/<dense|sparse>   EncodeObservations with
//     existing_cyclic   the six day-level fields CYCLIC (12 columns)
//     harmonics         the same fields, Fourier orders 3,4,10,3,6,2 (56)
//     existing_index    the same six fields INDEX (6 columns)
//     zero_based_index  the same, zero_based_index (6)
//     years_flags       YEAR, ISO_YEAR LINEAR + the five flags (7)
//     existing_clock    hour_of_day, minute_of_hour CYCLIC (4)
//     clock_harmonics   the same, orders 4 and 3 (14)
//     time_ladder       time block, dim 26 geometric ladder (26)
//     time_periods      time block, Prophet's 365.25 d × 10 + 7 d × 3 (26)
// items_per_second is timestamps per second.
//
// --phasor_dump=DIR writes the encode configuration's features for the first
// 10^4 dense timestamps to DIR/calendar_dense_N10000.bin (float32, 14 per row),
// and the fractional one's to DIR/calendar_dense_fractional_N10000.bin.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "bench/bench_common.h"
#include "core/adapters/parallel.h"
#include "core/temporal/calendar.h"
#include "core/temporal/compose.h"
#include "core/temporal/local_time.h"
#include "core/temporal/observations.h"

namespace phasor::bench {
namespace {

constexpr int64_t kDenseStartNs = int64_t{1767225600} * 1000000000;  // 2026-01-01
constexpr int64_t kDenseStepNs = int64_t{37000000123};
constexpr int64_t kSparseStartNs = int64_t{-631152000} * 1000000000;  // 1950-01-01
constexpr int64_t kSparseStepNs = int64_t{3600000000007};

std::vector<int64_t> Timestamps(bool dense, int64_t n) {
  std::vector<int64_t> t(n);
  for (int64_t i = 0; i < n; ++i) {
    t[i] = dense ? kDenseStartNs + i * kDenseStepNs : kSparseStartNs + i * kSparseStepNs;
  }
  return t;
}

absl::TimeZone NewYork() {
  absl::TimeZone zone;
  if (!absl::LoadTimeZone("America/New_York", &zone)) std::abort();
  return zone;
}

TemporalSpec CalendarSpec(bool fractional) {
  TemporalSpec spec;
  CalendarBlock cal;
  cal.time_zone = "America/New_York";
  cal.fields = {CalendarField::kHourOfDay,  CalendarField::kDayOfWeek,
                CalendarField::kDayOfMonth, CalendarField::kDayOfYear,
                CalendarField::kWeekOfYear, CalendarField::kMonthOfYear};
  cal.encoding = CalendarEncoding::kCyclic;
  cal.fractional = fractional;
  cal.include_utc_offset = true;
  cal.include_dst = true;
  spec.calendar = cal;
  return spec;
}

// LocalTimeCursor::At over `times`, a fresh cursor per iteration.
void TimeCursor(benchmark::State& state, const std::vector<int64_t>& times) {
  const absl::TimeZone zone = NewYork();
  for (auto _ : state) {
    LocalTimeCursor cursor(zone);
    int64_t checksum = 0;
    for (int64_t t : times) {
      const LocalTime& local = cursor.At(t);
      checksum += local.hour + local.day_of_year + local.utc_offset_seconds;
    }
    benchmark::DoNotOptimize(checksum);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(times.size()));
}

void BM_Cursor(benchmark::State& state, bool dense) {
  TimeCursor(state, Timestamps(dense, 1000000));
}

// One timestamp per local day: 10^5 of them from 1900-01-01T00:00:00Z,
// 86400.000123 s apart (274 years): every row a new local day, as daily
// data is.
void BM_CursorDaily(benchmark::State& state) {
  constexpr int64_t kStart = -2208988800 * int64_t{1000000000};  // 1900-01-01.
  std::vector<int64_t> times(100000);
  for (size_t i = 0; i < times.size(); ++i) {
    times[i] = kStart + static_cast<int64_t>(i) * 86400000123000;
  }
  TimeCursor(state, times);
}

void BM_AbslAt(benchmark::State& state, bool dense) {
  const std::vector<int64_t> times = Timestamps(dense, 1000000);
  const absl::TimeZone zone = NewYork();
  for (auto _ : state) {
    int64_t checksum = 0;
    for (int64_t t : times) {
      const LocalTime local = LocalTimeAt(zone, t);
      checksum += local.hour + local.day_of_year + local.utc_offset_seconds;
    }
    benchmark::DoNotOptimize(checksum);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(times.size()));
}

// Times EncodeObservations of `spec` over 10^6 timestamps (float32 out);
// returns the output values per call.
int64_t TimeEncode(benchmark::State& state, const TemporalSpec& spec, bool dense,
                   int threads) {
  const std::vector<int64_t> times = Timestamps(dense, 1000000);
  ObservationsView obs;
  obs.timestamps = times;
  const int64_t width = TemporalFeatureLayout(spec, 0, 0)->width;
  std::vector<float> out(times.size() * width);
  const ExecutionOptions options{.max_threads = threads};
  for (auto _ : state) {
    const absl::Status status =
        EncodeObservations(spec, obs, nullptr, options, absl::MakeSpan(out), nullptr);
    if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(times.size()));
  return static_cast<int64_t>(out.size());
}

void BM_Encode(benchmark::State& state, bool dense, bool fractional, int threads) {
  const int64_t values = TimeEncode(state, CalendarSpec(fractional), dense, threads);
  state.SetBytesProcessed(state.iterations() * values * 4);
}

// The per-value comparison's configurations (see the file comment).
TemporalSpec ColumnsSpec(const std::string& config) {
  TemporalSpec spec;
  CalendarBlock cal;
  cal.time_zone = "America/New_York";
  const std::vector<CalendarField> day_fields = {
      CalendarField::kDayOfWeek,  CalendarField::kDayOfMonth,
      CalendarField::kDayOfYear,  CalendarField::kWeekOfYear,
      CalendarField::kMonthOfYear, CalendarField::kQuarter};
  const std::vector<CalendarField> clock_fields = {CalendarField::kHourOfDay,
                                                   CalendarField::kMinuteOfHour};
  if (config == "time_ladder" || config == "time_periods") {
    TimeBlock time;
    time.dim = 26;
    time.origin = OriginKind::kUnixEpoch;
    time.min_period_seconds = 86400;
    time.max_period_seconds = 365.25 * 86400;
    if (config == "time_periods") time.periods = {{365.25 * 86400, 10}, {7 * 86400.0, 3}};
    spec.time = time;
    return spec;
  }
  if (config == "existing_clock" || config == "clock_harmonics") {
    cal.fields = clock_fields;
    if (config == "clock_harmonics") cal.fourier_orders = {4, 3};
  } else if (config == "years_flags") {
    cal.fields = {CalendarField::kYear,         CalendarField::kIsoYear,
                  CalendarField::kIsWeekend,    CalendarField::kIsMonthStart,
                  CalendarField::kIsMonthEnd,   CalendarField::kIsQuarterStart,
                  CalendarField::kIsQuarterEnd};
    cal.encoding = CalendarEncoding::kLinear;
    cal.min_year = 1950;
    cal.max_year = 2050;
  } else {
    cal.fields = day_fields;
    if (config == "harmonics") cal.fourier_orders = {3, 4, 10, 3, 6, 2};
    if (config == "existing_index" || config == "zero_based_index") {
      cal.encoding = CalendarEncoding::kIndex;
      cal.zero_based_index = config == "zero_based_index";
    }
  }
  spec.calendar = cal;
  return spec;
}

void BM_Columns(benchmark::State& state, const std::string& config, bool dense) {
  const int64_t values = TimeEncode(state, ColumnsSpec(config), dense, /*threads=*/1);
  state.counters["value_rate"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(values),
      benchmark::Counter::kIsRate);
}

void Dump(const std::string& dir) {
  const std::vector<int64_t> times = Timestamps(/*dense=*/true, 10000);
  for (bool fractional : {false, true}) {
    const TemporalSpec spec = CalendarSpec(fractional);
    ObservationsView obs;
    obs.timestamps = times;
    std::vector<float> out(times.size() * TemporalFeatureLayout(spec, 0, 0)->width);
    if (!EncodeObservations(spec, obs, nullptr, {}, absl::MakeSpan(out), nullptr).ok()) {
      std::abort();
    }
    WriteRaw(dir,
             fractional ? "calendar_dense_fractional_N10000.bin"
                        : "calendar_dense_N10000.bin",
             out.data(), out.size() * sizeof(float));
  }
}

void RegisterAll(const BenchFlags& flags) {
  for (bool dense : {true, false}) {
    const std::string tag = dense ? "dense" : "sparse";
    for (const char* config :
         {"existing_cyclic", "harmonics", "existing_index", "zero_based_index",
          "years_flags", "existing_clock", "clock_harmonics", "time_ladder",
          "time_periods"}) {
      benchmark::RegisterBenchmark(
          absl::StrCat("calendar/columns/", config, "/", tag).c_str(), BM_Columns,
          std::string(config), dense)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    benchmark::RegisterBenchmark(absl::StrCat("calendar/cursor/", tag, "/N=1000000").c_str(),
                                 BM_Cursor, dense)
        ->Unit(benchmark::kMillisecond);
    if (!dense) {
      benchmark::RegisterBenchmark("calendar/cursor/daily/N=100000", BM_CursorDaily)
          ->Unit(benchmark::kMillisecond);
    }
    benchmark::RegisterBenchmark(absl::StrCat("calendar/absl_at/", tag, "/N=1000000").c_str(),
                                 BM_AbslAt, dense)
        ->Unit(benchmark::kMillisecond);
    for (int threads : flags.threads) {
      for (bool fractional : {false, true}) {
        benchmark::RegisterBenchmark(
            absl::StrCat("calendar/", fractional ? "encode_fractional/" : "encode/", tag,
                         "/N=1000000/threads=", threads)
                .c_str(),
            BM_Encode, dense, fractional, threads)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    }
  }
}

}  // namespace
}  // namespace phasor::bench

int main(int argc, char** argv) {
  return phasor::bench::RunBenchmarkMain(argc, argv, phasor::bench::Dump,
                                         phasor::bench::RegisterAll);
}
