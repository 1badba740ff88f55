// -----------------------------------------------------------------------------
// File: core/math/angle_ladder-inl.h
// -----------------------------------------------------------------------------
//
// Per-target (Highway) code of the angle-addition ladder
// (core/math/angle_ladder.h): the step of a row of (cos, sin) pairs in
// vectors, and the walker that brings a chunk's rows from their anchors.
//
// Include inside a translation unit's per-target code, after
// "hwy/highway.h" (as hwy/contrib/math/math-inl.h is included); the code is
// in phasor::HWY_NAMESPACE. The translation unit must be compiled with
// -ffp-contract=off (core/CMakeLists.txt), so that the only fused
// multiply-adds are the ones AngleStepRounding::kFirstProductFused spells
// out.
//
// Thread-safety: StepAngleRow is a pure function; an AngleLadderWalker
// belongs to one thread.
//
// Example (in a per-target kernel, rows of `half` pairs):
//
//   AngleLadderWalker<AngleStepRounding::kEachProduct> walker(ladder, cos_row,
//                                                            sin_row);
//   for (int64_t t = begin; t < end; ++t) {
//     if (walker.Seek(t, exact_row)) walker.Step();
//     // cos_row, sin_row hold row t.
//   }

// Per-target include guard (still compiled once per target).
#if defined(PHASOR_CORE_MATH_ANGLE_LADDER_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PHASOR_CORE_MATH_ANGLE_LADDER_INL_H_
#undef PHASOR_CORE_MATH_ANGLE_LADDER_INL_H_
#else
#define PHASOR_CORE_MATH_ANGLE_LADDER_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "core/math/angle_ladder.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One ladder step for the Lanes(d) pairs at i: (cos_row, sin_row)[i..]
// rotated by (step_cos, step_sin)[i..] = cos(δθ), sin(δθ).
//
//   Valid Lane Types: float64
//          Max Error: ~3 roundings (2^-53 relative) per step
//        Valid Range: |cos|, |sin| <= 1 (any finite values)
//   @return the next row's pairs, in place
template <AngleStepRounding kRounding, class D>
HWY_INLINE void StepAngleLanes(D d, const double* HWY_RESTRICT step_cos,
                               const double* HWY_RESTRICT step_sin, size_t i,
                               double* HWY_RESTRICT cos_row,
                               double* HWY_RESTRICT sin_row) {
  const auto c = hn::LoadU(d, cos_row + i);
  const auto s = hn::LoadU(d, sin_row + i);
  const auto sc = hn::LoadU(d, step_cos + i);
  const auto ss = hn::LoadU(d, step_sin + i);
  if constexpr (kRounding == AngleStepRounding::kFirstProductFused) {
    // a·b − c·d = fma(a, b, −(c·d)) where the target has FMA.
    hn::StoreU(hn::MulSub(c, sc, hn::Mul(s, ss)), d, cos_row + i);
    hn::StoreU(hn::MulAdd(s, sc, hn::Mul(c, ss)), d, sin_row + i);
  } else {
    hn::StoreU(hn::Add(hn::Mul(s, sc), hn::Mul(c, ss)), d, sin_row + i);
    hn::StoreU(hn::Sub(hn::Mul(c, sc), hn::Mul(s, ss)), d, cos_row + i);
  }
}

// One ladder step for the `half` pairs of a row: whole vectors, then one
// pair at a time (each pair is computed alone, so the split changes no bit).
//
//   Valid Lane Types: float64
//          Max Error: ~3 roundings per step
//        Valid Range: any half >= 0
//   @return the next row, in place
template <AngleStepRounding kRounding>
HWY_INLINE void StepAngleRow(const double* HWY_RESTRICT step_cos,
                             const double* HWY_RESTRICT step_sin, int64_t half,
                             double* HWY_RESTRICT cos_row, double* HWY_RESTRICT sin_row) {
  const hn::ScalableTag<double> d;
  const size_t n = static_cast<size_t>(half);
  size_t i = 0;
  for (; i + hn::Lanes(d) <= n; i += hn::Lanes(d)) {
    StepAngleLanes<kRounding>(d, step_cos, step_sin, i, cos_row, sin_row);
  }
  for (; i < n; ++i) {
    StepAngleLanes<kRounding>(hn::CappedTag<double, 1>(), step_cos, step_sin, i, cos_row,
                              sin_row);
  }
}

// Walks the rows of one chunk in increasing order, holding the current row
// in the caller's `cos_row`, `sin_row` (half values each). Belongs to one
// thread.
template <AngleStepRounding kRounding>
class AngleLadderWalker final {
 public:
  AngleLadderWalker(const AngleLadder& ladder, double* cos_row, double* sin_row)
      : ladder_(ladder), cos_row_(cos_row), sin_row_(sin_row) {}

  // Readies row t. `exact_row(r, cos_row, sin_row)` writes row r from its
  // position alone. Returns false when it wrote row t itself; true when
  // row t follows from row t − 1 by one step, after the rows have been
  // brought to row t − 1 (replayed from the anchor when t starts the walk
  // in the middle of a run): the caller then takes that step, Step() or a
  // step fused with its own stores (StepAnglePair), before the next Seek.
  template <class ExactRow>
  HWY_INLINE bool Seek(int64_t t, const ExactRow& exact_row) {
    const bool steps = StepsFromPrevious(ladder_.positions, ladder_.step, t);
    if (!steps) {
      exact_row(t, cos_row_, sin_row_);
    } else if (row_ != t - 1) {
      int64_t anchor = t - 1;
      while (StepsFromPrevious(ladder_.positions, ladder_.step, anchor)) --anchor;
      exact_row(anchor, cos_row_, sin_row_);
      for (int64_t r = anchor + 1; r < t; ++r) Step();
    }
    row_ = t;
    return steps;
  }

  // One step of the held rows (StepAngleRow).
  HWY_INLINE void Step() {
    StepAngleRow<kRounding>(ladder_.step_cos, ladder_.step_sin, ladder_.half, cos_row_,
                            sin_row_);
  }

 private:
  const AngleLadder& ladder_;
  double* cos_row_;
  double* sin_row_;
  int64_t row_ = -2;  // The row the buffers hold after the caller's step.
};

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace phasor
HWY_AFTER_NAMESPACE();

#endif  // PHASOR_CORE_MATH_ANGLE_LADDER_INL_H_
