#include "bench/sincos_limit.h"

#include <cstddef>
#include <cstdint>

// Compiled once per SIMD target Highway finds (hwy/examples/skeleton.cc),
// like core/'s kernels, so the limit runs on the target they run on.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/sincos_limit.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace phasor::bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// A vector of angles advanced by one add per iteration; two running sums
// keep every Sin and Cos live. Iterations are independent but for those
// adds (a few cycles against the tens a Sin takes), so out-of-order
// execution overlaps the evaluations as a kernel over an array would.
template <typename T>
T SinCosLoop(int64_t angles) {
  const hn::ScalableTag<T> d;
  const size_t lanes = hn::Lanes(d);
  constexpr T kPi = static_cast<T>(3.14159265358979323846);
  const T step = 2 * kPi / static_cast<T>(angles > 0 ? angles : 1);
  auto x = hn::MulAdd(hn::Iota(d, 0), hn::Set(d, step), hn::Set(d, -kPi));
  const auto advance = hn::Set(d, step * static_cast<T>(lanes));
  auto sum_sin = hn::Zero(d);
  auto sum_cos = hn::Zero(d);
  for (int64_t i = 0; i < angles; i += static_cast<int64_t>(lanes)) {
    sum_sin = hn::Add(sum_sin, hn::Sin(d, x));
    sum_cos = hn::Add(sum_cos, hn::Cos(d, x));
    x = hn::Add(x, advance);
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(sum_sin, sum_cos)));
}

double SinCosLoopF64(int64_t angles) { return SinCosLoop<double>(angles); }
float SinCosLoopF32(int64_t angles) { return SinCosLoop<float>(angles); }
int64_t ThisTarget() { return HWY_TARGET; }

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace phasor::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace phasor::bench {

HWY_EXPORT(SinCosLoopF64);
HWY_EXPORT(SinCosLoopF32);
HWY_EXPORT(ThisTarget);

double HighwaySinCosF64(int64_t angles) {
  return HWY_DYNAMIC_DISPATCH(SinCosLoopF64)(angles);
}

float HighwaySinCosF32(int64_t angles) {
  return HWY_DYNAMIC_DISPATCH(SinCosLoopF32)(angles);
}

const char* DispatchedSimdTarget() {
  return hwy::TargetName(HWY_DYNAMIC_DISPATCH(ThisTarget)());
}

}  // namespace phasor::bench
#endif  // HWY_ONCE
