#include "core/sinusoidal.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "core/errors.h"
#include "core/exact_angle.h"
#include "core/frequency_ladder.h"

// The row loops are compiled once per SIMD target Highway finds
// (hwy/examples/skeleton.cc), as in core/rope.cc: foreach_target.h
// re-includes this file with HWY_TARGET set to each, HWY_DYNAMIC_DISPATCH
// picks the best the CPU runs, and the plain loops below are vectorised for
// that target. The file is compiled with -ffp-contract=off and the ladder
// step is an explicit multiply then add, so every target gives the same
// bits; one process always runs one target, so 1 and N threads agree.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/sinusoidal.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#ifndef PHASOR_CORE_SINUSOIDAL_SHARED_
#define PHASOR_CORE_SINUSOIDAL_SHARED_
namespace phasor {
namespace {

// Rows are filled by the angle-addition ladder: with integer positions in
// arithmetic progression p_t = p_{t−1} + δ, pair k of row t follows from row
// t−1 by a rotation through δ·ω_k, carried in double:
//   sin((p+δ)ω) = sin(pω)·cos(δω) + cos(pω)·sin(δω)
//   cos((p+δ)ω) = cos(pω)·cos(δω) − sin(pω)·sin(δω)
// Four multiplies and two adds per pair instead of a sin and a cos (about 25
// ns each), and the loop vectorises across pairs. Every kAnchorRows-th row,
// and every row that breaks the progression, is re-anchored exactly (the single-
// row formula, ExactRow). Each step adds
// about 3 double roundings (2^-53 relative) and the step angle δ·ω_k carries
// one rounding of δ·ω_k·2^-53, so after 255 steps with |δ| <= 2^20 the drift
// is below 2^-30 (1e-9), far inside float32's half ulp (3e-8) and the 2e-6
// contract. Anchors sit at fixed row indices, so a row's value does not
// depend on where a ParallelFor chunk starts: a chunk that starts mid-ladder
// replays from the row's anchor, and 1 and N threads give identical bytes.
constexpr int64_t kAnchorRows = 256;
constexpr int64_t kMaxLadderStep = int64_t{1} << 20;

// Column of sin and cos for pair k, per layout, as compile-time strides so
// the store loops vectorise.
template <SinusoidalLayout kLayout>
struct Columns;
template <>
struct Columns<SinusoidalLayout::kInterleaved> {
  static int64_t Sin(int64_t k, int64_t) { return 2 * k; }
  static int64_t Cos(int64_t k, int64_t) { return 2 * k + 1; }
};
template <>
struct Columns<SinusoidalLayout::kSplitSinCos> {
  static int64_t Sin(int64_t k, int64_t) { return k; }
  static int64_t Cos(int64_t k, int64_t half) { return half + k; }
};
template <>
struct Columns<SinusoidalLayout::kSplitCosSin> {
  static int64_t Sin(int64_t k, int64_t half) { return half + k; }
  static int64_t Cos(int64_t k, int64_t) { return k; }
};

// The single-row formula: core/exact_angle.h CosSinRow (cos and sin of
// p·ω_k; exact for integer positions).


// The ladder's step δ, or 0 when positions are real or |δ| is too large for
// the drift bound above (then every row is exact).
int64_t LadderStep(const Positions& positions) {
  if (positions.is_real() || positions.size() < 2) return 0;
  const absl::Span<const int64_t> p = positions.integers();
  int64_t step = 0;
  if (__builtin_sub_overflow(p[1], p[0], &step)) return 0;
  return (step != 0 && step >= -kMaxLadderStep && step <= kMaxLadderStep) ? step : 0;
}

// Whether row t is reached from row t−1 by one ladder step.
inline bool StepsFromPrevious(absl::Span<const int64_t> p, int64_t step, int64_t t) {
  if (step == 0 || t % kAnchorRows == 0) return false;
  int64_t expected = 0;
  return !__builtin_add_overflow(p[t - 1], step, &expected) && expected == p[t];
}

// What one chunk of rows needs; built once per call.
template <typename T>
struct TableJob {
  const ExactAngle* angles;  // Per ω_k.
  const double* step_sin;  // sin(δ·ω_k); unused when step == 0.
  const double* step_cos;
  int64_t half;
  int64_t step;  // Ladder step δ, 0 for exact rows only.
  Positions positions;
  absl::Span<const T> content;
  T content_scale;
  absl::Span<T> out;
};

// Row t in double, from its position alone.
template <typename T>
void ExactRow(const TableJob<T>& job, int64_t t, double* sin_row, double* cos_row) {
  if (job.positions.is_real()) {
    CosSinRow(job.angles, job.half, job.positions.reals()[t], cos_row, sin_row);
  } else {
    CosSinRow(job.angles, job.half, job.positions.integers()[t], cos_row, sin_row);
  }
}
}  // namespace
}  // namespace phasor
#endif  // PHASOR_CORE_SINUSOIDAL_SHARED_

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One ladder step for the Lanes(d) pairs at k: a multiply and an add each
// (unfused, on every target, so every target gives the same bits).
template <class D>
HWY_INLINE void StepLanes(D d, const double* HWY_RESTRICT step_sin,
                          const double* HWY_RESTRICT step_cos, size_t k,
                          double* HWY_RESTRICT sin_row, double* HWY_RESTRICT cos_row) {
  const auto s = hn::LoadU(d, sin_row + k);
  const auto c = hn::LoadU(d, cos_row + k);
  const auto sc = hn::LoadU(d, step_cos + k);
  const auto ss = hn::LoadU(d, step_sin + k);
  hn::StoreU(hn::Add(hn::Mul(s, sc), hn::Mul(c, ss)), d, sin_row + k);
  hn::StoreU(hn::Sub(hn::Mul(c, sc), hn::Mul(s, ss)), d, cos_row + k);
}

