// RoPE microbenchmarks on [T, 32, 128] (32 heads of 128 channels, LLaMA-7B's
// attention shape), next to the physical limit: a memory copy of the same
// bytes with the same thread budget.
//
// Each ApplyRope iteration is what one request costs the core once its
// tensors are in memory: θ_i (with scaling) from ComputeRopeFrequencies, then
// ApplyRope out of place into a caller-owned buffer that was touched
// beforehand (no page faults timed; the copy kernel writes the same buffer). Positions are 0..T−1 (a prefill), or
// scattered (p_t = 7919·t mod 4T) to time the path for arbitrary positions.
//
// Names: rope/dtype=fp32/layout=half/scaling=none/pos=contiguous/T=4096/threads=1,
// copy/dtype=fp32/T=4096/threads=1, rope_tables/T=4096/threads=1. The peer
// script bench/peers/rope_peer.py uses the same names, inputs and positions.
// dtype=fp64 (T <= 4096) times the double path beside fp32: every row's
// cos/sin evaluated exactly (no angle-addition runs) and the rotation in
// double, against a copy of its own (twice as many) bytes;
// rope_tables/dtype=fp64 likewise.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_common.h"
#include "core/dtype.h"
#include "core/parallel.h"
#include "core/positions.h"
#include "core/rope.h"
#include "core/rope_scaling.h"

