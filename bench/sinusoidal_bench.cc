// Sinusoidal table microbenchmarks: [N, d] float32 tables for positions
// 0..N−1 at the sizes of bench/peers/sinusoidal_peer.py (4096×512, a typical
// context × model width, and 65536×1024), next to a write-only fill of the
// same bytes (the table is pure output, so a fill is its physical limit).
//
// Two ways to own the output are timed: into a caller buffer touched before
// (what a server reusing its response buffer sees) and into freshly allocated
// memory (what the PyTorch snippet does: torch.zeros allocates every call, so
// page faults are part of its time and of this variant's).
//
// Names: sinusoidal/N=4096/d=512/out=reused/threads=1, .../out=fresh/...,
// fill/N=4096/d=512/threads=1. The float64 table (every row exact, no
// angle-addition runs) is sinusoidal/dtype=fp64/..., beside fill/dtype=fp64
// of its own bytes.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_common.h"
#include "core/adapters/parallel.h"
#include "core/base/positions.h"
#include "core/positional/sinusoidal.h"

namespace phasor::bench {
namespace {

struct TableSize {
  int64_t positions;
  int64_t dim;
};

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> positions(n);
  for (int64_t t = 0; t < n; ++t) positions[t] = t;
  return positions;
}

template <typename T>
void BM_Sinusoidal(benchmark::State& state, TableSize size, bool fresh, int threads) {
  const SinusoidalSpec spec{.dim = size.dim};
  const std::vector<int64_t> positions_storage = Iota(size.positions);
  const Positions positions = Positions::Integers(positions_storage);
  const ExecutionOptions options{.max_threads = threads};
  const int64_t elements = SinusoidalOutputSize(spec, size.positions);
  std::vector<T> reused(fresh ? 0 : elements, T(0));
  for (auto _ : state) {
    if (fresh) {
      // Uninitialised on purpose: the kernel's writes are the first touch.
      std::unique_ptr<T[]> out(new T[elements]);
      EncodeSinusoidal(spec, positions, absl::Span<const T>(), T(1), options,
                       absl::MakeSpan(out.get(), elements));
      benchmark::DoNotOptimize(out.get());
      benchmark::ClobberMemory();
    } else {
      EncodeSinusoidal(spec, positions, absl::Span<const T>(), T(1), options,
                       absl::MakeSpan(reused));
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(state.iterations() * elements * sizeof(T));
}

template <typename T>
void BM_Fill(benchmark::State& state, TableSize size, int threads) {
  const int64_t elements = size.positions * size.dim;
  std::vector<T> out(elements, T(0));
  const ExecutionOptions options{.max_threads = threads};
  for (auto _ : state) {
    ParallelFor(options, size.positions, size.dim, [&](int64_t begin, int64_t end) {
      std::memset(out.data() + begin * size.dim, 0x3f,
                  static_cast<size_t>((end - begin) * size.dim) * sizeof(T));
    });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * elements * sizeof(T));
}

std::string SizeTag(TableSize size) {
  return absl::StrCat("N=", size.positions, "/d=", size.dim);
}

void Dump(const std::string& dir) {
  for (TableSize size : {TableSize{4096, 512}, TableSize{65536, 1024}}) {
    const SinusoidalSpec spec{.dim = size.dim};
    const std::vector<int64_t> positions_storage = Iota(size.positions);
    std::vector<float> out(SinusoidalOutputSize(spec, size.positions));
    EncodeSinusoidal(spec, Positions::Integers(positions_storage),
                     absl::Span<const float>(), 1.0f, {}, absl::MakeSpan(out));
    WriteRaw(dir, absl::StrCat("sinusoidal_N", size.positions, "_d", size.dim, ".bin"),
             out.data(), out.size() * sizeof(float));
  }
}

void RegisterAll(const BenchFlags& flags) {
  std::vector<TableSize> sizes = {{4096, 512}};
  if (!flags.small_only) sizes.push_back({65536, 1024});
  for (int threads : flags.threads) {
    for (TableSize size : sizes) {
      for (bool fresh : {false, true}) {
        benchmark::RegisterBenchmark(
            absl::StrCat("sinusoidal/", SizeTag(size), "/out=", fresh ? "fresh" : "reused",
                         "/threads=", threads).c_str(),
            BM_Sinusoidal<float>, size, fresh, threads)
            ->UseRealTime();
      }
      benchmark::RegisterBenchmark(
          absl::StrCat("fill/", SizeTag(size), "/threads=", threads).c_str(),
          BM_Fill<float>, size, threads)
          ->UseRealTime();
      benchmark::RegisterBenchmark(
          absl::StrCat("sinusoidal/dtype=fp64/", SizeTag(size), "/out=reused/threads=",
                       threads).c_str(),
          BM_Sinusoidal<double>, size, false, threads)
          ->UseRealTime();
      benchmark::RegisterBenchmark(
          absl::StrCat("fill/dtype=fp64/", SizeTag(size), "/threads=", threads).c_str(),
          BM_Fill<double>, size, threads)
          ->UseRealTime();
    }
  }
}

}  // namespace
}  // namespace phasor::bench

int main(int argc, char** argv) {
  return phasor::bench::RunBenchmarkMain(argc, argv, phasor::bench::Dump,
                                         phasor::bench::RegisterAll);
}