// One ladder step for every pair: whole vectors, then one pair at a time.
HWY_INLINE void StepRow(const double* HWY_RESTRICT step_sin,
                        const double* HWY_RESTRICT step_cos, int64_t half,
                        double* HWY_RESTRICT sin_row, double* HWY_RESTRICT cos_row) {
  const hn::ScalableTag<double> d;
  const size_t n = static_cast<size_t>(half);
  size_t k = 0;
  for (; k + hn::Lanes(d) <= n; k += hn::Lanes(d)) {
    StepLanes(d, step_sin, step_cos, k, sin_row, cos_row);
  }
  for (; k < n; ++k) {
    StepLanes(hn::CappedTag<double, 1>(), step_sin, step_cos, k, sin_row, cos_row);
  }
}

// StepRow followed by StoreRow without content, in one pass over the pairs.
template <SinusoidalLayout kLayout, typename T>
HWY_INLINE void StepAndStoreRow(const double* HWY_RESTRICT step_sin,
                     const double* HWY_RESTRICT step_cos, int64_t half,
                     double* HWY_RESTRICT sin_row, double* HWY_RESTRICT cos_row,
                     T* HWY_RESTRICT out) {
  using Col = Columns<kLayout>;
  for (int64_t k = 0; k < half; ++k) {
    const double s = sin_row[k];
    const double c = cos_row[k];
    const double next_sin = s * step_cos[k] + c * step_sin[k];
    const double next_cos = c * step_cos[k] - s * step_sin[k];
    sin_row[k] = next_sin;
    cos_row[k] = next_cos;
    out[Col::Sin(k, half)] = static_cast<T>(next_sin);
    out[Col::Cos(k, half)] = static_cast<T>(next_cos);
  }
}

