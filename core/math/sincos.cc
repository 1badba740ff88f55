#include "core/math/sincos.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"

// The array kernels are compiled once per SIMD target Highway finds
// (hwy/examples/skeleton.cc): foreach_target.h re-includes this file with
// HWY_TARGET set to each, HWY_DYNAMIC_DISPATCH picks the best the CPU runs;
// the scalar code below is in HWY_ONCE.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/math/sincos.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "core/math/sincos-inl.h"

#ifndef PHASOR_CORE_MATH_SINCOS_BATCH_
#define PHASOR_CORE_MATH_SINCOS_BATCH_
namespace phasor {
// The angles SinCosSmallAngles takes at a time: 4 = one 256-bit vector of
// doubles.
constexpr size_t kSinCosBatch = 4;
}  // namespace phasor
#endif  // PHASOR_CORE_MATH_SINCOS_BATCH_

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The kernel on one vector of Lanes(d) angles at angle[i..].
template <class D>
HWY_INLINE void SinCosVector(D d, const double* HWY_RESTRICT angle,
                             double* HWY_RESTRICT sin_out,
                             double* HWY_RESTRICT cos_out, size_t i) {
  hn::Vec<D> s, c;
  SinCosOf(d, hn::LoadU(d, angle + i), &s, &c);
  hn::StoreU(s, d, sin_out + i);
  hn::StoreU(c, d, cos_out + i);
}

// SinCosOf over `count` angles.
// REQUIRES: count % kSinCosBatch == 0; |angle[i]| < 2^20 (or NaN).
void SinCosSmallAngles(const double* HWY_RESTRICT angle, size_t count,
                       double* HWY_RESTRICT sin_out,
                       double* HWY_RESTRICT cos_out) {
  // Full vectors (8 lanes on AVX-512), then vectors of at most
  // kSinCosBatch: each lane is computed alone, so the split changes no bit.
  const hn::ScalableTag<double> full;
  size_t i = 0;
  for (; i + hn::Lanes(full) <= count; i += hn::Lanes(full)) {
    SinCosVector(full, angle, sin_out, cos_out, i);
  }
  const hn::CappedTag<double, kSinCosBatch> part;
  for (; i < count; i += hn::Lanes(part)) {
    SinCosVector(part, angle, sin_out, cos_out, i);
  }
}

// vector(d, i) for i = 0, Lanes, 2·Lanes, ... over full vectors of
// doubles, then one lane at a time for the rest of `count` (each lane is
// computed alone, so the split changes no bit).
template <class VectorAt>
HWY_INLINE void ForEachVector(size_t count, const VectorAt& vector) {
  const hn::ScalableTag<double> full;
  size_t i = 0;
  for (; i + hn::Lanes(full) <= count; i += hn::Lanes(full)) vector(full, i);
  for (; i < count; ++i) vector(hn::CappedTag<double, 1>(), i);
}

// SinCosOfPhase over `count` phases (any count).
void SinCosOfTurnsKernel(const uint64_t* HWY_RESTRICT turns, size_t count,
                         double* HWY_RESTRICT sin_out, double* HWY_RESTRICT cos_out) {
  ForEachVector(count, [&](auto d, size_t i) {
    hn::Vec<decltype(d)> s, c;
    SinCosOfPhase(d, hn::LoadU(hn::RebindToUnsigned<decltype(d)>(), turns + i), &s, &c);
    hn::StoreU(s, d, sin_out + i);
    hn::StoreU(c, d, cos_out + i);
  });
}

