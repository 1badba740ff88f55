#include "core/rope.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "core/errors.h"
#include "core/exact_angle.h"
#include "core/status_macros.h"

// The per-chunk kernels are compiled once per SIMD target Highway finds
// (hwy/examples/skeleton.cc; core/continuous_time.cc does the same):
// foreach_target.h re-includes this file with HWY_TARGET set to each, and
// HWY_DYNAMIC_DISPATCH picks the best one the CPU runs (AVX-512, AVX2 + FMA
// + F16C, SSE4, ..., a portable baseline). One process always runs one
// target, so 1 and N threads agree bytewise.
//
// Arithmetic is spelled out: this file is compiled with -ffp-contract=off
// (core/CMakeLists.txt) and every multiply-add is an explicit hn::MulAdd or
// hn::MulSub, fused on targets with FMA and a multiply then an add on the
// others. Each rotation and angle-addition step is "first product fused,
// second rounded", a·b − c·d = fma(a, b, −(c·d)), the contraction g++ chose
// for the earlier auto-vectorised loops, so outputs keep their bytes.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/rope.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"

// Types and scalar helpers shared by every target, defined once.
#ifndef PHASOR_CORE_ROPE_SHARED_
#define PHASOR_CORE_ROPE_SHARED_
namespace phasor {
namespace {

// ---------------------------------------------------------------------------
// Layer 1: the scalar formula, one position's cos(p·θ_i), sin(p·θ_i) in
// double: core/exact_angle.h CosSinRow (exact for integer positions).
//
// Layer 2: the per-request cos/sin rows. A sin and a cos in double cost about
// 25 ns each, 64 pairs per token at head_dim 128: more than rotating the
// token's 32 heads. When integer positions run in arithmetic progression
// (p_t = p_{t−1} + δ, a prefill or a range), row t follows from row t−1 by
// angle addition:
//   cos((p+δ)θ) = cos(pθ)·cos(δθ) − sin(pθ)·sin(δθ)
//   sin((p+δ)θ) = sin(pθ)·cos(δθ) + cos(pθ)·sin(δθ)
// four multiplies and two adds per pair, carried in double. Every
// kAnchorRows-th row, and every row that breaks the run, is re-anchored
// exactly. Each step adds about three double roundings (2^-53 relative) and
// δ·θ_i carries one rounding of |δ|·θ_i·2^-53, so with |δ| <= 2^20 the drift
// after 255 steps stays below 2^-30 (1e-9), far inside float32's half ulp and
// the 2e-6 contract. Anchors sit at fixed token indices, so a row's value does
// not depend on where a ParallelFor chunk begins (a chunk starting mid-run
// replays from the anchor): 1 and N threads give identical bytes.
constexpr int64_t kAnchorRows = 256;
constexpr int64_t kMaxLadderStep = int64_t{1} << 20;

// Per-token rows up to this many pairs live on the stack (rd <= 512), so a
// single-token call allocates nothing.
constexpr size_t kInlinePairs = 256;

// `n` uninitialised values (every user writes them before reading): on the
// stack up to kInline, else on the heap. Not zero-filled: at one token the
// memsets of value-initialised rows cost a quarter of the call.
template <typename T, size_t kInline>
class Scratch final {
 public:
  explicit Scratch(size_t n) {
    if (n > kInline) {
      heap_.reset(new T[n]);
      data_ = heap_.get();
    }
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* data() { return data_; }
  T& operator[](size_t i) { return data_[i]; }

 private:
  T inline_[kInline];
  std::unique_ptr<T[]> heap_;
  T* data_ = inline_;
};

// M-RoPE: pairs [begin, begin + count) take their angles from position
// axis `axis` (0 temporal, 1 height, 2 width).
struct AxisRun {
  int64_t begin;
  int64_t count;
  int64_t axis;
};
using AxisRuns = absl::InlinedVector<AxisRun, 3>;

// The runs of equal axis over the rd/2 pairs (RopeSpec.mrope_section); one
// run of axis 0 without M-RoPE.
// Consecutive sections (Qwen2-VL; HF's apply_multimodal_rotary_pos_emb
// splits cos/sin by mrope_section·2, chunk k from axis k % 3), or
// interleaved (Qwen3-VL; HF's apply_interleaved_mrope: pair i from axis 1
// when i % 3 == 1 and i < 3·s_1, axis 2 when i % 3 == 2 and i < 3·s_2,
// else axis 0).
AxisRuns MropeRuns(const RopeSpec& spec, int64_t half) {
  AxisRuns runs;
  if (spec.mrope_section.empty()) {
    runs.push_back({0, half, 0});
    return runs;
  }
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
  const ExactAngle* angles = nullptr;  // Per θ_i (a RopePlan's).
  int64_t half = 0;
  double scale = 1.0;  // Attention factor when folded, else 1.
  Positions positions = Positions::Integers({});
  int64_t num_tokens = 0;  // Rows; positions hold one row per axis.
  AxisRuns runs;       // Pairs by position axis (MropeRuns).
  int64_t step = 0;    // δ, or 0: every row exact (real or irregular positions).
  std::vector<double> step_cos;  // cos(δ·θ_i), sin(δ·θ_i).
  std::vector<double> step_sin;
};

// `exact_rows` turns the angle-addition ladder off (double outputs: its
// ~1e-9 drift would be their largest error); M-RoPE rows are always exact.
// `axes` is RopePositionAxes(spec): with M-RoPE, positions hold 3 rows even
// when every pair takes axis 0.
TrigPlan MakeTrigPlan(const RopePlan& rope, double scale, const Positions& positions,
                      AxisRuns runs, int64_t axes, bool exact_rows) {
  TrigPlan plan;
  plan.angles = rope.angles.data();
  plan.half = static_cast<int64_t>(rope.angles.size());
  plan.scale = scale;
  plan.positions = positions;
  plan.runs = std::move(runs);
  plan.num_tokens = positions.size() / axes;
  if (!exact_rows && axes == 1 && !positions.is_real() && positions.size() >= 2) {
    const absl::Span<const int64_t> p = positions.integers();
    int64_t step = 0;
    if (!__builtin_sub_overflow(p[1], p[0], &step) && step != 0 &&
        step >= -kMaxLadderStep && step <= kMaxLadderStep) {
      plan.step = step;
      plan.step_cos.resize(plan.half);
      plan.step_sin.resize(plan.half);
      CosSinRow(plan.angles, plan.half, step, plan.step_cos.data(),
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
      CosSinRow(plan.angles + run.begin, run.count, plan.positions.reals()[index],
                cos_row + run.begin, sin_row + run.begin);
    } else {
      CosSinRow(plan.angles + run.begin, run.count,
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

// Where token `token`'s heads are, in elements: head h starts at
// first + h·stride. [T, H, D] and [B, T, H, D]: one contiguous row per
// token. [B, H, T, D] (seq_len > 0): token b·T + t's head h is row
// (b·H + h)·T + t.
struct TokenHeads {
  int64_t first;
  int64_t stride;
};
inline TokenHeads HeadsOf(const RopeOperand& operand, int64_t token) {
  const int64_t heads = operand.num_heads;
  const int64_t head_dim = operand.head_dim;
  if (operand.seq_len == 0) return {token * heads * head_dim, head_dim};
  const int64_t seq = operand.seq_len;
  const int64_t b = token / seq;
  const int64_t t = token % seq;
  return {(b * heads * seq + t) * head_dim, seq * head_dim};
}

// What every chunk of one ApplyRope call shares.
struct ApplyJob {
  const TrigPlan* trig;
  const RopeOperand* query;
  const RopeOperand* key;  // May be null.
  RopeLayout layout;
  int64_t rotary_dim;
  bool stream;  // Non-temporal stores where aligned (kStreamBytes).
};

// Outputs of at least this many bytes (query and key together) are written
// with non-temporal stores where a vector is aligned: they cannot stay in
// cache for their reader anyway, and plain stores first read every output
// line (read-for-ownership), a third more memory traffic than a copy that
// streams (glibc's memcpy does above ~3/4 of the last-level cache). On a
// 2-core AMD EPYC (32 MiB L3, docs/BENCHMARKS.md) fp32 [4096, 32, 128]
// went from 0.69x to 0.95-1.0x of memcpy; below the cache's size streaming
// was slower ([128, 32, 128]: 1.05x the time).
constexpr size_t kStreamBytes = size_t{32} << 20;

}  // namespace
}  // namespace phasor
#endif  // PHASOR_CORE_ROPE_SHARED_

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// A vector's store to the output: with kStream, non-temporal where `p` is
// aligned to the vector (whole vectors of 16 bytes or more), else plain.
template <bool kStream, class D>
HWY_INLINE void Put(hn::Vec<D> v, D d, hn::TFromD<D>* HWY_RESTRICT p) {
  if constexpr (kStream && hn::MaxLanes(D()) * sizeof(hn::TFromD<D>) >= 16) {
    if ((reinterpret_cast<uintptr_t>(p) & (hn::Lanes(d) * sizeof(hn::TFromD<D>) - 1)) == 0) {
      hn::Stream(v, d, p);
      return;
    }
  }
  hn::StoreU(v, d, p);
}

// ---------------------------------------------------------------------------
// Storage codecs: load N elements of storage as a vector of the arithmetic
// type (float32 for float32 and the 16-bit formats, double for float64), and
// store one back. The 16-bit formats are widened in registers and narrowed
// once, round to nearest even, with the scalar conversions' bits
// (core/dtype.h HalfToFloat/FloatToHalf, BFloat16ToFloat/FloatToBFloat16):
// a NaN narrows to the quiet NaN of its sign (0x7e00, or the bfloat16 NaN
// with the quiet bit set), ±Inf and overflow to ±Inf, subnormals exactly.
// Pointers need no alignment (LoadU/StoreU).
template <typename T, bool kStream>
struct PlainCodec {
  using Elem = T;
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const T* HWY_RESTRICT p) {
    return hn::LoadU(d, p);
  }
  template <class D>
  static HWY_INLINE void Store(D d, hn::Vec<D> v, T* HWY_RESTRICT p) {
    Put<kStream>(v, d, p);
  }
};

// bfloat16 is the top half of a float32: widening is a shift; narrowing
// rounds the low 16 bits to nearest even, (bits + 0x7fff + lsb) >> 16, and
// keeps a NaN's sign and top payload bits with the quiet bit set.
template <bool kStream>
struct BFloat16Codec {
  using Elem = uint16_t;
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const uint16_t* HWY_RESTRICT p) {
    const hn::Rebind<uint16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, p))));
  }
  template <class D>
  static HWY_INLINE void Store(D /*d*/, hn::Vec<D> v, uint16_t* HWY_RESTRICT p) {
    const hn::Rebind<uint16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const auto bits = hn::BitCast(du, v);
    const auto top = hn::ShiftRight<16>(bits);
    const auto lsb = hn::And(top, hn::Set(du, 1u));
    const auto rounded = hn::ShiftRight<16>(hn::Add(bits, hn::Add(hn::Set(du, 0x7fffu), lsb)));
    const auto quiet_nan = hn::Or(top, hn::Set(du, 0x0040u));
    const auto narrow = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet_nan, rounded);
    // Every lane is <= 0xffff, so the saturating narrow is exact.
    Put<kStream>(hn::DemoteTo(d16, hn::BitCast(di, narrow)), d16, p);
  }
};

