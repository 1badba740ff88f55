// -----------------------------------------------------------------------------
// File: core/math/sincos-inl.h
// -----------------------------------------------------------------------------
//
// Per-target (Highway) vector sine and cosine in double: fdlibm's kernels
// (Sun Microsystems 1993, as kept in FreeBSD lib/msun/src/e_rem_pio2.c,
// k_sin.c, k_cos.c; coefficients copied with their bit patterns) on vectors
// of angles, and on vectors of phases in 2^-64 turn (core/math/turns.h).
//
// Include this file inside a translation unit's per-target code, after
// "hwy/highway.h", as hwy/contrib/math/math-inl.h is included: it has a
// per-target include guard and defines its functions in
// phasor::HWY_NAMESPACE. The translation unit must be compiled with
// -ffp-contract=off (core/CMakeLists.txt): every operation below is one
// IEEE-rounded operation in a fixed order, so every target (HWY_SCALAR
// included) gives the same bits, and each lane is computed alone, so no
// value depends on the vector width or on its neighbours.
//
// The array versions and the dispatch are in core/math/sincos.h.
//
// Thread-safety: pure functions.
//
// Example (in a per-target kernel):
//
//   const hn::ScalableTag<double> d;
//   hn::Vec<decltype(d)> s, c;
//   SinCosOf(d, hn::LoadU(d, angles), &s, &c);

// Per-target include guard (still compiled once per target).
#if defined(PHASOR_CORE_MATH_SINCOS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PHASOR_CORE_MATH_SINCOS_INL_H_
#undef PHASOR_CORE_MATH_SINCOS_INL_H_
#else
#define PHASOR_CORE_MATH_SINCOS_INL_H_
#endif

#include <cstdint>

#include "core/math/turns.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// fdlibm's constants (see SinCosOf).
// π/2 = kPio2_1 + kPio2_2 + kPio2_2t; kPio2_1 and kPio2_2 have 33 bits, so
// q·kPio2_1 and q·kPio2_2 are exact for |q| < 2^20.
constexpr double kInvPio2 = 6.36619772367581382433e-01;  // 0x3FE45F30 6DC9C883
constexpr double kPio2_1 = 1.57079632673412561417e+00;   // 0x3FF921FB 54400000
constexpr double kPio2_2 = 6.07710050630396597660e-11;   // 0x3DD0B461 1A600000
constexpr double kPio2_2t = 2.02226624879595063154e-21;  // 0x3BA3198A 2E037073
// k_sin.c: sin(r) ≈ r + r^3·(S1 + r^2·S2 + ... + r^10·S6).
constexpr double kS1 = -1.66666666666666324348e-01;  // 0xBFC55555 55555549
constexpr double kS2 = 8.33333333332248946124e-03;   // 0x3F811111 1110F8A6
constexpr double kS3 = -1.98412698298579493134e-04;  // 0xBF2A01A0 19C161D5
constexpr double kS4 = 2.75573137070700676789e-06;   // 0x3EC71DE3 57B1FE7D
constexpr double kS5 = -2.50507602534068634195e-08;  // 0xBE5AE5E6 8A2B9CEB
constexpr double kS6 = 1.58969099521155010221e-10;   // 0x3DE5D93A 5ACFD57C
// k_cos.c: cos(r) ≈ 1 − r^2/2 + r^4·(C1 + r^2·C2 + ... + r^10·C6).
constexpr double kC1 = 4.16666666666666019037e-02;   // 0x3FA55555 5555554C
constexpr double kC2 = -1.38888888888741095749e-03;  // 0xBF56C16C 16C15177
constexpr double kC3 = 2.48015872894767294178e-05;   // 0x3EFA01A0 19CB1590
constexpr double kC4 = -2.75573143513906633035e-07;  // 0xBE927E4F 809C52AD
constexpr double kC5 = 2.08757232129817482790e-09;   // 0x3E21EE9E BDB4B1C4
constexpr double kC6 = -1.13596475577881948265e-11;  // 0xBDA8FAE9 BE8838D4
// Adding 1.5·2^52 leaves no fraction bits: rounds to nearest, ties to
// even, and leaves q in two's complement in the low significand bits.
constexpr double kShifter = 6755399441055744.0;


