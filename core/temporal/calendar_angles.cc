#include "core/temporal/calendar_angles.h"

#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdint>

// Compiled once per SIMD target Highway finds, as core/adapters/dtype.cc.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/temporal/calendar_angles.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#ifndef PHASOR_CORE_CALENDAR_ANGLES_SHARED_
#define PHASOR_CORE_CALENDAR_ANGLES_SHARED_
namespace phasor::calendar_internal {
namespace {
// calendar_fields.h's kTwoPi.
constexpr double kTwoPi = 6.283185307179586476925286766559;
}  // namespace
}  // namespace phasor::calendar_internal
#endif  // PHASOR_CORE_CALENDAR_ANGLES_SHARED_

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace calendar_internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The angles of Lanes(d) rows from row r of field kField. x and P are
// calendar_fields.h's (CivilValue − FieldBase) + FieldFraction and CyclePeriod,
// spelled out per field with the scalar code's operations in its order
// (an int operand converted to double first, as C++ does).
template <int kField, class D>
HWY_INLINE void AnglesAt(D d, const ClockRows& b, int64_t r, int64_t order,
                         double* HWY_RESTRICT angles, int64_t stride) {
  using V = hn::Vec<D>;
  const hn::Rebind<int32_t, D> di;
  const auto I = [&](ClockRows::Int column) -> V {
    return hn::PromoteTo(d, hn::LoadU(di, b.ints(column) + r));
  };
  const auto R = [&](ClockRows::Real column) -> V { return hn::LoadU(d, b.reals(column) + r); };
  const auto C = [&](double c) -> V { return hn::Set(d, c); };
  using B = ClockRows;
  V x;
  V period;
  if constexpr (kField == 0) {  // Second of minute.
    x = hn::Add(I(B::kSecond), hn::Mul(I(B::kSubsecondNs), C(1e-9)));
    period = C(60);
  } else if constexpr (kField == 1) {  // Minute of hour.
    x = hn::Add(I(B::kMinute), hn::Div(R(B::kSeconds), C(60.0)));
    period = C(60);
  } else if constexpr (kField == 2) {  // Hour of day.
    x = hn::Add(I(B::kHour),
                hn::Div(hn::Add(hn::Mul(I(B::kMinute), C(60.0)), R(B::kSeconds)), C(3600.0)));
    period = C(24);
  } else if constexpr (kField == 3) {  // Day of week.
    x = hn::Add(I(B::kWeekday), R(B::kDayFraction));
    period = C(7);
  } else if constexpr (kField == 4) {  // Day of month.
    x = hn::Add(I(B::kDayIndex), R(B::kDayFraction));
    period = I(B::kDaysInMonth);
  } else if constexpr (kField == 5) {  // Day of year.
    x = hn::Add(I(B::kDayOfYearIndex), R(B::kDayFraction));
    period = I(B::kDaysInYear);
  } else if constexpr (kField == 6) {  // ISO week of year.
    x = hn::Add(I(B::kIsoWeekIndex),
                hn::Div(hn::Add(I(B::kWeekday), R(B::kDayFraction)), C(7.0)));
    period = I(B::kIsoWeeksInYear);
  } else if constexpr (kField == 7) {  // Month of year.
    x = hn::Add(I(B::kMonthIndex), hn::Div(hn::Add(I(B::kDayIndex), R(B::kDayFraction)),
                                           I(B::kDaysInMonth)));
    period = C(12);
  } else {  // Quarter.
    static_assert(kField == 8, "a cyclic field");
    const V in_month =
        hn::Div(hn::Add(I(B::kDayIndex), R(B::kDayFraction)), I(B::kDaysInMonth));
    x = hn::Add(I(B::kQuarterIndex),
                hn::Div(hn::Add(I(B::kMonthInQuarter), in_month), C(3.0)));
    period = C(4);
  }
  // Harmonic 1: 2π·x/P (calendar_fields.h's HarmonicAngle with k = 1).
  const V first = hn::Div(hn::Mul(C(kTwoPi), x), period);
  HWY_ALIGN double xs[HWY_MAX_BYTES / sizeof(double)];
  HWY_ALIGN double ps[HWY_MAX_BYTES / sizeof(double)];
  HWY_ALIGN double as[HWY_MAX_BYTES / sizeof(double)];
  hn::Store(first, d, as);
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  if (order == 1) {
    for (int64_t l = 0; l < lanes; ++l) angles[(r + l) * stride] = as[l];
    return;
  }
  hn::Store(x, d, xs);
  hn::Store(period, d, ps);
  for (int64_t l = 0; l < lanes; ++l) {
    double* a = angles + (r + l) * stride;
    a[0] = as[l];
    for (int64_t k = 2; k <= order; ++k) {
      // (k·x) mod P, exact (fmod is), a smaller angle.
      const double kx = std::fmod(static_cast<double>(k) * xs[l], ps[l]);
      a[k - 1] = kTwoPi * kx / ps[l];
    }
  }
}

template <int kField>
HWY_INLINE void AnglesOf(const ClockRows& batch, int64_t rows, int64_t order,
                         double* HWY_RESTRICT angles, int64_t stride) {
  const hn::ScalableTag<double> d;
  const hn::CappedTag<double, 1> d1;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t r = 0;
  for (; r + lanes <= rows; r += lanes) AnglesAt<kField>(d, batch, r, order, angles, stride);
  for (; r < rows; ++r) AnglesAt<kField>(d1, batch, r, order, angles, stride);
}

void FieldAnglesKernel(int field, const ClockRows& batch, int64_t rows, int64_t order,
                       double* HWY_RESTRICT angles, int64_t stride) {
  switch (field) {
    case 0: return AnglesOf<0>(batch, rows, order, angles, stride);
    case 1: return AnglesOf<1>(batch, rows, order, angles, stride);
    case 2: return AnglesOf<2>(batch, rows, order, angles, stride);
    case 3: return AnglesOf<3>(batch, rows, order, angles, stride);
    case 4: return AnglesOf<4>(batch, rows, order, angles, stride);
    case 5: return AnglesOf<5>(batch, rows, order, angles, stride);
    case 6: return AnglesOf<6>(batch, rows, order, angles, stride);
    case 7: return AnglesOf<7>(batch, rows, order, angles, stride);
    default: return AnglesOf<8>(batch, rows, order, angles, stride);
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace calendar_internal
}  // namespace phasor
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace phasor::calendar_internal {

HWY_EXPORT(FieldAnglesKernel);

void FieldAngles(int field, const ClockRows& batch, int64_t rows, int64_t order,
                 double* angles, int64_t stride) {
  assert(field >= 0 && field <= 8 && rows <= batch.capacity());
  HWY_DYNAMIC_DISPATCH(FieldAnglesKernel)(field, batch, rows, order, angles, stride);
}

}  // namespace phasor::calendar_internal
#endif  // HWY_ONCE