// IEEE binary16. x86 targets with F16C (AVX2 and up) convert in hardware
// (vcvtph2ps / vcvtps2ph, round to nearest even); a NaN is replaced by the
// quiet NaN of its sign first, so it narrows to sign | 0x7e00 as
// FloatToHalf does. Other targets use the integer formulation below (Highway
// 1.0.3's portable float16 conversions truncate, so they are not used).
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
template <bool kStream>
struct Float16Codec {
  using Elem = uint16_t;
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const uint16_t* HWY_RESTRICT p) {
    const hn::Rebind<hwy::float16_t, D> d16;
    return hn::PromoteTo(d, hn::LoadU(d16, reinterpret_cast<const hwy::float16_t*>(p)));
  }
  template <class D>
  static HWY_INLINE void Store(D d, hn::Vec<D> v, uint16_t* HWY_RESTRICT p) {
    const hn::Rebind<hwy::float16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    const auto quiet_nan = hn::CopySign(hn::BitCast(d, hn::Set(du, 0x7fc00000u)), v);
    const auto canonical = hn::IfThenElse(hn::IsNaN(v), quiet_nan, v);
    Put<kStream>(hn::DemoteTo(d16, canonical), d16, reinterpret_cast<hwy::float16_t*>(p));
  }
};
#else
template <bool kStream>
struct Float16Codec {
  using Elem = uint16_t;
  // Exponent and mantissa moved into float32 position and rebiased by
  // 127 − 15; Inf/NaN (exponent 31) rebiased again to 255; zero and
  // subnormals (exponent 0) formed as (2^-14 + m·2^-24) − 2^-14, exact.
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const uint16_t* HWY_RESTRICT p) {
    const hn::Rebind<uint16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    const auto h = hn::PromoteTo(du, hn::LoadU(d16, p));
    const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
    const auto shifted = hn::ShiftLeft<13>(hn::And(h, hn::Set(du, 0x7fffu)));
    const auto exponent = hn::And(shifted, hn::Set(du, 0x0f800000u));
    const auto rebias = hn::Set(du, (127u - 15u) << 23);
    const auto normal = hn::Add(shifted, rebias);
    const auto special = hn::Add(normal, rebias);  // Exponent 31 -> 255.
    const auto min_normal = hn::BitCast(d, hn::Set(du, 113u << 23));  // 2^-14
    const auto small = hn::BitCast(
        du, hn::Sub(hn::BitCast(d, hn::Add(normal, hn::Set(du, 1u << 23))), min_normal));
    auto bits = hn::IfThenElse(hn::Eq(exponent, hn::Set(du, 0x0f800000u)), special, normal);
    bits = hn::IfThenElse(hn::Eq(exponent, hn::Zero(du)), small, bits);
    return hn::BitCast(d, hn::Or(bits, sign));
  }
  // |x| < 2^-14 (a subnormal or zero half): adding 0.5 puts the half's last
  // bit (2^-24) at float's last place, so the float addition rounds to
  // nearest even there. Normal: rebias and round the 13 dropped bits to
  // nearest even. |x| >= 65520 overflows to Inf; NaN gives 0x7e00.
  template <class D>
  static HWY_INLINE void Store(D d, hn::Vec<D> v, uint16_t* HWY_RESTRICT p) {
    const hn::Rebind<uint16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const auto bits = hn::BitCast(du, v);
    const auto sign = hn::ShiftRight<16>(hn::And(bits, hn::Set(du, 0x80000000u)));
    const auto magnitude = hn::And(bits, hn::Set(du, 0x7fffffffu));
    const auto odd = hn::And(hn::ShiftRight<13>(magnitude), hn::Set(du, 1u));
    // magnitude − (112 << 23) + 0xfff + odd, modulo 2^32.
    const auto normal = hn::ShiftRight<13>(
        hn::Add(hn::Add(magnitude, hn::Set(du, 0xc8000fffu)), odd));
    const auto half = hn::Set(d, 0.5f);
    const auto small = hn::Sub(
        hn::BitCast(du, hn::Add(hn::BitCast(d, magnitude), half)), hn::BitCast(du, half));
    const auto m = hn::BitCast(di, magnitude);
    auto narrow = hn::IfThenElse(RebindMask(du, hn::Lt(m, hn::Set(di, 0x38800000))),
                                 small, normal);
    narrow = hn::IfThenElse(RebindMask(du, hn::Gt(m, hn::Set(di, 0x477fefff))),
                            hn::Set(du, 0x7c00u), narrow);
    narrow = hn::IfThenElse(RebindMask(du, hn::Gt(m, hn::Set(di, 0x7f800000))),
                            hn::Set(du, 0x7e00u), narrow);
    Put<kStream>(hn::DemoteTo(d16, hn::BitCast(di, hn::Or(narrow, sign))), d16, p);
  }
};
#endif

