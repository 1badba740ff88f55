#include "core/math/frequency_ladder.h"

#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__SIZEOF_FLOAT128__) && defined(__x86_64__)
// quadmath.h is not on clang-14's include path; the few functions used.
extern "C" {
__float128 powq(__float128, __float128);
__float128 logq(__float128);
__float128 floorq(__float128);
__float128 ceilq(__float128);
}
#else
static_assert(std::numeric_limits<long double>::digits >= 106,
              "the frequency fallbacks need a quad long double (or __float128)");
#endif

namespace phasor {
namespace {

// Knuth's TwoSum: s + e == a + b exactly.
DoubleDouble TwoSum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  const double e = (a - (s - bb)) + (b - bb);
  return {s, e};
}

DoubleDouble FastTwoSum(double a, double b) {  // REQUIRES |a| >= |b|
  const double s = a + b;
  return {s, b - (s - a)};
}

// Dekker's TwoProduct with Veltkamp splitting: p + e == a·b exactly (no FMA
// needed, so every target gives the same bits).
void Split(double a, double* high, double* low) {
  constexpr double kSplitter = 134217729.0;  // 2^27 + 1
  const double t = kSplitter * a;
  *high = t - (t - a);
  *low = a - *high;
}

DoubleDouble TwoProduct(double a, double b) {
  const double p = a * b;
  double ah, al, bh, bl;
  Split(a, &ah, &al);
  Split(b, &bh, &bl);
  const double e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
  return {p, e};
}

DoubleDouble MultiplyByDouble(DoubleDouble a, double b) {
  DoubleDouble p = TwoProduct(a.hi, b);
  p.lo += a.lo * b;
  return FastTwoSum(p.hi, p.lo);
}

DoubleDouble Power(DoubleDouble x, int64_t n) {
  DoubleDouble result{1.0, 0.0};
  while (n > 0) {
    if (n & 1) result = Multiply(result, x);
    x = Multiply(x, x);
    n >>= 1;
  }
  return result;
}

}  // namespace

#if defined(__SIZEOF_FLOAT128__) && defined(__x86_64__)
WideReal WidePow(WideReal x, WideReal y) { return powq(x, y); }
WideReal WideLog(WideReal x) { return logq(x); }
WideReal WideFloor(WideReal x) { return floorq(x); }
WideReal WideCeil(WideReal x) { return ceilq(x); }
#else
WideReal WidePow(WideReal x, WideReal y) { return powl(x, y); }
WideReal WideLog(WideReal x) { return logl(x); }
WideReal WideFloor(WideReal x) { return floorl(x); }
WideReal WideCeil(WideReal x) { return ceill(x); }
#endif

WideReal WidePi() {
  // π = hi + lo to 2^-107 (fdlibm's pio2 split, doubled).
  return static_cast<WideReal>(0x1.921fb54442d18p+1) +
         static_cast<WideReal>(0x1.1a62633145c07p-53);
}

DoubleDouble Multiply(DoubleDouble a, DoubleDouble b) {
  DoubleDouble p = TwoProduct(a.hi, b.hi);
  p.lo += a.hi * b.lo + a.lo * b.hi;
  return FastTwoSum(p.hi, p.lo);
}

DoubleDouble ToDoubleDouble(WideReal value) {
  const double hi = static_cast<double>(value);
  return {hi, static_cast<double>(value - static_cast<WideReal>(hi))};
}

DoubleDouble InverseRoot(double base, int64_t n) {
  assert(std::isfinite(base) && base > 0.0 && n >= 1);
  // Newton on f(r) = r^n·base − 1: r ← r − r·(r^n·base − 1)/n. Each step
  // squares the relative error (2^-52 → 2^-100, limited by the arithmetic).
  DoubleDouble root{std::pow(base, -1.0 / static_cast<double>(n)), 0.0};
  for (int step = 0; step < 2; ++step) {
    const DoubleDouble scaled = MultiplyByDouble(Power(root, n), base);
    const DoubleDouble residual = TwoSum(scaled.hi, -1.0);
    const double correction = residual.hi + (residual.lo + scaled.lo);
    const DoubleDouble delta =
        MultiplyByDouble(root, correction / static_cast<double>(n));
    const DoubleDouble sum = TwoSum(root.hi, -delta.hi);
    root = FastTwoSum(sum.hi, sum.lo + (root.lo - delta.lo));
  }
  return root;
}

std::vector<DoubleDouble> PowerLadder(DoubleDouble root, int64_t count) {
  std::vector<DoubleDouble> ladder(static_cast<size_t>(count));
  DoubleDouble power{1.0, 0.0};
  for (int64_t i = 0; i < count; ++i) {
    ladder[i] = power;
    power = Multiply(power, root);
  }
  return ladder;
}

bool RoundIfDecidable(DoubleDouble value, double* out) {
  // After FastTwoSum, hi is value rounded to nearest unless |lo| is within
  // the error margin of half an ulp of hi (or of the smaller half-ulp below
  // a power of two). Positive normal values only (frequencies); others go
  // to the fallback.
  const double hi = value.hi;
  if (!(hi >= 0x1p-960 && hi <= 0x1p960)) return false;
  uint64_t bits;
  std::memcpy(&bits, &hi, sizeof(bits));
  const uint64_t up_bits = bits + 1, down_bits = bits - 1;
  double next_up, next_down;
  std::memcpy(&next_up, &up_bits, sizeof(next_up));
  std::memcpy(&next_down, &down_bits, sizeof(next_down));
  const double half = (value.lo > 0 ? next_up - hi : hi - next_down) * 0.5;
  const double margin = hi * 0x1p-92;
  if (!(std::fabs(std::fabs(value.lo) - half) > margin)) return false;
  *out = std::fabs(value.lo) < half ? hi : value.lo > 0 ? next_up : next_down;
  return true;
}

DoubleDouble Quotient(double a, double b) {
  // q + r/b with q·b + r = a exactly (TwoProduct), to ~2^-106.
  const double q = a / b;
  const DoubleDouble product = TwoProduct(q, b);
  const double remainder = (a - product.hi) - product.lo;
  return FastTwoSum(q, remainder / b);
}

DoubleDouble Reciprocal(double d) { return Quotient(1.0, d); }

DoubleDouble Add(DoubleDouble a, DoubleDouble b) {
  const DoubleDouble sum = TwoSum(a.hi, b.hi);
  return FastTwoSum(sum.hi, sum.lo + (a.lo + b.lo));
}

}  // namespace phasor
