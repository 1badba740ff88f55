// RoPE microbenchmarks on [T, 32, 128] (32 heads of 128 channels, LLaMA-7B's
// attention shape), next to the physical limit: a memory copy of the same
// bytes with the same thread budget.
//
// Each ApplyRope iteration is what one request costs the core once its
// tensors are in memory: θ_i (with scaling) from ComputeRopeFrequencies, then
// ApplyRope out of place into a caller-owned buffer that was touched
// beforehand (no page faults timed; the copy kernel writes the same
// buffer). Positions are 0..T−1 (a prefill),
// scattered (p_t = 7919·t mod 4T) to time the path for arbitrary positions,
// or decode (p_t = 4096 + t: the tokens after a 4096-token prompt; at T = 1
// one decoding step, whose 64 angles are exact rows, not the trivial
// angles of position 0).
//
// Names: rope/dtype=fp32/layout=half/scaling=none/pos=contiguous/T=4096/threads=1,
// copy/dtype=fp32/T=4096/threads=1, rope_tables/T=4096/threads=1. The peer
// script bench/peers/rope_peer.py uses the same names, inputs and positions.
// dtype=fp64 (T <= 4096) times the double path beside fp32: every row's
// cos/sin evaluated exactly (no angle-addition runs) and the rotation in
// double, against a copy of its own (twice as many) bytes;
// rope_tables/dtype=fp64 likewise. dtype=fp16 beside bf16 (same bytes).
// .../order=bhtd holds the operand as one [1, H, T, D] tensor (head-major,
// HF's order; fp32 HALF). .../freq=cached takes the spec's plan from the
// server's plan cache, as the server's ApplyRope does, instead of computing
// the frequencies per call.
// Every rope/ benchmark reports max_abs_err: the largest |out − reference|
// over the first min(T, 1024) tokens, the reference being the float64 path
// on the same inputs widened exactly. --phasor_simd=AVX2 (AVX3, SSE4, ...)
// runs the kernels on that Highway target instead of the best one.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "bench/bench_common.h"
#include "core/adapters/dtype.h"
#include "core/adapters/parallel.h"
#include "core/base/positions.h"
#include "core/rope/rope.h"
#include "core/rope/rope_scaling.h"
#include "hwy/targets.h"
#include "server/spec_cache.h"

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

enum class PositionKind { kContiguous, kScattered, kDecode };

std::vector<int64_t> BenchPositions(int64_t tokens, PositionKind kind) {
  std::vector<int64_t> positions(tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    switch (kind) {
      case PositionKind::kContiguous: positions[t] = t; break;
      case PositionKind::kScattered: positions[t] = (t * 7919) % (4 * tokens); break;
      case PositionKind::kDecode: positions[t] = 4096 + t; break;
    }
  }
  return positions;
}