// ---------------------------------------------------------------------------
// Layer 3: the rotation of one head's rotary channels, Lanes(d) pairs at a
// time; a tail of fewer pairs is staged through zero-padded stack vectors.
// Every vector is loaded before any is stored, so x == out (in place) is
// safe. HALF: pairs (j, j + half):
//   out[j]        = x[j]·c_j − x[j+half]·s_j
//   out[j + half] = x[j+half]·c_j + x[j]·s_j
template <class Codec, class D>
HWY_INLINE void RotatePairsHalf(D d, const typename Codec::Elem* x_lo,
                                const typename Codec::Elem* x_hi,
                                const hn::TFromD<D>* HWY_RESTRICT c,
                                const hn::TFromD<D>* HWY_RESTRICT s,
                                typename Codec::Elem* out_lo,
                                typename Codec::Elem* out_hi) {
  const auto lo = Codec::Load(d, x_lo);
  const auto hi = Codec::Load(d, x_hi);
  const auto cv = hn::LoadU(d, c);
  const auto sv = hn::LoadU(d, s);
  const auto new_lo = hn::MulSub(lo, cv, hn::Mul(hi, sv));
  const auto new_hi = hn::MulAdd(hi, cv, hn::Mul(lo, sv));
  Codec::Store(d, new_lo, out_lo);
  Codec::Store(d, new_hi, out_hi);
}

