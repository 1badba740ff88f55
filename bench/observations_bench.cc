// Temporal encoder microbenchmarks: irregular observations, America/New_York.
//
// Timestamps (shared with bench/peers/calendar_peer.py): N events spread over
// two years from 2023-01-01T00:00:00Z, so four DST changes fall inside,
//   step = 730 days / N (in ns),  t_i = start + i·step + (hash(i) mod step),
//   hash(i) = (i·2654435761) mod 2^32
// (non-decreasing; sub-second and irregular). N ∈ {10^4, 10^5, 10^6}.
//
// Timed, each an EncodeObservations call into a reused buffer:
//   calendar/N=.../threads=n      calendar block only, the nine fields CYCLIC
//                                 (18 columns, [sin, cos] per field in proto
//                                 order): what the pandas peer computes with
//                                 tz_convert and the dt accessors.
//   observations/N=.../threads=n  wide [N, 8] values (30% missing) with every
//                                 block on: content (values + mask), time (16),
//                                 time2vec (k = 8), gaps (Δt, δ per channel,
//                                 LOG1P in hours, mask, last value), calendar
//                                 (nine fields CYCLIC fractional, UTC offset,
//                                 DST, US federal holidays EXPONENTIAL).
//   observations_long/N=.../threads=n  the same blocks on N long-format
//                                 events over 8 channels.
//   block/<block>/spacing=two_years|dense|sparse/N=100000/threads=1
//                                 one block of the every-block spec alone
//                                 (content, time, time2vec, gaps, calendar),
//                                 float32; dense = ~1 ms apart, sparse =
//                                 spread over 1900–2180 (the time of a block
//                                 should not depend on it); fill/<block>/...
//                                 and copy/<block>/... memset and memcpy the
//                                 same output bytes: the bandwidth bound
//                                 (the time block also at N = 10^6, its 64 MB
//                                 output past the last-level cache).
//   workload_p_time/encode|encode_rows/...  workload P's (bench/workload_p.h)
//                                 time block alone over one series of 10^6
//                                 rows: row by row, and TimeSinusoid::EncodeRows
//                                 (what compose calls per tile). The whole
//                                 workload is bench/panel_bench.cc's.
//   .../f64 variants: calendar_f64, observations_f64, observations_long_f64
//                                 and workload_p_time/encode_rows_f64, the
//                                 same work with a float64 output (core's
//                                 float64 path: quarter-turn sinusoids, exact
//                                 CYCLIC phases, double-double Time2Vec),
//                                 registered next to the float32 line so a
//                                 run measures the two side by side.
//   limit/sincos_f64/for=time|observations/N=.../threads=1
//                                 the host's sin/cos compute limit
//                                 (bench/sincos_limit.h): Highway's Sin and
//                                 Cos in a bare loop, in double as the
//                                 blocks take them, over as many angles as
//                                 the time block (dim/2 per row) or the
//                                 every-block spec (SinCosPairsPerRow: time,
//                                 Time2Vec's sines, the calendar's CYCLIC
//                                 fields) computes for N rows; a block's
//                                 rows/s over the limit's is the fraction of
//                                 the host's sin/cos speed it reaches.
//                                 limit/sincos_f32/... the same in float.
// items_per_second counts rows (events).
//
// --phasor_simd_target prints the SIMD target Highway dispatches to on this
// CPU (the one the core's kernels run on) and exits.
// --phasor_dump=DIR writes the calendar configuration's features for N = 10^4
// to DIR/calendar_N10000.bin (float32, 18 per row) for the check step.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "bench/bench_common.h"
#include "bench/sincos_limit.h"
#include "bench/workload_p.h"
#include "core/adapters/parallel.h"
#include "core/math/sincos.h"
#include "core/temporal/calendar.h"
#include "core/temporal/compose.h"
#include "core/temporal/elapsed_time.h"
#include "core/temporal/gaps.h"
#include "core/temporal/holidays.h"
#include "core/temporal/observations.h"
#include "core/temporal/time2vec.h"
#include "core/temporal/time_sinusoid.h"

