#include "core/continuous_time.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/errors.h"
#include "core/exact_angle.h"

// The sin/cos kernel is compiled once per SIMD target Highway finds
// (hwy/examples/skeleton.cc): foreach_target.h re-includes this file with
// HWY_TARGET set to each; the scalar code below is in HWY_ONCE.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/continuous_time.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#ifndef PHASOR_CORE_CONTINUOUS_TIME_BATCH_
#define PHASOR_CORE_CONTINUOUS_TIME_BATCH_
namespace phasor {
// The angles per kernel call: a TimeSinusoid chunk of periods (4 = one
// 256-bit vector of doubles).
constexpr size_t kSinCosBatch = 4;
}  // namespace phasor
#endif  // PHASOR_CORE_CONTINUOUS_TIME_BATCH_

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// fdlibm's constants (see SinCosSmallAngles).
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

// The kernel on one vector of Lanes(d) angles x, turned by `quarter_turns`
// more quarter turns (per lane, mod 4; zero for x itself): *sin_x, *cos_x of
// x + quarter_turns·π/2. The extra turns join the reduction's own quadrant,
// so the result is one exact swap and sign change of the polynomials.
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

// The kernel on x itself.
template <class D, class V = hn::Vec<D>>
HWY_INLINE void SinCosOf(D d, V x, V* sin_x, V* cos_x) {
  SinCosOf(d, x, hn::Zero(hn::RebindToUnsigned<D>()), sin_x, cos_x);
}

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

// sin and cos of `count` angles |x| <= π in double. fdlibm's algorithm
// for |x| < 2^19·π/2 (Sun Microsystems 1993, as kept in FreeBSD
// lib/msun/src/e_rem_pio2.c, k_sin.c, k_cos.c; coefficients copied with their
// bit patterns): reduce by the nearest multiple q·π/2 with π/2 in three parts
// (the "2nd round" of e_rem_pio2.c, taken always: good to ~118 bits, so
// r = y0 + y1 carries no cancellation error even next to q·π/2), then the
// kernels' minimax polynomials on [−π/4, π/4] (|sin(r)/r − poly| < 2^−58,
// |cos(r) − poly| < 2^−58) and the quadrant's swap and signs, selected with
// masks (a quadrant is random; a branch per value was mispredicted half the
// time). Error < 1 ulp, like glibc's sin/cos, which this replaces because a
// libm call per value was ~24 ns, 40% of a workload-P row
// (bench/observations_bench.cc workload_p). The two may differ in the last
// bit of a double; a float32 output then differs only when the exact value
// lies within that bit of a float32 rounding boundary (~2^−29 of values;
// none of workload P's 8·10^6, see tests/continuous_time_test.cc).
// Every operation is one IEEE-rounded operation in a fixed order, and this
// file is compiled with -ffp-contract=off, so every target (and HWY_SCALAR)
// gives the same bits.
// REQUIRES: count % kSinCosBatch == 0; |angle[i]| <= π (more exactly:
// |q| < 2^20; π is far inside).
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

