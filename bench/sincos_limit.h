// -----------------------------------------------------------------------------
// File: bench/sincos_limit.h
// -----------------------------------------------------------------------------
//
// The host's sin/cos compute limit, for benchmarks that state a kernel's
// speed as a fraction of it: Highway's own vector Sin and Cos
// (hwy/contrib/math/math-inl.h, Cody-Waite reduction and a polynomial; 1-3
// ulp over |x| <= 39000) in a bare loop over a given number of angles, on
// the SIMD target Highway dispatches to at run time. The angles are made and
// the results consumed in registers (no loads, no stores), so the figure is
// arithmetic alone: what a block that takes the same number of (sin, cos)
// pairs would cost if it did nothing else.
//
// Thread-safety: pure functions; concurrent calls are safe.
//
// Example:
//
//   benchmark::DoNotOptimize(phasor::bench::HighwaySinCosF64(8 * rows));
//   std::printf("%s\n", phasor::bench::DispatchedSimdTarget());
#ifndef PHASOR_BENCH_SINCOS_LIMIT_H_
#define PHASOR_BENCH_SINCOS_LIMIT_H_

#include <cstdint>

namespace phasor::bench {

// sin(x) and cos(x) for `angles` angles x evenly spaced over [−π, π) (the
// count rounded up to whole vectors), in double; returns the sum of every
// value so that no evaluation can be dropped.
double HighwaySinCosF64(int64_t angles);
// The same in float.
float HighwaySinCosF32(int64_t angles);

// hwy::TargetName of the target HWY_DYNAMIC_DISPATCH picks on this CPU for
// code built like core/'s ("AVX2", "AVX3", "AVX3_DL", ...).
const char* DispatchedSimdTarget();

}  // namespace phasor::bench

#endif  // PHASOR_BENCH_SINCOS_LIMIT_H_