namespace phasor::bench {
namespace {

constexpr int64_t kStartNs = int64_t{1672531200} * 1000000000;  // 2023-01-01Z
constexpr int64_t kSpanNs = int64_t{730} * 86400 * 1000000000;
constexpr int64_t kChannels = 8;

uint64_t Hash(uint64_t i) { return (i * uint64_t{2654435761}) & uint64_t{0xffffffff}; }

std::vector<int64_t> Timestamps(int64_t n) {
  const int64_t step = kSpanNs / n;
  std::vector<int64_t> t(n);
  for (int64_t i = 0; i < n; ++i) {
    t[i] = kStartNs + i * step + static_cast<int64_t>(Hash(i) % static_cast<uint64_t>(step));
  }
  return t;
}

const std::vector<CalendarField>& AllFields() {
  static const std::vector<CalendarField>* fields = new std::vector<CalendarField>{
      CalendarField::kSecondOfMinute, CalendarField::kMinuteOfHour,
      CalendarField::kHourOfDay,      CalendarField::kDayOfWeek,
      CalendarField::kDayOfMonth,     CalendarField::kDayOfYear,
      CalendarField::kWeekOfYear,     CalendarField::kMonthOfYear,
      CalendarField::kQuarter};
  return *fields;
}

TemporalSpec CalendarOnlySpec() {
  TemporalSpec spec;
  CalendarBlock calendar;
  calendar.time_zone = "America/New_York";
  calendar.fields = AllFields();
  calendar.encoding = CalendarEncoding::kCyclic;
  spec.calendar = calendar;
  return spec;
}

TemporalSpec EveryBlockSpec() {
  TemporalSpec spec;
  spec.content = ContentBlock{};
  spec.time = TimeBlock{};  // 16 columns, 1 s .. 10 years.
  Time2VecBlock time2vec;
  time2vec.unit_seconds = 3600.0;
  for (int i = 0; i <= 8; ++i) {
    time2vec.omega.push_back(2.0 * M_PI / (24.0 * (i + 1)));
    time2vec.phi.push_back(0.1 * i);
  }
  spec.time2vec = time2vec;
  GapsBlock gaps;
  gaps.transform = GapTransform::kLog1p;
  gaps.unit_seconds = 3600.0;
  gaps.include_mask = true;
  gaps.include_last_value = true;
  spec.gaps = gaps;
  CalendarBlock calendar;
  calendar.time_zone = "America/New_York";
  calendar.fields = AllFields();
  calendar.encoding = CalendarEncoding::kCyclic;
  calendar.fractional = true;
  calendar.include_utc_offset = true;
  calendar.include_dst = true;
  HolidaysBlock holidays;
  holidays.dates = {"2023-01-02", "2023-01-16", "2023-02-20", "2023-05-29",
                    "2023-06-19", "2023-07-04", "2023-09-04", "2023-10-09",
                    "2023-11-10", "2023-11-23", "2023-12-25", "2024-01-01",
                    "2024-01-15", "2024-02-19", "2024-05-27", "2024-06-19",
                    "2024-07-04", "2024-09-02", "2024-10-14", "2024-11-11",
                    "2024-11-28", "2024-12-25"};
  holidays.kernel = HolidayKernel::kExponential;
  holidays.alpha = 0.5;
  calendar.holidays = holidays;
  spec.calendar = calendar;
  return spec;
}

// Wide values [n, 8]: input values, 30% NaN (unobserved).
std::vector<double> WideValues(int64_t n) {
  std::vector<double> values(n * kChannels);
  for (int64_t k = 0; k < n * kChannels; ++k) {
    values[k] = Hash(static_cast<uint64_t>(k) + 977) % 10 < 3
                    ? std::numeric_limits<double>::quiet_NaN()
                    : InputValue(static_cast<uint64_t>(k));
  }
  return values;
}

struct Series {
  std::vector<int64_t> times;
  std::vector<double> values;
  std::vector<int32_t> channels;
  ObservationsView view;
};

Series MakeSeries(int64_t n, bool wide, bool with_values) {
  Series s;
  s.times = Timestamps(n);
  if (wide) {
    s.view.layout = ObservationLayout::kWide;
    s.view.timestamps = s.times;
    if (with_values) {
      s.values = WideValues(n);
      s.view.num_channels = kChannels;
      s.view.values.f64 = s.values;
    }
  } else {
    s.values.resize(n);
    s.channels.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      s.channels[i] = static_cast<int32_t>(Hash(static_cast<uint64_t>(i) + 31) % kChannels);
      s.values[i] = InputValue(static_cast<uint64_t>(i));
    }
    s.view.layout = ObservationLayout::kLong;
    s.view.num_channels = kChannels;
    s.view.event_times = s.times;
    s.view.event_channels = s.channels;
    s.view.event_values.f64 = s.values;
  }
  return s;
}

template <typename T>
void Encode(const TemporalSpec& spec, const Series& series, int threads,
            std::vector<T>& out) {
  const absl::Status status =
      EncodeObservations(spec, series.view, /*state_in=*/nullptr,
                         ExecutionOptions{.max_threads = threads}, absl::MakeSpan(out),
                         /*state_out=*/nullptr);
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    std::exit(1);
  }
}