// Rounds the row once to T (float32, or double: unchanged), then adds
// content·content_scale in T.
template <SinusoidalLayout kLayout, typename T>
HWY_INLINE void StoreRow(const double* HWY_RESTRICT sin_row, const double* HWY_RESTRICT cos_row,
              int64_t half, const T* HWY_RESTRICT content, T content_scale,
              T* HWY_RESTRICT out) {
  using Col = Columns<kLayout>;
  for (int64_t k = 0; k < half; ++k) {
    out[Col::Sin(k, half)] = static_cast<T>(sin_row[k]);
    out[Col::Cos(k, half)] = static_cast<T>(cos_row[k]);
  }
  if (content != nullptr) {
    for (int64_t c = 0; c < 2 * half; ++c) {
      out[c] = content[c] * content_scale + out[c];
    }
  }
}



// Rows [begin, end). Per chunk, never per element: the current row's sin and
// cos in double, in `sin_row` / `cos_row` (half values each).
template <SinusoidalLayout kLayout, typename T>
HWY_INLINE void EncodeChunk(const TableJob<T>& job, int64_t begin, int64_t end,
                            double* sin_row, double* cos_row) {
  const int64_t half = job.half;
  const int64_t dim = 2 * half;
  const absl::Span<const int64_t> integers = job.positions.integers();
  for (int64_t t = begin; t < end; ++t) {
    T* out = job.out.data() + t * dim;
    if (!StepsFromPrevious(integers, job.step, t)) {
      ExactRow(job, t, sin_row, cos_row);
    } else {
      if (t == begin) {
        // Mid-ladder chunk start: replay from this row's anchor.
        int64_t anchor = t - 1;
        while (StepsFromPrevious(integers, job.step, anchor)) --anchor;
        ExactRow(job, anchor, sin_row, cos_row);
        for (int64_t r = anchor + 1; r < t; ++r) {
          StepRow(job.step_sin, job.step_cos, half, sin_row, cos_row);
        }
      }
      if (job.content.empty()) {
        StepAndStoreRow<kLayout>(job.step_sin, job.step_cos, half, sin_row,
                                 cos_row, out);
        continue;
      }
      StepRow(job.step_sin, job.step_cos, half, sin_row, cos_row);
    }
    StoreRow<kLayout>(sin_row, cos_row, half,
                      job.content.empty() ? nullptr : job.content.data() + t * dim,
                      job.content_scale, out);
  }
}

#define PHASOR_SINUSOIDAL_CHUNK(name, layout, T)                                   \
  void name(const TableJob<T>& job, int64_t begin, int64_t end, double* sin_row, \
            double* cos_row) {                                                   \
    EncodeChunk<layout, T>(job, begin, end, sin_row, cos_row);                   \
  }
