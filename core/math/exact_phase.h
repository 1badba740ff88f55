// -----------------------------------------------------------------------------
// File: core/math/exact_phase.h
// -----------------------------------------------------------------------------
//
// The exact 128-bit phase of a period: ExactPhase turns a period P (in
// seconds, taken as exactly the double given) and a harmonic h into the
// fixed-point step
//
//   step = floor(frac(h / P_ns) · 2^128)      turns per nanosecond, in 2^-128
//
// so that the phase of any elapsed time e (integer nanoseconds) is one
// wrapping 128-bit multiply,
//
//   phase(e) = top 64 bits of (e · step mod 2^128)    in 2^-64 turn,
//
// exact to 2^-64 turns for any |e| < 2^64 ns (plain double loses ~1e-5 rad
// for a 1 s period over 300 years). The step is the ratio of two integers
// (P = m·2^k exactly, so P_ns = m·10^9·2^k), divided out by long division
// with no rounding but the final floor. Payne–Hanek reduction does the same
// for an angle in radians (core/math/exact_angle.h); a phase goes to sin/cos
// through core/math/sincos.h.
//
// Units: periods in seconds, elapsed times in nanoseconds, phases in 2^-64
// turn, steps in 2^-128 turn per nanosecond.
//
// Thread-safety: an ExactPhase is immutable after construction.
//
// Example:
//
//   const ExactPhase daily(/*period_seconds=*/86400.0);
//   const uint64_t noon = daily.Turns(/*elapsed_ns=*/__int128{43200} * 1000000000);
//   // Half a turn, less the floored step: noon == (uint64_t{1} << 63) - 1.
#ifndef PHASOR_CORE_MATH_EXACT_PHASE_H_
#define PHASOR_CORE_MATH_EXACT_PHASE_H_

#include <cstdint>

namespace phasor {

// Periods an ExactPhase takes: 1 ns to 1e15 s (~3e7 years). The upper bound
// keeps the exact step computation inside 128 bits.
inline constexpr double kMinLadderPeriodSeconds = 1e-9;
inline constexpr double kMaxLadderPeriodSeconds = 1e15;

// One period as an exact phase step: floor(frac(h / P_ns) · 2^128), the turns
// of harmonic h advanced per nanosecond in units of 2^-128 (the period taken
// as exactly the double given). The phase of an elapsed time is then one
// wrapping 128-bit multiply, exact to 2^-64 turns for any |elapsed| < 2^64 ns.
class ExactPhase final {
 public:
  // REQUIRES: kMinLadderPeriodSeconds <= period_seconds <=
  // kMaxLadderPeriodSeconds; harmonic >= 1.
  explicit ExactPhase(double period_seconds, int64_t harmonic = 1);

  // (elapsed_ns / P_ns) mod 1 turn as a fraction of 2^64 (the top of the
  // 128-bit product), for a quarter-turn split.
  uint64_t Turns(__int128 elapsed_ns) const {
    const unsigned __int128 turns =
        static_cast<unsigned __int128>(elapsed_ns) * step_;
    return static_cast<uint64_t>(turns >> 64);
  }
  // The step, in 2^-128 turns per nanosecond.
  unsigned __int128 step() const { return step_; }

 private:
  unsigned __int128 step_;
};

}  // namespace phasor

#endif  // PHASOR_CORE_MATH_EXACT_PHASE_H_