template <typename T = float>
std::vector<T> OutputFor(const TemporalSpec& spec, const Series& series) {
  const absl::StatusOr<FeatureLayout> layout =
      TemporalFeatureLayout(spec, series.view.num_channels, 0);
  if (!layout.ok()) {
    std::fprintf(stderr, "%s\n", layout.status().ToString().c_str());
    std::exit(1);
  }
  return std::vector<T>(series.view.num_rows() * layout->width, T{0});
}

template <typename T>
void BM_Encode(benchmark::State& state, TemporalSpec spec, int64_t n, bool wide,
               bool with_values, int threads) {
  const Series series = MakeSeries(n, wide, with_values);
  std::vector<T> out = OutputFor<T>(spec, series);
  for (auto _ : state) {
    Encode(spec, series, threads, out);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(out.size()) *
                          static_cast<int64_t>(sizeof(T)));
  state.counters["columns"] = static_cast<double>(out.size() / n);
}

int64_t WorkloadPWidth() {
  const absl::StatusOr<FeatureLayout> layout =
      TemporalFeatureLayout(WorkloadPCoreSpec(), WorkloadPShape().channels, 0);
  if (!layout.ok()) {
    std::fprintf(stderr, "%s\n", layout.status().ToString().c_str());
    std::exit(1);
  }
  return layout->width;
}

// Timestamps for the blocks-alone lines: the spacing of the every-block
// benchmark (two years), dense (about 1 ms apart: small angles, small gaps)
// or sparse (spread over 1900–2180: huge angles and gaps). A block's time
// should not depend on which.
enum class Spacing { kTwoYears, kDense, kSparse };

std::vector<int64_t> SpacedTimestamps(int64_t n, Spacing spacing) {
  if (spacing == Spacing::kTwoYears) return Timestamps(n);
  // 1900-01-01Z and 280 years of 365.2425 days (300 would overflow int64 ns).
  const int64_t start = spacing == Spacing::kDense ? kStartNs : int64_t{-2208988800} * 1000000000;
  const int64_t span = spacing == Spacing::kDense
                           ? n * int64_t{1000000}
                           : static_cast<int64_t>(280 * 365.2425 * 86400.0) * 1000000000;
  const int64_t step = span / n;
  std::vector<int64_t> t(n);
  for (int64_t i = 0; i < n; ++i) {
    t[i] = start + i * step + static_cast<int64_t>(Hash(i) % static_cast<uint64_t>(step));
  }
  return t;
}

// The every-block spec with one block kept.
TemporalSpec OneBlockSpec(absl::string_view block) {
  const TemporalSpec every = EveryBlockSpec();
  TemporalSpec spec;
  if (block == "content") spec.content = every.content;
  if (block == "time") spec.time = every.time;
  if (block == "time2vec") spec.time2vec = every.time2vec;
  if (block == "gaps") spec.gaps = every.gaps;
  if (block == "calendar") spec.calendar = every.calendar;
  return spec;
}

// One block alone over N wide rows (the every-block benchmark's values),
// float32 output. With `peer`: the same bytes memset (kFill) or memcpy'd
// from another buffer (kCopy) instead, the bandwidth bound of that output.
enum class Peer { kNone, kFill, kCopy };

