#include "core/rope.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/errors.h"
#include "core/exact_angle.h"
#include "core/status_macros.h"

namespace phasor {
namespace {

// On x86-64 the per-chunk kernels below are compiled twice, for x86-64-v3
// (AVX2 + FMA + F16C) and for the baseline, and an ifunc picks one at load
// time, so a portable build still runs 8-wide float and 4-wide double
// arithmetic where the CPU has it. One process always runs one clone, so 1
// and N threads agree bytewise. Builds that already target AVX2
// (PHASOR_NATIVE) and other compilers/architectures get one version.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__AVX2__)
#define PHASOR_TARGET_CLONES \
  __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define PHASOR_TARGET_CLONES
#endif
// Helpers of the cloned kernels must be inlined into them to be compiled for
// the clone's ISA; an out-of-line call would run the baseline code.
#if defined(__GNUC__)
#define PHASOR_KERNEL_INLINE inline __attribute__((always_inline))
#else
#define PHASOR_KERNEL_INLINE inline
#endif

// ---------------------------------------------------------------------------
// Layer 1: the scalar formula, one position's cos(p·θ_i), sin(p·θ_i) in
// double: core/exact_angle.h CosSinRow (exact for integer positions).

// Angle addition to the next position of an arithmetic run p + δ:
//   cos((p+δ)θ) = cos(pθ)·cos(δθ) − sin(pθ)·sin(δθ)
//   sin((p+δ)θ) = sin(pθ)·cos(δθ) + cos(pθ)·sin(δθ)
PHASOR_KERNEL_INLINE void StepTrig(const double* __restrict step_cos,
                                   const double* __restrict step_sin, int64_t half,
                                   double* __restrict cos_row,
                                   double* __restrict sin_row) {
  for (int64_t i = 0; i < half; ++i) {
    const double c = cos_row[i];
    const double s = sin_row[i];
    cos_row[i] = c * step_cos[i] - s * step_sin[i];
    sin_row[i] = s * step_cos[i] + c * step_sin[i];
  }
}

// Times the attention factor (or 1), then rounded once to T (float, or
// double: the product's one rounding).
template <typename T>
PHASOR_KERNEL_INLINE void RoundTrig(const double* __restrict cos_row,
                                    const double* __restrict sin_row, int64_t half,
                                    double scale, T* __restrict cos_out,
                                    T* __restrict sin_out) {
  for (int64_t i = 0; i < half; ++i) {
    cos_out[i] = static_cast<T>(cos_row[i] * scale);
    sin_out[i] = static_cast<T>(sin_row[i] * scale);
  }
}

// ---------------------------------------------------------------------------
// Layer 2: the per-request cos/sin rows. A sin and a cos in double cost about
// 25 ns each, 64 pairs per token at head_dim 128: more than rotating the
// token's 32 heads. When integer positions run in arithmetic progression
// (p_t = p_{t−1} + δ, a prefill or a range), row t follows from row t−1 by the
// angle-addition step above: four multiplies and two adds per pair, carried
// in double. Every kAnchorRows-th row, and every row that breaks the run, is
// re-anchored exactly. Each step adds about three double roundings (2^-53
// relative) and δ·θ_i carries one rounding of |δ|·θ_i·2^-53, so with
// |δ| <= 2^20 the drift after 255 steps stays below 2^-30 (1e-9), far inside
// float32's half ulp and the 2e-6 contract. Anchors sit at fixed token
// indices, so a row's value does not depend on where a ParallelFor chunk
// begins (a chunk starting mid-run replays from the anchor): 1 and N threads
// give identical bytes.
constexpr int64_t kAnchorRows = 256;
constexpr int64_t kMaxLadderStep = int64_t{1} << 20;

// M-RoPE: pairs [begin, begin + count) take their angles from position
// axis `axis` (0 temporal, 1 height, 2 width).
struct AxisRun {
  int64_t begin;
  int64_t count;
  int64_t axis;
};

// The runs of equal axis over the rd/2 pairs (RopeSpec.mrope_section); one
// run of axis 0 without M-RoPE.
// Consecutive sections (Qwen2-VL; HF's apply_multimodal_rotary_pos_emb
// splits cos/sin by mrope_section·2, chunk k from axis k % 3), or
// interleaved (Qwen3-VL; HF's apply_interleaved_mrope: pair i from axis 1
// when i % 3 == 1 and i < 3·s_1, axis 2 when i % 3 == 2 and i < 3·s_2,
// else axis 0).
std::vector<AxisRun> MropeRuns(const RopeSpec& spec, int64_t half) {
  std::vector<AxisRun> runs;
  if (spec.mrope_section.empty()) return {{0, half, 0}};
  auto append = [&](int64_t pair, int64_t axis) {
    if (!runs.empty() && runs.back().axis == axis &&
        runs.back().begin + runs.back().count == pair) {
      ++runs.back().count;
    } else {
      runs.push_back({pair, 1, axis});
    }
  };
  if (spec.mrope_interleaved) {
    for (int64_t i = 0; i < half; ++i) {
      int64_t axis = 0;
      if (i % 3 == 1 && i < 3 * spec.mrope_section[1]) axis = 1;
      if (i % 3 == 2 && i < 3 * spec.mrope_section[2]) axis = 2;
      append(i, axis);
    }
  } else {
    int64_t pair = 0;
    for (int64_t axis = 0; axis < 3; ++axis) {
      for (int64_t j = 0; j < spec.mrope_section[axis] && pair < half; ++j) {
        append(pair++, axis);
      }
    }
  }
  return runs;
}

// Built once per call.
struct TrigPlan {
  std::vector<ExactAngle> angles;  // Per θ_i.
  int64_t half = 0;
  double scale = 1.0;  // Attention factor when folded, else 1.
  Positions positions = Positions::Integers({});
  int64_t num_tokens = 0;  // Rows; positions hold one row per axis.
  std::vector<AxisRun> runs;  // Pairs by position axis (MropeRuns).
  int64_t step = 0;    // δ, or 0: every row exact (real or irregular positions).
  std::vector<double> step_cos;  // cos(δ·θ_i), sin(δ·θ_i).
  std::vector<double> step_sin;
};

// `exact_rows` turns the angle-addition ladder off (double outputs: its
// ~1e-9 drift would be their largest error); M-RoPE rows are always exact.
TrigPlan MakeTrigPlan(const RopeFrequencies& frequencies, double scale,
                      const Positions& positions, std::vector<AxisRun> runs,
                      bool exact_rows) {
  TrigPlan plan;
  plan.half = static_cast<int64_t>(frequencies.inv_freq.size());
  plan.scale = scale;
  plan.positions = positions;
  plan.runs = std::move(runs);
  const bool mrope = plan.runs.size() != 1 || plan.runs[0].axis != 0;
  plan.num_tokens = mrope ? positions.size() / 3 : positions.size();
  plan.angles.reserve(frequencies.inv_freq.size());
  for (double theta : frequencies.inv_freq) plan.angles.emplace_back(theta);
  if (!exact_rows && !mrope && !positions.is_real() &&
      positions.size() >= 2) {
    const absl::Span<const int64_t> p = positions.integers();
    int64_t step = 0;
    if (!__builtin_sub_overflow(p[1], p[0], &step) && step != 0 &&
        step >= -kMaxLadderStep && step <= kMaxLadderStep) {
      plan.step = step;
      plan.step_cos.resize(plan.half);
      plan.step_sin.resize(plan.half);
      CosSinRow(plan.angles.data(), plan.half, step, plan.step_cos.data(),
                  plan.step_sin.data());
    }
  }
  return plan;
}

// Row t's cos and sin in double, from its position alone.
void PositionTrig(const TrigPlan& plan, int64_t t, double* cos_row,
                  double* sin_row) {
  for (const AxisRun& run : plan.runs) {
    const int64_t index = run.axis * plan.num_tokens + t;
    if (plan.positions.is_real()) {
      CosSinRow(plan.angles.data() + run.begin, run.count,
                plan.positions.reals()[index], cos_row + run.begin,
                sin_row + run.begin);
    } else {
      CosSinRow(plan.angles.data() + run.begin, run.count,
                plan.positions.integers()[index], cos_row + run.begin,
                sin_row + run.begin);
    }
  }
}

// Whether row t is reached from row t−1 by one step.
inline bool StepsFromPrevious(const TrigPlan& plan, int64_t t) {
  if (plan.step == 0 || t % kAnchorRows == 0) return false;
  const absl::Span<const int64_t> p = plan.positions.integers();
  int64_t expected = 0;
  return !__builtin_add_overflow(p[t - 1], plan.step, &expected) && expected == p[t];
}

// Walks the rows of one chunk in increasing order. Belongs to one thread.
class TrigWalker final {
 public:
  explicit TrigWalker(const TrigPlan& plan)
      : plan_(plan), cos_(plan.half), sin_(plan.half) {}

