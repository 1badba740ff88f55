// -----------------------------------------------------------------------------
// File: core/math/log1p-inl.h
// -----------------------------------------------------------------------------
//
// Per-target (Highway) signed log1p in double: sign(x)·log1p(|x|) by
// fdlibm's s_log1p.c (Sun Microsystems 1993, as kept in FreeBSD
// lib/msun/src/s_log1p.c; constants copied with their bit patterns), its
// branches turned into selects on lane masks.
//
// Include inside a translation unit's per-target code, after
// "hwy/highway.h" (as hwy/contrib/math/math-inl.h is included); the
// functions are in phasor::HWY_NAMESPACE. The translation unit must be
// compiled with -ffp-contract=off (core/CMakeLists.txt): each lane is
// computed alone in a fixed order of IEEE operations, so every target gives
// the same bits. The array version is core/math/log1p.h.
//
// Thread-safety: pure functions.
//
// Example (in a per-target kernel):
//
//   const hn::ScalableTag<double> d;
//   hn::StoreU(SignedLog1pWithLibm(d, hn::LoadU(d, gaps)), d, gaps);

// Per-target include guard (still compiled once per target).
#if defined(PHASOR_CORE_MATH_LOG1P_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PHASOR_CORE_MATH_LOG1P_INL_H_
#undef PHASOR_CORE_MATH_LOG1P_INL_H_
#else
#define PHASOR_CORE_MATH_LOG1P_INL_H_
#endif

#include <cmath>
#include <cstddef>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// fdlibm's s_log1p.c (Sun Microsystems 1993, as kept in FreeBSD
// lib/msun/src/s_log1p.c; constants copied with their bit patterns).
constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 0x3FE62E42 FEE00000
constexpr double kLn2Lo = 1.90821492927058770002e-10;  // 0x3DEA39EF 35793C76
constexpr double kLp1 = 6.666666666666735130e-01;      // 0x3FE55555 55555593
constexpr double kLp2 = 3.999999999940941908e-01;      // 0x3FD99999 9997FA04
constexpr double kLp3 = 2.857142874366239149e-01;      // 0x3FD24924 94229359
constexpr double kLp4 = 2.222219843214978396e-01;      // 0x3FCC71C5 1D8E78AF
constexpr double kLp5 = 1.818357216161805012e-01;      // 0x3FC74664 96CB03DE
constexpr double kLp6 = 1.531383769920937332e-01;      // 0x3FC39A09 D078C69F
constexpr double kLp7 = 1.479819860511658591e-01;      // 0x3FC2F112 DF3E5244