namespace phasor::bench {
namespace {

constexpr int64_t kHeads = 32;
constexpr int64_t kHeadDim = 128;

// YaRN as Qwen2.5/DeepSeek configure it: 4× over a 4096-token original
// context (attention factor 0.1·ln 4 + 1).
RopeScaling BenchScaling(bool scaled) {
  if (!scaled) return NoRopeScaling{};
  YarnRopeScaling yarn;
  yarn.factor = 4.0;
  yarn.original_max_position_embeddings = 4096;
  return yarn;
}

std::vector<int64_t> BenchPositions(int64_t tokens, bool scattered) {
  std::vector<int64_t> positions(tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    positions[t] = scattered ? (t * 7919) % (4 * tokens) : t;
  }
  return positions;
}

// Inputs and outputs for the largest shape, filled once and shared by every
// benchmark (the largest fp32 operand is 512 MiB).
struct Buffers {
  explicit Buffers(int64_t max_elements)
      : fp32_in(max_elements), bf16_in(max_elements), out(max_elements * 4) {
    FillInputs(fp32_in.data(), max_elements);
    for (int64_t i = 0; i < max_elements; ++i) bf16_in[i] = FloatToBFloat16(fp32_in[i]);
    std::memset(out.data(), 0, out.size());
  }
  std::vector<float> fp32_in;
  std::vector<uint16_t> bf16_in;
  std::vector<uint8_t> out;
};

Buffers& SharedBuffers(int64_t max_tokens) {
  static Buffers* buffers = new Buffers(max_tokens * kHeads * kHeadDim);
  return *buffers;
}

// The float64 operands: the fp32 inputs widened, up to kMaxTokens64 tokens.
constexpr int64_t kMaxTokens64 = 4096;
struct Buffers64 {
  Buffers64() : in(kMaxTokens64 * kHeads * kHeadDim), out(in.size() * 8) {
    std::vector<float> narrow(in.size());
    FillInputs(narrow.data(), static_cast<int64_t>(narrow.size()));
    for (size_t i = 0; i < in.size(); ++i) in[i] = narrow[i];
    std::memset(out.data(), 0, out.size());
  }
  std::vector<double> in;
  std::vector<uint8_t> out;
};

Buffers64& SharedBuffers64() {
  static Buffers64* buffers = new Buffers64();
  return *buffers;
}

struct RopeCase {
  DType dtype = DType::kFloat32;
  RopeLayout layout = RopeLayout::kHalf;
  bool scaled = false;
  bool scattered = false;
  int64_t tokens = 0;
};

RopeOperand MakeOperand(const RopeCase& c, Buffers& buffers) {
  RopeOperand operand;
  operand.dtype = c.dtype;
  operand.num_tokens = c.tokens;
  operand.num_heads = kHeads;
  operand.head_dim = kHeadDim;
  const size_t bytes = static_cast<size_t>(
      RopeOperandBytes(c.dtype, c.tokens, kHeads, kHeadDim));
  if (c.dtype == DType::kFloat64) {
    Buffers64& wide = SharedBuffers64();
    operand.in = absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(wide.in.data()), bytes);
    operand.out = absl::MakeSpan(wide.out.data(), bytes);
    return operand;
  }
  const uint8_t* in = c.dtype == DType::kFloat32
                          ? reinterpret_cast<const uint8_t*>(buffers.fp32_in.data())
                          : reinterpret_cast<const uint8_t*>(buffers.bf16_in.data());
  operand.in = absl::MakeConstSpan(in, bytes);
  operand.out = absl::MakeSpan(buffers.out.data(), bytes);
  return operand;
}

RopeSpec MakeSpec(const RopeCase& c) {
  RopeSpec spec;
  spec.layout = c.layout;
  spec.scaling = BenchScaling(c.scaled);
  return spec;
}

// One request's core work: frequencies for the spec, then the rotation.
void RunRope(const RopeCase& c, const Positions& positions, int threads,
             Buffers& buffers) {
  const RopeSpec spec = MakeSpec(c);
  const RopeOperand query = MakeOperand(c, buffers);
  const ExecutionOptions options{.max_threads = threads};
  const absl::StatusOr<RopeFrequencies> frequencies =
      ComputeRopeFrequencies(spec, kHeadDim, DefaultRopeSeqLen(positions));
  if (!frequencies.ok()) {
    std::fprintf(stderr, "%s\n", frequencies.status().ToString().c_str());
    std::exit(1);
  }
  ApplyRope(spec, *frequencies, positions, options, query, /*key=*/nullptr);
}

void BM_Rope(benchmark::State& state, RopeCase c, int threads, int64_t max_tokens) {
  Buffers& buffers = SharedBuffers(max_tokens);
  const std::vector<int64_t> positions = BenchPositions(c.tokens, c.scattered);
  for (auto _ : state) {
    RunRope(c, Positions::Integers(positions), threads, buffers);
    benchmark::ClobberMemory();
  }
  // Bytes moved: the operand read once and written once, as for the copy.
  const int64_t bytes = RopeOperandBytes(c.dtype, c.tokens, kHeads, kHeadDim);
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
}

void BM_Copy(benchmark::State& state, DType dtype, int64_t tokens, int threads,
             int64_t max_tokens) {
  Buffers& buffers = SharedBuffers(max_tokens);
  const RopeOperand operand = MakeOperand({.dtype = dtype, .tokens = tokens}, buffers);
  const ExecutionOptions options{.max_threads = threads};
  const size_t row_bytes = operand.in.size() / static_cast<size_t>(tokens);
  for (auto _ : state) {
    // Same chunking as ApplyRope: ParallelFor over token rows.
    ParallelFor(options, tokens, kHeads * kHeadDim, [&](int64_t begin, int64_t end) {
      std::memcpy(operand.out.data() + begin * row_bytes,
                  operand.in.data() + begin * row_bytes,
                  static_cast<size_t>(end - begin) * row_bytes);
    });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 *
                          static_cast<int64_t>(operand.in.size()));
}

template <typename T>
void BM_RopeTables(benchmark::State& state, int64_t tokens, int threads) {
  const RopeSpec spec;
  const std::vector<int64_t> positions_storage = BenchPositions(tokens, false);
  const Positions positions = Positions::Integers(positions_storage);
  const RopeFrequencies frequencies =
      *ComputeRopeFrequencies(spec, kHeadDim, tokens);
  std::vector<T> cos(tokens * kHeadDim / 2), sin(tokens * kHeadDim / 2);
  const ExecutionOptions options{.max_threads = threads};
  for (auto _ : state) {
    ComputeRopeTables(spec, frequencies, positions, options, absl::MakeSpan(cos),
                      absl::MakeSpan(sin));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * tokens * kHeadDim);
}

const char* DTypeTag(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "fp32";
    case DType::kFloat64: return "fp64";
    default: return "bf16";
  }
}
const char* LayoutTag(RopeLayout layout) {
  return layout == RopeLayout::kHalf ? "half" : "interleaved";
}