// sin and cos of 2π·turns[i..]·2^-64 for Lanes(d) phases: the quarter-turn
// split of ExactAngle::QuarterTurnSplit in vectors (the same bits: integer
// steps, exact conversions of the residual's halves through the 1.5·2^52
// shifter, then the same plain multiplies and adds in the same order), and
// the kernel on the residual angle turned by the split's quarter turns.
template <class D>
HWY_INLINE void SinCosOfTurnsVector(D d, const uint64_t* HWY_RESTRICT turns, size_t i,
                                    double* HWY_RESTRICT sin_out,
                                    double* HWY_RESTRICT cos_out) {
  using V = hn::Vec<D>;
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const auto t = hn::LoadU(du, turns + i);
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
  V s, c;
  SinCosOf(d, angle, q, &s, &c);
  hn::StoreU(s, d, sin_out + i);
  hn::StoreU(c, d, cos_out + i);
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

// SinCosOfTurnsVector over `count` phases (any count).
void SinCosOfTurnsKernel(const uint64_t* HWY_RESTRICT turns, size_t count,
                         double* HWY_RESTRICT sin_out, double* HWY_RESTRICT cos_out) {
  ForEachVector(count, [&](auto d, size_t i) {
    SinCosOfTurnsVector(d, turns, i, sin_out, cos_out);
  });
}

// sin and cos of 2π·turns·2^-64 for Lanes(d) phases, for float32 outputs
// (every kFloat32 path of the time sinusoid: the same bits on every
// target). With u = turns + 2^61, u's top two bits are the nearest quarter
// turn q mod 4 and (u mod 2^62) − 2^61 the residual r in [−2^61, 2^61) of
// 2^-64 turn; the angle r·π·2^-63 is rounded from the integer once and
// scaled once (relative error < 2^-51, so it stays relative next to a
// zero of sin or cos, where 2π·turns in double was ~4e-16 off absolute),
// |angle| <= π/4. No reduction is left to do: these are SinCosOf's
// polynomials with y0 = angle and y1 = 0 and its zero terms dropped, which
// round exactly as SinCosOf does on that angle (RN(0 − a) = −a,
// RN(−a − b) = −RN(a + b), x − 0 = x), so < 1 ulp from the exact sin and cos
// of the rounded angle. q's swap and signs come from u's bits, no shifts:
// odd q is bit 62, sin's sign bit 63 and cos's the bit 63 of u + 2^62.
template <class D, class V = hn::Vec<D>, class VU = hn::Vec<hn::RebindToUnsigned<D>>>
HWY_INLINE void SinCosOfTurnsFloat32(D d, VU turns, V* sin_x, V* cos_x) {
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

// SinCosOfTurnsFloat32 over `count` phases (any count).
void SinCosOfTurnsFloat32Kernel(const uint64_t* HWY_RESTRICT turns, size_t count,
                                double* HWY_RESTRICT sin_out,
                                double* HWY_RESTRICT cos_out) {
  ForEachVector(count, [&](auto d, size_t i) {
    hn::Vec<decltype(d)> s, c;
    SinCosOfTurnsFloat32(d, hn::LoadU(hn::RebindToUnsigned<decltype(d)>(), turns + i), &s, &c);
    hn::StoreU(s, d, sin_out + i);
    hn::StoreU(c, d, cos_out + i);
  });
}

// The top 64 bits of the 128-bit products a_j·step_j of unsigned a_j,
// lane by lane, formed from 32-bit pieces: a_j·step_lo's high half +
// a_j·step_hi's low half, mod 2^64. For an int64 e_j sign-extended, the
// scalar path's integer is this minus step_lo where e_j < 0.
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

// The scalar path's integer for one row's e and periods k.. k + Lanes(d).
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

// The scalar path's integer for e_j and period j of each lane.
template <class VU>
HWY_INLINE VU ProductTopOfLanes(VU e, VU lo, VU hi) {
  const hn::DFromV<VU> du;
  const hn::RebindToSigned<decltype(du)> di;
  // All ones where e_j < 0 (an arithmetic shift of its sign).
  const VU negative = hn::BitCast(du, hn::ShiftRight<63>(hn::BitCast(di, e)));
  return hn::Sub(UnsignedProductTop(e, lo, hi), hn::And(lo, negative));
}

// Periods k.. k + Lanes(d) of one row of the float32-path ladder:
// row[2k] = sin, row[2k + 1] = cos of the phase ExactPhase::Turns(e)
// (ProductTop), through the scalar path's SinCosOfTurnsFloat32: the same
// bits.
template <class D>
HWY_INLINE void LadderVector(D d, int64_t e, const uint64_t* HWY_RESTRICT step_lo,
                             const uint64_t* HWY_RESTRICT step_hi, size_t k,
                             double* HWY_RESTRICT row) {
  hn::Vec<D> s, c;
  SinCosOfTurnsFloat32(d, ProductTop(d, e, step_lo, step_hi, k), &s, &c);
  hn::StoreInterleaved2(s, c, d, row + 2 * k);
}

// Sines k.. k + Lanes(d) of one row of Time2Vec's float32 path: sin[k] =
// sin of the phase top64(e·step_k) + offset_k in 2^-64 turns
// (Time2Vec::PhasesFloat32's integer), through SinCosOfTurnsFloat32.
template <class D>
HWY_INLINE void Time2VecVector(D d, int64_t e, const uint64_t* HWY_RESTRICT step_lo,
                               const uint64_t* HWY_RESTRICT step_hi,
                               const uint64_t* HWY_RESTRICT offsets, size_t k,
                               double* HWY_RESTRICT sines) {
  const hn::RebindToUnsigned<D> du;
  const auto turns = hn::Add(ProductTop(d, e, step_lo, step_hi, k), hn::LoadU(du, offsets + k));
  hn::Vec<D> s, c;
  SinCosOfTurnsFloat32(d, turns, &s, &c);
  hn::StoreU(s, d, sines + k);
}

// ProductTop of one lane, in 128-bit arithmetic.
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

// Time2Vec's float32 sines of whole rows: row r's `count` sines at
// out + r·stride (Time2VecVector), for elapsed times that fit int64. Each
// lane is computed alone: any vector width gives the same bits.
void Time2VecRowsFloat32(const int64_t* HWY_RESTRICT elapsed, size_t rows,
                         const uint64_t* HWY_RESTRICT step_lo,
                         const uint64_t* HWY_RESTRICT step_hi,
                         const uint64_t* HWY_RESTRICT offsets, size_t count,
                         double* HWY_RESTRICT out, int64_t stride) {
  const hn::CappedTag<double, 1> one;
  for (size_t r = 0; r < rows; ++r) {
    double* row = out + static_cast<int64_t>(r) * stride;
    size_t k = ForVectors(count, [&](auto d, size_t k0) {
      Time2VecVector(d, elapsed[r], step_lo, step_hi, offsets, k0, row);
    });
    for (; k < count; ++k) {
      const uint64_t top = ScalarProductTop(elapsed[r], step_lo[k], step_hi[k]);
      hn::Vec<decltype(one)> s, c;
      SinCosOfTurnsFloat32(one, hn::Set(hn::RebindToUnsigned<decltype(one)>(), top + offsets[k]),
                           &s, &c);
      row[k] = hn::GetLane(s);
    }
  }
}

// Whether LadderRowsFloat32 takes a ladder of `periods`: a whole vector of
// them per row, or a vector of whole rows (periods dividing the lanes).
bool LadderTakes(size_t periods) {
  const size_t lanes = hn::Lanes(hn::ScalableTag<double>());
  return periods >= lanes || (periods > 0 && lanes % periods == 0);
}

// Rows [0, rows − rows mod (Lanes(d) / periods)) of LadderRowsFloat32 for
// a ladder narrower than a vector (dim 8 is 4 periods, half an AVX-512
// vector): Lanes(d) / periods rows per vector, lane j holding period
// j mod periods of row j / periods. Returns the first row left.
// REQUIRES: periods < Lanes(d), Lanes(d) divisible by periods.
template <class D>
HWY_INLINE size_t NarrowLadderRows(D d, const int64_t* HWY_RESTRICT elapsed, size_t rows,
                                   const uint64_t* HWY_RESTRICT step_lo,
                                   const uint64_t* HWY_RESTRICT step_hi, size_t periods,
                                   double* HWY_RESTRICT out, int64_t stride) {
  const hn::RebindToUnsigned<D> du;
  constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(double);
  const size_t lanes = hn::Lanes(d);
  const size_t rows_per_vector = lanes / periods;
  HWY_ALIGN uint64_t lo[kMaxLanes];
  HWY_ALIGN uint64_t hi[kMaxLanes];
  HWY_ALIGN double pairs[2 * kMaxLanes];
  for (size_t j = 0; j < lanes; ++j) {
    lo[j] = step_lo[j % periods];
    hi[j] = step_hi[j % periods];
  }
  const auto lo_v = hn::Load(du, lo);
  const auto hi_v = hn::Load(du, hi);
  size_t r = 0;
  for (; r + rows_per_vector <= rows; r += rows_per_vector) {
    // Lanes [i·periods, (i + 1)·periods) hold row r + i's elapsed time
    // (built in registers: lanes stored one by one and loaded as a vector
    // would stall the load behind the stores).
    auto e = hn::Set(du, static_cast<uint64_t>(elapsed[r + rows_per_vector - 1]));
    for (size_t i = rows_per_vector - 1; i-- > 0;) {
      e = hn::IfThenElse(hn::FirstN(du, (i + 1) * periods),
                         hn::Set(du, static_cast<uint64_t>(elapsed[r + i])), e);
    }
    hn::Vec<D> s, c;
    SinCosOfTurnsFloat32(d, ProductTopOfLanes(e, lo_v, hi_v), &s, &c);
    // Interleaved, row i's pairs are pairs[2·periods·i, 2·periods·(i + 1)).
    hn::StoreInterleaved2(s, c, d, pairs);
    for (size_t i = 0; i < rows_per_vector; ++i) {
      double* row = out + static_cast<int64_t>(r + i) * stride;
      const double* from = pairs + 2 * periods * i;
      if (2 * periods == lanes) {  // Two rows per vector: a vector per row.
        hn::StoreU(hn::Load(d, from), d, row);
      } else {
        for (size_t j = 0; j < 2 * periods; ++j) row[j] = from[j];
      }
    }
  }
  return r;
}

// The float32-path ladder of whole rows: row r at out + r·stride gets
// 2·periods values (LadderVector), for elapsed times that fit int64.
// Each lane is computed alone: any vector width, and any grouping of rows
// into vectors, gives the same bits.
// REQUIRES: LadderTakes(periods).
void LadderRowsFloat32(const int64_t* HWY_RESTRICT elapsed, size_t rows,
                       const uint64_t* HWY_RESTRICT step_lo,
                       const uint64_t* HWY_RESTRICT step_hi, size_t periods,
                       double* HWY_RESTRICT out, int64_t stride) {
  const hn::CappedTag<double, 1> one;
  size_t r = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<double> full;
  if (periods < hn::Lanes(full)) {
    r = NarrowLadderRows(full, elapsed, rows, step_lo, step_hi, periods, out, stride);
  }
#endif
  for (; r < rows; ++r) {
    double* row = out + static_cast<int64_t>(r) * stride;
    size_t k = ForVectors(periods, [&](auto d, size_t k0) {
      LadderVector(d, elapsed[r], step_lo, step_hi, k0, row);
    });
#if HWY_TARGET != HWY_SCALAR
    for (; k < periods; ++k) LadderVector(one, elapsed[r], step_lo, step_hi, k, row);
#endif
    // HWY_SCALAR: one lane at a time, the product in 128 bits.
    for (; k < periods; ++k) {
      const uint64_t top = ScalarProductTop(elapsed[r], step_lo[k], step_hi[k]);
      hn::Vec<decltype(one)> s, c;
      SinCosOfTurnsFloat32(one, hn::Set(hn::RebindToUnsigned<decltype(one)>(), top), &s, &c);
      row[2 * k] = hn::GetLane(s);
      row[2 * k + 1] = hn::GetLane(c);
    }
  }
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
HWY_EXPORT(LadderRowsFloat32);
HWY_EXPORT(Time2VecRowsFloat32);
HWY_EXPORT(LadderTakes);
namespace {

using u128 = unsigned __int128;

// A field path kept as prefix + suffix and joined only for an error message,
// so validating a valid ladder builds no string (it runs once per request).
struct LadderField {
  absl::string_view prefix;
  absl::string_view suffix;
  std::string Path() const { return absl::StrCat(prefix, suffix); }
};

absl::Status CheckPeriodLadder(int64_t dim, double min_period_seconds,
                               double max_period_seconds,
                               const LadderField& dim_field,
                               const LadderField& min_field,
                               const LadderField& max_field) {
  if (dim < 2 || dim % 2 != 0 || dim > kMaxEncodingWidth) {
    return InvalidField(dim_field.Path(),
                        absl::StrCat("must be even and in [2, ",
                                     kMaxEncodingWidth, "], got ", dim));
  }
  auto check_period = [](double p, const LadderField& field) -> absl::Status {
    if (!std::isfinite(p) || p < kMinLadderPeriodSeconds ||
        p > kMaxLadderPeriodSeconds) {
      return InvalidField(field.Path(),
                          absl::StrCat("must be a finite period in [",
                                       kMinLadderPeriodSeconds, ", ",
                                       kMaxLadderPeriodSeconds,
                                       "] seconds, got ", p));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = check_period(min_period_seconds, min_field); !s.ok()) {
    return s;
  }
  if (absl::Status s = check_period(max_period_seconds, max_field); !s.ok()) {
    return s;
  }
  if (max_period_seconds < min_period_seconds) {
    return InvalidField(max_field.Path(),
                        absl::StrCat("must be >= ", min_field.Path(), " (",
                                     min_period_seconds, "), got ",
                                     max_period_seconds));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePeriodLadder(int64_t dim, double min_period_seconds,
                                  double max_period_seconds,
                                  absl::string_view dim_field,
                                  absl::string_view min_field,
                                  absl::string_view max_field) {
  return CheckPeriodLadder(dim, min_period_seconds, max_period_seconds,
                           {dim_field, ""}, {min_field, ""}, {max_field, ""});
}

absl::Status ValidateTimeBlock(const TimeBlock& block,
                               absl::string_view field_prefix) {
  if (!block.periods.empty()) {
    int64_t orders = 0;
    for (size_t i = 0; i < block.periods.size(); ++i) {
      const TimePeriod& period = block.periods[i];
      const std::string path = absl::StrCat(field_prefix, ".periods[", i, "]");
      const double p = period.period_seconds;
      if (!std::isfinite(p) || p < kMinLadderPeriodSeconds ||
          p > kMaxLadderPeriodSeconds) {
        return InvalidField(absl::StrCat(path, ".period_seconds"),
                            absl::StrCat("must be a finite period in [",
                                         kMinLadderPeriodSeconds, ", ",
                                         kMaxLadderPeriodSeconds, "] seconds, got ", p));
      }
      if (period.order < 1 || period.order > kMaxFourierOrder) {
        return InvalidField(absl::StrCat(path, ".order"),
                            absl::StrCat("must be in [1, ", kMaxFourierOrder,
                                         "], got ", period.order));
      }
      orders += period.order;
    }
    if (2 * orders > kMaxEncodingWidth || block.dim != 2 * orders) {
      return InvalidField(absl::StrCat(field_prefix, ".dim"),
                          absl::StrCat("must be 2 x the periods' orders (",
                                       2 * orders, ", at most ", kMaxEncodingWidth,
                                       "), got ", block.dim));
    }
    return absl::OkStatus();
  }
  return CheckPeriodLadder(block.dim, block.min_period_seconds,
                           block.max_period_seconds, {field_prefix, ".dim"},
                           {field_prefix, ".min_period_seconds"},
                           {field_prefix, ".max_period_seconds"});
}

absl::Status ValidateTime2VecBlock(const Time2VecBlock& block,
                                   absl::string_view field_prefix) {
  if (block.omega.empty()) {
    return InvalidField(absl::StrCat(field_prefix, ".omega"),
                        "must hold k+1 >= 1 frequencies, got none");
  }
  if (static_cast<int64_t>(block.omega.size()) > kMaxEncodingWidth) {
    return InvalidField(absl::StrCat(field_prefix, ".omega"),
                        absl::StrCat("holds ", block.omega.size(),
                                     " terms; at most ", kMaxEncodingWidth));
  }
  if (block.phi.size() != block.omega.size()) {
    return InvalidField(absl::StrCat(field_prefix, ".phi"),
                        absl::StrCat("has ", block.phi.size(),
                                     " values; omega has ", block.omega.size()));
  }
  for (size_t i = 0; i < block.omega.size(); ++i) {
    if (!std::isfinite(block.omega[i])) {
      return InvalidField(absl::StrCat(field_prefix, ".omega[", i, "]"),
                          absl::StrCat("not finite (", block.omega[i], ")"));
    }
    if (!std::isfinite(block.phi[i])) {
      return InvalidField(absl::StrCat(field_prefix, ".phi[", i, "]"),
                          absl::StrCat("not finite (", block.phi[i], ")"));
    }
  }
  if (!std::isfinite(block.unit_seconds) || block.unit_seconds <= 0) {
    return InvalidField(absl::StrCat(field_prefix, ".unit_seconds"),
                        absl::StrCat("must be finite and > 0, got ",
                                     block.unit_seconds));
  }
  return absl::OkStatus();
}

double LadderPeriodSeconds(int64_t k, int64_t num_periods,
                           double min_period_seconds,
                           double max_period_seconds) {
  assert(num_periods >= 1 && k >= 0 && k < num_periods);
  if (num_periods == 1) return min_period_seconds;
  if (k == num_periods - 1) return max_period_seconds;
  const double ratio = max_period_seconds / min_period_seconds;
  return min_period_seconds *
         std::pow(ratio, static_cast<double>(k) /
                             static_cast<double>(num_periods - 1));
}

std::vector<double> LadderPeriodsSeconds(int64_t num_periods,
                                         double min_period_seconds,
                                         double max_period_seconds) {
  assert(num_periods >= 1);
  std::vector<double> periods(num_periods);
  for (int64_t k = 0; k < num_periods; ++k) {
    periods[k] = LadderPeriodSeconds(k, num_periods, min_period_seconds,
                                     max_period_seconds);
  }
  return periods;
}

std::vector<double> TimeBlockPeriodsSeconds(const TimeBlock& block) {
  if (block.periods.empty()) {
    return LadderPeriodsSeconds(block.dim / 2, block.min_period_seconds,
                                block.max_period_seconds);
  }
  std::vector<double> periods;
  periods.reserve(static_cast<size_t>(block.dim / 2));
  for (const TimePeriod& period : block.periods) {
    for (int64_t k = 1; k <= period.order; ++k) {
      periods.push_back(period.period_seconds / static_cast<double>(k));
    }
  }
  return periods;
}

ExactPhase::ExactPhase(double period_seconds, int64_t harmonic) {
  assert(period_seconds >= kMinLadderPeriodSeconds &&
         period_seconds <= kMaxLadderPeriodSeconds);
  assert(harmonic >= 1 && harmonic <= kMaxFourierOrder);
  // period = m·2^e exactly, with m odd, so P_ns = m·10^9·2^e and the turns
  // per nanosecond are 2^−e / (m·10^9): a ratio of integers, divided out
  // below bit by bit with no rounding except the final floor.
  int exponent = 0;
  const double fraction = std::frexp(period_seconds, &exponent);
  auto mantissa = static_cast<uint64_t>(std::ldexp(fraction, 53));
  int e = exponent - 53;
  while ((mantissa & 1) == 0) {
    mantissa >>= 1;
    ++e;
  }
  u128 divisor = static_cast<u128>(mantissa) * 1000000000u;
  int doublings = -e;
  if (doublings < 0) {
    // P_ns = m·10^9·2^e <= 1e24 < 2^80 for the validated periods.
    divisor <<= -doublings;
    doublings = 0;
  }
  // remainder = 2^doublings mod divisor; divisor < 2^83, so 2·remainder
  // never overflows.
  // Long division in base 2^kChunkBits: divisor < 2^83, so a remainder
  // shifted by kChunkBits stays below 2^128 and each step is one exact
  // 128-bit division (the same bits as a bit-by-bit division, ~40x fewer
  // operations; a request builds one of these per ladder period).
  constexpr int kChunkBits = 44;
  assert(divisor < (static_cast<u128>(1) << (128 - kChunkBits)));
  // remainder = harmonic·2^doublings mod divisor: the turns per nanosecond
  // are harmonic·2^−e / (m·10^9), divided out the same way.
  u128 remainder = static_cast<u128>(harmonic) % divisor;
  for (int left = doublings; left > 0;) {
    const int bits = left < kChunkBits ? left : kChunkBits;
    remainder = (remainder << bits) % divisor;
    left -= bits;
  }
  // The 128 fractional bits of remainder / divisor.
  u128 step = 0;
  for (int left = 128; left > 0;) {
    const int bits = left < kChunkBits ? left : kChunkBits;
    remainder <<= bits;
    step = (step << bits) | (remainder / divisor);
    remainder %= divisor;
    left -= bits;
  }
  step_ = step;
}

TimeSinusoid::TimeSinusoid(int64_t dim, double min_period_seconds,
                           double max_period_seconds,
                           SinusoidAccuracy accuracy)
    : min_period_seconds_(min_period_seconds),
      max_period_seconds_(max_period_seconds),
      accuracy_(accuracy) {
  const int64_t num_periods = dim / 2;
  phases_.reserve(static_cast<size_t>(num_periods));
  step_lo_.reserve(static_cast<size_t>(num_periods));
  step_hi_.reserve(static_cast<size_t>(num_periods));
  for (int64_t k = 0; k < num_periods; ++k) {
    AddPhase(ExactPhase(LadderPeriodSeconds(k, num_periods, min_period_seconds,
                                            max_period_seconds)));
  }
}

TimeSinusoid::TimeSinusoid(absl::Span<const TimePeriod> periods,
                           SinusoidAccuracy accuracy)
    : min_period_seconds_(0),
      max_period_seconds_(0),
      accuracy_(accuracy),
      explicit_periods_(periods.begin(), periods.end()) {
  for (const TimePeriod& period : periods) {
    for (int64_t k = 1; k <= period.order; ++k) {
      AddPhase(ExactPhase(period.period_seconds, k));
    }
  }
}

void TimeSinusoid::AddPhase(const ExactPhase& phase) {
  phases_.push_back(phase);
  step_lo_.push_back(static_cast<uint64_t>(phase.step()));
  step_hi_.push_back(static_cast<uint64_t>(phase.step() >> 64));
}

std::vector<double> TimeSinusoid::periods_seconds() const {
  if (!explicit_periods_.empty()) {
    TimeBlock block;
    block.dim = dim();
    block.periods = explicit_periods_;
    return TimeBlockPeriodsSeconds(block);
  }
  return LadderPeriodsSeconds(static_cast<int64_t>(phases_.size()),
                              min_period_seconds_, max_period_seconds_);
}

void TimeSinusoid::Encode(__int128 elapsed_ns, double* out) const {
  if (accuracy_ == SinusoidAccuracy::kFloat64) {
    EncodeImpl<SinusoidAccuracy::kFloat64>(elapsed_ns, out);
    return;
  }
  const auto narrow = static_cast<int64_t>(elapsed_ns);
  if (narrow != elapsed_ns) {
    EncodeImpl<SinusoidAccuracy::kFloat32>(elapsed_ns, out);
    return;
  }
  HWY_DYNAMIC_DISPATCH(LadderRowsFloat32)(&narrow, 1, step_lo_.data(), step_hi_.data(),
                                          phases_.size(), out, dim());
}

void TimeSinusoid::EncodeRows(absl::Span<const int64_t> times_ns,
                              int64_t origin_ns, double* out,
                              int64_t row_stride) const {
  if (accuracy_ == SinusoidAccuracy::kFloat64) {
    EncodeRowsImpl<SinusoidAccuracy::kFloat64>(times_ns, origin_ns, out,
                                               row_stride);
  } else {
    EncodeRowsImpl<SinusoidAccuracy::kFloat32>(times_ns, origin_ns, out,
                                               row_stride);
  }
}

namespace {

// sin_out[i], cos_out[i] of the phases turns[0..count) (2^-64 turn), as
// kAccuracy's outputs take them: kFloat32 through SinCosOfTurnsFloat32
// (the vector ladder's own kernel, so every kFloat32 path gives the same
// bits); kFloat64 through SinCosOfTurns (QuarterTurnSplit, within 1.7e-16).
template <SinusoidAccuracy kAccuracy>
void SinCosOfPhases(const uint64_t* turns, size_t count, double* sin_out,
                    double* cos_out) {
  if constexpr (kAccuracy == SinusoidAccuracy::kFloat32) {
    HWY_DYNAMIC_DISPATCH(SinCosOfTurnsFloat32Kernel)(turns, count, sin_out, cos_out);
  } else {
    HWY_DYNAMIC_DISPATCH(SinCosOfTurnsKernel)(turns, count, sin_out, cos_out);
  }
}

}  // namespace

template <SinusoidAccuracy kAccuracy>
void TimeSinusoid::EncodeImpl(__int128 elapsed_ns, double* out) const {
  // Periods in chunks of kChunk: the exact phases first (integer work), then
  // one vector sin/cos pass.
  constexpr int64_t kChunk = 64;
  uint64_t turns[kChunk];
  double sin_angle[kChunk];
  double cos_angle[kChunk];
  const auto num_periods = static_cast<int64_t>(phases_.size());
  for (int64_t k0 = 0; k0 < num_periods; k0 += kChunk) {
    const int64_t n = std::min(kChunk, num_periods - k0);
    for (int64_t i = 0; i < n; ++i) turns[i] = phases_[k0 + i].Turns(elapsed_ns);
    SinCosOfPhases<kAccuracy>(turns, static_cast<size_t>(n), sin_angle, cos_angle);
    for (int64_t i = 0; i < n; ++i) {
      out[2 * (k0 + i)] = sin_angle[i];
      out[2 * (k0 + i) + 1] = cos_angle[i];
    }
  }
}

template <SinusoidAccuracy kAccuracy>
void TimeSinusoid::EncodeRowsImpl(absl::Span<const int64_t> times_ns,
                                  int64_t origin_ns, double* out,
                                  int64_t row_stride) const {
  // kFloat32 ladders of a vector of periods or more, or of a divisor of a
  // vector's lanes (dim 8 is 4 periods, half an AVX-512 vector: two rows per
  // vector): whole rows through the vector ladder, kRows at a time; a row
  // whose elapsed time does not fit int64 (t and the origin ~292 years
  // apart) is redone by the scalar path. Other ladders (dim 6 on AVX-512)
  // fill whole vectors with the angles of several rows below instead. Both
  // give the same bits.
  if (kAccuracy == SinusoidAccuracy::kFloat32 &&
      HWY_DYNAMIC_DISPATCH(LadderTakes)(phases_.size())) {
    constexpr int64_t kRows = 64;
    int64_t elapsed[kRows];
    const auto ladder = HWY_DYNAMIC_DISPATCH(LadderRowsFloat32);
    const auto rows = static_cast<int64_t>(times_ns.size());
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      const int64_t n = std::min(kRows, rows - r0);
      bool overflow = false;
      for (int64_t r = 0; r < n; ++r) {
        overflow |= __builtin_sub_overflow(times_ns[r0 + r], origin_ns, &elapsed[r]);
      }
      ladder(elapsed, static_cast<size_t>(n), step_lo_.data(), step_hi_.data(),
             phases_.size(), out + r0 * row_stride, row_stride);
      if (overflow) {
        for (int64_t r = 0; r < n; ++r) {
          int64_t unused = 0;
          if (__builtin_sub_overflow(times_ns[r0 + r], origin_ns, &unused)) {
            EncodeImpl<kAccuracy>(ElapsedNs(times_ns[r0 + r], origin_ns),
                                  out + (r0 + r) * row_stride);
          }
        }
      }
    }
    return;
  }
  const auto num_periods = static_cast<int64_t>(phases_.size());
  const auto rows = static_cast<int64_t>(times_ns.size());
  // Phases of whole rows, kPhases at most per kernel call.
  constexpr int64_t kPhases = 64;
  const int64_t rows_per_call = kPhases / num_periods;
  if (rows_per_call == 0) {  // dim > 2·kPhases: rows one by one.
    for (int64_t r = 0; r < rows; ++r) {
      EncodeImpl<kAccuracy>(ElapsedNs(times_ns[r], origin_ns),
                            out + r * row_stride);
    }
    return;
  }
  uint64_t turns[kPhases];
  double sin_angle[kPhases];
  double cos_angle[kPhases];
  for (int64_t r0 = 0; r0 < rows; r0 += rows_per_call) {
    const int64_t call_rows = std::min(rows_per_call, rows - r0);
    for (int64_t r = 0; r < call_rows; ++r) {
      const __int128 elapsed = ElapsedNs(times_ns[r0 + r], origin_ns);
      for (int64_t k = 0; k < num_periods; ++k) {
        turns[r * num_periods + k] = phases_[k].Turns(elapsed);
      }
    }
    SinCosOfPhases<kAccuracy>(turns, static_cast<size_t>(call_rows * num_periods),
                              sin_angle, cos_angle);
    for (int64_t r = 0; r < call_rows; ++r) {
      double* row = out + (r0 + r) * row_stride;
      for (int64_t k = 0; k < num_periods; ++k) {
        row[2 * k] = sin_angle[r * num_periods + k];
        row[2 * k + 1] = cos_angle[r * num_periods + k];
      }
    }
  }
}

namespace {

// binary128: gcc's __float128 on x86-64 (arithmetic from libgcc), long
// double where that is binary128 (aarch64).
#if defined(__x86_64__) || defined(__i386__)
using Binary128 = __float128;
#else
using Binary128 = long double;
static_assert(std::numeric_limits<long double>::digits == 113,
              "Time2Vec's float64 path needs binary128");
#endif

// 2π as three doubles, summed to ~2^-150 (the 48-bit pieces of
// tests/quad_reference.h's kTwoPiPieces, from mpmath).
Binary128 TwoPi128() {
  return Binary128(0x1.921fb54442d00p+2) + Binary128(0x1.8469898cc5160p-46) +
         Binary128(0x1.01b839a252040p-94);
}

// The double-double hi + lo nearest a binary128 value (2^-106 relative).
void SplitBinary128(Binary128 value, double* hi, double* lo) {
  *hi = static_cast<double>(value);
  *lo = static_cast<double>(value - Binary128(*hi));
}

// (θ/2π) mod 1 in 2^-128 turn, mod 2^128, for any finite double θ of either
// sign: ExactAngle's exact step of |θ|, negated for a negative θ.
u128 SignedTurnStep(double theta) {
  const u128 step = ExactAngle(std::fabs(theta)).step();
  return theta < 0 ? u128{0} - step : step;
}

// x mod 1 turn as a 2^-64-turn integer, within 2^-64 turn (truncated).
// x − round(x) is exact for every double (an |x| >= 2^52 is an integer).
// Rounded by adding 1.5·2^52 (no fraction bits left; the hardware rounds to
// nearest even; this file has no contraction), not std::nearbyint, a libm
// call that saves and restores the floating-point environment.
inline uint64_t TurnsOf(double x) {
  constexpr double kShift = 6755399441055744.0;  // 1.5·2^52
  const double whole =
      std::fabs(x) < 0x1p51 ? (x + kShift) - kShift : std::nearbyint(x);
  const double scaled = (x - whole) * 0x1p64;  // In [−2^63, 2^63], or NaN.
  if (scaled < 0x1p63) return static_cast<uint64_t>(static_cast<int64_t>(scaled));
  // +2^63 (x = n + 1/2) is −2^63 modulo 2^64. A NaN (x infinite: the caller
  // marks that term) gives 0 rather than an undefined conversion.
  return scaled == 0x1p63 ? uint64_t{1} << 63 : 0;
}

// The exact integer e as hi + lo doubles: lo = e − hi has |lo| <= ulp(hi)/2
// <= 2^12 for |e| < 2^66, exact.
inline void SplitElapsed(__int128 e, double* hi, double* lo) {
  // Elapsed times almost always fit int64, whose conversions are single
  // instructions; the 128-bit ones are library calls.
  const auto narrow = static_cast<int64_t>(e);
  if (narrow == e) {
    *hi = static_cast<double>(narrow);
    if (std::fabs(*hi) < 0x1p63) {
      *lo = static_cast<double>(narrow - static_cast<int64_t>(*hi));
      return;
    }
  }
  *hi = static_cast<double>(e);
  *lo = static_cast<double>(e - static_cast<__int128>(*hi));
}

}  // namespace

Time2Vec::Time2Vec(const Time2VecBlock& block, SinusoidAccuracy accuracy)
    : width_(static_cast<int64_t>(block.omega.size())), accuracy_(accuracy) {
  const size_t n = block.omega.size();
  // U = unit_seconds·1e9: a 53-bit by 30-bit product, exact in binary128.
  const Binary128 unit_ns = Binary128(block.unit_seconds) * Binary128(1e9);
  if (accuracy_ == SinusoidAccuracy::kFloat32) {
    // The linear term as kFloat64 forms it; the sines in fixed point.
    rate_hi_.resize(1);
    rate_lo_.resize(1);
    offset_hi_.resize(1);
    offset_lo_.resize(1);
    SplitBinary128(Binary128(block.omega[0]) / unit_ns, &rate_hi_[0], &rate_lo_[0]);
    SplitBinary128(Binary128(block.phi[0]), &offset_hi_[0], &offset_lo_[0]);
    turn_steps_.reserve(n);
    phase_offsets_.reserve(n);
    for (size_t i = 1; i < n; ++i) {
      // ω_i/U rad per ns as a double-double; each part's turn fraction is
      // exact (ExactAngle), so the sum is within 2^-127 turn per ns of
      // the fraction of their sum.
      double rate_hi = 0;
      double rate_lo = 0;
      SplitBinary128(Binary128(block.omega[i]) / unit_ns, &rate_hi, &rate_lo);
      turn_steps_.push_back(SignedTurnStep(rate_hi) + SignedTurnStep(rate_lo));
      phase_offsets_.push_back(static_cast<uint64_t>(SignedTurnStep(block.phi[i]) >> 64));
      step_lo_.push_back(static_cast<uint64_t>(turn_steps_.back()));
      step_hi_.push_back(static_cast<uint64_t>(turn_steps_.back() >> 64));
    }
    return;
  }
  const Binary128 two_pi = TwoPi128();
  rate_hi_.resize(n);
  rate_lo_.resize(n);
  offset_hi_.resize(n);
  offset_lo_.resize(n);
  offset_turns_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Binary128 per_turn = i == 0 ? Binary128(1) : two_pi;
    SplitBinary128(Binary128(block.omega[i]) / (unit_ns * per_turn), &rate_hi_[i],
                   &rate_lo_[i]);
    SplitBinary128(Binary128(block.phi[i]) / per_turn, &offset_hi_[i],
                   &offset_lo_[i]);
    if (i > 0) offset_turns_[i] = TurnsOf(offset_hi_[i]) + TurnsOf(offset_lo_[i]);
  }
}

double Time2Vec::Linear(double e_hi, double e_lo) const {
  // ω_0·τ + φ_0 = e·rate + φ_0: the exact product e_hi·rate_hi (fma), the
  // small cross terms, then φ_0 by TwoSum (Knuth), rounded once at the end.
  const double p = e_hi * rate_hi_[0];
  const double p_error = std::fma(e_hi, rate_hi_[0], -p);
  const double cross = e_hi * rate_lo_[0] + e_lo * rate_hi_[0];
  const double s = p + offset_hi_[0];
  const double bp = s - p;
  const double s_error = (p - (s - bp)) + (offset_hi_[0] - bp);
  return s + (s_error + (p_error + (cross + offset_lo_[0])));
}

void Time2Vec::EncodeFloat64(__int128 elapsed_ns, double* out) const {
  double e_hi = 0;
  double e_lo = 0;
  SplitElapsed(elapsed_ns, &e_hi, &e_lo);
  out[0] = Linear(e_hi, e_lo);
  // The sines in chunks of kAngles through the vector kernel, each turns
  // e·rate_i + offset_i with every part reduced mod 1 on its own and summed
  // as 2^-64-turn integers (wrapping is the mod), then split at the nearest
  // quarter turn.
  constexpr int64_t kAngles = 64;
  HWY_ALIGN double angle[kAngles];
  HWY_ALIGN double sin_angle[kAngles];
  HWY_ALIGN double cos_angle[kAngles];
  uint32_t quadrant[kAngles];
  const auto sin_cos = HWY_DYNAMIC_DISPATCH(SinCosSmallAngles);
  const auto terms = static_cast<int64_t>(rate_hi_.size());
  for (int64_t i0 = 1; i0 < terms; i0 += kAngles) {
    const int64_t used = std::min(kAngles, terms - i0);
    for (int64_t j = 0; j < used; ++j) {
      const int64_t i = i0 + j;
      const double p = e_hi * rate_hi_[i];
      const double p_error = std::fma(e_hi, rate_hi_[i], -p);
      const uint64_t turns = TurnsOf(p) + TurnsOf(p_error) +
                             TurnsOf(e_hi * rate_lo_[i]) +
                             TurnsOf(e_lo * rate_hi_[i]) + offset_turns_[i];
      angle[j] = ExactAngle::QuarterTurnSplit(turns, &quadrant[j]);
      // ω_i·τ/2π beyond double's range (ω near its maximum): no phase is
      // left to reduce, so NaN rather than a sine of nothing.
      if (!std::isfinite(p)) angle[j] = std::numeric_limits<double>::quiet_NaN();
    }
    const auto batch = static_cast<int64_t>(kSinCosBatch);
    const int64_t padded = (used + batch - 1) / batch * batch;
    std::fill(angle + used, angle + padded, 0.0);
    sin_cos(angle, static_cast<size_t>(padded), sin_angle, cos_angle);
    for (int64_t j = 0; j < used; ++j) {
      // sin(r + q·π/2): sin r, cos r, −sin r, −cos r.
      const uint32_t q = quadrant[j];
      const double value = (q & 1) != 0 ? cos_angle[j] : sin_angle[j];
      out[i0 + j] = (q & 2) != 0 ? -value : value;
    }
  }
}

namespace {

// The largest angle handed to SinCosSmallAngles: it needs |q| < 2^20 quarter
// turns (~1.6e6 rad); a caller's angle may be any finite double, and the
// rare one past this goes to libm.
constexpr double kMaxKernelAngle = 0x1p20;

}  // namespace

double Time2Vec::LinearOf(__int128 elapsed_ns) const {
  double e_hi = 0;
  double e_lo = 0;
  SplitElapsed(elapsed_ns, &e_hi, &e_lo);
  return Linear(e_hi, e_lo);
}

void Time2Vec::PhasesFloat32(__int128 elapsed_ns, size_t first, size_t count,
                             uint64_t* turns) const {
  // e·step mod 2^128 (the whole turns wrap away), its top 64 bits the phase.
  const auto e = static_cast<u128>(elapsed_ns);
  for (size_t j = 0; j < count; ++j) {
    turns[j] = static_cast<uint64_t>((e * turn_steps_[first + j]) >> 64) +
               phase_offsets_[first + j];
  }
}

void Time2Vec::Encode(__int128 elapsed_ns, double* out) const {
  if (accuracy_ == SinusoidAccuracy::kFloat64) {
    EncodeFloat64(elapsed_ns, out);
    return;
  }
  EncodeRowsFloat32(absl::MakeConstSpan(&elapsed_ns, 1), /*origin_ns=*/0, out,
                    /*row_stride=*/width());
}

void Time2Vec::EncodeRows(absl::Span<const int64_t> times_ns, int64_t origin_ns,
                          double* out, int64_t row_stride) const {
  if (accuracy_ == SinusoidAccuracy::kFloat64) {
    for (size_t r = 0; r < times_ns.size(); ++r) {
      EncodeFloat64(ElapsedNs(times_ns[r], origin_ns),
                    out + static_cast<int64_t>(r) * row_stride);
    }
    return;
  }
  EncodeRowsFloat32(times_ns, origin_ns, out, row_stride);
}

template <typename Time>
void Time2Vec::EncodeRowsFloat32(absl::Span<const Time> times, int64_t origin_ns,
                                 double* out, int64_t row_stride) const {
  // The phases row by row (integer), then the sines of the phases of up to
  // kPhases / k rows through the float32 ladder's kernel together.
  constexpr int64_t kPhases = 64;
  uint64_t turns[kPhases];
  double sin_turns[kPhases];
  double cos_turns[kPhases];  // Not used: the kernel gives both.
  const auto sines = static_cast<int64_t>(turn_steps_.size());
  const auto rows = static_cast<int64_t>(times.size());
  if constexpr (std::is_same_v<Time, int64_t>) {
    // Rows whose elapsed time fits int64 (all but t and the origin ~292
    // years apart): the sines through the vector kernel row by row; the
    // rest by the 128-bit path below. Both give the same bits.
    constexpr int64_t kRows = 64;
    int64_t narrow[kRows];
    const auto kernel = HWY_DYNAMIC_DISPATCH(Time2VecRowsFloat32);
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      const int64_t n = std::min(kRows, rows - r0);
      bool overflow = false;
      for (int64_t r = 0; r < n; ++r) {
        overflow |= __builtin_sub_overflow(times[r0 + r], origin_ns, &narrow[r]);
        out[(r0 + r) * row_stride] = LinearOf(narrow[r]);
      }
      kernel(narrow, static_cast<size_t>(n), step_lo_.data(), step_hi_.data(),
             phase_offsets_.data(), static_cast<size_t>(sines), out + r0 * row_stride + 1,
             row_stride);
      if (!overflow) continue;
      for (int64_t r = 0; r < n; ++r) {
        int64_t unused = 0;
        if (__builtin_sub_overflow(times[r0 + r], origin_ns, &unused)) {
          const __int128 e = ElapsedNs(times[r0 + r], origin_ns);
          EncodeRowsFloat32(absl::MakeConstSpan(&e, 1), 0, out + (r0 + r) * row_stride,
                            row_stride);
        }
      }
    }
    return;
  }
  const auto elapsed = [&](int64_t r) -> __int128 {
    if constexpr (std::is_same_v<Time, __int128>) {
      return times[r];
    } else {
      return ElapsedNs(times[r], origin_ns);
    }
  };
  if (sines > kPhases) {  // A row at a time, kPhases sines at a time.
    for (int64_t r = 0; r < rows; ++r) {
      double* row = out + r * row_stride;
      const __int128 e = elapsed(r);
      row[0] = LinearOf(e);
      for (int64_t k0 = 0; k0 < sines; k0 += kPhases) {
        const auto n = static_cast<size_t>(std::min(kPhases, sines - k0));
        PhasesFloat32(e, static_cast<size_t>(k0), n, turns);
        SinCosOfPhases<SinusoidAccuracy::kFloat32>(turns, n, row + 1 + k0, cos_turns);
      }
    }
    return;
  }
  const int64_t rows_per_call = sines == 0 ? rows : kPhases / sines;
  for (int64_t r0 = 0; r0 < rows; r0 += rows_per_call) {
    const int64_t call_rows = std::min(rows_per_call, rows - r0);
    for (int64_t r = 0; r < call_rows; ++r) {
      const __int128 e = elapsed(r0 + r);
      out[(r0 + r) * row_stride] = LinearOf(e);
      PhasesFloat32(e, 0, static_cast<size_t>(sines), turns + r * sines);
    }
    SinCosOfPhases<SinusoidAccuracy::kFloat32>(
        turns, static_cast<size_t>(call_rows * sines), sin_turns, cos_turns);
    for (int64_t r = 0; r < call_rows; ++r) {
      std::copy(sin_turns + r * sines, sin_turns + (r + 1) * sines,
                out + (r0 + r) * row_stride + 1);
    }
  }
}

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

}  // namespace phasor
#endif  // HWY_ONCE
