// A __float128 (libquadmath) reference for cos(p·θ) and sin(p·θ) at any int64
// p, independent of core/exact_angle: Cody–Waite reduction in quad precision.
//
// p·θ is split exactly into A + B with A = p_hi·2^32·θ and B = p_lo·θ (each an
// 85-bit product, exact in __float128's 113 bits). Each is reduced by
// k = round(X/2π) against 2π written as four 48-bit pieces (k·piece is exact,
// k < 2^62), so the reduced angle is within ~2^-98 rad of exact. quadmath.h is
// not found by clang-14, so the few functions used are declared here; link
// with quadmath.
#ifndef PHASOR_TESTS_QUAD_REFERENCE_H_
#define PHASOR_TESTS_QUAD_REFERENCE_H_

#include <cstdint>

extern "C" {
__float128 cosq(__float128);
__float128 sinq(__float128);
__float128 rintq(__float128);
__float128 powq(__float128, __float128);
__float128 expq(__float128);
__float128 logq(__float128);
__float128 floorq(__float128);
__float128 ceilq(__float128);
__float128 sqrtq(__float128);
}

namespace phasor::testing {

using Quad = __float128;

// 2π = Σ kTwoPiPieces to 2^-190 (mpmath, 48-bit significands).
inline constexpr double kTwoPiPieces[4] = {0x1.921fb54442d00p+2,
                                           0x1.8469898cc5160p-46,
                                           0x1.01b839a252040p-94,
                                           0x1.3822299f31d00p-143};

// 2π in quad (to its 113 bits).
inline Quad TwoPiQuad() {
  Quad sum = 0;
  for (double piece : kTwoPiPieces) sum += Quad(piece);
  return sum;
}

inline Quad ReduceTwoPi(Quad x) {
  const Quad two_pi = Quad(kTwoPiPieces[0]) + Quad(kTwoPiPieces[1]);
  const Quad k = rintq(x / two_pi);
  Quad r = x;
  for (double piece : kTwoPiPieces) r -= k * Quad(piece);
  return r;
}

// p·θ reduced to about [−π, π] (a few ulp beyond at worst), in quad.
inline Quad ReducedAngle(double theta, int64_t p) {
  const int64_t high = p >> 32;  // Arithmetic shift: p = high·2^32 + low.
  const uint64_t low = static_cast<uint64_t>(p) & 0xffffffffu;
  const Quad a = Quad(static_cast<double>(high)) * Quad(4294967296.0) * Quad(theta);
  const Quad b = Quad(static_cast<double>(low)) * Quad(theta);
  return ReduceTwoPi(a) + ReduceTwoPi(b);
}

inline Quad QuadCos(double theta, int64_t p) { return cosq(ReducedAngle(theta, p)); }
inline Quad QuadSin(double theta, int64_t p) { return sinq(ReducedAngle(theta, p)); }

// The nearest double to q: what "correctly rounded" means in the tests.
inline double NearestDouble(Quad q) { return static_cast<double>(q); }

}  // namespace phasor::testing

#endif  // PHASOR_TESTS_QUAD_REFERENCE_H_