// sign(v)·log1p(|v|) of one vector: fdlibm's reduction 1 + x = 2^k·(1 + f)
// with the rounding error of 1 + x carried as c, then its series in
// s = f/(2 + f) (or the short forms for |f| < 2^-20 and |x| < 2^-29).
//
//   Valid Lane Types: float64
//          Max Error: < 1 ulp (glibc's log1p is also < 1 ulp; the two may
//                     differ in the last bit)
//        Valid Range: |v| < 2^53 (other lanes give unspecified values:
//                     SignedLog1pWithLibm replaces them)
//   @return sign(v)·log1p(|v|)
template <class D, class V = hn::Vec<D>>
HWY_INLINE V SignedLog1pOf(D d, V v) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  using VI = hn::Vec<decltype(di)>;
  const V a = hn::Abs(v);
  const V one = hn::Set(d, 1.0);
  const auto high = [&](V value) -> VI {
    return hn::BitCast(di, hn::ShiftRight<32>(hn::BitCast(du, value)));
  };
  const VI hx = high(a);
  // x < 0.41422 (sqrt(2) − 1): k = 0, f = x, no reduction.
  const auto unreduced = hn::RebindMask(d, hn::Lt(hx, hn::Set(di, 0x3FDA827A)));
  // Otherwise 1 + x = 2^k·(1 + f), sqrt(2)/2 <= 1 + f < sqrt(2), with c the
  // rounding error of 1 + x over 1 + x.
  const V u = hn::Add(one, a);
  const VI hu_full = high(u);
  VI k = hn::Sub(hn::ShiftRight<20>(hu_full), hn::Set(di, 1023));
  const auto k_positive = hn::RebindMask(d, hn::Gt(k, hn::Zero(di)));
  V c = hn::IfThenElse(k_positive, hn::Sub(one, hn::Sub(u, a)),
                       hn::Sub(a, hn::Sub(u, one)));
  c = hn::Div(c, u);
  VI hu = hn::And(hu_full, hn::Set(di, 0x000fffff));
  const auto upper = hn::Gt(hu, hn::Set(di, 0x6a09d));  // hu >= 0x6a09e
  const VI new_high = hn::IfThenElse(upper, hn::Or(hu, hn::Set(di, 0x3fe00000)),
                                     hn::Or(hu, hn::Set(di, 0x3ff00000)));
  k = hn::IfThenElse(upper, hn::Add(k, hn::Set(di, 1)), k);
  hu = hn::IfThenElse(upper,
                      hn::ShiftRight<2>(hn::Sub(hn::Set(di, 0x00100000), hu)), hu);
  const auto low_word = hn::And(hn::BitCast(du, u), hn::Set(du, 0xffffffffu));
  const V u_normal = hn::BitCast(
      d, hn::Or(hn::ShiftLeft<32>(hn::BitCast(du, new_high)), low_word));
  V f = hn::Sub(u_normal, one);
  f = hn::IfThenElse(unreduced, a, f);
  k = hn::IfThenElse(hn::RebindMask(di, unreduced), hn::Zero(di), k);
  hu = hn::IfThenElse(hn::RebindMask(di, unreduced), hn::Set(di, 1), hu);
  const V dk = hn::ConvertTo(d, k);
  const auto k_zero = hn::RebindMask(d, hn::Eq(k, hn::Zero(di)));

  const V half = hn::Set(d, 0.5);
  const V hfsq = hn::Mul(hn::Mul(half, f), f);
  // |f| < 2^-20 (hu == 0): a shorter series.
  const V r_short =
      hn::Mul(hfsq, hn::Sub(one, hn::Mul(hn::Set(d, 0.66666666666666666), f)));
  const V k_lo = hn::Mul(dk, hn::Set(d, kLn2Lo));
  const V k_hi = hn::Mul(dk, hn::Set(d, kLn2Hi));
  const V short_k = hn::Sub(k_hi, hn::Sub(hn::Sub(r_short, hn::Add(k_lo, c)), f));
  V short_value = hn::IfThenElse(k_zero, hn::Sub(f, r_short), short_k);
  // f == 0: 0 (k = 0) or k·ln2_hi + (c + k·ln2_lo).
  const V exact_power =
      hn::IfThenElse(k_zero, hn::Zero(d), hn::Add(k_hi, hn::Add(c, k_lo)));
  short_value = hn::IfThenElse(hn::Eq(f, hn::Zero(d)), exact_power, short_value);
  // The general case: s = f/(2 + f), log(1 + f) = f − (hfsq − s·(hfsq + R)).
  const V s = hn::Div(f, hn::Add(hn::Set(d, 2.0), f));
  const V z = hn::Mul(s, s);
  V poly = hn::Set(d, kLp7);
  poly = hn::Add(hn::Set(d, kLp6), hn::Mul(z, poly));
  poly = hn::Add(hn::Set(d, kLp5), hn::Mul(z, poly));
  poly = hn::Add(hn::Set(d, kLp4), hn::Mul(z, poly));
  poly = hn::Add(hn::Set(d, kLp3), hn::Mul(z, poly));
  poly = hn::Add(hn::Set(d, kLp2), hn::Mul(z, poly));
  poly = hn::Add(hn::Set(d, kLp1), hn::Mul(z, poly));
  const V r = hn::Mul(z, poly);
  const V s_term = hn::Mul(s, hn::Add(hfsq, r));
  const V general_zero = hn::Sub(f, hn::Sub(hfsq, s_term));
  const V general_k = hn::Sub(
      k_hi, hn::Sub(hn::Sub(hfsq, hn::Add(s_term, hn::Add(k_lo, c))), f));
  V result = hn::IfThenElse(k_zero, general_zero, general_k);
  result = hn::IfThenElse(hn::RebindMask(d, hn::Eq(hu, hn::Zero(di))), short_value,
                          result);
  // |x| < 2^-29: x − x·x/2, or x itself below 2^-54.
  const V tiny = hn::IfThenElse(
      hn::RebindMask(d, hn::Lt(hx, hn::Set(di, 0x3c900000))), a,
      hn::Sub(a, hn::Mul(hn::Mul(a, a), half)));
  result = hn::IfThenElse(hn::RebindMask(d, hn::Lt(hx, hn::Set(di, 0x3e200000))),
                          tiny, result);
  return hn::CopySign(result, v);
}

// SignedLog1pOf, and libm's log1p for the lanes past its range
// (|x| >= 2^53, ±Inf, NaN): core/math/log1p.h SignedLog1p's values.
//
//   Valid Lane Types: float64
//          Max Error: < 1 ulp
//        Valid Range: every double
//   @return sign(x)·log1p(|x|)
template <class D, class V = hn::Vec<D>>
HWY_INLINE V SignedLog1pWithLibm(D d, V x) {
  V y = SignedLog1pOf(d, x);
  if (HWY_UNLIKELY(!hn::AllTrue(d, hn::Lt(hn::Abs(x), hn::Set(d, 0x1p53))))) {
    HWY_ALIGN double xs[HWY_MAX_BYTES / sizeof(double)];
    HWY_ALIGN double ys[HWY_MAX_BYTES / sizeof(double)];
    hn::Store(x, d, xs);
    hn::Store(y, d, ys);
    for (size_t l = 0; l < hn::Lanes(d); ++l) {
      if (!(std::fabs(xs[l]) < 0x1p53)) {
        ys[l] = std::copysign(std::log1p(std::fabs(xs[l])), xs[l]);
      }
    }
    y = hn::Load(d, ys);
  }
  return y;
}

// The memory of a group of channels down a block of rows (GapTracker's

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace phasor
HWY_AFTER_NAMESPACE();

#endif  // PHASOR_CORE_MATH_LOG1P_INL_H_
