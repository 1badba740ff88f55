#include "core/positional/sinusoidal.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/math/angle_ladder.h"
#include "core/math/exact_angle.h"
#include "core/math/frequency_ladder.h"

// The row loops are compiled once per SIMD target Highway finds
// (hwy/examples/skeleton.cc), as in core/rope/rope_kernels.cc: foreach_target.h
// re-includes this file with HWY_TARGET set to each, HWY_DYNAMIC_DISPATCH
// picks the best the CPU runs, and the plain loops below are vectorised for
// that target. The file is compiled with -ffp-contract=off and the ladder
// step is an explicit multiply then add, so every target gives the same
// bits; one process always runs one target, so 1 and N threads agree.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/positional/sinusoidal.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "core/math/angle_ladder-inl.h"

#ifndef PHASOR_CORE_SINUSOIDAL_SHARED_
#define PHASOR_CORE_SINUSOIDAL_SHARED_
namespace phasor {
namespace {

// Rows are filled by the angle-addition ladder (core/math/angle_ladder.h):
// for integer positions in arithmetic progression, row t follows from row
// t−1 by a rotation through δ·ω_k, re-anchored exactly every
// kLadderAnchorRows rows and at every row that breaks the progression
// (ExactRow); its drift (< 1e-9) is far inside float32's half ulp. Steps
// round each product (AngleStepRounding::kEachProduct), as this encoding
// always has. Double outputs take no step: every row exact.

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

// What one chunk of rows needs; built once per call.
template <typename T>
struct TableJob {
  const ExactAngle* angles;  // Per ω_k.
  int64_t half;
  // Step δ (0 for exact rows only) and cos(δ·ω_k), sin(δ·ω_k).
  AngleLadder ladder;
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

// The ladder's step (StepAnglePair, the bits of StepAngleRow<kEachProduct>)
// followed by StoreRow without content, in one pass over the pairs.
template <SinusoidalLayout kLayout, typename T>
HWY_INLINE void StepAndStoreRow(const double* HWY_RESTRICT step_cos,
                                const double* HWY_RESTRICT step_sin, int64_t half,
                                double* HWY_RESTRICT cos_row,
                                double* HWY_RESTRICT sin_row, T* HWY_RESTRICT out) {
  using Col = Columns<kLayout>;
  for (int64_t k = 0; k < half; ++k) {
    double c = cos_row[k];
    double s = sin_row[k];
    StepAnglePair(step_cos[k], step_sin[k], &c, &s);
    sin_row[k] = s;
    cos_row[k] = c;
    out[Col::Sin(k, half)] = static_cast<T>(s);
    out[Col::Cos(k, half)] = static_cast<T>(c);
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
  const auto exact_row = [&](int64_t t, double* cos_out, double* sin_out) {
    ExactRow(job, t, sin_out, cos_out);
  };
  AngleLadderWalker<AngleStepRounding::kEachProduct> walker(job.ladder, cos_row, sin_row);
  for (int64_t t = begin; t < end; ++t) {
    T* out = job.out.data() + t * dim;
    if (walker.Seek(t, exact_row)) {
      if (job.content.empty()) {
        StepAndStoreRow<kLayout>(job.ladder.step_cos, job.ladder.step_sin, half, cos_row,
                                 sin_row, out);
        continue;
      }
      walker.Step();
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
  // (core/math/frequency_ladder.h): Vaswani with n = d/2; tensor2tensor
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
  const int64_t step = std::is_same_v<T, double> || positions.is_real()
                           ? 0
                           : AngleLadderStep(positions.integers());
  std::vector<ExactAngle> angles;
  angles.reserve(omega.size());
  for (double w : omega) angles.emplace_back(w);
  std::vector<double> step_sin(half), step_cos(half);
  if (step != 0) {
    CosSinRow(angles.data(), half, step, step_cos.data(), step_sin.data());
  }
  const AngleLadder ladder{step != 0 ? positions.integers() : absl::Span<const int64_t>(),
                           step, step_cos.data(), step_sin.data(), half};
  const TableJob<T> job{angles.data(), half,    ladder,        positions,
                        content,       content_scale, out};
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
