#include "core/rope/rope_kernels.h"

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <type_traits>

#include "absl/types/span.h"
#include "core/adapters/dtype.h"
#include "core/adapters/parallel.h"
#include "core/base/positions.h"
#include "core/math/angle_ladder.h"
#include "core/rope/rope_spec.h"
#include "core/rope/rope_trig.h"

// The per-chunk kernels are compiled once per SIMD target Highway finds
// (hwy/examples/skeleton.cc): foreach_target.h re-includes this file with
// HWY_TARGET set to each, and HWY_DYNAMIC_DISPATCH picks the best one the
// CPU runs (AVX-512, AVX2 + FMA + F16C, SSE4, ..., a portable baseline). One
// process always runs one target, so 1 and N threads agree bytewise.
//
// Arithmetic is spelled out: this file is compiled with -ffp-contract=off
// (core/CMakeLists.txt) and every multiply-add is an explicit hn::MulAdd or
// hn::MulSub, fused on targets with FMA and a multiply then an add on the
// others. Each rotation and angle-addition step is "first product fused,
// second rounded", a·b − c·d = fma(a, b, −(c·d)), the contraction g++ chose
// for the earlier auto-vectorised loops, so outputs keep their bytes.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/rope/rope_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "core/math/angle_ladder-inl.h"
#include "core/rope/storage_codecs-inl.h"

// Types and scalar helpers shared by every target, defined once.
#ifndef PHASOR_CORE_ROPE_KERNELS_SHARED_
#define PHASOR_CORE_ROPE_KERNELS_SHARED_
namespace phasor::rope_internal {
namespace {

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
}  // namespace phasor::rope_internal
#endif  // PHASOR_CORE_ROPE_KERNELS_SHARED_

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace rope_internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using phasor::HWY_NAMESPACE::AngleLadderWalker;
using phasor::HWY_NAMESPACE::BFloat16Codec;
using phasor::HWY_NAMESPACE::Float16Codec;
using phasor::HWY_NAMESPACE::PlainCodec;

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

// `rows` rows of head_dim elements, row r at x + r·stride (and out +
// r·stride), rotary part only, row r with the cos/sin rows at c + r·cs_stride
// and s + r·cs_stride. The rows are every head of one token (stride head_dim
// for [T, H, D], T·head_dim for [B, H, T, D]; cs_stride 0) or consecutive
// tokens of one head of a [B, H, T, D] tensor (stride head_dim; cs_stride
// the length of a cos/sin row). The rotary widths models use (rd = 32, 64,
// 96, 128, 256) get their own copies with the trip count fixed (kHalf =
// rd/2; 0 = any width): a row's loads are then issued back to back, which
// keeps enough cache misses in flight for RoPE over [T, 32, 128] to run at
// memory-copy speed. For INTERLEAVED, c and s are the per-lane c2 and s2
// rows.
template <class Codec, int64_t kHalf, class D>
HWY_INLINE void RotateRowsFixed(D d, RopeLayout layout, const typename Codec::Elem* x,
                                const hn::TFromD<D>* HWY_RESTRICT c,
                                const hn::TFromD<D>* HWY_RESTRICT s, int64_t cs_stride,
                                int64_t half, int64_t rows, int64_t stride,
                                typename Codec::Elem* out) {
  if (layout == RopeLayout::kHalf) {
    for (int64_t r = 0; r < rows; ++r) {
      RotateHeadHalf<Codec, kHalf>(d, x + r * stride, c + r * cs_stride, s + r * cs_stride, half,
                                   out + r * stride);
    }
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      RotateHeadInterleaved<Codec, kHalf>(d, x + r * stride, c + r * cs_stride, s + r * cs_stride,
                                          half, out + r * stride);
    }
  }
}

template <class Codec, class D>
HWY_INLINE void RotateRows(D d, RopeLayout layout, const typename Codec::Elem* x,
                           const hn::TFromD<D>* HWY_RESTRICT c, const hn::TFromD<D>* HWY_RESTRICT s,
                           int64_t cs_stride, int64_t half, int64_t rows, int64_t stride,
                           typename Codec::Elem* out) {
  switch (half) {
    case 16:
      return RotateRowsFixed<Codec, 16>(d, layout, x, c, s, cs_stride, half, rows, stride, out);
    case 32:
      return RotateRowsFixed<Codec, 32>(d, layout, x, c, s, cs_stride, half, rows, stride, out);
    case 48:
      return RotateRowsFixed<Codec, 48>(d, layout, x, c, s, cs_stride, half, rows, stride, out);
    case 64:
      return RotateRowsFixed<Codec, 64>(d, layout, x, c, s, cs_stride, half, rows, stride, out);
    case 128:
      return RotateRowsFixed<Codec, 128>(d, layout, x, c, s, cs_stride, half, rows, stride, out);
    default:
      return RotateRowsFixed<Codec, 0>(d, layout, x, c, s, cs_stride, half, rows, stride, out);
  }
}