PHASOR_SINUSOIDAL_CHUNK(ChunkInterleavedF32, SinusoidalLayout::kInterleaved, float)
PHASOR_SINUSOIDAL_CHUNK(ChunkSinCosF32, SinusoidalLayout::kSplitSinCos, float)
PHASOR_SINUSOIDAL_CHUNK(ChunkCosSinF32, SinusoidalLayout::kSplitCosSin, float)
PHASOR_SINUSOIDAL_CHUNK(ChunkInterleavedF64, SinusoidalLayout::kInterleaved, double)
PHASOR_SINUSOIDAL_CHUNK(ChunkSinCosF64, SinusoidalLayout::kSplitSinCos, double)
PHASOR_SINUSOIDAL_CHUNK(ChunkCosSinF64, SinusoidalLayout::kSplitCosSin, double)
#undef PHASOR_SINUSOIDAL_CHUNK

}  // namespace HWY_NAMESPACE
}  // namespace phasor
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace phasor {

absl::Status ValidateSinusoidalSpec(const SinusoidalSpec& spec,
                                    absl::string_view field_prefix) {
  if (spec.dim <= 0 || spec.dim % 2 != 0) {
    return InvalidField(absl::StrCat(field_prefix, ".dim"),
                        absl::StrCat("must be even and > 0, got ", spec.dim));
  }
  // Every ω_k is base^e with e in [−1, 0], so ω_k <= max(1, 1/base): a base
  // of at least the smallest normal double keeps every frequency finite (a
  // subnormal base would make 1/base overflow).
  if (!std::isfinite(spec.base) || !(spec.base >= std::numeric_limits<double>::min())) {
    return InvalidField(absl::StrCat(field_prefix, ".base"),
                        absl::StrCat("must be finite and >= 2.2250738585072014e-308 "
                                     "(so 1/base, the largest frequency, is finite), got ",
                                     spec.base));
  }
  return absl::OkStatus();
}

std::vector<double> SinusoidalFrequencies(const SinusoidalSpec& spec) {
  // Both schemes are geometric ladders ω_k = base^(−k/n), correctly rounded
  // (core/frequency_ladder.h): Vaswani with n = d/2; tensor2tensor
  // (common_attention.get_timing_signal_1d: the log increment is
  // ln(max/min timescale) / max(num_timescales − 1, 1)) with
  // n = max(d/2 − 1, 1), so d = 2 has the single frequency ω_0 = 1, as in
  // tensor2tensor.
  const int64_t half = spec.dim / 2;
  const int64_t n = spec.frequencies == FrequencyScheme::kVaswani
                        ? half
                        : std::max<int64_t>(half - 1, 1);
  const WideReal base = static_cast<WideReal>(spec.base);
  return RoundLadder(PowerLadder(InverseRoot(spec.base, n), half),
                     std::vector<DoubleDouble>{},
                     [&](int64_t k) {
                       return WidePow(base, -static_cast<WideReal>(k) /
                                                static_cast<WideReal>(n));
                     });
}

namespace {

template <typename T>
absl::Status CheckSinusoidalInputs(const SinusoidalSpec& spec,
                                   const Positions& positions,
                                   absl::Span<const T> content, T content_scale) {
  if (positions.is_real()) {
    const absl::Span<const double> reals = positions.reals();
    for (size_t i = 0; i < reals.size(); ++i) {
      if (!std::isfinite(reals[i])) {
        return InvalidField(absl::StrCat("positions[", i, "]"),
                            absl::StrCat("must be finite, got ", reals[i]));
      }
    }
  }
  if (!content.empty()) {
    const int64_t expected = positions.size() * spec.dim;
    if (static_cast<int64_t>(content.size()) != expected) {
      return InvalidField(
          "content", absl::StrCat("must have ", positions.size(), " x ",
                                  spec.dim, " = ", expected, " values, got ",
                                  content.size()));
    }
    if (!std::isfinite(content_scale)) {
      return InvalidField("content_scale", "must be finite");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSinusoidalInputs(const SinusoidalSpec& spec,
                                      const Positions& positions,
                                      absl::Span<const float> content,
                                      float content_scale) {
  return CheckSinusoidalInputs(spec, positions, content, content_scale);
}

absl::Status ValidateSinusoidalInputs(const SinusoidalSpec& spec,
                                      const Positions& positions,
                                      absl::Span<const double> content,
                                      double content_scale) {
  return CheckSinusoidalInputs(spec, positions, content, content_scale);
}


namespace {

HWY_EXPORT(ChunkInterleavedF32);
HWY_EXPORT(ChunkSinCosF32);
HWY_EXPORT(ChunkCosSinF32);
HWY_EXPORT(ChunkInterleavedF64);
HWY_EXPORT(ChunkSinCosF64);
HWY_EXPORT(ChunkCosSinF64);

template <typename T>
using ChunkKernel = void (*)(const TableJob<T>&, int64_t, int64_t, double*, double*);

// The chunk kernel of the best target the CPU runs.
template <SinusoidalLayout kLayout, typename T>
ChunkKernel<T> DispatchedChunk() {
  if constexpr (std::is_same_v<T, float>) {
    if constexpr (kLayout == SinusoidalLayout::kInterleaved) {
      return HWY_DYNAMIC_DISPATCH(ChunkInterleavedF32);
    } else if constexpr (kLayout == SinusoidalLayout::kSplitSinCos) {
      return HWY_DYNAMIC_DISPATCH(ChunkSinCosF32);
    } else {
      return HWY_DYNAMIC_DISPATCH(ChunkCosSinF32);
    }
  } else {
    if constexpr (kLayout == SinusoidalLayout::kInterleaved) {
      return HWY_DYNAMIC_DISPATCH(ChunkInterleavedF64);
    } else if constexpr (kLayout == SinusoidalLayout::kSplitSinCos) {
      return HWY_DYNAMIC_DISPATCH(ChunkSinCosF64);
    } else {
      return HWY_DYNAMIC_DISPATCH(ChunkCosSinF64);
    }
  }
}


// T = float: the ladder where positions allow it. T = double: every row
// exact, since the ladder's drift (~1e-9) would be the double output's
// largest error.
template <SinusoidalLayout kLayout, typename T>
void EncodeRows(const SinusoidalSpec& spec, const std::vector<double>& omega,
                const Positions& positions, absl::Span<const T> content,
                T content_scale, const ExecutionOptions& options,
                absl::Span<T> out) {
  const int64_t half = spec.dim / 2;
  const int64_t step = std::is_same_v<T, double> ? 0 : LadderStep(positions);
  std::vector<ExactAngle> angles;
  angles.reserve(omega.size());
  for (double w : omega) angles.emplace_back(w);
  std::vector<double> step_sin(half), step_cos(half);
  if (step != 0) {
    CosSinRow(angles.data(), half, step, step_cos.data(), step_sin.data());
  }
  const TableJob<T> job{angles.data(), step_sin.data(),
                     step_cos.data(), half,       step,
                     positions,       content,    content_scale,
                     out};
  ParallelFor(options, positions.size(), spec.dim, [&](int64_t begin, int64_t end) {
    std::vector<double> sin_row(half), cos_row(half);
    DispatchedChunk<kLayout, T>()(job, begin, end, sin_row.data(), cos_row.data());
  });
}

template <typename T>
void EncodeSinusoidalAs(const SinusoidalSpec& spec, const Positions& positions,
                        absl::Span<const T> content, T content_scale,
                        const ExecutionOptions& options, absl::Span<T> out) {
  assert(static_cast<int64_t>(out.size()) ==
         SinusoidalOutputSize(spec, positions.size()));
  const std::vector<double> omega = SinusoidalFrequencies(spec);
  switch (spec.layout) {
    case SinusoidalLayout::kInterleaved:
      EncodeRows<SinusoidalLayout::kInterleaved, T>(spec, omega, positions, content,
                                                 content_scale, options, out);
      return;
    case SinusoidalLayout::kSplitSinCos:
      EncodeRows<SinusoidalLayout::kSplitSinCos, T>(spec, omega, positions, content,
                                                 content_scale, options, out);
      return;
    case SinusoidalLayout::kSplitCosSin:
      EncodeRows<SinusoidalLayout::kSplitCosSin, T>(spec, omega, positions, content,
                                                 content_scale, options, out);
      return;
  }
}

}  // namespace

void EncodeSinusoidal(const SinusoidalSpec& spec, const Positions& positions,
                      absl::Span<const float> content, float content_scale,
                      const ExecutionOptions& options, absl::Span<float> out) {
  EncodeSinusoidalAs(spec, positions, content, content_scale, options, out);
}

void EncodeSinusoidal(const SinusoidalSpec& spec, const Positions& positions,
                      absl::Span<const double> content, double content_scale,
                      const ExecutionOptions& options, absl::Span<double> out) {
  EncodeSinusoidalAs(spec, positions, content, content_scale, options, out);
}

}  // namespace phasor
#endif  // HWY_ONCE