// Inputs and outputs for the largest shape, filled once and shared by every
// benchmark (the largest fp32 operand is 512 MiB).
// Output buffers start on a page, as the server's response tensors do
// (tcmalloc hands out large blocks page-aligned), so that vectors of the
// output are aligned where the kernel streams them (core/rope/rope_kernels.cc
// kStreamBytes); glibc's malloc would put them 16 bytes past a page.
template <typename T>
struct PageAlignedAllocator {
  using value_type = T;
  PageAlignedAllocator() = default;
  template <typename U>
  explicit PageAlignedAllocator(const PageAlignedAllocator<U>&) {}
  T* allocate(size_t n) {
    const size_t bytes = (n * sizeof(T) + 4095) / 4096 * 4096;
    void* p = std::aligned_alloc(4096, bytes);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  bool operator==(const PageAlignedAllocator&) const { return true; }
  bool operator!=(const PageAlignedAllocator&) const { return false; }
};

struct Buffers {
  explicit Buffers(int64_t max_elements)
      : fp32_in(max_elements),
        bf16_in(max_elements),
        fp16_in(max_elements),
        out(max_elements * 4) {
    FillInputs(fp32_in.data(), max_elements);
    for (int64_t i = 0; i < max_elements; ++i) {
      bf16_in[i] = FloatToBFloat16(fp32_in[i]);
      fp16_in[i] = FloatToHalf(fp32_in[i]);
    }
    std::memset(out.data(), 0, out.size());
  }
  std::vector<float> fp32_in;
  std::vector<uint16_t> bf16_in;
  std::vector<uint16_t> fp16_in;
  std::vector<uint8_t, PageAlignedAllocator<uint8_t>> out;
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
  PositionKind positions = PositionKind::kContiguous;
  int64_t tokens = 0;
  // The frequencies from the server's plan cache (what its ApplyRope does
  // for a spec it has seen), instead of computed per call.
  bool cached = false;
  // The same bytes as one [1, H, T, D] tensor (HF's head-major order)
  // instead of [T, H, D].
  bool head_major = false;
};

RopeOperand MakeOperand(const RopeCase& c, Buffers& buffers) {
  RopeOperand operand;
  operand.dtype = c.dtype;
  operand.num_tokens = c.tokens;
  operand.num_heads = kHeads;
  operand.head_dim = kHeadDim;
  operand.seq_len = c.head_major ? c.tokens : 0;
  const size_t bytes = static_cast<size_t>(
      RopeOperandBytes(c.dtype, c.tokens, kHeads, kHeadDim));
  if (c.dtype == DType::kFloat64) {
    Buffers64& wide = SharedBuffers64();
    operand.in = absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(wide.in.data()), bytes);
    operand.out = absl::MakeSpan(wide.out.data(), bytes);
    return operand;
  }
  const uint8_t* in =
      c.dtype == DType::kFloat32   ? reinterpret_cast<const uint8_t*>(buffers.fp32_in.data())
      : c.dtype == DType::kFloat16 ? reinterpret_cast<const uint8_t*>(buffers.fp16_in.data())
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

absl::StatusOr<RopeFrequencies> FrequenciesOrDie(const RopeSpec& spec,
                                                 const Positions& positions) {
  absl::StatusOr<RopeFrequencies> frequencies =
      ComputeRopeFrequencies(spec, kHeadDim, DefaultRopeSeqLen(positions));
  if (!frequencies.ok()) {
    std::fprintf(stderr, "%s\n", frequencies.status().ToString().c_str());
    std::exit(1);
  }
  return frequencies;
}

// One request's core work: frequencies for the spec (computed, or looked up
// by the spec's bytes as the server does), then the rotation.
void RunRope(const RopeCase& c, const Positions& positions, int threads,
             Buffers& /*buffers*/, const RopeOperand& query) {
  const RopeSpec spec = MakeSpec(c);
  const ExecutionOptions options{.max_threads = threads};
  if (c.cached) {
    // The server's plan cache (server/spec_cache.h), keyed as a server keys
    // it: the spec's bytes (here its scaling and layout).
    static auto* cache = new server::SpecCache<RopePlan>(server::SpecCacheLimits{});
    const char key[4] = {'r', static_cast<char>(c.scaled), static_cast<char>(c.layout), 0};
    std::shared_ptr<const RopePlan> plan = cache->Find(absl::string_view(key, sizeof(key)));
    if (plan == nullptr) {
      plan = std::make_shared<const RopePlan>(
          MakeRopePlan(*FrequenciesOrDie(spec, positions)));
      cache->Insert(absl::string_view(key, sizeof(key)), plan, 0);
    }
    ApplyRope(spec, *plan, positions, options, query, /*key=*/nullptr);
    return;
  }
  ApplyRope(spec, *FrequenciesOrDie(spec, positions), positions, options, query,
            /*key=*/nullptr);
}
void RunRope(const RopeCase& c, const Positions& positions, int threads,
             Buffers& buffers) {
  RunRope(c, positions, threads, buffers, MakeOperand(c, buffers));
}

double Widen(DType dtype, const uint8_t* data, int64_t i) {
  switch (dtype) {
    case DType::kFloat32: {
      float value;
      std::memcpy(&value, data + 4 * i, 4);
      return value;
    }
    case DType::kFloat64: {
      double value;
      std::memcpy(&value, data + 8 * i, 8);
      return value;
    }
    default: {
      uint16_t bits;
      std::memcpy(&bits, data + 2 * i, 2);
      return dtype == DType::kFloat16 ? HalfToFloat(bits) : BFloat16ToFloat(bits);
    }
  }
}

// Accuracy beside the speed: the largest |out − reference| over the first
// min(T, 1024) tokens (rows are computed the same whatever T is), where the
// reference is the float64 path (every row exact, rotated in double) applied
// to the same inputs widened exactly to double.
double MaxAbsError(const RopeCase& c, Buffers& buffers) {
  RopeCase prefix = c;
  prefix.tokens = std::min<int64_t>(c.tokens, 1024);
  const std::vector<int64_t> positions_storage = BenchPositions(prefix.tokens, c.positions);
  const Positions positions = Positions::Integers(positions_storage);
  const int64_t elements = prefix.tokens * kHeads * kHeadDim;
  RopeOperand query = MakeOperand(prefix, buffers);
  std::vector<uint8_t> out(query.out.size());
  query.out = absl::MakeSpan(out);
  RunRope(prefix, positions, /*threads=*/1, buffers, query);
  std::vector<double> wide_in(elements), wide_out(elements);
  for (int64_t i = 0; i < elements; ++i) wide_in[i] = Widen(c.dtype, query.in.data(), i);
  RopeOperand reference = query;
  reference.dtype = DType::kFloat64;
  reference.in = absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(wide_in.data()),
                                     wide_in.size() * 8);
  reference.out = absl::MakeSpan(reinterpret_cast<uint8_t*>(wide_out.data()),
                                 wide_out.size() * 8);
  RopeCase reference_case = prefix;
  reference_case.cached = false;
  RunRope(reference_case, positions, /*threads=*/1, buffers, reference);
  double max_error = 0.0;
  for (int64_t i = 0; i < elements; ++i) {
    max_error = std::max(max_error, std::fabs(Widen(c.dtype, out.data(), i) - wide_out[i]));
  }
  return max_error;
}