template <class Codec, int64_t kHalf, class D>
HWY_INLINE void RotateHeadHalf(D d, const typename Codec::Elem* x,
                               const hn::TFromD<D>* HWY_RESTRICT c,
                               const hn::TFromD<D>* HWY_RESTRICT s, int64_t half_in,
                               typename Codec::Elem* out) {
  using Elem = typename Codec::Elem;
  const size_t half = kHalf > 0 ? static_cast<size_t>(kHalf) : static_cast<size_t>(half_in);
  const size_t lanes = hn::Lanes(d);
  size_t j = 0;
  for (; j + lanes <= half; j += lanes) {
    RotatePairsHalf<Codec>(d, x + j, x + half + j, c + j, s + j, out + j,
                           out + half + j);
  }
  if (j == half) return;
  const size_t rest = half - j;
  constexpr size_t kMax = HWY_MAX_BYTES / sizeof(hn::TFromD<D>);
  HWY_ALIGN Elem lo[kMax] = {};
  HWY_ALIGN Elem hi[kMax] = {};
  HWY_ALIGN hn::TFromD<D> cs[kMax] = {};
  HWY_ALIGN hn::TFromD<D> ss[kMax] = {};
  std::memcpy(lo, x + j, rest * sizeof(Elem));
  std::memcpy(hi, x + half + j, rest * sizeof(Elem));
  std::memcpy(cs, c + j, rest * sizeof(cs[0]));
  std::memcpy(ss, s + j, rest * sizeof(ss[0]));
  RotatePairsHalf<Codec>(d, lo, hi, cs, ss, lo, hi);
  std::memcpy(out + j, lo, rest * sizeof(Elem));
  std::memcpy(out + half + j, hi, rest * sizeof(Elem));
}

// INTERLEAVED: pairs (2i, 2i + 1), as one vector of 2·Lanes/2 pairs with
// c2 = (c_0, c_0, c_1, c_1, ...) and s2 = (−s_0, s_0, −s_1, s_1, ...):
//   out = x·c2 + swap_pairs(x)·s2
// (even lane x[2i]·c_i − x[2i+1]·s_i, odd lane x[2i+1]·c_i + x[2i]·s_i).
template <class Codec, class D>
HWY_INLINE void RotateLanesInterleaved(D d, const typename Codec::Elem* x,
                                       const hn::TFromD<D>* HWY_RESTRICT c2,
                                       const hn::TFromD<D>* HWY_RESTRICT s2,
                                       typename Codec::Elem* out) {
  const auto v = Codec::Load(d, x);
  const auto rotated =
      hn::MulAdd(v, hn::LoadU(d, c2), hn::Mul(hn::Reverse2(d, v), hn::LoadU(d, s2)));
  Codec::Store(d, rotated, out);
}