// ---------------------------------------------------------------------------
// Layer 2 in vectors: the rows of a chunk, stepped by the angle-addition
// ladder (core/math/angle_ladder-inl.h, first product fused), and the
// rounding of a row.

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
      : plan_(plan),
        ladder_(LadderOf(plan)),
        cos_(plan.half),
        sin_(plan.half),
        walker_(ladder_, cos_.data(), sin_.data()) {}

  // Writes row t's cos and sin (plan.half values each, float or double).
  template <typename T>
  HWY_INLINE void Row(int64_t t, T* cos_out, T* sin_out) {
    const auto exact_row = [&](int64_t r, double* cos_row, double* sin_row) {
      PositionTrig(plan_, r, cos_row, sin_row);
    };
    if (walker_.Seek(t, exact_row)) walker_.Step();
    RoundTrig(cos_.data(), sin_.data(), plan_.half, plan_.scale, cos_out, sin_out);
  }

 private:
  const TrigPlan& plan_;
  const AngleLadder ladder_;
  Scratch<double, kInlinePairs> cos_;  // The current row, before the factor.
  Scratch<double, kInlinePairs> sin_;
  AngleLadderWalker<AngleStepRounding::kFirstProductFused> walker_;
};

// ---------------------------------------------------------------------------
// Tokens of one operand, rotated from `in` to `out` with their cos/sin rows.
// Elements are addressed through LoadU/StoreU (and memcpy), so in place, out
// of place, misaligned and every tensor layout run the same arithmetic and
// give the same bytes; nothing is staged or zero-filled.
//
// Stores: plain, or non-temporal for outputs of kStreamBytes and more
// (ApplyJob::stream; measured slower than plain stores on an earlier AMD
// Zen 5 host, ~1.5x faster on the host of docs/BENCHMARKS.md's "A new
// host"). Either way the bytes are the same.

// The channels past the rotary part of `rows` rows (row r at element
// first + r·stride), copied from in to out unchanged (nothing to do in place).
template <typename Elem>
HWY_INLINE void CopyPassThrough(const RopeOperand& operand, int64_t first, int64_t rows,
                                int64_t stride, int64_t rotary_dim) {
  if (operand.head_dim <= rotary_dim || operand.in.data() == operand.out.data()) return;
  const size_t pass_bytes = static_cast<size_t>(operand.head_dim - rotary_dim) * sizeof(Elem);
  for (int64_t r = 0; r < rows; ++r) {
    const size_t offset = static_cast<size_t>(first + r * stride + rotary_dim) * sizeof(Elem);
    std::memcpy(operand.out.data() + offset, operand.in.data() + offset, pass_bytes);
  }
}

// Every head of one token, with the token's cos/sin rows.
template <class Codec, class D>
HWY_INLINE void RotateToken(D d, const RopeOperand& operand, int64_t token,
                            RopeLayout layout, int64_t rotary_dim,
                            const hn::TFromD<D>* c, const hn::TFromD<D>* s) {
  using Elem = typename Codec::Elem;
  const TokenHeads where = HeadsOf(operand, token);
  const size_t first = static_cast<size_t>(where.first) * sizeof(Elem);
  const Elem* x = reinterpret_cast<const Elem*>(operand.in.data() + first);
  Elem* out = reinterpret_cast<Elem*>(operand.out.data() + first);
  RotateRows<Codec>(d, layout, x, c, s, /*cs_stride=*/0, rotary_dim / 2, operand.num_heads,
                    where.stride, out);
  CopyPassThrough<Elem>(operand, where.first, operand.num_heads, where.stride, rotary_dim);
}

