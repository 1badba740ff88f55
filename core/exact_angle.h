// Exact angle reduction: cos(p·θ) and sin(p·θ) for any int64 position p and
// any finite double frequency θ ≥ 0 (radians per unit position).
//
// p·θ is an exact product of a 64-bit integer and a 53-bit significand, up to
// 2^63·θ radians; a double angle p·θ loses |p|·θ·2^-53 radians before any
// sine is taken (2^53 + 1 rounds to 2^53, INT64_MAX and INT64_MIN give the
// same cos). Here the phase is reduced modulo one turn exactly, Payne–Hanek
// style (M. Payne, R. Hanek, "Radian reduction for trigonometric functions",
// SIGNUM Newsletter 18(1), 1983), with the 128-bit fixed-point arithmetic of
// ExactPhase in core/continuous_time.h:
//   step = floor(frac(θ / 2π) · 2^128)   (from 1280 bits of 1/(2π), built once)
//   phase = p · step mod 2^128            (one wrapping 128-bit multiply)
// frac(p·θ/2π) = frac(p·frac(θ/2π)) because p is an integer, so the phase is
// within |p|·2^-128 + 2^-64 turns (< 4e-19 rad) of exact for every int64 p.
// The phase is then split into a quarter turn q and a residual angle in
// [−π/4, π/4] rounded once to double (≤ 2^-54 rad), whose sin and cos come
// from the time sinusoid's vector kernel (core/continuous_time.h
// SinCosOfAngles: fdlibm's polynomials, < 1 ulp like libm's, the same bits
// on every SIMD target), a row of angles per kernel call; the quadrant swaps
// and negates them exactly. Result: each of cos and sin within 1.7e-16
// absolute of the exact value
// (tests/exact_angle_test in rope_test.cc and sinusoidal_test.cc check ≤ 4e-16
// against a __float128 reference at 2^53 ± 1, INT64_MAX, INT64_MIN, ...).
// The bound is absolute: the phase has a resolution of 2^-64 turns, so an
// angle below ~1e-18 rad has a sin of the right size only to that absolute
// precision.
//
// Thread-safety: immutable after construction.
#ifndef PHASOR_CORE_EXACT_ANGLE_H_
#define PHASOR_CORE_EXACT_ANGLE_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/types/span.h"

namespace phasor {

// The double nearest x < 2^127, ties to even: the value
// static_cast<double>(x) gives, without libgcc's __floatuntidf call (a third
// of the float64 sinusoid's time). The top 64 bits from the leading one,
// with a sticky bit for any nonzero bit below them, round the same way:
// 64 > 53 + 2 bits keep the round and sticky information.
inline double NearestDouble(unsigned __int128 x) {
  const auto high = static_cast<uint64_t>(x >> 64);
  if (high == 0) return static_cast<double>(static_cast<uint64_t>(x));
  const int shift = __builtin_clzll(high);  // x·2^shift has bit 127 set.
  const unsigned __int128 normal = x << shift;
  const auto top = static_cast<uint64_t>(normal >> 64);
  const uint64_t sticky = static_cast<uint64_t>(normal) != 0 ? 1 : 0;
  // top >= 2^63: halved (its last bit kept as sticky) it converts as a
  // signed integer, one instruction, still with 63 > 53 + 2 bits.
  const auto half = static_cast<int64_t>((top >> 1) | ((top | sticky) & 1));
  // 2^(65 − shift), 2^2..2^65, built from its bits (std::ldexp is a call).
  const uint64_t scale_bits = static_cast<uint64_t>(1023 + 65 - shift) << 52;
  double scale = 0;
  std::memcpy(&scale, &scale_bits, sizeof(scale));
  return static_cast<double>(half) * scale;
}

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

  // The phase of p·θ in units of 2^-64 turn (mod 2^64).
  uint64_t Turns(int64_t position) const {
    const unsigned __int128 turns =
        static_cast<unsigned __int128>(static_cast<__int128>(position)) * step_;
    return static_cast<uint64_t>(turns >> 64);
  }

  // cos and sin of 2π·turns·2^-64 (one value of the row function below,
  // the same bits).
  static void CosSinOfTurns(uint64_t turns, double* cos_out, double* sin_out);

  // The split of 2π·turns·2^-64: the nearest quarter turn q (mod 4, in
  // *quadrant) and the residual r in [−1/8, 1/8) turn as the angle r·2π, its
  // 2^-64-turn integer times round(π·2^62) formed exactly in 128 bits and
  // rounded once, so |angle| <= π/4 and its error is <= 2^-54 rad.
  static double QuarterTurnSplit(uint64_t turns, uint32_t* quadrant) {
    const uint64_t q = (turns + (uint64_t{1} << 61)) >> 62;
    const auto residual = static_cast<int64_t>(turns - (q << 62));
    constexpr uint64_t kPiTimes2Pow62 = 0xc90fdaa22168c235u;  // round(π·2^62)
    // Unsigned, so clang's UBSan needs no __muloti4.
    const uint64_t magnitude =
        residual < 0 ? uint64_t{0} - static_cast<uint64_t>(residual)
                     : static_cast<uint64_t>(residual);
    const double scaled =
        NearestDouble(static_cast<unsigned __int128>(magnitude) * kPiTimes2Pow62);
    *quadrant = static_cast<uint32_t>(q & 3);
    return (residual < 0 ? -scaled : scaled) * 0x1p-125;
  }

 private:
  unsigned __int128 step_;  // floor(frac(θ/2π)·2^128)
  double theta_ = 0.0;          // θ
  double turns_per_unit_ = 0.0;  // θ/2π, rounded once
};

// cos_out[k] and sin_out[k] of 2π·turns[k]·2^-64 for every k: each phase's
// QuarterTurnSplit, the residuals' sin and cos through the vector kernel (up
// to 64 a call), then each quadrant's swap and signs. Each value depends on
// its own phase alone (ExactAngle::CosSinOfTurns gives the same bits).
void CosSinOfTurns(absl::Span<const uint64_t> turns, double* __restrict cos_out,
                   double* __restrict sin_out);

// One row of angles: cos and sin of p·θ_k for k < n, each exactly
// ExactAngle::CosSin's (or CosSinReal's) bits, the row's sines and cosines
// taken together through the vector kernel. An integer position is reduced
// exactly (any int64 p, within 1.7e-16 of the exact values); a real one is
// split into integer and fraction (ExactAngle::CosSinReal).
void CosSinRow(const ExactAngle* __restrict angles, int64_t n, int64_t position,
               double* __restrict cos_row, double* __restrict sin_row);
void CosSinRow(const ExactAngle* __restrict angles, int64_t n, double position,
               double* __restrict cos_row, double* __restrict sin_row);

}  // namespace phasor

#endif  // PHASOR_CORE_EXACT_ANGLE_H_