template <class Codec, int64_t kHalf, class D>
HWY_INLINE void RotateHeadInterleaved(D d, const typename Codec::Elem* x,
                                      const hn::TFromD<D>* HWY_RESTRICT c2,
                                      const hn::TFromD<D>* HWY_RESTRICT s2,
                                      int64_t half_in, typename Codec::Elem* out) {
  using Elem = typename Codec::Elem;
  const size_t width =
      2 * (kHalf > 0 ? static_cast<size_t>(kHalf) : static_cast<size_t>(half_in));
#if HWY_TARGET == HWY_SCALAR
  // One-lane vectors hold no pair: rotate (x[2i], x[2i+1]) as a HALF pair,
  // with sin from the odd lane (+s_i); the same products and roundings.
  for (size_t j = 0; j < width; j += 2) {
    RotatePairsHalf<Codec>(d, x + j, x + j + 1, c2 + j, s2 + j + 1, out + j, out + j + 1);
  }
  return;
#endif
  const size_t lanes = hn::Lanes(d);
  size_t j = 0;
  for (; j + lanes <= width; j += lanes) {
    RotateLanesInterleaved<Codec>(d, x + j, c2 + j, s2 + j, out + j);
  }
  if (j == width) return;
  const size_t rest = width - j;  // Even: whole pairs.
  constexpr size_t kMax = HWY_MAX_BYTES / sizeof(hn::TFromD<D>);
  HWY_ALIGN Elem v[kMax] = {};
  HWY_ALIGN hn::TFromD<D> cs[kMax] = {};
  HWY_ALIGN hn::TFromD<D> ss[kMax] = {};
  std::memcpy(v, x + j, rest * sizeof(Elem));
  std::memcpy(cs, c2 + j, rest * sizeof(cs[0]));
  std::memcpy(ss, s2 + j, rest * sizeof(ss[0]));
  RotateLanesInterleaved<Codec>(d, v, cs, ss, v);
  std::memcpy(out + j, v, rest * sizeof(Elem));
}

// Every head of one token, heads `stride` elements apart in both x and out
// (head_dim for [T, H, D] rows, T·head_dim for [B, H, T, D]), rotary part
// only. The rotary widths models use (rd = 32, 64, 96, 128, 256) get their
// own copies with the trip count fixed (kHalf = rd/2; 0 = any width): a
// head's loads are then issued back to back, which keeps enough cache misses
// in flight for RoPE over [T, 32, 128] to run at memory-copy speed.
// For INTERLEAVED, c and s are the per-lane c2 and s2 rows.
template <class Codec, int64_t kHalf, class D>
HWY_INLINE void RotateHeadsFixed(D d, RopeLayout layout,
                                 const typename Codec::Elem* x,
                                 const hn::TFromD<D>* HWY_RESTRICT c,
                                 const hn::TFromD<D>* HWY_RESTRICT s, int64_t half,
                                 int64_t heads, int64_t stride,
                                 typename Codec::Elem* out) {
  if (layout == RopeLayout::kHalf) {
    for (int64_t h = 0; h < heads; ++h) {
      RotateHeadHalf<Codec, kHalf>(d, x + h * stride, c, s, half, out + h * stride);
    }
  } else {
    for (int64_t h = 0; h < heads; ++h) {
      RotateHeadInterleaved<Codec, kHalf>(d, x + h * stride, c, s, half,
                                          out + h * stride);
    }
  }
}

template <class Codec, class D>
HWY_INLINE void RotateHeads(D d, RopeLayout layout, const typename Codec::Elem* x,
                            const hn::TFromD<D>* HWY_RESTRICT c,
                            const hn::TFromD<D>* HWY_RESTRICT s, int64_t half,
                            int64_t heads, int64_t stride,
                            typename Codec::Elem* out) {
  switch (half) {
    case 16:
      return RotateHeadsFixed<Codec, 16>(d, layout, x, c, s, half, heads, stride, out);
    case 32:
      return RotateHeadsFixed<Codec, 32>(d, layout, x, c, s, half, heads, stride, out);
    case 48:
      return RotateHeadsFixed<Codec, 48>(d, layout, x, c, s, half, heads, stride, out);
    case 64:
      return RotateHeadsFixed<Codec, 64>(d, layout, x, c, s, half, heads, stride, out);
    case 128:
      return RotateHeadsFixed<Codec, 128>(d, layout, x, c, s, half, heads, stride, out);
    default:
      return RotateHeadsFixed<Codec, 0>(d, layout, x, c, s, half, heads, stride, out);
  }
}

// ---------------------------------------------------------------------------
// Layer 2 in vectors: the angle-addition step and the rounding of a row.
// cos' = cos·cos(δθ) − sin·sin(δθ), sin' = sin·cos(δθ) + cos·sin(δθ), for
// the Lanes(d) pairs at i.
template <class D>
HWY_INLINE void StepLanes(D d, const double* HWY_RESTRICT step_cos,
                          const double* HWY_RESTRICT step_sin, size_t i,
                          double* HWY_RESTRICT cos_row, double* HWY_RESTRICT sin_row) {
  const auto c = hn::LoadU(d, cos_row + i);
  const auto s = hn::LoadU(d, sin_row + i);
  const auto sc = hn::LoadU(d, step_cos + i);
  const auto ss = hn::LoadU(d, step_sin + i);
  hn::StoreU(hn::MulSub(c, sc, hn::Mul(s, ss)), d, cos_row + i);
  hn::StoreU(hn::MulAdd(s, sc, hn::Mul(c, ss)), d, sin_row + i);
}

