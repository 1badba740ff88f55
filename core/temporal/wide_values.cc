#include "core/temporal/wide_values.h"

#include <cmath>
#include <cstddef>
#include <cstdint>

// The kernels are compiled once per SIMD target Highway finds, as in
// core/adapters/dtype.cc (foreach_target.h re-includes this file; HWY_DYNAMIC_DISPATCH
// picks the best the CPU runs).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/temporal/wide_values.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Whether any of values[0, count) is ±Inf.
template <typename T>
HWY_INLINE bool AnyInfinite(const T* HWY_RESTRICT values, size_t count) {
  const hn::ScalableTag<T> d;
  const size_t lanes = hn::Lanes(d);
  auto infinite = hn::Zero(d);  // Lanes that saw an infinity: all ones.
  size_t i = 0;
  for (; i + lanes <= count; i += lanes) {
    infinite = hn::Or(infinite, hn::VecFromMask(d, hn::IsInf(hn::LoadU(d, values + i))));
  }
  bool any = !hn::AllFalse(d, hn::MaskFromVec(infinite));
  for (; i < count; ++i) any |= std::isinf(values[i]);
  return any;
}

bool AnyInfiniteF64(const double* HWY_RESTRICT values, size_t count) {
  return AnyInfinite(values, count);
}
bool AnyInfiniteF32(const float* HWY_RESTRICT values, size_t count) {
  return AnyInfinite(values, count);
}

// Values (0 where NaN) and flags (1, or 0 where NaN) of the vector at
// in[j..], to out[j..] and out[channels + j..].
template <class D, typename T>
HWY_INLINE void ValueAndFlag(D d, const T* HWY_RESTRICT in, int64_t j, int64_t channels,
                             double* HWY_RESTRICT out) {
  hn::Vec<D> v;
  if constexpr (sizeof(T) == sizeof(double)) {
    v = hn::LoadU(d, in + j);
  } else {
    v = hn::PromoteTo(d, hn::LoadU(hn::Rebind<T, D>(), in + j));
  }
  const auto observed = hn::Not(hn::IsNaN(v));
  hn::StoreU(hn::IfThenElseZero(observed, v), d, out + j);
  hn::StoreU(hn::IfThenElseZero(observed, hn::Set(d, 1.0)), d, out + channels + j);
}

// Rows [0, rows) of values [rows, channels] without a mask, row i to
// out + i·row_stride.
template <typename T>
HWY_INLINE void ValuesAndFlags(const T* HWY_RESTRICT values, int64_t channels, int64_t rows,
                               double* HWY_RESTRICT out, int64_t row_stride) {
  const hn::ScalableTag<double> d;
  const hn::CappedTag<double, 1> d1;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t i = 0; i < rows; ++i) {
    const T* row = values + i * channels;
    double* dst = out + i * row_stride;
    int64_t j = 0;
    for (; j + lanes <= channels; j += lanes) ValueAndFlag(d, row, j, channels, dst);
    for (; j < channels; ++j) ValueAndFlag(d1, row, j, channels, dst);
  }
}

void ValuesAndFlagsF64(const double* HWY_RESTRICT values, int64_t channels, int64_t rows,
                       double* HWY_RESTRICT out, int64_t row_stride) {
  ValuesAndFlags(values, channels, rows, out, row_stride);
}
void ValuesAndFlagsF32(const float* HWY_RESTRICT values, int64_t channels, int64_t rows,
                       double* HWY_RESTRICT out, int64_t row_stride) {
  ValuesAndFlags(values, channels, rows, out, row_stride);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace phasor
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace phasor {

HWY_EXPORT(AnyInfiniteF64);
HWY_EXPORT(AnyInfiniteF32);
HWY_EXPORT(ValuesAndFlagsF64);
HWY_EXPORT(ValuesAndFlagsF32);

bool AnyObservedNonFinite(const ObservationsView& obs) {
  const int64_t count = obs.values.size();
  const bool f64 = obs.values.f32.empty();
  if (obs.mask.empty()) {
    // NaN means "not observed": only an infinity is observed and not finite.
    return f64 ? HWY_DYNAMIC_DISPATCH(AnyInfiniteF64)(obs.values.f64.data(),
                                                      static_cast<size_t>(count))
               : HWY_DYNAMIC_DISPATCH(AnyInfiniteF32)(obs.values.f32.data(),
                                                      static_cast<size_t>(count));
  }
  bool any = false;
  for (int64_t i = 0; i < count; ++i) {
    any |= (obs.mask[i] != 0) & !std::isfinite(obs.values.at(i));
  }
  return any;
}

void WriteValuesAndFlags(const ObservationsView& obs, int64_t begin, int64_t n,
                         double* out, int64_t row_stride) {
  const int64_t channels = obs.num_channels;
  const bool f64 = obs.values.f32.empty();
  if (obs.mask.empty()) {
    if (f64) {
      HWY_DYNAMIC_DISPATCH(ValuesAndFlagsF64)(obs.values.f64.data() + begin * channels,
                                              channels, n, out, row_stride);
    } else {
      HWY_DYNAMIC_DISPATCH(ValuesAndFlagsF32)(obs.values.f32.data() + begin * channels,
                                              channels, n, out, row_stride);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    double* dst = out + i * row_stride;
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t k = (begin + i) * channels + c;
      const bool observed = obs.mask[k] != 0;
      dst[c] = observed ? obs.values.at(k) : 0.0;
      dst[channels + c] = observed ? 1.0 : 0.0;
    }
  }
}

}  // namespace phasor
#endif  // HWY_ONCE