// The polynomials' tails in z = r^2 (zz = z^2), one expression for both
// kernels below: k_sin.c's S2 + z·S3 + ... + z^4·S6 and k_cos.c's
// z·C1 + ... + z^6·C6, in fdlibm's order.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V SinTail(D d, V z, V zz) {
  return hn::Add(
      hn::Add(hn::Set(d, kS2),
              hn::Mul(z, hn::Add(hn::Set(d, kS3), hn::Mul(z, hn::Set(d, kS4))))),
      hn::Mul(hn::Mul(z, zz),
              hn::Add(hn::Set(d, kS5), hn::Mul(z, hn::Set(d, kS6)))));
}
template <class D, class V = hn::Vec<D>>
HWY_INLINE V CosTail(D d, V z, V zz) {
  return hn::Add(
      hn::Mul(z, hn::Add(hn::Set(d, kC1),
                         hn::Mul(z, hn::Add(hn::Set(d, kC2),
                                            hn::Mul(z, hn::Set(d, kC3)))))),
      hn::Mul(hn::Mul(zz, zz),
              hn::Add(hn::Set(d, kC4),
                      hn::Mul(z, hn::Add(hn::Set(d, kC5),
                                         hn::Mul(z, hn::Set(d, kC6)))))));
}

// fdlibm's sin and cos of Lanes(d) angles x, turned by `quarter_turns` more
// quarter turns (per lane, mod 4; zero for x itself): *sin_x, *cos_x of
// x + quarter_turns·π/2. The extra turns join the reduction's own quadrant,
// so the result is one exact swap and sign change of the polynomials.
//
// Reduction by the nearest multiple q·π/2 with π/2 in three parts (the "2nd
// round" of e_rem_pio2.c, taken always: good to ~118 bits, so r = y0 + y1
// carries no cancellation error even next to q·π/2), then the kernels'
// minimax polynomials on [−π/4, π/4] (|sin(r)/r − poly| < 2^−58,
// |cos(r) − poly| < 2^−58) and the quadrant's swap and signs, selected with
// masks (a quadrant is random; a branch per value was mispredicted half the
// time).
//
//   Valid Lane Types: float64
//          Max Error: < 1 ulp (glibc's sin/cos are also < 1 ulp; the two may
//                     differ in the last bit)
//        Valid Range: |q| < 2^20, i.e. |x| < ~1.6e6 (π is far inside)
//   @return sin and cos of x + quarter_turns·π/2 in *sin_x, *cos_x
template <class D, class V = hn::Vec<D>, class VU = hn::Vec<hn::RebindToUnsigned<D>>>
HWY_INLINE void SinCosOf(D d, V x, VU quarter_turns, V* sin_x, V* cos_x) {
  const hn::RebindToUnsigned<D> du;
  const V one = hn::Set(d, 1.0);
  const V half = hn::Set(d, 0.5);
  const V shifted = hn::Add(hn::Mul(x, hn::Set(d, kInvPio2)), hn::Set(d, kShifter));
  const V q = hn::Sub(shifted, hn::Set(d, kShifter));
  // e_rem_pio2.c, medium case, second round.
  const V t = hn::Sub(x, hn::Mul(q, hn::Set(d, kPio2_1)));
  const V w0 = hn::Mul(q, hn::Set(d, kPio2_2));
  const V r = hn::Sub(t, w0);
  const V w = hn::Sub(hn::Mul(q, hn::Set(d, kPio2_2t)),
                      hn::Sub(hn::Sub(t, r), w0));
  const V y0 = hn::Sub(r, w);
  const V y1 = hn::Sub(hn::Sub(r, y0), w);
  // __kernel_sin(y0, y1, iy = 1):
  //   y0 − ((z·(y1/2 − v·sr) − y1) − v·S1).
  const V z = hn::Mul(y0, y0);
  const V zz = hn::Mul(z, z);
  const V sr = SinTail(d, z, zz);
  const V v = hn::Mul(z, y0);
  const V ks = hn::Sub(
      y0, hn::Sub(hn::Sub(hn::Mul(z, hn::Sub(hn::Mul(half, y1), hn::Mul(v, sr))), y1),
                  hn::Mul(v, hn::Set(d, kS1))));
  // __kernel_cos(y0, y1):
  //   (1 − z/2) + (((1 − (1 − z/2)) − z/2) + (z·cr − y0·y1)).
  const V cr = CosTail(d, z, zz);
  const V hz = hn::Mul(half, z);
  const V one_minus_hz = hn::Sub(one, hz);
  const V kc = hn::Add(
      one_minus_hz,
      hn::Add(hn::Sub(hn::Sub(one, one_minus_hz), hz),
              hn::Sub(hn::Mul(z, cr), hn::Mul(y0, y1))));
  // Quadrant q mod 4: (sin, cos) = (ks, kc), (kc, −ks), (−ks, −kc), (−kc, ks).
  const auto quadrant = hn::Add(hn::BitCast(du, shifted), quarter_turns);
  const auto odd = hn::RebindMask(
      d, hn::Eq(hn::And(quadrant, hn::Set(du, 1)), hn::Set(du, 1)));
  const V s = hn::IfThenElse(odd, kc, ks);
  const V c = hn::IfThenElse(odd, ks, kc);
  const auto sin_sign = hn::ShiftLeft<62>(hn::And(quadrant, hn::Set(du, 2)));
  const auto cos_sign = hn::ShiftLeft<62>(
      hn::And(hn::Add(quadrant, hn::Set(du, 1)), hn::Set(du, 2)));
  *sin_x = hn::BitCast(d, hn::Xor(hn::BitCast(du, s), sin_sign));
  *cos_x = hn::BitCast(d, hn::Xor(hn::BitCast(du, c), cos_sign));
}