void BM_Rope(benchmark::State& state, RopeCase c, int threads, int64_t max_tokens) {
  Buffers& buffers = SharedBuffers(max_tokens);
  const std::vector<int64_t> positions = BenchPositions(c.tokens, c.positions);
  state.counters["max_abs_err"] = MaxAbsError(c, buffers);
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
  const std::vector<int64_t> positions_storage = BenchPositions(tokens, PositionKind::kContiguous);
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
    case DType::kFloat16: return "fp16";
    default: return "bf16";
  }
}
const char* LayoutTag(RopeLayout layout) {
  return layout == RopeLayout::kHalf ? "half" : "interleaved";
}

const char* PositionTag(PositionKind kind) {
  switch (kind) {
    case PositionKind::kScattered: return "scattered";
    case PositionKind::kDecode: return "decode";
    default: return "contiguous";
  }
}

std::string RopeName(const RopeCase& c, int threads) {
  return absl::StrCat("rope/dtype=", DTypeTag(c.dtype), "/layout=", LayoutTag(c.layout),
                      "/scaling=", c.scaled ? "yarn" : "none", "/pos=", PositionTag(c.positions),
                      "/T=", c.tokens, c.head_major ? "/order=bhtd" : "",
                      c.cached ? "/freq=cached" : "", "/threads=", threads);
}

// Check step: Phasor's outputs for the configurations the peer compares.
void Dump(const std::string& dir) {
  constexpr int64_t kTokens = 4096;
  Buffers& buffers = SharedBuffers(kTokens);
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (RopeLayout layout : {RopeLayout::kHalf, RopeLayout::kInterleaved}) {
      for (bool scaled : {false, true}) {
        const RopeCase c{dtype, layout, scaled, PositionKind::kContiguous, kTokens};
        const std::vector<int64_t> positions =
            BenchPositions(kTokens, PositionKind::kContiguous);
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
      for (DType dtype :
           {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kFloat64}) {
        if (dtype == DType::kFloat64 && tokens > kMaxTokens64) continue;
        benchmark::RegisterBenchmark(
            absl::StrCat("copy/dtype=", DTypeTag(dtype), "/T=", tokens,
                         "/threads=", threads).c_str(),
            BM_Copy, dtype, tokens, threads, max_tokens)
            ->UseRealTime();
        for (RopeLayout layout : {RopeLayout::kHalf, RopeLayout::kInterleaved}) {
          for (bool scaled : {false, true}) {
            const RopeCase c{dtype, layout, scaled, PositionKind::kContiguous, tokens};
            benchmark::RegisterBenchmark(RopeName(c, threads).c_str(), BM_Rope, c,
                                         threads, max_tokens)
                ->UseRealTime();
          }
          // The server's path: the spec's plan from its cache.
          const RopeCase cached{dtype, layout, false, PositionKind::kContiguous, tokens,
                                /*cached=*/true};
          benchmark::RegisterBenchmark(RopeName(cached, threads).c_str(), BM_Rope,
                                       cached, threads, max_tokens)
              ->UseRealTime();
          // One decoding step at position 4096, the server's path.
          if (tokens == 1 && dtype != DType::kFloat64) {
            RopeCase decode = cached;
            decode.positions = PositionKind::kDecode;
            benchmark::RegisterBenchmark(RopeName(decode, threads).c_str(), BM_Rope,
                                         decode, threads, max_tokens)
                ->UseRealTime();
          }
        }
      }
      // Arbitrary (non-consecutive) positions, and the head-major order the
      // server's [B, H, T, D] requests take: fp32 HALF only.
      if (tokens >= 128) {
        const RopeCase head_major{
            .dtype = DType::kFloat32, .tokens = tokens, .cached = true, .head_major = true};
        benchmark::RegisterBenchmark(RopeName(head_major, threads).c_str(), BM_Rope, head_major,
                                     threads, max_tokens)
            ->UseRealTime();
        const RopeCase c{DType::kFloat32, RopeLayout::kHalf, false, PositionKind::kScattered,
                         tokens};
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
  // --phasor_simd=AVX2 (or AVX3, SSE4, EMU128, ...): run the kernels on that
  // Highway target instead of the best one the CPU supports, to compare
  // vector widths in one binary.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--phasor_simd=")) {
      int64_t chosen = 0;
      for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        if (arg == hwy::TargetName(target)) chosen = target;
      }
      if (chosen == 0) {
        std::fprintf(stderr, "--phasor_simd: %s is not a supported target\n", argv[i]);
        return 2;
      }
      hwy::SetSupportedTargetsForTest(chosen);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return phasor::bench::RunBenchmarkMain(argc, argv, phasor::bench::Dump,
                                         phasor::bench::RegisterAll);
}