  // Writes row t's cos and sin (plan.half values each, float or double).
  template <typename T>
  PHASOR_KERNEL_INLINE void Row(int64_t t, T* cos_out, T* sin_out) {
    const int64_t half = plan_.half;
    if (!StepsFromPrevious(plan_, t)) {
      PositionTrig(plan_, t, cos_.data(), sin_.data());
    } else {
      if (row_ != t - 1) {
        // First row of a chunk in the middle of a run: replay from its anchor.
        int64_t anchor = t - 1;
        while (StepsFromPrevious(plan_, anchor)) --anchor;
        PositionTrig(plan_, anchor, cos_.data(), sin_.data());
        for (int64_t r = anchor + 1; r < t; ++r) Step();
      }
      Step();
    }
    row_ = t;
    RoundTrig(cos_.data(), sin_.data(), half, plan_.scale, cos_out, sin_out);
  }

 private:
  PHASOR_KERNEL_INLINE void Step() {
    StepTrig(plan_.step_cos.data(), plan_.step_sin.data(), plan_.half, cos_.data(),
             sin_.data());
  }

  const TrigPlan& plan_;
  std::vector<double> cos_;  // Row row_ in double, before the factor.
  std::vector<double> sin_;
  int64_t row_ = -2;
};

// ---------------------------------------------------------------------------
// Layer 3: the inner rotate loops, in float32 (float32 and 16-bit storage)
// or double (float64 storage). `__restrict` lets g++ -O3 vectorise without
// runtime alias checks; callers never pass overlapping arrays (in-place
// rotation is staged through a scratch row, see below). The body runs
// kLanes pairs at a time (8 floats = one AVX register, two SSE registers),
// the tail finishes the rest one pair at a time.
constexpr int64_t kLanes = 8;

// HALF: pairs (i, i + half).
template <typename T>
PHASOR_KERNEL_INLINE void RotateHalf(const T* __restrict x, const T* __restrict c,
                                     const T* __restrict s, int64_t half,
                                     T* __restrict out) {
  const T* __restrict x_hi = x + half;
  T* __restrict out_hi = out + half;
  int64_t i = 0;
  for (; i + kLanes <= half; i += kLanes) {
    for (int64_t j = i; j < i + kLanes; ++j) {
      const T lo = x[j];
      const T hi = x_hi[j];
      out[j] = lo * c[j] - hi * s[j];
      out_hi[j] = hi * c[j] + lo * s[j];
    }
  }
  for (; i < half; ++i) {
    const T lo = x[i];
    const T hi = x_hi[i];
    out[i] = lo * c[i] - hi * s[i];
    out_hi[i] = hi * c[i] + lo * s[i];
  }
}

// INTERLEAVED: pairs (2i, 2i + 1).
template <typename T>
PHASOR_KERNEL_INLINE void RotateInterleaved(const T* __restrict x,
                                            const T* __restrict c,
                                            const T* __restrict s, int64_t half,
                                            T* __restrict out) {
  int64_t i = 0;
  for (; i + kLanes <= half; i += kLanes) {
    for (int64_t j = i; j < i + kLanes; ++j) {
      const T even = x[2 * j];
      const T odd = x[2 * j + 1];
      out[2 * j] = even * c[j] - odd * s[j];
      out[2 * j + 1] = odd * c[j] + even * s[j];
    }
  }
  for (; i < half; ++i) {
    const T even = x[2 * i];
    const T odd = x[2 * i + 1];
    out[2 * i] = even * c[i] - odd * s[i];
    out[2 * i + 1] = odd * c[i] + even * s[i];
  }
}

// Every head of one token, heads `stride` elements apart in both x and out
// (head_dim for [T, H, D] rows, T·head_dim for [B, H, T, D]), rotary part
// only. The rotary widths models use (rd = 32, 64, 96, 128, 256) get their
// own fully unrolled copies (kHalf = rd/2; 0 = any width): with the trip
// count known, a head's loads are all issued back to back, which keeps
// enough cache misses in flight for RoPE over [T, 32, 128] to run at
// memory-copy speed, where the generic loop reaches about 0.6 of it.
template <int64_t kHalf, typename T>
PHASOR_KERNEL_INLINE void RotateHeadsFixed(RopeLayout layout, const T* __restrict x,
                                           const T* __restrict c,
                                           const T* __restrict s, int64_t half,
                                           int64_t heads, int64_t stride,
                                           T* __restrict out) {
  const int64_t width = kHalf > 0 ? kHalf : half;
  if (layout == RopeLayout::kHalf) {
    for (int64_t h = 0; h < heads; ++h) {
      RotateHalf(x + h * stride, c, s, width, out + h * stride);
    }
  } else {
    for (int64_t h = 0; h < heads; ++h) {
      RotateInterleaved(x + h * stride, c, s, width, out + h * stride);
    }
  }
}

template <typename T>
PHASOR_KERNEL_INLINE void RotateHeads(RopeLayout layout, const T* __restrict x,
                                      const T* __restrict c, const T* __restrict s,
                                      int64_t half, int64_t heads, int64_t stride,
                                      T* __restrict out) {
  switch (half) {
    case 16:
      return RotateHeadsFixed<16>(layout, x, c, s, half, heads, stride, out);
    case 32:
      return RotateHeadsFixed<32>(layout, x, c, s, half, heads, stride, out);
    case 48:
      return RotateHeadsFixed<48>(layout, x, c, s, half, heads, stride, out);
    case 64:
      return RotateHeadsFixed<64>(layout, x, c, s, half, heads, stride, out);
    case 128:
      return RotateHeadsFixed<128>(layout, x, c, s, half, heads, stride, out);
    default:
      return RotateHeadsFixed<0>(layout, x, c, s, half, heads, stride, out);
  }
}

// Storage formats. Arithmetic is float32 for float32 and the 16-bit formats
// (widened on load and narrowed, round to nearest even, once on store), and
// double for float64 (with double cos/sin).
struct Float32Storage {
  using Elem = float;
  using Math = float;
  static constexpr bool kNeedsWidening = false;
};
struct Float64Storage {
  using Elem = double;
  using Math = double;
  static constexpr bool kNeedsWidening = false;
};
struct Float16Storage {
  using Elem = uint16_t;
  using Math = float;
  static constexpr bool kNeedsWidening = true;
  static float Widen(uint16_t bits) { return HalfToFloat(bits); }
  static uint16_t Narrow(float value) { return FloatToHalf(value); }
};
struct BFloat16Storage {
  using Elem = uint16_t;
  using Math = float;
  static constexpr bool kNeedsWidening = true;
  // BFloat16ToFloat / FloatToBFloat16 (core/dtype.h) spelled branch-free so
  // the rotate loops vectorise; same bits for every input, NaN included.
  PHASOR_KERNEL_INLINE static float Widen(uint16_t bits) {
    const uint32_t wide = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &wide, sizeof(value));
    return value;
  }
  PHASOR_KERNEL_INLINE static uint16_t Narrow(float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (bits >> 16) | 0x0040u;
    return static_cast<uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan
                                                                     : rounded);
  }
};