// SinCosOf without extra quarter turns: sin and cos of x.
//
//   Valid Lane Types: float64
//          Max Error: < 1 ulp
//        Valid Range: |x| < ~1.6e6
//   @return sin(x), cos(x) in *sin_x, *cos_x
template <class D, class V = hn::Vec<D>>
HWY_INLINE void SinCosOf(D d, V x, V* sin_x, V* cos_x) {
  SinCosOf(d, x, hn::Zero(hn::RebindToUnsigned<D>()), sin_x, cos_x);
}

// sin and cos of the phase 2π·turns·2^-64 of each lane (turns in 2^-64 turn,
// any uint64): QuarterTurnSplit (core/math/turns.h) in vectors, with the
// bits of the scalar split (integer steps, exact conversions of the
// residual's halves through the 1.5·2^52 shifter, then the same plain
// multiplies and adds in the same order), and SinCosOf on the residual
// angle turned by the split's quarter turns. SinusoidAccuracy::kFloat64's
// kernel (core/math/sincos.h).
//
//   Valid Lane Types: uint64 in, float64 out
//          Max Error: 1.7e-16 absolute of the exact sin/cos of the phase
//                     (the split's 2^-54 rad, then < 1 ulp)
//        Valid Range: every uint64
//   @return sin and cos of 2π·turns·2^-64 in *sin_x, *cos_x
template <class D, class V = hn::Vec<D>, class VU = hn::Vec<hn::RebindToUnsigned<D>>>
HWY_INLINE void SinCosOfPhase(D d, VU t, V* sin_x, V* cos_x) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const auto q = hn::ShiftRight<62>(hn::Add(t, hn::Set(du, uint64_t{1} << 61)));
  const auto residual = hn::Sub(t, hn::ShiftLeft<62>(q));
  // h = residual >> 32 (|h| <= 2^29) and l = residual mod 2^32 as doubles:
  // the shifter's bits plus the integer are the double 1.5·2^52 + it.
  const auto high_int = hn::BitCast(du, hn::ShiftRight<32>(hn::BitCast(di, residual)));
  const auto low_int = hn::And(residual, hn::Set(du, uint64_t{0xffffffff}));
  const auto shifter_bits = hn::Set(du, uint64_t{0x4338000000000000});
  const V shifter = hn::Set(d, kShifter);
  const V high = hn::Sub(hn::BitCast(d, hn::Add(high_int, shifter_bits)), shifter);
  const V low = hn::Sub(hn::BitCast(d, hn::Add(low_int, shifter_bits)), shifter);
  const V angle =
      hn::Add(hn::Mul(high, hn::Set(d, kTurnsHiRadiansHi)),
              hn::Add(hn::Mul(high, hn::Set(d, kTurnsHiRadiansLo)),
                      hn::Mul(low, hn::Set(d, kTurnRadians))));
  SinCosOf(d, angle, q, sin_x, cos_x);
}

