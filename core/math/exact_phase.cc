#include "core/math/exact_phase.h"

#include <cassert>
#include <cmath>
#include <cstdint>

namespace phasor {
namespace {

using u128 = unsigned __int128;

}  // namespace

ExactPhase::ExactPhase(double period_seconds, int64_t harmonic) {
  assert(period_seconds >= kMinLadderPeriodSeconds &&
         period_seconds <= kMaxLadderPeriodSeconds);
  assert(harmonic >= 1);
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

}  // namespace phasor