// The 16-bit rotate loops: widen, rotate in float32 and narrow in one pass
// per pair, so a 16-bit head never makes a float32 round trip through memory.
template <class Storage>
PHASOR_KERNEL_INLINE void RotateHalf16(const uint16_t* __restrict x,
                                       const float* __restrict c,
                                       const float* __restrict s, int64_t half,
                                       uint16_t* __restrict out) {
  for (int64_t j = 0; j < half; ++j) {
    const float lo = Storage::Widen(x[j]);
    const float hi = Storage::Widen(x[j + half]);
    out[j] = Storage::Narrow(lo * c[j] - hi * s[j]);
    out[j + half] = Storage::Narrow(hi * c[j] + lo * s[j]);
  }
}

template <class Storage>
PHASOR_KERNEL_INLINE void RotateInterleaved16(const uint16_t* __restrict x,
                                              const float* __restrict c,
                                              const float* __restrict s,
                                              int64_t half, uint16_t* __restrict out) {
  for (int64_t j = 0; j < half; ++j) {
    const float even = Storage::Widen(x[2 * j]);
    const float odd = Storage::Widen(x[2 * j + 1]);
    out[2 * j] = Storage::Narrow(even * c[j] - odd * s[j]);
    out[2 * j + 1] = Storage::Narrow(odd * c[j] + even * s[j]);
  }
}