HWY_INLINE void StepTrig(const double* HWY_RESTRICT step_cos,
                         const double* HWY_RESTRICT step_sin, int64_t half,
                         double* HWY_RESTRICT cos_row, double* HWY_RESTRICT sin_row) {
  const hn::ScalableTag<double> d;
  const size_t n = static_cast<size_t>(half);
  size_t i = 0;
  for (; i + hn::Lanes(d) <= n; i += hn::Lanes(d)) {
    StepLanes(d, step_cos, step_sin, i, cos_row, sin_row);
  }
  for (; i < n; ++i) {
    StepLanes(hn::CappedTag<double, 1>(), step_cos, step_sin, i, cos_row, sin_row);
  }
}

// Times the attention factor (or 1), then rounded once to T (float, or
// double: the product's one rounding).
template <typename T>
HWY_INLINE void RoundTrig(const double* HWY_RESTRICT cos_row,
                          const double* HWY_RESTRICT sin_row, int64_t half,
                          double scale, T* HWY_RESTRICT cos_out,
                          T* HWY_RESTRICT sin_out) {
  for (int64_t i = 0; i < half; ++i) {
    cos_out[i] = static_cast<T>(cos_row[i] * scale);
    sin_out[i] = static_cast<T>(sin_row[i] * scale);
  }
}

// Walks the rows of one chunk in increasing order. Belongs to one thread.
class TrigWalker final {
 public:
  explicit TrigWalker(const TrigPlan& plan)
      : plan_(plan), cos_(plan.half), sin_(plan.half) {}

  // Writes row t's cos and sin (plan.half values each, float or double).
  template <typename T>
  HWY_INLINE void Row(int64_t t, T* cos_out, T* sin_out) {
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
    RoundTrig(cos_.data(), sin_.data(), plan_.half, plan_.scale, cos_out, sin_out);
  }

 private:
  HWY_INLINE void Step() {
    StepTrig(plan_.step_cos.data(), plan_.step_sin.data(), plan_.half, cos_.data(),
             sin_.data());
  }

  const TrigPlan& plan_;
  Scratch<double, kInlinePairs> cos_;  // Row row_, before the factor.
  Scratch<double, kInlinePairs> sin_;
  int64_t row_ = -2;
};

// ---------------------------------------------------------------------------
// One token of one operand, rotated from `in` to `out` with the token's
// cos/sin rows. Elements are addressed through LoadU/StoreU (and memcpy), so
// in place, out of place, misaligned and every tensor layout run the same
// arithmetic and give the same bytes; nothing is staged or zero-filled.
//
// Stores: plain, or non-temporal for outputs of kStreamBytes and more
// (ApplyJob::stream; measured slower than plain stores on an earlier AMD
// Zen 5 host, ~1.5x faster on the host of docs/BENCHMARKS.md's "A new
// host"). Either way the bytes are the same.
template <class Codec, class D>
HWY_INLINE void RotateToken(D d, const RopeOperand& operand, int64_t token,
                            RopeLayout layout, int64_t rotary_dim,
                            const hn::TFromD<D>* c, const hn::TFromD<D>* s) {
  using Elem = typename Codec::Elem;
  constexpr size_t kElemBytes = sizeof(Elem);
  const int64_t head_dim = operand.head_dim;
  const TokenHeads where = HeadsOf(operand, token);
  const size_t first = static_cast<size_t>(where.first) * kElemBytes;
  const Elem* x = reinterpret_cast<const Elem*>(operand.in.data() + first);
  Elem* out = reinterpret_cast<Elem*>(operand.out.data() + first);
  RotateHeads<Codec>(d, layout, x, c, s, rotary_dim / 2, operand.num_heads,
                     where.stride, out);
  if (head_dim > rotary_dim && operand.in.data() != operand.out.data()) {
    const size_t stride_bytes = static_cast<size_t>(where.stride) * kElemBytes;
    const size_t rotary_bytes = static_cast<size_t>(rotary_dim) * kElemBytes;
    const size_t pass_bytes = static_cast<size_t>(head_dim - rotary_dim) * kElemBytes;
    for (int64_t head = 0; head < operand.num_heads; ++head) {
      const size_t offset = first + static_cast<size_t>(head) * stride_bytes + rotary_bytes;
      std::memcpy(operand.out.data() + offset, operand.in.data() + offset, pass_bytes);
    }
  }
}