std::string RopeName(const RopeCase& c, int threads) {
  return absl::StrCat("rope/dtype=", DTypeTag(c.dtype), "/layout=", LayoutTag(c.layout),
                      "/scaling=", c.scaled ? "yarn" : "none",
                      "/pos=", c.scattered ? "scattered" : "contiguous",
                      "/T=", c.tokens, "/threads=", threads);
}

// Check step: Phasor's outputs for the configurations the peer compares.
void Dump(const std::string& dir) {
  constexpr int64_t kTokens = 4096;
  Buffers& buffers = SharedBuffers(kTokens);
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (RopeLayout layout : {RopeLayout::kHalf, RopeLayout::kInterleaved}) {
      for (bool scaled : {false, true}) {
        const RopeCase c{dtype, layout, scaled, false, kTokens};
        const std::vector<int64_t> positions = BenchPositions(kTokens, false);
        RunRope(c, Positions::Integers(positions), /*threads=*/1, buffers);
        const int64_t bytes = RopeOperandBytes(dtype, kTokens, kHeads, kHeadDim);
        WriteRaw(dir,
                 absl::StrCat("rope_", DTypeTag(dtype), "_", LayoutTag(layout), "_",
                              scaled ? "yarn" : "none", "_T", kTokens, ".bin"),
                 buffers.out.data(), static_cast<size_t>(bytes));
      }
    }
  }
}

void RegisterAll(const BenchFlags& flags) {
  const std::vector<int64_t> sizes =
      flags.small_only ? std::vector<int64_t>{1, 128, 4096}
                       : std::vector<int64_t>{1, 128, 4096, 32768};
  const int64_t max_tokens = sizes.back();
  for (int threads : flags.threads) {
    for (int64_t tokens : sizes) {
      for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat64}) {
        if (dtype == DType::kFloat64 && tokens > kMaxTokens64) continue;
        benchmark::RegisterBenchmark(
            absl::StrCat("copy/dtype=", DTypeTag(dtype), "/T=", tokens,
                         "/threads=", threads).c_str(),
            BM_Copy, dtype, tokens, threads, max_tokens)
            ->UseRealTime();
        for (RopeLayout layout : {RopeLayout::kHalf, RopeLayout::kInterleaved}) {
          for (bool scaled : {false, true}) {
            const RopeCase c{dtype, layout, scaled, false, tokens};
            benchmark::RegisterBenchmark(RopeName(c, threads).c_str(), BM_Rope, c,
                                         threads, max_tokens)
                ->UseRealTime();
          }
        }
      }
      // Arbitrary (non-consecutive) positions, fp32 HALF only.
      if (tokens >= 128) {
        const RopeCase c{DType::kFloat32, RopeLayout::kHalf, false, true, tokens};
        benchmark::RegisterBenchmark(RopeName(c, threads).c_str(), BM_Rope, c,
                                     threads, max_tokens)
            ->UseRealTime();
      }
      benchmark::RegisterBenchmark(
          absl::StrCat("rope_tables/T=", tokens, "/threads=", threads).c_str(),
          BM_RopeTables<float>, tokens, threads)
          ->UseRealTime();
      benchmark::RegisterBenchmark(
          absl::StrCat("rope_tables/dtype=fp64/T=", tokens, "/threads=", threads).c_str(),
          BM_RopeTables<double>, tokens, threads)
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
