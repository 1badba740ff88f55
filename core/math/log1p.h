// -----------------------------------------------------------------------------
// File: core/math/log1p.h
// -----------------------------------------------------------------------------
//
// The signed log1p of an array, in vectors: x ↦ sign(x)·log1p(|x|), the
// LOG1P transform of the temporal gaps (a gap of Δ units becomes
// log(1 + Δ), symmetric for negative inputs).
//
// fdlibm's s_log1p.c (Sun Microsystems 1993, as kept in FreeBSD
// lib/msun/src/s_log1p.c) vectorised with Highway and dispatched at run time
// to the widest unit the CPU has; the per-target code, with its lane types,
// error and range, is core/math/log1p-inl.h. Error < 1 ulp, like glibc's
// log1p, which this replaces because a libm call per gap was ~14% of an
// every-block row (bench/observations_bench.cc). The two may differ in the
// last bit of a double; the float32 rounding then differs only when the
// exact value lies within that bit of a float32 boundary (none of the sweep
// in tests/log1p_test.cc). Each value is computed alone by a fixed order of
// IEEE operations with no fused multiply-add: the same bits on every target,
// for any array length.
//
// Thread-safety: pure function.
//
// Example:
//
//   std::vector<double> gaps = {0.0, 1.0, -3.5, 1e300};
//   SignedLog1p(absl::MakeSpan(gaps));  // {0, log 2, −log 4.5, log1p(1e300)}
#ifndef PHASOR_CORE_MATH_LOG1P_H_
#define PHASOR_CORE_MATH_LOG1P_H_

#include "absl/types/span.h"

namespace phasor {

// values[i] = sign(values[i])·log1p(|values[i]|), < 1 ulp: the vector
// kernel for |values[i]| < 2^53, libm's log1p past 2^53 and for non-finite
// values.
void SignedLog1p(absl::Span<double> values);

}  // namespace phasor

#endif  // PHASOR_CORE_MATH_LOG1P_H_
