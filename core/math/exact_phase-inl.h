// -----------------------------------------------------------------------------
// File: core/math/exact_phase-inl.h
// -----------------------------------------------------------------------------
//
// Per-target (Highway) phases of many steps at once: the top 64 bits of the
// 128-bit products e·step that ExactPhase::Turns (core/math/exact_phase.h)
// and ExactAngle::Turns (core/math/exact_angle.h) form one at a time, in
// vectors of 64-bit lanes built from 32-bit multiplies (x86 has no 64×64→128
// vector multiply). Integer arithmetic only: every target gives the scalar
// product's bits exactly.
//
// Include inside a translation unit's per-target code, after
// "hwy/highway.h" (as hwy/contrib/math/math-inl.h is included); the
// functions are in phasor::HWY_NAMESPACE.
//
// Thread-safety: pure functions.
//
// Example (in a per-target kernel; steps split into 64-bit halves):
//
//   const hn::ScalableTag<double> d;
//   const auto turns = ProductTop(d, elapsed_ns, step_lo, step_hi, k);
//   hn::Vec<decltype(d)> s, c;
//   SinCosOfPhaseFloat32(d, turns, &s, &c);  // core/math/sincos-inl.h

// Per-target include guard (still compiled once per target).
#if defined(PHASOR_CORE_MATH_EXACT_PHASE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PHASOR_CORE_MATH_EXACT_PHASE_INL_H_
#undef PHASOR_CORE_MATH_EXACT_PHASE_INL_H_
#else
#define PHASOR_CORE_MATH_EXACT_PHASE_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The top 64 bits of the 128-bit products a_j·step_j of unsigned a_j,
// lane by lane, formed from 32-bit pieces: a_j·step_lo's high half +
// a_j·step_hi's low half, mod 2^64. For an int64 e_j sign-extended, the
// scalar product's top is this minus step_lo where e_j < 0.
//
//   Valid Lane Types: uint64
//          Max Error: none (exact integer arithmetic, mod 2^64)
//        Valid Range: every uint64 a, lo, hi
//   @return top64(a·(hi·2^64 + lo)) mod 2^64 per lane
template <class VU>
HWY_INLINE VU UnsignedProductTop(VU a, VU lo, VU hi) {
  const hn::DFromV<VU> du;
  const hn::Repartition<uint32_t, decltype(du)> du32;
  // MulEven multiplies the low 32 bits of each 64-bit lane.
  const auto low32 = [&](VU v) { return hn::BitCast(du32, v); };
  const auto high32 = [&](VU v) { return hn::BitCast(du32, hn::ShiftRight<32>(v)); };
  const VU p00 = hn::MulEven(low32(a), low32(lo));
  const VU p01 = hn::MulEven(low32(a), high32(lo));
  const VU p10 = hn::MulEven(high32(a), low32(lo));
  const VU p11 = hn::MulEven(high32(a), high32(lo));
  const VU mask32 = hn::Set(du, 0xffffffffu);
  const VU mid = hn::Add(hn::Add(hn::ShiftRight<32>(p00), hn::And(p01, mask32)),
                         hn::And(p10, mask32));
  const VU product_high =
      hn::Add(hn::Add(hn::Add(p11, hn::ShiftRight<32>(p01)), hn::ShiftRight<32>(p10)),
              hn::ShiftRight<32>(mid));
  const VU cross = hn::Add(hn::MulEven(low32(a), high32(hi)),
                           hn::MulEven(high32(a), low32(hi)));
  const VU product_low =
      hn::Add(hn::MulEven(low32(a), low32(hi)), hn::ShiftLeft<32>(cross));
  return hn::Add(product_high, product_low);
}


// ExactPhase::Turns(e) of the steps k .. k + Lanes(d) (halves step_lo[k..],
// step_hi[k..]) for one signed elapsed time e: the sign-extended product.
//
//   Valid Lane Types: int64 e, uint64 steps and result
//          Max Error: none
//        Valid Range: every int64 e
//   @return the phases in 2^-64 turn
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> ProductTop(D d, int64_t e,
                                                      const uint64_t* HWY_RESTRICT step_lo,
                                                      const uint64_t* HWY_RESTRICT step_hi,
                                                      size_t k) {
  const hn::RebindToUnsigned<D> du;
  (void)d;
  const auto lo = hn::LoadU(du, step_lo + k);
  const auto top = UnsignedProductTop(hn::Set(du, static_cast<uint64_t>(e)), lo,
                                      hn::LoadU(du, step_hi + k));
  return e < 0 ? hn::Sub(top, lo) : top;
}


// ProductTop with a signed e_j per lane (lane j: e_j and step j).
//
//   Valid Lane Types: uint64 (e_j as int64 bits)
//          Max Error: none
//        Valid Range: every int64 e_j
//   @return the phases in 2^-64 turn
template <class VU>
HWY_INLINE VU ProductTopOfLanes(VU e, VU lo, VU hi) {
  const hn::DFromV<VU> du;
  const hn::RebindToSigned<decltype(du)> di;
  // All ones where e_j < 0 (an arithmetic shift of its sign).
  const VU negative = hn::BitCast(du, hn::ShiftRight<63>(hn::BitCast(di, e)));
  return hn::Sub(UnsignedProductTop(e, lo, hi), hn::And(lo, negative));
}

// ProductTop of one lane, in 128-bit scalar arithmetic (the oracle the
// vector forms are tested against, and HWY_SCALAR's path).
inline uint64_t ScalarProductTop(int64_t e, uint64_t step_lo, uint64_t step_hi) {
  const unsigned __int128 step = (static_cast<unsigned __int128>(step_hi) << 64) | step_lo;
  return static_cast<uint64_t>(
      (static_cast<unsigned __int128>(static_cast<__int128>(e)) * step) >> 64);
}

// Calls f(d, k) for vectors of `count` lanes from k = 0: full vectors,
// then narrower ones for the rest (a dim-8 ladder is 4 periods, half an
// AVX-512 vector); returns the first k left for single lanes (0 on
// HWY_SCALAR, whose caller does every lane itself).
template <class F>
HWY_INLINE size_t ForVectors(size_t count, const F& f) {
  size_t k = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<double> full;
  const hn::CappedTag<double, 4> four;
  const hn::CappedTag<double, 2> two;
  for (; k + hn::Lanes(full) <= count; k += hn::Lanes(full)) f(full, k);
  for (; k + hn::Lanes(four) <= count; k += hn::Lanes(four)) f(four, k);
  for (; k + hn::Lanes(two) <= count; k += hn::Lanes(two)) f(two, k);
#else
  (void)count;
  (void)f;
#endif
  return k;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace phasor
HWY_AFTER_NAMESPACE();

#endif  // PHASOR_CORE_MATH_EXACT_PHASE_INL_H_