// Layer 4 body: tokens [begin, end), one cos/sin row per token shared by all
// query and key heads. Math is float (float32 and 16-bit storage) or double.
template <class Codec, typename Math>
HWY_INLINE void RotateChunk(const ApplyJob& job, int64_t begin, int64_t end) {
  // 16-bit storage is compute-bound in cache and uses the widest vectors;
  // float32/float64 rows are often not 64-byte aligned (a vector split
  // across cache lines on every access), and measured faster at 256 bits.
  using Tag = std::conditional_t<sizeof(typename Codec::Elem) == 2, hn::ScalableTag<Math>,
                                 hn::CappedTag<Math, 32 / sizeof(Math)>>;
  const Tag d;
  const TrigPlan& plan = *job.trig;
  const size_t half = static_cast<size_t>(plan.half);
  Scratch<Math, kInlinePairs> cos(half), sin(half);
  // INTERLEAVED rotates with per-lane rows (RotateLanesInterleaved).
  const bool interleaved = job.layout == RopeLayout::kInterleaved;
  Scratch<Math, 2 * kInlinePairs> cos2(interleaved ? 2 * half : 0);
  Scratch<Math, 2 * kInlinePairs> sin2(interleaved ? 2 * half : 0);
  const Math* c = interleaved ? cos2.data() : cos.data();
  const Math* s = interleaved ? sin2.data() : sin.data();
  TrigWalker trig(plan);
  for (int64_t token = begin; token < end; ++token) {
    trig.Row(token, cos.data(), sin.data());
    if (interleaved) {
      for (size_t i = 0; i < half; ++i) {
        cos2[2 * i] = cos2[2 * i + 1] = cos[i];
        sin2[2 * i] = -sin[i];
        sin2[2 * i + 1] = sin[i];
      }
    }
    RotateToken<Codec>(d, *job.query, token, job.layout, job.rotary_dim, c, s);
    if (job.key != nullptr) {
      RotateToken<Codec>(d, *job.key, token, job.layout, job.rotary_dim, c, s);
    }
  }
}

// The codec with plain stores, or with non-temporal ones (then fenced, so
// the chunk's bytes are visible to whoever waits on ParallelFor).
template <template <bool> class Codec, typename Math>
HWY_INLINE void RotateChunkStreamingOrNot(const ApplyJob& job, int64_t begin, int64_t end) {
  if (job.stream) {
    RotateChunk<Codec<true>, Math>(job, begin, end);
    hwy::FlushStream();
  } else {
    RotateChunk<Codec<false>, Math>(job, begin, end);
  }
}
template <bool kStream>
using Float32Codec = PlainCodec<float, kStream>;
template <bool kStream>
using Float64Codec = PlainCodec<double, kStream>;

void RotateChunkFloat32(const ApplyJob& job, int64_t begin, int64_t end) {
  RotateChunkStreamingOrNot<Float32Codec, float>(job, begin, end);
}
void RotateChunkFloat64(const ApplyJob& job, int64_t begin, int64_t end) {
  RotateChunkStreamingOrNot<Float64Codec, double>(job, begin, end);
}
void RotateChunkFloat16(const ApplyJob& job, int64_t begin, int64_t end) {
  RotateChunkStreamingOrNot<Float16Codec, float>(job, begin, end);
}
void RotateChunkBFloat16(const ApplyJob& job, int64_t begin, int64_t end) {
  RotateChunkStreamingOrNot<BFloat16Codec, float>(job, begin, end);
}

