// -----------------------------------------------------------------------------
// File: core/math/frequency_ladder.h
// -----------------------------------------------------------------------------
//
// Correctly rounded geometric frequency ladders: θ_i = base^(−i/n), and the
// scaled variants RoPE's scaling types build from them (θ_i/f, θ_i·w_i), each
// returned as the nearest double to the exact real value.
//
// Why: an int64 position multiplies θ_i by up to 2^63, so one ulp of θ_i moves
// the angle by ~2^11·θ_i radians; std::pow(base, −2i/d) rounds the exponent
// first and is itself not correctly rounded (tensor2tensor's exp-of-log form
// was up to 8 ulp off).
//
// How (Ziv's strategy): root = base^(−1/n) as a double-double (two Newton steps
// on root^n·base = 1 from std::pow, ~2^-100 relative), then the powers
// root^i by double-double products (relative error < i·2^-101), so each θ_i
// is known to ~2^-94 before the one rounding. Where that is too close to a
// midpoint between doubles to decide, the value is recomputed in quad
// precision (__float128 with libquadmath on x86-64, long double elsewhere).
// The double-double arithmetic is error-free only without multiply-add
// contraction: frequency_ladder.cc is compiled with -ffp-contract=off.
// A ladder of 64 costs one std::pow and ~90 double-double products (less
// than the 64 std::pow calls it replaces); a quad fallback (~3 µs) is
// essentially never taken.
//
// Thread-safety: pure functions.
//
// Example:
//
//   // θ_i = 10000^(−i/64), i < 64, each the nearest double to the exact value.
//   const std::vector<double> theta = RoundLadder(
//       PowerLadder(InverseRoot(/*base=*/10000.0, /*n=*/64), /*count=*/64), {},
//       [](int64_t i) { return WidePow(10000, -static_cast<WideReal>(i) / 64); });
#ifndef PHASOR_CORE_MATH_FREQUENCY_LADDER_H_
#define PHASOR_CORE_MATH_FREQUENCY_LADDER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace phasor {

#if defined(__SIZEOF_FLOAT128__) && defined(__x86_64__)
using WideReal = __float128;  // 113-bit significand (libquadmath).
#else
using WideReal = long double;  // 113 bits on aarch64; see frequency_ladder.cc.
#endif

// Quad-precision libm, for the fallbacks and the few per-request constants.
WideReal WidePow(WideReal x, WideReal y);
WideReal WideLog(WideReal x);
WideReal WideFloor(WideReal x);
WideReal WideCeil(WideReal x);
// π to the wide precision.
WideReal WidePi();

// An unevaluated sum hi + lo with |lo| <= ulp(hi)/2.
struct DoubleDouble {
  double hi = 0.0;
  double lo = 0.0;
};

// base^(−1/n) to ~2^-100 relative. REQUIRES: base finite > 0, n >= 1.
DoubleDouble InverseRoot(double base, int64_t n);
// The same from a wide-precision value (when the root's base is itself a
// formula, e.g. NTK's base·s^(rd/(rd−2))).
DoubleDouble ToDoubleDouble(WideReal value);

// root^i for i in [0, count), each within ~2^-94 relative of exact (the
// root's error times i, plus i double-double roundings).
std::vector<DoubleDouble> PowerLadder(DoubleDouble root, int64_t count);

DoubleDouble Multiply(DoubleDouble a, DoubleDouble b);
inline WideReal ToWide(DoubleDouble value) {
  return static_cast<WideReal>(value.hi) + static_cast<WideReal>(value.lo);
}

// The nearest double to value.hi + value.lo when that is decidable from a
// value within 2^-92 relative of the truth; else false.
bool RoundIfDecidable(DoubleDouble value, double* out);

// 1/d and a/b to ~2^-106 relative; a + b. REQUIRES: finite, normal results.
DoubleDouble Reciprocal(double d);
DoubleDouble Quotient(double a, double b);
DoubleDouble Add(DoubleDouble a, DoubleDouble b);

// ladder[i]·weights[i] (weights empty: 1), each the nearest double to the
// exact value; `fallback(i)` recomputes rung i in wide precision when the
// double-double value is too close to a rounding boundary to decide.
// REQUIRES: weights empty or the size of ladder; weights within ~2^-100.
template <class Fallback>
std::vector<double> RoundLadder(const std::vector<DoubleDouble>& ladder,
                                const std::vector<DoubleDouble>& weights,
                                const Fallback& fallback) {
  std::vector<double> rungs(ladder.size());
  for (size_t i = 0; i < ladder.size(); ++i) {
    const DoubleDouble value =
        weights.empty() ? ladder[i] : Multiply(ladder[i], weights[i]);
    if (!RoundIfDecidable(value, &rungs[i])) {
      rungs[i] = static_cast<double>(fallback(static_cast<int64_t>(i)));
    }
  }
  return rungs;
}

}  // namespace phasor

#endif  // PHASOR_CORE_MATH_FREQUENCY_LADDER_H_
