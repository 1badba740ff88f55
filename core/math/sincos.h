// -----------------------------------------------------------------------------
// File: core/math/sincos.h
// -----------------------------------------------------------------------------
//
// The project's one set of vector sine/cosine kernels, over arrays: of
// angles in radians, and of phases in 2^-64 turn (core/math/turns.h).
//
//   SinCosOfAngles(x):       sin(x), cos(x) for any double x
//   SinCosOfSmallAngles(x):  the same for |x| <= 2^20, without the range pass
//   SinCosOfTurns(t):        sin, cos of 2π·t·2^-64, within 1.7e-16 of exact
//   SinCosOfTurnsFloat32(t): the same phases with a one-rounding residual
//                            angle (≤ 3.5e-16 rad), for float32 outputs
//
// The kernels are fdlibm's (Sun Microsystems 1993, as kept in FreeBSD
// lib/msun/src/e_rem_pio2.c, k_sin.c, k_cos.c), vectorised with Highway and
// dispatched at run time to the widest unit the CPU has; the per-target code
// and each function's lane types, error and range are in
// core/math/sincos-inl.h. Error < 1 ulp, like glibc's sin/cos, which these
// replace because a libm call per value was ~24 ns, 40% of a workload-P row
// (bench/observations_bench.cc workload_p). The two may differ in the last
// bit of a double; a float32 output then differs only when the exact value
// lies within that bit of a float32 rounding boundary (~2^−29 of values;
// none of workload P's 8·10^6, tests/sincos_test.cc). Every operation is
// one IEEE-rounded operation in a fixed order and no multiply-add is fused,
// so every SIMD target gives the same bits; each value depends on its own
// input alone, not on the call's other inputs or their count.
//
// Thread-safety: pure functions; concurrent calls are safe.
//
// Example:
//
//   const std::vector<double> angles = {0.0, 1.0, 2.5};
//   std::vector<double> sines(3), cosines(3);
//   SinCosOfAngles(angles, sines.data(), cosines.data());
#ifndef PHASOR_CORE_MATH_SINCOS_H_
#define PHASOR_CORE_MATH_SINCOS_H_

#include <cstdint>

#include "absl/types/span.h"

namespace phasor {

// Which output a sinusoid's doubles are for: kFloat32 (also fp16, bf16)
// rounds the quarter-turn residual of a phase to one double angle
// (SinCosOfTurnsFloat32), fast and far inside a float32 ulp; kFloat64
// converts it in two parts (SinCosOfTurns), within 1.7e-16 of exact. The
// two differ by a few 1e-16 relative, so a float64 result narrowed to
// float32 may differ from the float32 result by one float32 ulp where the
// exact value lies that close to a float32 rounding boundary.
enum class SinusoidAccuracy { kFloat32, kFloat64 };

// sin_out[i] = sin(angles[i]), cos_out[i] = cos(angles[i]): the vector
// fdlibm kernel (< 1 ulp, the same bits on every SIMD target; it and glibc
// may differ in the last bit), libm's sin and cos for |angles[i]| > 2^20.
// Each value depends on its angle alone, not on the call's other angles.
// sin_out and cos_out hold angles.size() values; either may be
// angles.data().
void SinCosOfAngles(absl::Span<const double> angles, double* sin_out,
                    double* cos_out);
// SinCosOfAngles (the same bits) of angles known to be small, without its
// pass over the angles for ones past the kernel's range.
// REQUIRES: |angles[i]| <= 2^20 or NaN (the calendar's lie in [0, 2π]);
// sin_out and cos_out apart from angles.
void SinCosOfSmallAngles(absl::Span<const double> angles, double* sin_out,
                         double* cos_out);

// sin_out[i], cos_out[i] of 2π·turns[i]·2^-64 (a phase in 2^-64 turns):
// QuarterTurnSplit (core/math/turns.h), the kernel on the residual and the
// quadrant's swap and signs, in vectors, with the bits of the scalar split
// followed by the kernel on one angle. Within 1.7e-16 of exact
// (SinusoidAccuracy::kFloat64).
void SinCosOfTurns(absl::Span<const uint64_t> turns, double* sin_out,
                   double* cos_out);
// The same phases for float32 outputs (SinusoidAccuracy::kFloat32): the
// residual's integer rounded to one double and scaled once (relative error
// < 2^-51), then the kernel's polynomials; < 1 ulp from the sin and cos of
// that angle.
void SinCosOfTurnsFloat32(absl::Span<const uint64_t> turns, double* sin_out,
                          double* cos_out);

}  // namespace phasor

#endif  // PHASOR_CORE_MATH_SINCOS_H_
