// Workload P in core (bench/workload_p.h: 10,000 series x 100 rows x 3
// channels, 21 float32 columns), timed side by side in one run:
//   panel/threads=n        one EncodePanel call over the whole panel
//   per_series/threads=n   10,000 EncodeObservations calls, one per series
//   memcpy                 copying a buffer the size of the output (84 MB):
//                          the memory-speed bound the panel is measured
//                          against
// items_per_second counts rows; bytes_per_second counts output bytes.
//
// --phasor_dump=DIR writes the panel's features to DIR/panel_p.bin (float32,
// 21 per row) for bench/peers/panel_peer.py's check.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_common.h"
#include "bench/workload_p.h"
#include "core/temporal/compose.h"

namespace phasor::bench {
namespace {

const WorkloadP& Workload() {
  static const WorkloadP* workload = new WorkloadP(MakeWorkloadP());
  return *workload;
}

int64_t NumSeries() { return Workload().shape.series; }
int64_t NumRows() { return static_cast<int64_t>(Workload().timestamps_ns.size()); }

int64_t Width() {
  const absl::StatusOr<FeatureLayout> layout =
      TemporalFeatureLayout(WorkloadPCoreSpec(), Workload().shape.channels, 0);
  if (!layout.ok()) {
    std::fprintf(stderr, "%s\n", layout.status().ToString().c_str());
    std::exit(1);
  }
  return layout->width;
}

void Check(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    std::exit(1);
  }
}

void EncodeWholePanel(int threads, std::vector<float>* out,
                      std::vector<SeriesState>* states) {
  Check(EncodePanel(WorkloadPCoreSpec(), WorkloadPPanel(Workload()), /*zones=*/{},
                    /*states_in=*/{},
                    ExecutionOptions{.max_threads = threads}, absl::MakeSpan(*out),
                    absl::MakeSpan(*states)));
}

void BM_Panel(benchmark::State& state, int threads) {
  std::vector<float> out(NumRows() * Width());
  std::vector<SeriesState> states(NumSeries());
  for (auto _ : state) {
    EncodeWholePanel(threads, &out, &states);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * NumRows());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(out.size()) * 4);
}

void BM_PerSeries(benchmark::State& state, int threads) {
  const WorkloadP& w = Workload();
  const PanelView panel = WorkloadPPanel(w);
  const TemporalSpec spec = WorkloadPCoreSpec();
  const int64_t width = Width();
  std::vector<float> out(NumRows() * width);
  std::vector<SeriesState> states(NumSeries());
  for (auto _ : state) {
    for (int64_t s = 0; s < NumSeries(); ++s) {
      const ObservationsView series = panel.Series(s);
      Check(EncodeObservations(spec, series, nullptr,
                               ExecutionOptions{.max_threads = threads},
                               absl::MakeSpan(out).subspan(w.series_offsets[s] * width,
                                                           series.num_rows() * width),
                               &states[s]));
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * NumRows());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(out.size()) * 4);
}

void BM_Memcpy(benchmark::State& state) {
  const int64_t bytes = NumRows() * Width() * 4;
  std::vector<char> from(bytes, 1), to(bytes, 0);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), from.size());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * NumRows());
  state.SetBytesProcessed(state.iterations() * bytes);
}

void Dump(const std::string& dir) {
  std::vector<float> out(NumRows() * Width());
  std::vector<SeriesState> states(NumSeries());
  EncodeWholePanel(1, &out, &states);
  WriteRaw(dir, "panel_p.bin", out.data(), out.size() * sizeof(float));
}

void RegisterAll(const BenchFlags& flags) {
  benchmark::RegisterBenchmark("memcpy", BM_Memcpy)->UseRealTime()->Unit(benchmark::kMillisecond);
  for (int threads : flags.threads) {
    const std::string tag = absl::StrCat("threads=", threads);
    benchmark::RegisterBenchmark(absl::StrCat("panel/", tag).c_str(), BM_Panel, threads)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(absl::StrCat("per_series/", tag).c_str(), BM_PerSeries,
                                 threads)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace
}  // namespace phasor::bench

int main(int argc, char** argv) {
  return phasor::bench::RunBenchmarkMain(argc, argv, phasor::bench::Dump,
                                         phasor::bench::RegisterAll);
}