// Tokens [token, token + n) of one b of a [B, H, T, D] operand, head by
// head: a head's n rows are contiguous, token i's cos/sin rows at
// c + i·cs_stride and s + i·cs_stride.
template <class Codec, class D>
HWY_INLINE void RotateHeadMajorTokens(D d, const RopeOperand& operand, int64_t token, int64_t n,
                                      RopeLayout layout, int64_t rotary_dim, const hn::TFromD<D>* c,
                                      const hn::TFromD<D>* s, int64_t cs_stride) {
  using Elem = typename Codec::Elem;
  const int64_t head_dim = operand.head_dim;
  const TokenHeads where = HeadsOf(operand, token);
  for (int64_t head = 0; head < operand.num_heads; ++head) {
    const int64_t first = where.first + head * where.stride;
    const size_t first_bytes = static_cast<size_t>(first) * sizeof(Elem);
    RotateRows<Codec>(d, layout, reinterpret_cast<const Elem*>(operand.in.data() + first_bytes), c,
                      s, cs_stride, rotary_dim / 2, n, head_dim,
                      reinterpret_cast<Elem*>(operand.out.data() + first_bytes));
    CopyPassThrough<Elem>(operand, first, n, head_dim, rotary_dim);
  }
}

// Tokens per tile of a [B, H, T, D] operand. Token by token, such an operand
// is read and written in 2·H streams T·D elements apart ([1, 32, 4096, 128]
// fp32: 64 streams 2 MiB apart, more than the prefetchers follow, all in the
// same cache sets), measured 1.5x slower than [T, H, D]; a tile's rows of
// one head are contiguous, and its cos/sin rows (16 x 128 floats each) stay
// in L1 across the heads.
constexpr int64_t kTileTokens = 16;

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
  const size_t row = interleaved ? 2 * half : half;
  TrigWalker trig(plan);
  // Token `token`'s rows, as the rotation reads them, into c_out and s_out.
  const auto trig_row = [&](int64_t token, Math* c_out, Math* s_out) {
    if (!interleaved) {
      trig.Row(token, c_out, s_out);
      return;
    }
    trig.Row(token, cos.data(), sin.data());
    for (size_t i = 0; i < half; ++i) {
      c_out[2 * i] = c_out[2 * i + 1] = cos[i];
      s_out[2 * i] = -sin[i];
      s_out[2 * i + 1] = sin[i];
    }
  };
  // A tile of tokens shares a pass: [T, H, D] rows one token at a time (a
  // token's heads are contiguous already), [B, H, T, D] kTileTokens tokens
  // of one b at a time, head by head.
  const int64_t seq = job.query->seq_len;  // The key's is the same.
  const int64_t tile = seq == 0 ? 1 : std::min({kTileTokens, seq, end - begin});
  Scratch<Math, 2 * kInlinePairs> c(static_cast<size_t>(tile) * row);
  Scratch<Math, 2 * kInlinePairs> s(static_cast<size_t>(tile) * row);
  for (int64_t token = begin; token < end;) {
    const int64_t b_end = seq == 0 ? end : (token / seq + 1) * seq;
    const int64_t n = std::min({token + tile, end, b_end}) - token;
    for (int64_t i = 0; i < n; ++i) trig_row(token + i, &c[i * row], &s[i * row]);
    for (const RopeOperand* operand : {job.query, job.key}) {
      if (operand == nullptr) continue;
      if (seq == 0) {
        RotateToken<Codec>(d, *operand, token, job.layout, job.rotary_dim, c.data(), s.data());
      } else {
        RotateHeadMajorTokens<Codec>(d, *operand, token, n, job.layout, job.rotary_dim, c.data(),
                                     s.data(), static_cast<int64_t>(row));
      }
    }
    token += n;
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
}  // namespace rope_internal
}  // namespace phasor
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace phasor::rope_internal {
namespace {

HWY_EXPORT(RotateChunkFloat32);
HWY_EXPORT(RotateChunkFloat64);
HWY_EXPORT(RotateChunkFloat16);
HWY_EXPORT(RotateChunkBFloat16);
HWY_EXPORT(TableChunkFloat32);
HWY_EXPORT(TableChunkFloat64);

}  // namespace

// Layer 4: ParallelFor over tokens, one writer per token.
void ApplyRopeRows(const RopeSpec& spec, const RopePlan& rope,
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
void RopeTableRows(const RopeSpec& spec, const RopePlan& rope,
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

template void RopeTableRows<float>(const RopeSpec&, const RopePlan&, const Positions&,
                                   const ExecutionOptions&, absl::Span<float>,
                                   absl::Span<float>);
template void RopeTableRows<double>(const RopeSpec&, const RopePlan&, const Positions&,
                                    const ExecutionOptions&, absl::Span<double>,
                                    absl::Span<double>);

}  // namespace phasor::rope_internal
#endif  // HWY_ONCE
