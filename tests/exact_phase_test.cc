// ExactPhase (core/math/exact_phase.h): the 128-bit phase step of a period
// is the exact quotient, bit for bit, for whole-nanosecond, tiny and huge
// periods and for harmonics.
#include "core/math/exact_phase.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/temporal/elapsed_time.h"
#include "gtest/gtest.h"

namespace phasor {
namespace {

// (elapsed_ns / P_ns) mod 1 in turns, in [−0.5, 0.5): the phase's 2^-64-turn
// integer read as signed.
double SignedTurns(const ExactPhase& phase, __int128 elapsed_ns) {
  return static_cast<double>(static_cast<int64_t>(phase.Turns(elapsed_ns))) * 0x1p-64;
}

TEST(ExactPhase, ExactForWholeNanosecondPeriods) {
  // For a period that is a whole number of nanoseconds the true phase is the
  // integer remainder; the fixed-point step must agree to ~2^-60 turns over
  // the whole 128-bit-elapsed range.
  std::mt19937_64 rng(11);
  for (int64_t period_ns : {int64_t{1000000000}, int64_t{86400} * 1000000000,
                            int64_t{7} * 1000000000, int64_t{500000000},
                            int64_t{604800} * 1000000000}) {
    // Whole seconds and halves are exact doubles.
    const ExactPhase phase(static_cast<double>(period_ns) / 1e9);
    double worst = 0;
    for (int i = 0; i < 20000; ++i) {
      const __int128 elapsed =
          static_cast<__int128>(static_cast<int64_t>(rng())) * 2 +
          static_cast<__int128>(rng() & 1);  // Beyond int64 both ways.
      __int128 r = elapsed % period_ns;
      if (r < 0) r += period_ns;
      double exact = static_cast<double>(static_cast<long double>(r) /
                                         static_cast<long double>(period_ns));
      if (exact >= 0.5) exact -= 1.0;
      double diff = std::fabs(SignedTurns(phase, elapsed) - exact);
      diff = std::min(diff, 1.0 - diff);  // −0.5 and 0.5 are the same phase.
      worst = std::max(worst, diff);
    }
    EXPECT_LT(worst, 0x1p-52) << period_ns << " ns";
  }
}

TEST(ExactPhase, TinyAndHugePeriods) {
  // 2^-29 s (1.86 ns, the smallest power of two the ladder accepts) is an
  // exact double: turns = elapsed·2^29 / 10^9, whose fraction is an integer
  // remainder.
  const ExactPhase tiny(0x1p-29);
  for (__int128 elapsed : {static_cast<__int128>(123456789012345),
                           static_cast<__int128>(-987654321987654321)}) {
    __int128 r = (elapsed * (static_cast<__int128>(1) << 29)) % 1000000000;
    if (r < 0) r += 1000000000;
    double exact = static_cast<double>(r) / 1e9;
    if (exact >= 0.5) exact -= 1.0;
    EXPECT_NEAR(SignedTurns(tiny, elapsed), exact, 1e-15);
  }
  // 1e15 s: after 1e14 s the phase is 0.1 turn.
  const ExactPhase huge(1e15);
  EXPECT_NEAR(SignedTurns(huge, static_cast<__int128>(1e14) * 1000000000), 0.1,
              1e-15);
}

// The step by definition: floor(frac(1 / P_ns) · 2^128) for P = m·2^e s
// (m odd), i.e. the 128 fractional bits of 2^-e / (m·10^9), divided out one
// bit at a time.
unsigned __int128 ReferenceStep(double period_seconds) {
  using u128 = unsigned __int128;
  int exponent = 0;
  const double fraction = std::frexp(period_seconds, &exponent);
  auto mantissa = static_cast<uint64_t>(std::ldexp(fraction, 53));
  int e = exponent - 53;
  while ((mantissa & 1) == 0) {
    mantissa >>= 1;
    ++e;
  }
  u128 divisor = static_cast<u128>(mantissa) * 1000000000u;
  if (e > 0) divisor <<= e;
  u128 remainder = 1;
  for (int i = 0; i < -e; ++i) {
    remainder <<= 1;
    if (remainder >= divisor) remainder -= divisor;
  }
  u128 step = 0;
  for (int i = 0; i < 128; ++i) {
    remainder <<= 1;
    step <<= 1;
    if (remainder >= divisor) {
      remainder -= divisor;
      step |= 1;
    }
  }
  return step;
}


TEST(ExactPhase, StepIsTheBitByBitQuotient) {
  // SignedTurns(1) is the step's top 64 bits and SignedTurns(2^64) its low 64
  // bits moved up, so together they pin every bit of the step.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> log10_period(-9.0, 15.0);
  std::vector<double> periods = {1e-9, 0x1p-29, 1.0, 37.0, 86400.0, 1e15,
                                 10 * 365.2425 * 86400.0};
  for (int i = 0; i < 2000; ++i) {
    periods.push_back(std::min(1e15, std::max(1e-9, std::pow(10.0, log10_period(rng)))));
  }
  for (double period : periods) {
    const ExactPhase phase(period);
    const unsigned __int128 step = ReferenceStep(period);
    const auto high = static_cast<int64_t>(static_cast<uint64_t>(step >> 64));
    const auto low = static_cast<int64_t>(static_cast<uint64_t>(step));
    EXPECT_EQ(SignedTurns(phase, 1), static_cast<double>(high) * 0x1p-64) << period;
    EXPECT_EQ(SignedTurns(phase, static_cast<__int128>(1) << 64),
              static_cast<double>(low) * 0x1p-64)
        << period;
  }
}

TEST(ExactPhase, HarmonicIsTheExactStepOfKOverP) {
  // For whole-nanosecond periods the phase of harmonic k is the integer
  // remainder (k·elapsed) mod P_ns; the step k/P_ns must agree to ~2^-60
  // turns over the whole 128-bit-elapsed range, k up to kMaxFourierOrder.
  std::mt19937_64 rng(17);
  for (int64_t period_ns : {int64_t{604800} * 1000000000,
                            int64_t{31557600} * 1000000000, int64_t{86400} * 1000000000,
                            int64_t{7} * 1000000000}) {
    for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{10}, kMaxFourierOrder}) {
      const ExactPhase phase(static_cast<double>(period_ns) / 1e9, k);
      double worst = 0;
      for (int i = 0; i < 5000; ++i) {
        const __int128 elapsed =
            static_cast<__int128>(static_cast<int64_t>(rng())) * 2 +
            static_cast<__int128>(rng() & 1);
        __int128 r = (elapsed % period_ns) * k % period_ns;
        if (r < 0) r += period_ns;
        double exact = static_cast<double>(static_cast<long double>(r) /
                                           static_cast<long double>(period_ns));
        if (exact >= 0.5) exact -= 1.0;
        double diff = std::fabs(SignedTurns(phase, elapsed) - exact);
        diff = std::min(diff, 1.0 - diff);
        worst = std::max(worst, diff);
      }
      EXPECT_LT(worst, 0x1p-52) << period_ns << " ns, k = " << k;
    }
  }
}

}  // namespace
}  // namespace phasor