// sin and cos of the phase 2π·turns·2^-64 of each lane, for float32 outputs
// (SinusoidAccuracy::kFloat32: every float32 path of the temporal sinusoids,
// the same bits on every target). With u = turns + 2^61, u's top two bits
// are the nearest quarter turn q mod 4 and (u mod 2^62) − 2^61 the residual
// r in [−2^61, 2^61) of 2^-64 turn; the angle r·π·2^-63 is rounded from the
// integer once and scaled once (relative error < 2^-51, so it stays
// relative next to a zero of sin or cos, where 2π·turns in double was
// ~4e-16 off absolute), |angle| <= π/4. No reduction is left to do: these
// are SinCosOf's polynomials with y0 = angle and y1 = 0 and its zero terms
// dropped, which round exactly as SinCosOf does on that angle
// (RN(0 − a) = −a, RN(−a − b) = −RN(a + b), x − 0 = x), so < 1 ulp from the
// exact sin and cos of the rounded angle. q's swap and signs come from u's
// bits, no shifts: odd q is bit 62, sin's sign bit 63 and cos's the bit 63
// of u + 2^62.
//
//   Valid Lane Types: uint64 in, float64 out
//          Max Error: ≤ 3.5e-16 rad on the angle before the sine, then
//                     < 1 ulp (far inside a float32 ulp)
//        Valid Range: every uint64
//   @return sin and cos of 2π·turns·2^-64 in *sin_x, *cos_x
template <class D, class V = hn::Vec<D>, class VU = hn::Vec<hn::RebindToUnsigned<D>>>
HWY_INLINE void SinCosOfPhaseFloat32(D d, VU turns, V* sin_x, V* cos_x) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const VU quarter = hn::Set(du, uint64_t{1} << 62);
  const VU eighth = hn::Set(du, uint64_t{1} << 61);
  const VU sign = hn::Set(du, uint64_t{1} << 63);
  const VU u = hn::Add(turns, eighth);
  const VU residual = hn::Sub(hn::AndNot(hn::Or(sign, quarter), u), eighth);
  const V y0 = hn::Mul(hn::ConvertTo(d, hn::BitCast(di, residual)),
                       hn::Set(d, kTurnRadians));
  const V one = hn::Set(d, 1.0);
  const V half = hn::Set(d, 0.5);
  const V z = hn::Mul(y0, y0);
  const V zz = hn::Mul(z, z);
  const V v = hn::Mul(z, y0);
  // SinCosOf's y0 − ((z·(y1/2 − v·sr) − y1) − v·S1) at y1 = 0.
  const V ks = hn::Add(y0, hn::Add(hn::Mul(z, hn::Mul(v, SinTail(d, z, zz))),
                                   hn::Mul(v, hn::Set(d, kS1))));
  // SinCosOf's (1 − z/2) + (((1 − (1 − z/2)) − z/2) + (z·cr − y0·y1)) at y1 = 0.
  const V hz = hn::Mul(half, z);
  const V one_minus_hz = hn::Sub(one, hz);
  const V kc = hn::Add(one_minus_hz,
                       hn::Add(hn::Sub(hn::Sub(one, one_minus_hz), hz),
                               hn::Mul(z, CosTail(d, z, zz))));
  const auto odd = hn::RebindMask(d, hn::TestBit(u, quarter));
  const V s = hn::IfThenElse(odd, kc, ks);
  const V c = hn::IfThenElse(odd, ks, kc);
  *sin_x = hn::BitCast(d, hn::Xor(hn::BitCast(du, s), hn::And(u, sign)));
  *cos_x = hn::BitCast(d, hn::Xor(hn::BitCast(du, c), hn::And(hn::Add(u, quarter), sign)));
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace phasor
HWY_AFTER_NAMESPACE();

#endif  // PHASOR_CORE_MATH_SINCOS_INL_H_
