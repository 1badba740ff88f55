#include "core/math/log1p.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "absl/types/span.h"

// The kernel is compiled once per SIMD target Highway finds
// (hwy/examples/skeleton.cc); the scalar code below is in HWY_ONCE.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/math/log1p.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "core/math/log1p-inl.h"

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The same, in place, for the vector at x[i..].
template <class D>
HWY_INLINE void SignedLog1pVector(D d, double* HWY_RESTRICT x, size_t i) {
  hn::StoreU(SignedLog1pOf(d, hn::LoadU(d, x + i)), d, x + i);
}

// x[i] = sign(x[i])·log1p(|x[i]|) for `count` values with |x[i]| < 2^53
// (others give unspecified values, for the caller to replace): whole
// vectors, then one lane at a time (each lane is computed alone, so the
// split changes no bit).
void SignedLog1pKernel(double* HWY_RESTRICT x, size_t count) {
  const hn::ScalableTag<double> full;
  size_t i = 0;
  for (; i + hn::Lanes(full) <= count; i += hn::Lanes(full)) {
    SignedLog1pVector(full, x, i);
  }
  const hn::CappedTag<double, 1> one;
  for (; i < count; ++i) SignedLog1pVector(one, x, i);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace phasor
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace phasor {
HWY_EXPORT(SignedLog1pKernel);

void SignedLog1p(absl::Span<double> values) {
  // In chunks: magnitudes past the kernel's range (2^53 and more, or not
  // finite) are noted before it runs and taken from libm after it.
  constexpr size_t kChunk = 64;
  double in[kChunk];
  const auto kernel = HWY_DYNAMIC_DISPATCH(SignedLog1pKernel);
  for (size_t i0 = 0; i0 < values.size(); i0 += kChunk) {
    const size_t used = std::min(kChunk, values.size() - i0);
    bool out_of_range = false;
    for (size_t j = 0; j < used; ++j) {
      in[j] = values[i0 + j];
      out_of_range |= !(std::fabs(in[j]) < 0x1p53);
    }
    kernel(values.data() + i0, used);
    if (out_of_range) {
      for (size_t j = 0; j < used; ++j) {
        if (!(std::fabs(in[j]) < 0x1p53)) {
          values[i0 + j] = std::copysign(std::log1p(std::fabs(in[j])), in[j]);
        }
      }
    }
  }
}

}  // namespace phasor
#endif  // HWY_ONCE