template <typename T>
HWY_INLINE void TableChunk(const TrigPlan& plan, int64_t begin, int64_t end,
                           T* cos, T* sin) {
  TrigWalker trig(plan);
  for (int64_t n = begin; n < end; ++n) {
    trig.Row(n, cos + n * plan.half, sin + n * plan.half);
  }
}
void TableChunkFloat32(const TrigPlan& plan, int64_t begin, int64_t end,
                       float* cos, float* sin) {
  TableChunk(plan, begin, end, cos, sin);
}
void TableChunkFloat64(const TrigPlan& plan, int64_t begin, int64_t end,
                       double* cos, double* sin) {
  TableChunk(plan, begin, end, cos, sin);
}

}  // namespace HWY_NAMESPACE
}  // namespace phasor
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace phasor {
namespace {

HWY_EXPORT(RotateChunkFloat32);
HWY_EXPORT(RotateChunkFloat64);
HWY_EXPORT(RotateChunkFloat16);
HWY_EXPORT(RotateChunkBFloat16);
HWY_EXPORT(TableChunkFloat32);
HWY_EXPORT(TableChunkFloat64);

// Layer 4: ParallelFor over tokens, one writer per token.
void ApplyRopeWith(const RopeSpec& spec, const RopePlan& rope,
                   const Positions& positions, const ExecutionOptions& options,
                   const RopeOperand& query, const RopeOperand* key) {
  const RopeFrequencies& frequencies = rope.frequencies;
  const double scale =
      spec.fold_attention_factor ? frequencies.attention_factor : 1.0;
  const int64_t rotary_dim = RopeRotaryDim(spec, query.head_dim);
  const bool float64 = query.dtype == DType::kFloat64;
  const TrigPlan trig = MakeTrigPlan(rope, scale, positions, MropeRuns(spec, rotary_dim / 2),
                                     RopePositionAxes(spec), /*exact_rows=*/float64);
  const size_t out_bytes = query.out.size() + (key != nullptr ? key->out.size() : 0);
  const ApplyJob job{&trig, &query, key, spec.layout, rotary_dim,
                     /*stream=*/out_bytes >= kStreamBytes};
  void (*chunk)(const ApplyJob&, int64_t, int64_t) = nullptr;
  switch (query.dtype) {
    case DType::kFloat32:
      chunk = HWY_DYNAMIC_DISPATCH(RotateChunkFloat32);
      break;
    case DType::kFloat16:
      chunk = HWY_DYNAMIC_DISPATCH(RotateChunkFloat16);
      break;
    case DType::kBFloat16:
      chunk = HWY_DYNAMIC_DISPATCH(RotateChunkBFloat16);
      break;
    case DType::kFloat64:
      chunk = HWY_DYNAMIC_DISPATCH(RotateChunkFloat64);
      break;
    default:
      assert(false && "ValidateRopeOperands rejects other dtypes");
      return;
  }
  const int64_t heads = query.num_heads + (key != nullptr ? key->num_heads : 0);
  ParallelFor(options, query.num_tokens, heads * query.head_dim,
              [&](int64_t begin, int64_t end) { chunk(job, begin, end); });
}

template <typename T>
void ComputeTables(const RopeSpec& spec, const RopePlan& rope,
                   const Positions& positions, const ExecutionOptions& options,
                   absl::Span<T> cos, absl::Span<T> sin) {
  const int64_t half = static_cast<int64_t>(rope.angles.size());
  const double scale =
      spec.fold_attention_factor ? rope.frequencies.attention_factor : 1.0;
  // The same rows ApplyRope rotates with, bit for bit.
  const TrigPlan plan =
      MakeTrigPlan(rope, scale, positions, MropeRuns(spec, half),
                   RopePositionAxes(spec), /*exact_rows=*/std::is_same_v<T, double>);
  // REQUIRES: output spans sized [tokens, rd/2].
  assert(static_cast<int64_t>(cos.size()) == plan.num_tokens * half);
  assert(static_cast<int64_t>(sin.size()) == plan.num_tokens * half);
  ParallelFor(options, plan.num_tokens, 2 * half, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, double>) {
      HWY_DYNAMIC_DISPATCH(TableChunkFloat64)(plan, begin, end, cos.data(), sin.data());
    } else {
      HWY_DYNAMIC_DISPATCH(TableChunkFloat32)(plan, begin, end, cos.data(), sin.data());
    }
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

RopePlan MakeRopePlan(RopeFrequencies frequencies) {
  RopePlan plan;
  plan.angles.reserve(frequencies.inv_freq.size());
  for (double theta : frequencies.inv_freq) plan.angles.emplace_back(theta);
  plan.frequencies = std::move(frequencies);
  return plan;
}

void ComputeRopeTables(const RopeFrequencies& frequencies,
                       bool fold_attention_factor, const Positions& positions,
                       const ExecutionOptions& options, absl::Span<float> cos,
                       absl::Span<float> sin) {
  RopeSpec spec;
  spec.fold_attention_factor = fold_attention_factor;
  ComputeTables(spec, MakeRopePlan(frequencies), positions, options, cos, sin);
}

void ComputeRopeTables(const RopeSpec& spec, const RopeFrequencies& frequencies,
                       const Positions& positions, const ExecutionOptions& options,
                       absl::Span<float> cos, absl::Span<float> sin) {
  ComputeTables(spec, MakeRopePlan(frequencies), positions, options, cos, sin);
}

void ComputeRopeTables(const RopeSpec& spec, const RopeFrequencies& frequencies,
                       const Positions& positions, const ExecutionOptions& options,
                       absl::Span<double> cos, absl::Span<double> sin) {
  ComputeTables(spec, MakeRopePlan(frequencies), positions, options, cos, sin);
}

void ComputeRopeTables(const RopeSpec& spec, const RopePlan& plan,
                       const Positions& positions, const ExecutionOptions& options,
                       absl::Span<float> cos, absl::Span<float> sin) {
  ComputeTables(spec, plan, positions, options, cos, sin);
}

void ComputeRopeTables(const RopeSpec& spec, const RopePlan& plan,
                       const Positions& positions, const ExecutionOptions& options,
                       absl::Span<double> cos, absl::Span<double> sin) {
  ComputeTables(spec, plan, positions, options, cos, sin);
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

void ApplyRope(const RopeSpec& spec, const RopePlan& plan,
               const Positions& positions, const ExecutionOptions& options,
               const RopeOperand& query, const RopeOperand* key) {
  // REQUIRES: see rope.h; the spans were validated against the shapes.
  assert(static_cast<int64_t>(plan.angles.size()) ==
         RopeTableWidth(spec, query.head_dim));
  assert(positions.size() == query.num_tokens * RopePositionAxes(spec));
  assert(query.out.size() == query.in.size());
  assert(key == nullptr || key->out.size() == key->in.size());
  ApplyRopeWith(spec, plan, positions, options, query, key);
}

void ApplyRope(const RopeSpec& spec, const RopeFrequencies& frequencies,
               const Positions& positions, const ExecutionOptions& options,
               const RopeOperand& query, const RopeOperand* key) {
  ApplyRope(spec, MakeRopePlan(frequencies), positions, options, query, key);
}

}  // namespace phasor

#endif  // HWY_ONCE
