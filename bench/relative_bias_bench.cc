// RelativeBias kernels (core/relative/relative_bias.h): the T5 bias [32, 4096, 4096]
// from a learned [32, 32] table, in float32 and bfloat16, next to a fill of
// the same output bytes (the memset bandwidth the kernel's target is set
// against), and the per-pair path (explicit positions that are not one
// arithmetic sequence). Peer: bench/peers/relative_bias_peer.py (HF T5's
// compute_bias in PyTorch).
//
// Table: table[b, h] = InputValue(b·32 + h) (bench_common.h), as the peer.
// --phasor_dump=DIR writes the check outputs: bucket ids [4096, 4096] int32
// (bidirectional and causal) and the float32 bias [32, 4096, 4096]
// bidirectional, raw little-endian.
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/relative/relative_bias.h"

namespace phasor::bench {
namespace {

constexpr int64_t kHeads = 32;
constexpr int64_t kBuckets = 32;
constexpr int64_t kLen = 4096;

std::vector<double> Table() {
  std::vector<double> table(kBuckets * kHeads);
  for (int64_t i = 0; i < kBuckets * kHeads; ++i) table[i] = InputValue(i);
  return table;
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

RelativeBucketing T5(bool bidirectional) {
  RelativeBucketing b;
  b.t5 = {kBuckets, 128, bidirectional};
  return b;
}

ExecutionOptions Threads(int threads) {
  ExecutionOptions options;
  options.max_threads = threads;
  return options;
}

void SetBytes(benchmark::State& state, int64_t bytes) {
  state.SetBytesProcessed(state.iterations() * bytes);
}

void BM_FillFloat32(benchmark::State& state) {
  std::vector<float> out(kHeads * kLen * kLen);
  for (auto _ : state) {
    std::memset(out.data(), 0x3f, out.size() * sizeof(float));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetBytes(state, static_cast<int64_t>(out.size() * sizeof(float)));
}

void BM_FillBFloat16(benchmark::State& state) {
  std::vector<uint16_t> out(kHeads * kLen * kLen);
  for (auto _ : state) {
    std::memset(out.data(), 0x3f, out.size() * sizeof(uint16_t));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetBytes(state, static_cast<int64_t>(out.size() * sizeof(uint16_t)));
}

void BM_T5BiasFloat32(benchmark::State& state) {
  const std::vector<double> table = Table();
  const std::vector<int64_t> positions = Iota(kLen);
  std::vector<float> out(kHeads * kLen * kLen);
  std::memset(out.data(), 0, out.size() * sizeof(float));
  const ExecutionOptions options = Threads(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    ComputeRelativeBias(T5(true), positions, positions, table, kHeads, options,
                        absl::MakeSpan(out));
    benchmark::DoNotOptimize(out.data());
  }
  SetBytes(state, static_cast<int64_t>(out.size() * sizeof(float)));
}

void BM_T5BiasBFloat16(benchmark::State& state) {
  const std::vector<double> table = Table();
  const std::vector<int64_t> positions = Iota(kLen);
  std::vector<uint16_t> out(kHeads * kLen * kLen);
  std::memset(out.data(), 0, out.size() * sizeof(uint16_t));
  const ExecutionOptions options = Threads(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    ComputeRelativeBias(T5(true), positions, positions, table, kHeads, DType::kBFloat16,
                        options, absl::MakeSpan(out));
    benchmark::DoNotOptimize(out.data());
  }
  SetBytes(state, static_cast<int64_t>(out.size() * sizeof(uint16_t)));
}

// As BM_T5BiasFloat32 into fresh memory every call (what a server response
// or an eager framework's new tensor pays: first-touch page faults).
void BM_T5BiasFloat32Fresh(benchmark::State& state) {
  const std::vector<double> table = Table();
  const std::vector<int64_t> positions = Iota(kLen);
  const size_t n = static_cast<size_t>(kHeads * kLen * kLen);
  const ExecutionOptions options = Threads(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    std::unique_ptr<float[]> out(new float[n]);
    ComputeRelativeBias(T5(true), positions, positions, table, kHeads, options,
                        absl::MakeSpan(out.get(), n));
    benchmark::DoNotOptimize(out.get());
  }
  SetBytes(state, static_cast<int64_t>(n * sizeof(float)));
}

// Keys 0..4095 with the last one moved: not one arithmetic sequence, so
// every pair is bucketed (the path explicit or timestamp positions take).
void BM_T5BiasFloat32PerPair(benchmark::State& state) {
  const std::vector<double> table = Table();
  const std::vector<int64_t> queries = Iota(kLen);
  std::vector<int64_t> keys = Iota(kLen);
  keys.back() = 100000;
  std::vector<float> out(kHeads * kLen * kLen);
  std::memset(out.data(), 0, out.size() * sizeof(float));
  const ExecutionOptions options = Threads(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    ComputeRelativeBias(T5(true), queries, keys, table, kHeads, options,
                        absl::MakeSpan(out));
    benchmark::DoNotOptimize(out.data());
  }
  SetBytes(state, static_cast<int64_t>(out.size() * sizeof(float)));
}

int Dump(const std::string& dir) {
  const std::vector<int64_t> positions = Iota(kLen);
  const auto write = [&dir](const std::string& name, const void* data, size_t bytes) {
    const std::string path = dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(data, 1, bytes, f) != bytes) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return false;
    }
    return std::fclose(f) == 0;
  };
  for (bool bidirectional : {true, false}) {
    std::vector<int32_t> ids(kLen * kLen);
    ComputeBucketIds(T5(bidirectional), positions, positions, Threads(2), absl::MakeSpan(ids));
    if (!write(bidirectional ? "relative_ids_bidirectional.i32" : "relative_ids_causal.i32",
               ids.data(), ids.size() * 4)) {
      return 1;
    }
  }
  std::vector<float> bias(kHeads * kLen * kLen);
  ComputeRelativeBias(T5(true), positions, positions, Table(), kHeads, Threads(2),
                      absl::MakeSpan(bias));
  return write("relative_bias_f32.bin", bias.data(), bias.size() * 4) ? 0 : 1;
}

}  // namespace
}  // namespace phasor::bench

int main(int argc, char** argv) {
  using namespace phasor::bench;
  const BenchFlags flags = ParseBenchFlags(&argc, argv);
  if (!flags.dump_dir.empty()) return Dump(flags.dump_dir);
  benchmark::RegisterBenchmark("BM_FillFloat32/32x4096x4096", BM_FillFloat32)
      ->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_FillBFloat16/32x4096x4096", BM_FillBFloat16)
      ->Unit(benchmark::kMillisecond)->UseRealTime();
  for (int threads : flags.threads) {
    benchmark::RegisterBenchmark("BM_T5BiasFloat32/32x4096x4096", BM_T5BiasFloat32)
        ->Arg(threads)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("BM_T5BiasFloat32Fresh/32x4096x4096", BM_T5BiasFloat32Fresh)
        ->Arg(threads)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("BM_T5BiasBFloat16/32x4096x4096", BM_T5BiasBFloat16)
        ->Arg(threads)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("BM_T5BiasFloat32PerPair/32x4096x4096",
                                 BM_T5BiasFloat32PerPair)
        ->Arg(threads)->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