// SinCosOfPhaseFloat32 over `count` phases (any count).
void SinCosOfTurnsFloat32Kernel(const uint64_t* HWY_RESTRICT turns, size_t count,
                                double* HWY_RESTRICT sin_out,
                                double* HWY_RESTRICT cos_out) {
  ForEachVector(count, [&](auto d, size_t i) {
    hn::Vec<decltype(d)> s, c;
    SinCosOfPhaseFloat32(d, hn::LoadU(hn::RebindToUnsigned<decltype(d)>(), turns + i), &s, &c);
    hn::StoreU(s, d, sin_out + i);
    hn::StoreU(c, d, cos_out + i);
  });
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace phasor
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace phasor {
HWY_EXPORT(SinCosSmallAngles);
HWY_EXPORT(SinCosOfTurnsKernel);
HWY_EXPORT(SinCosOfTurnsFloat32Kernel);
namespace {

// The largest angle handed to SinCosSmallAngles: it needs |q| < 2^20 quarter
// turns (~1.6e6 rad); a caller's angle may be any finite double, and the
// rare one past this goes to libm.
constexpr double kMaxKernelAngle = 0x1p20;

}  // namespace

void SinCosOfSmallAngles(absl::Span<const double> angles, double* sin_out,
                         double* cos_out) {
  assert(sin_out != angles.data() && cos_out != angles.data());
  // Straight through the kernel, the last few angles padded with zeros.
  const auto sin_cos = HWY_DYNAMIC_DISPATCH(SinCosSmallAngles);
  const size_t whole = angles.size() / kSinCosBatch * kSinCosBatch;
  sin_cos(angles.data(), whole, sin_out, cos_out);
  if (whole == angles.size()) return;
  HWY_ALIGN double angle[kSinCosBatch] = {};
  HWY_ALIGN double sin_angle[kSinCosBatch];
  HWY_ALIGN double cos_angle[kSinCosBatch];
  const size_t rest = angles.size() - whole;
  std::copy_n(angles.data() + whole, rest, angle);
  sin_cos(angle, kSinCosBatch, sin_angle, cos_angle);
  std::copy_n(sin_angle, rest, sin_out + whole);
  std::copy_n(cos_angle, rest, cos_out + whole);
}

void SinCosOfAngles(absl::Span<const double> angles, double* sin_out,
                    double* cos_out) {
  const auto sin_cos = HWY_DYNAMIC_DISPATCH(SinCosSmallAngles);
  // Every angle in the kernel's range and the outputs apart from the input:
  // straight through the kernel.
  bool in_range = true;
  for (const double a : angles) in_range &= std::fabs(a) <= kMaxKernelAngle;
  if (in_range && sin_out != angles.data() && cos_out != angles.data()) {
    SinCosOfSmallAngles(angles, sin_out, cos_out);
    return;
  }
  // Otherwise kAngles at a time; angles past the kernel's range are taken
  // by libm after the kernel, so a chunk has no branch per angle otherwise.
  // `in` keeps the chunk: sin_out or cos_out may be angles.
  constexpr int64_t kAngles = 64;
  double in[kAngles];
  HWY_ALIGN double angle[kAngles];
  HWY_ALIGN double sin_angle[kAngles];
  HWY_ALIGN double cos_angle[kAngles];
  const auto count = static_cast<int64_t>(angles.size());
  for (int64_t i0 = 0; i0 < count; i0 += kAngles) {
    const int64_t used = std::min(kAngles, count - i0);
    bool out_of_range = false;
    for (int64_t j = 0; j < used; ++j) {
      const double a = angles[i0 + j];
      const bool big = !(std::fabs(a) <= kMaxKernelAngle);
      out_of_range |= big;
      in[j] = a;
      angle[j] = big ? 0.0 : a;
    }
    const auto batch = static_cast<int64_t>(kSinCosBatch);
    const int64_t padded = (used + batch - 1) / batch * batch;
    std::fill(angle + used, angle + padded, 0.0);
    sin_cos(angle, static_cast<size_t>(padded), sin_angle, cos_angle);
    if (out_of_range) {
      for (int64_t j = 0; j < used; ++j) {
        if (!(std::fabs(in[j]) <= kMaxKernelAngle)) {
          sin_angle[j] = std::sin(in[j]);
          cos_angle[j] = std::cos(in[j]);
        }
      }
    }
    std::copy(sin_angle, sin_angle + used, sin_out + i0);
    std::copy(cos_angle, cos_angle + used, cos_out + i0);
  }
}

void SinCosOfTurns(absl::Span<const uint64_t> turns, double* sin_out,
                   double* cos_out) {
  HWY_DYNAMIC_DISPATCH(SinCosOfTurnsKernel)(turns.data(), turns.size(), sin_out, cos_out);
}

void SinCosOfTurnsFloat32(absl::Span<const uint64_t> turns, double* sin_out,
                          double* cos_out) {
  HWY_DYNAMIC_DISPATCH(SinCosOfTurnsFloat32Kernel)(turns.data(), turns.size(), sin_out,
                                                   cos_out);
}

}  // namespace phasor
#endif  // HWY_ONCE