// One 16-bit head, with the trip count fixed for the common widths as for
// float32 (RotateHeads).
template <class Storage, int64_t kHalf>
PHASOR_KERNEL_INLINE void RotateHead16Fixed(RopeLayout layout,
                                            const uint16_t* __restrict x,
                                            const float* __restrict c,
                                            const float* __restrict s, int64_t half,
                                            uint16_t* __restrict out) {
  const int64_t width = kHalf > 0 ? kHalf : half;
  if (layout == RopeLayout::kHalf) {
    RotateHalf16<Storage>(x, c, s, width, out);
  } else {
    RotateInterleaved16<Storage>(x, c, s, width, out);
  }
}

template <class Storage>
PHASOR_KERNEL_INLINE void RotateHead16(RopeLayout layout, const uint16_t* __restrict x,
                                       const float* __restrict c,
                                       const float* __restrict s, int64_t half,
                                       uint16_t* __restrict out) {
  switch (half) {
    case 16:
      return RotateHead16Fixed<Storage, 16>(layout, x, c, s, half, out);
    case 32:
      return RotateHead16Fixed<Storage, 32>(layout, x, c, s, half, out);
    case 48:
      return RotateHead16Fixed<Storage, 48>(layout, x, c, s, half, out);
    case 64:
      return RotateHead16Fixed<Storage, 64>(layout, x, c, s, half, out);
    case 128:
      return RotateHead16Fixed<Storage, 128>(layout, x, c, s, half, out);
    default:
      return RotateHead16Fixed<Storage, 0>(layout, x, c, s, half, out);
  }
}

// Per-chunk scratch, allocated once per ParallelFor chunk, never per element.
template <class Storage>
struct ChunkScratch {
  using Math = typename Storage::Math;
  ChunkScratch(int64_t rotary_dim, int64_t row_elements)
      : cos(static_cast<size_t>(rotary_dim / 2)),
        sin(static_cast<size_t>(rotary_dim / 2)),
        head_in(static_cast<size_t>(rotary_dim)),
        head_out(static_cast<size_t>(rotary_dim)),
        token_in(Storage::kNeedsWidening ? 0 : static_cast<size_t>(row_elements)),
        staged(Storage::kNeedsWidening ? 0 : static_cast<size_t>(row_elements)) {}
  std::vector<Math> cos;
  std::vector<Math> sin;
  std::vector<uint16_t> head_in;  // A 16-bit head's rotary channels, copied.
  std::vector<uint16_t> head_out;
  std::vector<Math> token_in;     // A token's heads gathered into one row.
  std::vector<Math> staged;       // A token row, in place or misaligned.
};

bool AlignedFor(const void* pointer, size_t alignment) {
  return reinterpret_cast<uintptr_t>(pointer) % alignment == 0;
}

// Where token `token`'s heads are, in elements: head h starts at
// first + h·stride. [T, H, D] and [B, T, H, D]: one contiguous row per
// token. [B, H, T, D] (seq_len > 0): token b·T + t's head h is row
// (b·H + h)·T + t.
struct TokenHeads {
  int64_t first;
  int64_t stride;
};
PHASOR_KERNEL_INLINE TokenHeads HeadsOf(const RopeOperand& operand, int64_t token) {
  const int64_t heads = operand.num_heads;
  const int64_t head_dim = operand.head_dim;
  if (operand.seq_len == 0) return {token * heads * head_dim, head_dim};
  const int64_t seq = operand.seq_len;
  const int64_t b = token / seq;
  const int64_t t = token % seq;
  return {(b * heads * seq + t) * head_dim, seq * head_dim};
}

