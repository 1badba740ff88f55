// -----------------------------------------------------------------------------
// File: core/math/angle_ladder.h
// -----------------------------------------------------------------------------
//
// The angle-addition ladder: rows of cos(p_t·θ_k), sin(p_t·θ_k) for integer
// positions in arithmetic progression p_t = p_{t−1} + δ, each row from the
// previous one by a rotation through δ·θ_k, carried in double:
//
//   cos((p+δ)θ) = cos(pθ)·cos(δθ) − sin(pθ)·sin(δθ)
//   sin((p+δ)θ) = sin(pθ)·cos(δθ) + cos(pθ)·sin(δθ)
//
// Four multiplies and two adds per pair instead of a sin and a cos in double
// (about 25 ns each; 64 pairs per token at RoPE's head_dim 128 cost more than
// rotating the token's 32 heads), and the step vectorises across pairs. The
// sinusoidal encoding and RoPE fill their float32 rows with it.
//
// Error: every kLadderAnchorRows-th row, and every row that breaks the
// progression, is re-anchored exactly (core/math/exact_angle.h). Each step
// adds about three double roundings (2^-53 relative) and δ·θ carries one
// rounding of |δ|·θ·2^-53, so with |δ| <= kMaxLadderStep the drift after 255
// steps stays below 2^-30 (1e-9): far inside float32's half ulp (3e-8) and
// the 2e-6 float32 contract, and the reason float64 outputs never take a step
// (its drift would be their largest error).
//
// Determinism: anchors sit at fixed row indices (multiples of
// kLadderAnchorRows), so a row's value does not depend on where a
// ParallelFor chunk begins: a chunk that starts mid-run replays from the
// row's anchor (AngleLadderWalker, core/math/angle_ladder-inl.h), and 1 and
// N threads give identical bytes.
//
// Rounding: the two encoders took their steps with different roundings before
// they shared this ladder, and each keeps its bytes: kEachProduct rounds both
// products (a·b + c·d with two products and a sum rounded), kFirstProductFused
// fuses the first product into the sum on targets with FMA (fma(a, b, c·d),
// Highway's MulAdd/MulSub; a multiply then an add on the others). The scalar
// StepAnglePair below is kEachProduct's oracle.
//
// Units: positions are integers (token indices), θ in radians per position.
//
// Thread-safety: pure functions.
//
// Example:
//
//   const int64_t step = AngleLadderStep(positions);  // 0: every row exact.
//   // ... with the walker of core/math/angle_ladder-inl.h in a kernel:
//   //   if (walker.Seek(t, exact_row)) StepAngleRow<kRounding>(...);
#ifndef PHASOR_CORE_MATH_ANGLE_LADDER_H_
#define PHASOR_CORE_MATH_ANGLE_LADDER_H_

#include <cstdint>

#include "absl/types/span.h"

namespace phasor {

// Rows between exact anchors: row t is exact when t % kLadderAnchorRows == 0.
inline constexpr int64_t kLadderAnchorRows = 256;
// The largest |δ| the drift bound above admits.
inline constexpr int64_t kMaxLadderStep = int64_t{1} << 20;

// How a step rounds (see the file comment).
enum class AngleStepRounding {
  kEachProduct,        // Every product rounded (the sinusoidal encoding).
  kFirstProductFused,  // fma on targets with FMA (RoPE).
};

// What a ladder over one call's rows shares: the positions, the step δ
// (0: every row exact) and cos(δθ_k), sin(δθ_k) of its `half` pairs.
struct AngleLadder {
  absl::Span<const int64_t> positions;  // One per row; empty when step == 0.
  int64_t step = 0;
  const double* step_cos = nullptr;  // half values; unused when step == 0.
  const double* step_sin = nullptr;
  int64_t half = 0;
};

// The ladder's step δ = p[1] − p[0], or 0 (every row exact) when there are
// fewer than two positions, the difference overflows, is 0, or exceeds
// kMaxLadderStep in magnitude.
inline int64_t AngleLadderStep(absl::Span<const int64_t> positions) {
  if (positions.size() < 2) return 0;
  int64_t step = 0;
  if (__builtin_sub_overflow(positions[1], positions[0], &step)) return 0;
  return (step != 0 && step >= -kMaxLadderStep && step <= kMaxLadderStep) ? step : 0;
}

// Whether row t follows from row t−1 by one step of δ = `step`: not an
// anchor row, and p[t] = p[t−1] + δ without overflow. Always false for
// step 0.
// REQUIRES: step == 0 or 0 <= t < positions.size().
inline bool StepsFromPrevious(absl::Span<const int64_t> positions, int64_t step,
                              int64_t t) {
  if (step == 0 || t % kLadderAnchorRows == 0) return false;
  int64_t expected = 0;
  return !__builtin_add_overflow(positions[t - 1], step, &expected) &&
         expected == positions[t];
}

// One pair's step with AngleStepRounding::kEachProduct, in scalar code: the
// bits of StepAngleRow<kEachProduct> (core/math/angle_ladder-inl.h) for that
// pair, for loops that fuse the step with their own stores. (*c, *s) holds
// cos(pθ), sin(pθ) and becomes cos((p+δ)θ), sin((p+δ)θ).
// REQUIRES: compiled with -ffp-contract=off.
inline void StepAnglePair(double step_cos, double step_sin, double* c, double* s) {
  const double next_sin = *s * step_cos + *c * step_sin;
  const double next_cos = *c * step_cos - *s * step_sin;
  *s = next_sin;
  *c = next_cos;
}

}  // namespace phasor

#endif  // PHASOR_CORE_MATH_ANGLE_LADDER_H_
