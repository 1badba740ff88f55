// -----------------------------------------------------------------------------
// File: core/math/exact_angle.h
// -----------------------------------------------------------------------------
//
// Exact angle reduction: cos(p·θ) and sin(p·θ) for any int64 position p and
// any finite double frequency θ ≥ 0 (radians per unit position).
//
// p·θ is an exact product of a 64-bit integer and a 53-bit significand, up to
// 2^63·θ radians; a double angle p·θ loses |p|·θ·2^-53 radians before any
// sine is taken (2^53 + 1 rounds to 2^53, INT64_MAX and INT64_MIN give the
// same cos). Here the phase is reduced modulo one turn exactly, Payne–Hanek
// style (M. Payne, R. Hanek, "Radian reduction for trigonometric functions",
// SIGNUM Newsletter 18(1), 1983), in 128-bit fixed point as ExactPhase
// (core/math/exact_phase.h) does for periods:
//   step = floor(frac(θ / 2π) · 2^128)   (from 1280 bits of 1/(2π), built once)
//   phase = p · step mod 2^128            (one wrapping 128-bit multiply)
// frac(p·θ/2π) = frac(p·frac(θ/2π)) because p is an integer, so the phase is
// within |p|·2^-128 + 2^-64 turns (< 4e-19 rad) of exact for every int64 p.
// The phase is then split into a quarter turn q and a residual angle in
// [−π/4, π/4] (≤ 2^-54 rad off, core/math/turns.h QuarterTurnSplit), whose
// sin and cos come from the vector kernel (core/math/sincos.h SinCosOfTurns:
// split, fdlibm's polynomials, < 1 ulp like libm's, and the quadrant's exact
// swap and signs, the same bits on every SIMD target), a row of phases per
// call. Result: each of cos and sin within 1.7e-16 absolute of the exact
// value (tests/exact_angle_test.cc, and rope_test.cc and sinusoidal_test.cc
// through their encoders, check ≤ 4e-16 against a __float128 reference at
// 2^53 ± 1, INT64_MAX, INT64_MIN, ...). The bound is absolute: the phase has
// a resolution of 2^-64 turns, so an angle below ~1e-18 rad has a sin of the
// right size only to that absolute precision.
//
// Units: θ in radians per unit position, positions in units (token indices,
// or any real unit for CosSinReal), phases in 2^-64 turn.
//
// Thread-safety: an ExactAngle is immutable after construction; concurrent
// calls on one object are safe.
//
// Example:
//
//   const ExactAngle angle(/*theta=*/1e-4);
//   double c, s;
//   angle.CosSin(/*position=*/int64_t{1} << 62, &c, &s);
#ifndef PHASOR_CORE_MATH_EXACT_ANGLE_H_
#define PHASOR_CORE_MATH_EXACT_ANGLE_H_

#include <cmath>
#include <cstdint>

#include "core/math/turns.h"

namespace phasor {

class ExactAngle final {
 public:
  // REQUIRES: theta finite and >= 0.
  explicit ExactAngle(double theta);
  ExactAngle() : step_(0) {}

  // cos(p·θ), sin(p·θ) for a real position. |p| < 2^63 splits exactly into
  // p = i + f (i = trunc(p), f = p − i, both exact in double): i·θ is
  // reduced exactly as for an integer, and f·θ (|f| < 1) adds its phase
  // f·θ/2π in double, off by at most |f·θ|·2^-52 radians. So every real
  // position is within θ·2^-52 + 1.7e-16 of exact (3.9e-16 for θ <= 1),
  // with no |p|-proportional error. Larger |p| (integers beyond int64) fall
  // back to the double product p·θ.
  void CosSinReal(double position, double* cos_out, double* sin_out) const {
    if (!(std::fabs(position) < 0x1p63)) {
      const double angle = position * theta_;
      *cos_out = std::cos(angle);
      *sin_out = std::sin(angle);
      return;
    }
    CosSinOfTurns(TurnsReal(position), cos_out, sin_out);
  }

  // The phase of p·θ in units of 2^-64 turn (mod 2^64), for a real position
  // split as CosSinReal says. REQUIRES: |position| < 2^63.
  uint64_t TurnsReal(double position) const {
    const auto whole = static_cast<int64_t>(position);
    const double fraction = position - static_cast<double>(whole);
    uint64_t turns = Turns(whole);
    if (fraction != 0.0) {
      const double phase = fraction * turns_per_unit_;   // turns
      const double part = phase - std::trunc(phase);   // (−1, 1), exact
      // part·2^63 < 2^63 in magnitude; one bit of resolution (2^-63 turn)
      // is given up to stay inside int64.
      turns += static_cast<uint64_t>(static_cast<int64_t>(part * 0x1p63)) << 1;
    }
    return turns;
  }

  // cos(p·θ), sin(p·θ) of the exact product.
  void CosSin(int64_t position, double* cos_out, double* sin_out) const {
    const unsigned __int128 turns =
        static_cast<unsigned __int128>(static_cast<__int128>(position)) * step_;
    CosSinOfTurns(static_cast<uint64_t>(turns >> 64), cos_out, sin_out);
  }

  // floor(frac(θ/2π)·2^128): the phase step per unit position, in 2^-128
  // turn.
  unsigned __int128 step() const { return step_; }

  // The phase of p·θ in units of 2^-64 turn (mod 2^64).
  uint64_t Turns(int64_t position) const {
    const unsigned __int128 turns =
        static_cast<unsigned __int128>(static_cast<__int128>(position)) * step_;
    return static_cast<uint64_t>(turns >> 64);
  }

  // cos and sin of 2π·turns·2^-64: one value of SinCosOfTurns
  // (core/math/sincos.h), the same bits.
  static void CosSinOfTurns(uint64_t turns, double* cos_out, double* sin_out);

  // The split of 2π·turns·2^-64 (core/math/turns.h QuarterTurnSplit): the
  // nearest quarter turn q (mod 4, in *quadrant) and the residual r in
  // [−1/8, 1/8) turn as the angle r·2π (|angle| <= π/4, error <= 2^-54 +
  // 1e-22 rad).
  static double QuarterTurnSplit(uint64_t turns, uint32_t* quadrant) {
    return phasor::QuarterTurnSplit(turns, quadrant);
  }

 private:
  unsigned __int128 step_;  // floor(frac(θ/2π)·2^128)
  double theta_ = 0.0;          // θ
  double turns_per_unit_ = 0.0;  // θ/2π, rounded once
};

// One row of angles: cos and sin of p·θ_k for k < n, each exactly
// ExactAngle::CosSin's (or CosSinReal's) bits, the row's phases taken
// together through SinCosOfTurns. An integer position is reduced
// exactly (any int64 p, within 1.7e-16 of the exact values); a real one is
// split into integer and fraction (ExactAngle::CosSinReal).
void CosSinRow(const ExactAngle* __restrict angles, int64_t n, int64_t position,
               double* __restrict cos_row, double* __restrict sin_row);
void CosSinRow(const ExactAngle* __restrict angles, int64_t n, double position,
               double* __restrict cos_row, double* __restrict sin_row);

}  // namespace phasor

#endif  // PHASOR_CORE_MATH_EXACT_ANGLE_H_