// Rotates every head of token `token` of `operand` with the token's cos/sin
// in `scratch`. Rows are addressed as bytes and moved with memcpy where
// alignment is not known, so no misaligned typed access can happen. The
// arithmetic is the same on every path, so in-place, out-of-place and
// misaligned outputs, and every tensor layout, are bytewise equal.
//
// Plain stores: non-temporal (streaming) stores were tried for large outputs
// and measured slower on AMD Zen 5 than these (the fixed-width loops already
// reach memory-copy speed), and the result is usually read again soon.
template <class Storage>
PHASOR_KERNEL_INLINE void RotateToken(const RopeOperand& operand, int64_t token,
                                      RopeLayout layout, int64_t rotary_dim,
                                      ChunkScratch<Storage>& scratch) {
  using Elem = typename Storage::Elem;
  using Math = typename Storage::Math;
  constexpr size_t kElemBytes = sizeof(Elem);
  const int64_t half = rotary_dim / 2;
  const int64_t head_dim = operand.head_dim;
  const int64_t heads = operand.num_heads;
  const size_t head_bytes = static_cast<size_t>(head_dim) * kElemBytes;
  const size_t rotary_bytes = static_cast<size_t>(rotary_dim) * kElemBytes;
  const TokenHeads where = HeadsOf(operand, token);
  const bool contiguous = where.stride == head_dim;
  const size_t stride_bytes = static_cast<size_t>(where.stride) * kElemBytes;
  const uint8_t* src = operand.in.data() + static_cast<size_t>(where.first) * kElemBytes;
  uint8_t* dst = operand.out.data() + static_cast<size_t>(where.first) * kElemBytes;
  const bool in_place = operand.in.data() == operand.out.data();
  const Math* c = scratch.cos.data();
  const Math* s = scratch.sin.data();

  if constexpr (!Storage::kNeedsWidening) {
    const bool aligned_src = AlignedFor(operand.in.data(), kElemBytes);
    if (!in_place && aligned_src && AlignedFor(operand.out.data(), kElemBytes)) {
      // Straight from input to output.
      RotateHeads(layout, reinterpret_cast<const Math*>(src), c, s, half, heads,
                  where.stride, reinterpret_cast<Math*>(dst));
      if (head_dim > rotary_dim) {
        for (int64_t head = 0; head < heads; ++head) {
          const size_t offset = static_cast<size_t>(head) * stride_bytes;
          std::memcpy(dst + offset + rotary_bytes, src + offset + rotary_bytes,
                      head_bytes - rotary_bytes);
        }
      }
      return;
    }
    // In place or misaligned: the token's heads are gathered into one row
    // (or read where they are, when contiguous and aligned), rotated into
    // scratch, then written back.
    const Math* x = reinterpret_cast<const Math*>(src);
    if (!(aligned_src && contiguous)) {
      for (int64_t head = 0; head < heads; ++head) {
        std::memcpy(scratch.token_in.data() + head * head_dim,
                    src + static_cast<size_t>(head) * stride_bytes, head_bytes);
      }
      x = scratch.token_in.data();
    }
    Math* staged = scratch.staged.data();
    RotateHeads(layout, x, c, s, half, heads, head_dim, staged);
    if (head_dim > rotary_dim) {
      for (int64_t head = 0; head < heads; ++head) {
        const int64_t offset = head * head_dim + rotary_dim;
        std::memcpy(staged + offset, x + offset, head_bytes - rotary_bytes);
      }
    }
    if (contiguous) {
      std::memcpy(dst, staged, static_cast<size_t>(heads) * head_bytes);
    } else {
      for (int64_t head = 0; head < heads; ++head) {
        std::memcpy(dst + static_cast<size_t>(head) * stride_bytes,
                    staged + head * head_dim, head_bytes);
      }
    }
  } else {
    // Head by head. A head rotated in place, or not 2-byte aligned, is read
    // from a copy (and written through one), so every path runs the same
    // arithmetic and gives the same bytes.
    const bool aligned = AlignedFor(operand.in.data(), kElemBytes) &&
                         AlignedFor(operand.out.data(), kElemBytes);
    for (int64_t head = 0; head < heads; ++head) {
      const size_t offset = static_cast<size_t>(head) * stride_bytes;
      const uint16_t* x = reinterpret_cast<const uint16_t*>(src + offset);
      if (in_place || !aligned) {
        std::memcpy(scratch.head_in.data(), src + offset, rotary_bytes);
        x = scratch.head_in.data();
      }
      if (aligned) {
        RotateHead16<Storage>(layout, x, c, s, half,
                              reinterpret_cast<uint16_t*>(dst + offset));
      } else {
        RotateHead16<Storage>(layout, x, c, s, half, scratch.head_out.data());
        std::memcpy(dst + offset, scratch.head_out.data(), rotary_bytes);
      }
      if (!in_place && head_dim > rotary_dim) {
        std::memcpy(dst + offset + rotary_bytes, src + offset + rotary_bytes,
                    head_bytes - rotary_bytes);
      }
    }
  }
}

// What every chunk of one ApplyRope call shares.
struct ApplyJob {
  const TrigPlan* trig;
  const RopeOperand* query;
  const RopeOperand* key;  // May be null.
  RopeLayout layout;
  int64_t rotary_dim;
};