void BM_Block(benchmark::State& state, std::string block, Spacing spacing, int64_t n,
              Peer peer) {
  const TemporalSpec spec = OneBlockSpec(block);
  Series series = MakeSeries(n, /*wide=*/true, /*with_values=*/true);
  series.times = SpacedTimestamps(n, spacing);
  series.view.timestamps = series.times;
  std::vector<float> out = OutputFor(spec, series);
  std::vector<float> source(peer == Peer::kCopy ? out.size() : 0, 1.0f);
  for (auto _ : state) {
    if (peer == Peer::kFill) {
      std::memset(out.data(), 0, out.size() * sizeof(float));
    } else if (peer == Peer::kCopy) {
      std::memcpy(out.data(), source.data(), out.size() * sizeof(float));
    } else {
      Encode(spec, series, /*threads=*/1, out);
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(out.size()) *
                          static_cast<int64_t>(sizeof(float)));
  state.counters["columns"] = static_cast<double>(out.size() / n);
}

// Workload P's time block alone (dim 8) over its 10^6 timestamps, into
// [rows, F] doubles: TimeSinusoid::Encode row by row (what compose does
// today) or EncodeRows (what a block-at-a-time compose would call).
void BM_WorkloadPTime(benchmark::State& state, bool rows_at_once,
                      SinusoidAccuracy accuracy) {
  WorkloadPShape shape;
  shape.series = 1;
  shape.rows_per_series = 1000000;
  const WorkloadP p = MakeWorkloadP(shape);
  const std::vector<int64_t>& times = p.timestamps_ns;
  const int64_t width = WorkloadPWidth();
  const TimeSinusoid sinusoid(/*dim=*/8, TimeBlock{}.min_period_seconds,
                              TimeBlock{}.max_period_seconds, accuracy);
  std::vector<double> out(times.size() * width);
  const auto rows = static_cast<int64_t>(times.size());
  for (auto _ : state) {
    if (rows_at_once) {
      sinusoid.EncodeRows(times, times[0], out.data(), width);
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        sinusoid.Encode(ElapsedNs(times[r], times[0]), &out[r * width]);
      }
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * rows);
}

// The (sin, cos) pairs a row of `spec` evaluates, counted as values / 2:
// the time block's dim, Time2Vec's sines (omega[1..k]) and two per CYCLIC
// calendar field. Holidays (exp), gaps (log1p) and the calendar's civil
// time are other work, not counted.
int64_t SinCosPairsPerRow(const TemporalSpec& spec) {
  int64_t values = 0;
  if (spec.time) values += spec.time->dim;
  if (spec.time2vec) values += static_cast<int64_t>(spec.time2vec->omega.size()) - 1;
  if (spec.calendar && spec.calendar->encoding == CalendarEncoding::kCyclic) {
    values += 2 * static_cast<int64_t>(spec.calendar->fields.size());
  }
  return (values + 1) / 2;
}

// The host's sin/cos limit for `rows` rows of `pairs_per_row` angles each:
// items_per_second counts rows, like the block it bounds.
void BM_SinCosLimit(benchmark::State& state, int64_t rows, int64_t pairs_per_row,
                    bool f64) {
  const int64_t angles = rows * pairs_per_row;
  for (auto _ : state) {
    if (f64) {
      benchmark::DoNotOptimize(HighwaySinCosF64(angles));
    } else {
      benchmark::DoNotOptimize(HighwaySinCosF32(angles));
    }
  }
  state.SetItemsProcessed(state.iterations() * rows);
  state.counters["angles"] = static_cast<double>(angles);
  state.counters["ns_per_angle"] = benchmark::Counter(
      static_cast<double>(state.iterations() * angles),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void RegisterSinCosLimit(absl::string_view for_what, int64_t rows, int64_t pairs_per_row) {
  for (const bool f64 : {true, false}) {
    benchmark::RegisterBenchmark(
        absl::StrCat("limit/sincos_", f64 ? "f64" : "f32", "/for=", for_what, "/N=", rows,
                     "/threads=1")
            .c_str(),
        BM_SinCosLimit, rows, pairs_per_row, f64)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

void Dump(const std::string& dir) {
  const TemporalSpec spec = CalendarOnlySpec();
  const Series series = MakeSeries(10000, /*wide=*/true, /*with_values=*/false);
  std::vector<float> out = OutputFor(spec, series);
  Encode(spec, series, 1, out);
  WriteRaw(dir, "calendar_N10000.bin", out.data(), out.size() * sizeof(float));
}

void RegisterAll(const BenchFlags& flags) {
  const std::vector<int64_t> sizes = flags.small_only
                                         ? std::vector<int64_t>{10000, 100000}
                                         : std::vector<int64_t>{10000, 100000, 1000000};
  // Workload P's whole panel, per-series calls and memcpy peer are in
  // bench/panel_bench.cc; here its time block alone, one thread.
  benchmark::RegisterBenchmark("workload_p_time/encode/rows=1000000/threads=1",
                               BM_WorkloadPTime, false, SinusoidAccuracy::kFloat32)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("workload_p_time/encode_rows/rows=1000000/threads=1",
                               BM_WorkloadPTime, true, SinusoidAccuracy::kFloat32)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("workload_p_time/encode_rows_f64/rows=1000000/threads=1",
                               BM_WorkloadPTime, true, SinusoidAccuracy::kFloat64)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  // Each block alone, one thread, N = 10^5: the block, then memset and
  // memcpy of its output bytes; time, Time2Vec and gaps also over dense and
  // sparse timestamps.
  for (const char* block : {"content", "time", "time2vec", "gaps", "calendar"}) {
    const int64_t n = 100000;
    const std::string tag = absl::StrCat(block, "/N=", n, "/threads=1");
    for (auto [spacing, name] : {std::pair{Spacing::kTwoYears, "two_years"},
                                 std::pair{Spacing::kDense, "dense"},
                                 std::pair{Spacing::kSparse, "sparse"}}) {
      const bool timed = std::string(block) != "content";
      if (spacing != Spacing::kTwoYears && !timed) continue;
      benchmark::RegisterBenchmark(
          absl::StrCat("block/", block, "/spacing=", name, "/N=", n, "/threads=1").c_str(),
          BM_Block, block, spacing, n, Peer::kNone)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
    benchmark::RegisterBenchmark(absl::StrCat("fill/", tag).c_str(), BM_Block, block,
                                 Spacing::kTwoYears, n, Peer::kFill)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(absl::StrCat("copy/", tag).c_str(), BM_Block, block,
                                 Spacing::kTwoYears, n, Peer::kCopy)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  // The sin/cos limits of the time block alone and of every block, next to
  // the lines they bound.
  const int64_t time_pairs = SinCosPairsPerRow(OneBlockSpec("time"));
  RegisterSinCosLimit("time", 100000, time_pairs);
  RegisterSinCosLimit("time", 1000000, time_pairs);
  for (int64_t n : sizes) {
    RegisterSinCosLimit("observations", n, SinCosPairsPerRow(EveryBlockSpec()));
  }
  // The time block against memset/memcpy at N = 10^6, where its 64 MB
  // output is past the last-level cache: the memory-bandwidth bound itself.
  {
    const int64_t n = 1000000;
    const std::string tag = absl::StrCat("time/N=", n, "/threads=1");
    for (auto [name, peer] : {std::pair{"block", Peer::kNone}, std::pair{"fill", Peer::kFill},
                              std::pair{"copy", Peer::kCopy}}) {
      const std::string line = peer == Peer::kNone
                                   ? absl::StrCat("block/time/spacing=two_years/N=", n, "/threads=1")
                                   : absl::StrCat(name, "/", tag);
      benchmark::RegisterBenchmark(line.c_str(), BM_Block, "time", Spacing::kTwoYears, n, peer)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (int threads : flags.threads) {
    for (int64_t n : sizes) {
      const std::string tag = absl::StrCat("N=", n, "/threads=", threads);
      benchmark::RegisterBenchmark(absl::StrCat("calendar/", tag).c_str(),
                                   BM_Encode<float>, CalendarOnlySpec(), n, true, false,
                                   threads)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(absl::StrCat("calendar_f64/", tag).c_str(),
                                   BM_Encode<double>, CalendarOnlySpec(), n, true, false,
                                   threads)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(absl::StrCat("observations/", tag).c_str(),
                                   BM_Encode<float>, EveryBlockSpec(), n, true, true,
                                   threads)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(absl::StrCat("observations_f64/", tag).c_str(),
                                   BM_Encode<double>, EveryBlockSpec(), n, true, true,
                                   threads)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(absl::StrCat("observations_long/", tag).c_str(),
                                   BM_Encode<float>, EveryBlockSpec(), n, false, true,
                                   threads)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(absl::StrCat("observations_long_f64/", tag).c_str(),
                                   BM_Encode<double>, EveryBlockSpec(), n, false, true,
                                   threads)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace
}  // namespace phasor::bench

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--phasor_simd_target") == 0) {
      phasor::bench::ParseBenchFlags(&argc, argv);  // --phasor_max_target.
      std::printf("%s\n", phasor::bench::DispatchedSimdTarget());
      return 0;
    }
  }
  return phasor::bench::RunBenchmarkMain(argc, argv, phasor::bench::Dump,
                                         phasor::bench::RegisterAll);
}
