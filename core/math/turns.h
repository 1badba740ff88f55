// -----------------------------------------------------------------------------
// File: core/math/turns.h
// -----------------------------------------------------------------------------
//
// Phases in units of 2^-64 turn, and their split at the nearest quarter turn.
//
// Every exact angle in core/ is a phase: an unsigned 64-bit integer t standing
// for the angle 2π·t·2^-64 radians (mod 2π). Wrapping integer arithmetic is
// reduction modulo one turn, so a phase is exact to 2^-64 turn (3.4e-19 rad)
// however many turns the angle made. To take its sine, the phase is split
// (as fdlibm's __ieee754_rem_pio2 splits a double, but exactly, since the
// phase is already reduced):
//
//   q = round(t / 2^62) mod 4                 the nearest quarter turn
//   r = t − q·2^62, |r| <= 2^61               the residual, in 2^-64 turn
//   angle(r) = r·π·2^-63 rad, |angle| <= π/4
//
// and sin/cos of 2π·t·2^-64 are sin/cos of angle(r) swapped and negated by q
// (core/math/sincos.h). The residual angle is formed from r = h·2^32 + l
// (h = r >> 32 signed, |h| <= 2^29; l = r mod 2^32) as
//
//   h·kTurnsHiRadiansHi + (h·kTurnsHiRadiansLo + l·kTurnRadians)
//
// where kTurnsHiRadiansHi + kTurnsHiRadiansLo = π·2^-31 (the first holds 23
// bits, so h times it is exact) and kTurnRadians = π·2^-63, each rounded once
// (mpmath, 300 bits). The inner sum is below 1e-7 and off by < 1e-22; the
// outer sum is rounded once: the angle is within 2^-54 + 1e-22 rad of exact.
// Plain multiplies and adds, no fused ones: every file that evaluates the
// split (QuarterTurnSplit here, the vector split in core/math/sincos-inl.h)
// is compiled with -ffp-contract=off, so the scalar and vector splits give
// the same bits.
//
// Thread-safety: constants and a pure function.
//
// Example:
//
//   uint32_t quadrant = 0;
//   const double angle = QuarterTurnSplit(uint64_t{3} << 60, &quadrant);
//   // 3/16 turn = π/2 − π/8: quadrant 1, angle −π/8.
#ifndef PHASOR_CORE_MATH_TURNS_H_
#define PHASOR_CORE_MATH_TURNS_H_

#include <cstdint>

namespace phasor {

inline constexpr double kTurnRadians = 0x1.921fb54442d18p-62;      // π·2^-63
inline constexpr double kTurnsHiRadiansHi = 0x1.921fb4p-30;        // 23 bits
inline constexpr double kTurnsHiRadiansLo = 0x1.4442d18469899p-54;  // the rest

// The split of 2π·turns·2^-64: the nearest quarter turn q (mod 4, in
// *quadrant) and the residual r in [−1/8, 1/8) turn as the angle r·2π
// (|angle| <= π/4, error <= 2^-54 + 1e-22 rad).
inline double QuarterTurnSplit(uint64_t turns, uint32_t* quadrant) {
  const uint64_t q = (turns + (uint64_t{1} << 61)) >> 62;
  const auto residual = static_cast<int64_t>(turns - (q << 62));
  const auto high = static_cast<double>(residual >> 32);  // Arithmetic shift.
  const auto low = static_cast<double>(static_cast<uint64_t>(residual) & 0xffffffffu);
  *quadrant = static_cast<uint32_t>(q & 3);
  return high * kTurnsHiRadiansHi + (high * kTurnsHiRadiansLo + low * kTurnRadians);
}

}  // namespace phasor

#endif  // PHASOR_CORE_MATH_TURNS_H_