// Layer 4 body: tokens [begin, end), one cos/sin row per token shared by all
// query and key heads.
template <class Storage>
PHASOR_TARGET_CLONES void RotateChunk(const ApplyJob& job, int64_t begin,
                                      int64_t end) {
  const int64_t row_elements =
      std::max(job.query->num_heads, job.key != nullptr ? job.key->num_heads : 0) *
      job.query->head_dim;
  ChunkScratch<Storage> scratch(job.rotary_dim, row_elements);
  TrigWalker trig(*job.trig);
  for (int64_t token = begin; token < end; ++token) {
    trig.Row(token, scratch.cos.data(), scratch.sin.data());
    RotateToken<Storage>(*job.query, token, job.layout, job.rotary_dim, scratch);
    if (job.key != nullptr) {
      RotateToken<Storage>(*job.key, token, job.layout, job.rotary_dim, scratch);
    }
  }
}

template <typename T>
PHASOR_TARGET_CLONES void TableChunk(const TrigPlan& plan, int64_t begin,
                                     int64_t end, T* cos, T* sin) {
  TrigWalker trig(plan);
  for (int64_t n = begin; n < end; ++n) {
    trig.Row(n, cos + n * plan.half, sin + n * plan.half);
  }
}

// Layer 4: ParallelFor over tokens, one writer per token.
template <class Storage>
void ApplyRopeTyped(const RopeSpec& spec, const RopeFrequencies& frequencies,
                    const Positions& positions, const ExecutionOptions& options,
                    const RopeOperand& query, const RopeOperand* key) {
  const double scale =
      spec.fold_attention_factor ? frequencies.attention_factor : 1.0;
  const int64_t rotary_dim = RopeRotaryDim(spec, query.head_dim);
  const TrigPlan trig =
      MakeTrigPlan(frequencies, scale, positions, MropeRuns(spec, rotary_dim / 2),
                   /*exact_rows=*/std::is_same_v<typename Storage::Elem, double>);
  const ApplyJob job{&trig, &query, key, spec.layout, rotary_dim};
  const int64_t heads = query.num_heads + (key != nullptr ? key->num_heads : 0);
  ParallelFor(options, query.num_tokens, heads * query.head_dim,
              [&](int64_t begin, int64_t end) {
                RotateChunk<Storage>(job, begin, end);
              });
}

template <typename T>
void ComputeTables(const RopeSpec& spec, const RopeFrequencies& frequencies,
                   const Positions& positions, const ExecutionOptions& options,
                   absl::Span<T> cos, absl::Span<T> sin) {
  const int64_t half = static_cast<int64_t>(frequencies.inv_freq.size());
  const double scale =
      spec.fold_attention_factor ? frequencies.attention_factor : 1.0;
  // The same rows ApplyRope rotates with, bit for bit.
  const TrigPlan plan = MakeTrigPlan(frequencies, scale, positions,
                                     MropeRuns(spec, half),
                                     /*exact_rows=*/std::is_same_v<T, double>);
  // REQUIRES: output spans sized [tokens, rd/2].
  assert(static_cast<int64_t>(cos.size()) == plan.num_tokens * half);
  assert(static_cast<int64_t>(sin.size()) == plan.num_tokens * half);
  ParallelFor(options, plan.num_tokens, 2 * half, [&](int64_t begin, int64_t end) {
    TableChunk(plan, begin, end, cos.data(), sin.data());
  });
}

// Shortest text that reads back as the same double ("0.9", not
// "0.90000000000000002"), so messages show what the caller sent.
std::string Fmt(double value) {
  char buffer[32];
  const std::to_chars_result result =
      std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

bool IsRopeStorage(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16 || dtype == DType::kFloat64;
}

absl::Status ValidateOperand(const RopeOperand& operand,
                             absl::string_view field) {
  if (!IsRopeStorage(operand.dtype)) {
    return InvalidField(absl::StrCat(field, ".dtype"),
                        absl::StrCat("must be float32, float16, bfloat16 or float64, got ",
                                     DTypeName(operand.dtype)));
  }
  if (operand.num_tokens < 0 || operand.num_heads < 0 || operand.head_dim <= 0) {
    return InvalidField(
        absl::StrCat(field, ".shape"),
        absl::StrCat("must be [tokens, heads, head_dim] with head_dim > 0, got [",
                     operand.num_tokens, ", ", operand.num_heads, ", ",
                     operand.head_dim, "]"));
  }
  const int64_t bytes = RopeOperandBytes(operand.dtype, operand.num_tokens,
                                         operand.num_heads, operand.head_dim);
  if (bytes < 0) {
    return InvalidField(absl::StrCat(field, ".shape"),
                        absl::StrCat("element count overflows int64: [",
                                     operand.num_tokens, ", ", operand.num_heads,
                                     ", ", operand.head_dim, "]"));
  }
  if (operand.seq_len < 0 ||
      (operand.seq_len > 0 && operand.num_tokens % operand.seq_len != 0)) {
    return InvalidField(absl::StrCat(field, ".shape"),
                        absl::StrCat("[B, H, T, D] needs tokens (", operand.num_tokens,
                                     ") to be a multiple of T (", operand.seq_len, ")"));
  }
  if (static_cast<int64_t>(operand.in.size()) != bytes) {
    return InvalidField(
        absl::StrCat(field, ".data"),
        absl::StrCat("must hold ", bytes, " bytes for shape [",
                     operand.num_tokens, ", ", operand.num_heads, ", ",
                     operand.head_dim, "] ", DTypeName(operand.dtype), ", got ",
                     operand.in.size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRopeSpec(const RopeSpec& spec, int64_t head_dim,
                              absl::string_view field_prefix) {
  const std::string rotary_field = absl::StrCat(field_prefix, ".rotary_dim");
  if (spec.rotary_dim < 0) {
    return InvalidField(rotary_field,
                        absl::StrCat("must be >= 0 (0 means head_dim), got ",
                                     spec.rotary_dim));
  }
  const int64_t rotary_dim = RopeRotaryDim(spec, head_dim);
  if (rotary_dim <= 0) {
    return InvalidField(rotary_field,
                        absl::StrCat("must be > 0 (head_dim is ", head_dim,
                                     "), got ", rotary_dim));
  }
  if (rotary_dim % 2 != 0 || rotary_dim > head_dim) {
    return InvalidField(
        rotary_field,
        absl::StrCat("must be even and <= head_dim ", head_dim, ", got ",
                     rotary_dim, spec.rotary_dim == 0 ? " (0 means head_dim)" : ""));
  }
  if (!std::isfinite(spec.base) || spec.base <= 0.0) {
    return InvalidField(absl::StrCat(field_prefix, ".base"),
                        absl::StrCat("must be finite and > 0, got ", Fmt(spec.base)));
  }
  if (!spec.mrope_section.empty()) {
    const std::string field = absl::StrCat(field_prefix, ".mrope_section");
    if (spec.mrope_section.size() != 3) {
      return InvalidField(field, absl::StrCat("must have 3 sizes (temporal, height, "
                                              "width), got ",
                                              spec.mrope_section.size()));
    }
    int64_t sum = 0;
    for (size_t k = 0; k < 3; ++k) {
      const int64_t size = spec.mrope_section[k];
      if (size < 0 || size > rotary_dim / 2) {
        return InvalidField(absl::StrCat(field, "[", k, "]"),
                            absl::StrCat("must be in [0, rotary_dim/2 = ",
                                         rotary_dim / 2, "], got ", size));
      }
      sum += size;
    }
    // HF splits cos/sin into chunks of mrope_section·2, which must cover the
    // head exactly; the interleaved assignment reads the sizes as bounds only.
    if (!spec.mrope_interleaved && sum != rotary_dim / 2) {
      return InvalidField(field, absl::StrCat("sizes must sum to rotary_dim/2 = ",
                                              rotary_dim / 2, ", got ", sum));
    }
  } else if (spec.mrope_interleaved) {
    return InvalidField(absl::StrCat(field_prefix, ".mrope_interleaved"),
                        "needs mrope_section");
  }
  return ValidateRopeScaling(spec.scaling, spec.base, rotary_dim, field_prefix);
}

int64_t DefaultRopeSeqLen(const Positions& positions) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t seq_len = 1;
  if (positions.is_real()) {
    double max_position = -std::numeric_limits<double>::infinity();
    for (double p : positions.reals()) max_position = std::max(max_position, p);
    // 2^62 keeps the cast exact and far above any context length.
    const double length = std::floor(max_position) + 1.0;
    if (length >= 0x1p62) return int64_t{1} << 62;
    if (length > 1.0) seq_len = static_cast<int64_t>(length);
  } else {
    for (int64_t p : positions.integers()) {
      const int64_t length = p == kMax ? kMax : p + 1;
      seq_len = std::max(seq_len, length);
    }
  }
  return seq_len;
}

absl::StatusOr<RopeFrequencies> ComputeRopeFrequencies(
    const RopeSpec& spec, int64_t head_dim, int64_t seq_len,
    absl::string_view field_prefix) {
  PHASOR_RETURN_IF_ERROR(ValidateRopeSpec(spec, head_dim, field_prefix));
  if (seq_len < 1) {
    return InvalidField("seq_len", absl::StrCat("must be >= 1, got ", seq_len));
  }
  const int64_t rotary_dim = RopeRotaryDim(spec, head_dim);
  RopeFrequencies frequencies =
      ScaledRopeFrequencies(spec.scaling, spec.base, rotary_dim, seq_len);
  // Valid fields can still combine into an unusable result (e.g. base 1e300
  // with a tiny longrope factor); refuse it rather than emit NaN.
  for (size_t i = 0; i < frequencies.inv_freq.size(); ++i) {
    if (!std::isfinite(frequencies.inv_freq[i]) || frequencies.inv_freq[i] < 0.0) {
      return InvalidField(
          field_prefix,
          absl::StrCat("scaled inverse frequency ", i, " is not a finite "
                       "non-negative number (", Fmt(frequencies.inv_freq[i]),
                       "); check base and scaling"));
    }
  }
  if (!std::isfinite(frequencies.attention_factor) ||
      frequencies.attention_factor <= 0.0) {
    return InvalidField(
        absl::StrCat(field_prefix, ".scaling"),
        absl::StrCat("attention factor must be finite and > 0, got ",
                     Fmt(frequencies.attention_factor)));
  }
  return frequencies;
}

absl::Status ValidateRopePositions(const Positions& positions,
                                   const RopeFrequencies& frequencies,
                                   absl::string_view field) {
  double max_abs_position = 0.0;
  if (positions.is_real()) {
    const absl::Span<const double> reals = positions.reals();
    for (size_t i = 0; i < reals.size(); ++i) {
      if (!std::isfinite(reals[i])) {
        return InvalidField(absl::StrCat(field, "[", i, "]"),
                            absl::StrCat("must be finite, got ", Fmt(reals[i])));
      }
      max_abs_position = std::max(max_abs_position, std::fabs(reals[i]));
    }
  } else {
    for (int64_t p : positions.integers()) {
      max_abs_position =
          std::max(max_abs_position, std::fabs(static_cast<double>(p)));
    }
  }
  double max_inv_freq = 0.0;
  for (double theta : frequencies.inv_freq) max_inv_freq = std::max(max_inv_freq, theta);
  if (!std::isfinite(max_abs_position * max_inv_freq)) {
    return InvalidField(
        field, absl::StrCat("angle |position|·θ overflows: max |position| ",
                            Fmt(max_abs_position), " times max θ ",
                            Fmt(max_inv_freq)));
  }
  return absl::OkStatus();
}

void ComputeRopeTables(const RopeFrequencies& frequencies,
                       bool fold_attention_factor, const Positions& positions,
                       const ExecutionOptions& options, absl::Span<float> cos,
                       absl::Span<float> sin) {
  RopeSpec spec;
  spec.fold_attention_factor = fold_attention_factor;
  ComputeTables(spec, frequencies, positions, options, cos, sin);
}

void ComputeRopeTables(const RopeSpec& spec, const RopeFrequencies& frequencies,
                       const Positions& positions, const ExecutionOptions& options,
                       absl::Span<float> cos, absl::Span<float> sin) {
  ComputeTables(spec, frequencies, positions, options, cos, sin);
}

void ComputeRopeTables(const RopeSpec& spec, const RopeFrequencies& frequencies,
                       const Positions& positions, const ExecutionOptions& options,
                       absl::Span<double> cos, absl::Span<double> sin) {
  ComputeTables(spec, frequencies, positions, options, cos, sin);
}

int64_t RopeOperandBytes(DType dtype, int64_t num_tokens, int64_t num_heads,
                         int64_t head_dim) {
  if (num_tokens < 0 || num_heads < 0 || head_dim < 0) return -1;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t total = static_cast<int64_t>(DTypeSize(dtype));
  for (int64_t extent : {num_tokens, num_heads, head_dim}) {
    if (extent != 0 && total > kMax / extent) return -1;
    total *= extent;
  }
  return total;
}

absl::Status ValidateRopeOperands(const RopeOperand& query,
                                  const RopeOperand* key,
                                  int64_t num_positions) {
  PHASOR_RETURN_IF_ERROR(ValidateOperand(query, "query"));
  if (query.num_tokens != num_positions) {
    return InvalidField("positions",
                        absl::StrCat("must have one position per query token (",
                                     query.num_tokens, "), got ", num_positions));
  }
  if (key == nullptr) return absl::OkStatus();
  if (key->dtype != query.dtype) {
    return InvalidField("key.dtype",
                        absl::StrCat("must equal query.dtype ",
                                     DTypeName(query.dtype), ", got ",
                                     DTypeName(key->dtype)));
  }
  if (key->num_tokens != query.num_tokens || key->head_dim != query.head_dim ||
      key->seq_len != query.seq_len) {
    return InvalidField(
        "key.shape",
        absl::StrCat("must be [", query.num_tokens, ", heads, ", query.head_dim,
                     "] to match query, got [", key->num_tokens, ", ",
                     key->num_heads, ", ", key->head_dim, "]"));
  }
  return ValidateOperand(*key, "key");
}

void ApplyRope(const RopeSpec& spec, const RopeFrequencies& frequencies,
               const Positions& positions, const ExecutionOptions& options,
               const RopeOperand& query, const RopeOperand* key) {
  // REQUIRES: see rope.h; the spans were validated against the shapes.
  assert(static_cast<int64_t>(frequencies.inv_freq.size()) ==
         RopeTableWidth(spec, query.head_dim));
  assert(positions.size() == query.num_tokens * RopePositionAxes(spec));
  assert(query.out.size() == query.in.size());
  assert(key == nullptr || key->out.size() == key->in.size());
  switch (query.dtype) {
    case DType::kFloat32:
      ApplyRopeTyped<Float32Storage>(spec, frequencies, positions, options,
                                     query, key);
      return;
    case DType::kFloat16:
      ApplyRopeTyped<Float16Storage>(spec, frequencies, positions, options,
                                     query, key);
      return;
    case DType::kBFloat16:
      ApplyRopeTyped<BFloat16Storage>(spec, frequencies, positions, options,
                                      query, key);
      return;
    case DType::kFloat64:
      ApplyRopeTyped<Float64Storage>(spec, frequencies, positions, options,
                                     query, key);
      return;
    default:
      assert(false && "ValidateRopeOperands rejects other dtypes");
      return;
  }
}

}  // namespace phasor
