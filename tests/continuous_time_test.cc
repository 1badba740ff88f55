#include "core/continuous_time.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "core/compose.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/hwy_targets.h"
#include "hwy/targets.h"
#include "tests/quad_reference.h"
#include "tests/status_matchers.h"

namespace phasor {
namespace {

using testing::Quad;

// (elapsed_ns / P_ns) mod 1 in turns, in [−0.5, 0.5): the phase's 2^-64-turn
// integer read as signed.
double SignedTurns(const ExactPhase& phase, __int128 elapsed_ns) {
  return static_cast<double>(static_cast<int64_t>(phase.Turns(elapsed_ns))) * 0x1p-64;
}

constexpr long double kTwoPiL =
    6.283185307179586476925286766559005768394338798750211641949889L;

int64_t UtcNs(int64_t y, int m, int d) {
  return absl::ToUnixNanos(
      absl::FromCivil(absl::CivilDay(y, m, d), absl::UTCTimeZone()));
}

// Nanosecond instants uniformly spread over [1900-01-01, 2200-01-01).
std::vector<int64_t> Instants1900To2200(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t lo = UtcNs(1900, 1, 1);
  const int64_t hi = UtcNs(2200, 1, 1);
  std::uniform_int_distribution<int64_t> pick(lo, hi - 1);
  std::vector<int64_t> out(count);
  for (int64_t& t : out) t = pick(rng);
  out.front() = lo;
  out.back() = hi - 1;
  std::sort(out.begin(), out.end());
  return out;
}

// Long-double reference of sin/cos(2π·(t − origin)/P): the elapsed
// nanoseconds are exact in long double (< 2^64), fmodl is exact, and P·1e9 is
// rounded once (relative 2^-64), so the phase is good to ~1e-9 rad.
long double ReferencePhase(__int128 elapsed_ns, double period_seconds) {
  const long double period_ns = static_cast<long double>(period_seconds) * 1e9L;
  const long double r = fmodl(static_cast<long double>(elapsed_ns), period_ns);
  return kTwoPiL * (r / period_ns);
}

TEST(LadderPeriodsSeconds, GeometricFromMinToMax) {
  const std::vector<double> p = LadderPeriodsSeconds(5, 2.0, 32.0);
  ASSERT_EQ(p.size(), 5u);
  // Ratio (32/2)^(1/4) = 2 per step.
  EXPECT_DOUBLE_EQ(p[0], 2.0);
  EXPECT_DOUBLE_EQ(p[1], 4.0);
  EXPECT_DOUBLE_EQ(p[2], 8.0);
  EXPECT_DOUBLE_EQ(p[3], 16.0);
  EXPECT_EQ(p[4], 32.0);
  EXPECT_EQ(LadderPeriodsSeconds(1, 3.0, 100.0), std::vector<double>{3.0});
}

TEST(ElapsedNs, SpansMoreThanInt64) {
  // 1900 → 2200 is 109573 days (73 leap days: 1904..2196 but not 2100),
  // ~9.47e18 ns; as int64 the difference would overflow.
  const __int128 span = ElapsedNs(UtcNs(2200, 1, 1), UtcNs(1900, 1, 1));
  EXPECT_GT(span, static_cast<__int128>(INT64_MAX));
  EXPECT_EQ(span, static_cast<__int128>(109573) * 86400 * 1000000000);
  EXPECT_EQ(ElapsedNs(INT64_MIN + 1, INT64_MAX),
            -(static_cast<__int128>(1) << 64) + 2);
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

TEST(Time2Vec, Float32PhaseWithinItsBoundOfQuadAtAnyInstant) {
  // The float32 path's phase is e·step + φ/2π in fixed point: within
  // |ω·τ|/2π·2^-104 + 2^-62 turns of exact (continuous_time.h), so each
  // sine within 2π times that plus the kernel's ulp, at every int64
  // instant. The reference forms ω·e/U + φ in __float128 (a 53-bit by
  // 64-bit product, rounded once) and reduces it by 2π to 2^-190.
  // A long-double reduction (2^-64 relative) is up to ~1 rad off at
  // ω = 1e9 rad/s, e ~ 2^63 ns, against a bound of ~1e-12 there.
  Time2VecBlock block;
  block.omega = {1.0, 1.0, 6.283185307179586, 1e-3, 1e6, 1e9, 0.37};
  block.phi = {0.5, 0.0, 0.25, -1.0, 2.0, 1e6, -1e15};
  const Time2Vec t2v(block);
  std::mt19937_64 rng(9);
  std::vector<double> out(block.omega.size());
  double worst_excess = 0;  // Largest error over its bound.
  for (int i = 0; i < 5000; ++i) {
    const int64_t e = i % 2 == 0 ? static_cast<int64_t>(rng())
                                 : static_cast<int64_t>(rng() >> (i % 60));
    t2v.Encode(e, out.data());
    for (size_t k = 1; k < block.omega.size(); ++k) {
      const Quad x = Quad(block.omega[k]) * Quad(static_cast<double>(e >> 11)) *
                         Quad(2048.0) / Quad(1e9) +
                     Quad(block.omega[k]) * Quad(static_cast<double>(e & 2047)) / Quad(1e9) +
                     Quad(block.phi[k]);
      const Quad exact = sinq(testing::ReduceTwoPi(x));
      const double x_abs = std::fabs(static_cast<double>(x));
      const double bound = x_abs * 0x1p-103 + 0x1p-58 + 4e-16;
      const double error = static_cast<double>(fabsl(
          static_cast<long double>(Quad(out[k]) - exact)));
      worst_excess = std::max(worst_excess, error / bound);
      ASSERT_LE(error, bound) << "term " << k << " at e = " << e;
    }
  }
  RecordProperty("worst_error_over_bound", std::to_string(worst_excess));
}

TEST(Time2Vec, HugePhiIsReducedExactly) {
  // φ_i mod 2π is reduced exactly (Payne–Hanek) for any double; with ω_i = 0
  // the output is sin(φ_i), as glibc's correctly reduced sin gives it.
  Time2VecBlock block;
  const double phis[] = {1e15, -1e300, 0x1p1000, 3.0e7, -7.5};
  block.omega = {0.0};
  block.phi = {0.0};
  for (double phi : phis) {
    block.omega.push_back(0.0);
    block.phi.push_back(phi);
  }
  const Time2Vec t2v(block);
  std::vector<double> out(block.omega.size());
  t2v.Encode(123456789, out.data());
  for (size_t k = 1; k < block.omega.size(); ++k) {
    EXPECT_NEAR(out[k], std::sin(block.phi[k]), 4e-16) << block.phi[k];
  }
}

TEST(TimeSinusoid, Float32WithinTwoMicroOfLongDoubleFrom1900To2200) {
  // DESIGN §4: float32 outputs within 2e-6 of a long-double reference for
  // nanosecond timestamps from 1900 to 2200. Shortest period 1 s: at 300
  // years the angle is ~6e10 rad.
  const std::vector<int64_t> times = Instants1900To2200(20000, 3);
  TemporalSpec spec;
  spec.time = TimeBlock{};
  spec.time->dim = 16;
  spec.time->min_period_seconds = 1.0;
  spec.time->max_period_seconds = 3.0e9;
  ObservationsView obs;
  obs.timestamps = times;
  double worst_overall = 0;
  for (auto [origin, origin_ns] :
       {std::pair{OriginKind::kUnixEpoch, int64_t{0}},
        std::pair{OriginKind::kFirstObservation, int64_t{0}},
        std::pair{OriginKind::kExplicit, UtcNs(2200, 1, 1)}}) {
    spec.time->origin = origin;
    spec.time->origin_ns = origin_ns;
    std::vector<float> out(times.size() * 16);
    PHASOR_ASSERT_OK(
        EncodeObservations(spec, obs, nullptr, {}, absl::MakeSpan(out), nullptr));
    const int64_t resolved =
        ResolveOriginNs(origin, origin_ns, times.front());
    const std::vector<double> periods = LadderPeriodsSeconds(8, 1.0, 3.0e9);
    double worst = 0;
    double naive_worst = 0;
    for (size_t r = 0; r < times.size(); ++r) {
      const __int128 elapsed = ElapsedNs(times[r], resolved);
      for (int k = 0; k < 8; ++k) {
        const long double angle = ReferencePhase(elapsed, periods[k]);
        worst = std::max<double>(worst, fabsl(out[r * 16 + 2 * k] - sinl(angle)));
        worst = std::max<double>(worst, fabsl(out[r * 16 + 2 * k + 1] - cosl(angle)));
        // What plain double seconds would give.
        const double naive = std::sin(2 * M_PI * (static_cast<double>(elapsed) * 1e-9) /
                                      periods[k]);
        naive_worst = std::max<double>(naive_worst, fabsl(naive - sinl(angle)));
      }
    }
    EXPECT_LT(worst, 2e-6);
    // The test discriminates: the naive double computation misses the bound.
    EXPECT_GT(naive_worst, 2e-6);
    worst_overall = std::max(worst_overall, worst);
  }
  std::printf("time sinusoid max |float32 - long double| = %.3g\n",
              worst_overall);
  RecordProperty("max_abs_error", std::to_string(worst_overall));
}

TEST(TimeSinusoid, OddPeriodsAgreeWithLongDouble) {
  const std::vector<int64_t> times = Instants1900To2200(5000, 5);
  for (double period : {1.7, 0.001, 365.2425 * 86400, 1.0 / 3.0, 29.530588853 * 86400}) {
    const TimeSinusoid sinusoid(2, period, period);
    double worst = 0;
    double out[2];
    for (int64_t t : times) {
      sinusoid.Encode(ElapsedNs(t, 0), out);
      const long double angle = ReferencePhase(ElapsedNs(t, 0), period);
      worst = std::max<double>(worst, fabsl(static_cast<float>(out[0]) - sinl(angle)));
      worst = std::max<double>(worst, fabsl(static_cast<float>(out[1]) - cosl(angle)));
    }
    EXPECT_LT(worst, 2e-6) << period;
  }
}

TEST(TimeSinusoid, InterleavedSinCosOfElapsedTime) {
  const TimeSinusoid s(4, 60.0, 3600.0);
  double out[4];
  s.Encode(static_cast<__int128>(15) * 1000000000, out);  // 15 s.
  EXPECT_NEAR(out[0], 1.0, 1e-15);  // sin(2π·15/60)
  EXPECT_NEAR(out[1], 0.0, 1e-15);
  EXPECT_NEAR(out[2], std::sin(2 * M_PI * 15 / 3600), 1e-15);
  EXPECT_NEAR(out[3], std::cos(2 * M_PI * 15 / 3600), 1e-15);
  s.Encode(static_cast<__int128>(-15) * 1000000000, out);  // Before the origin.
  EXPECT_NEAR(out[0], -1.0, 1e-15);
}

// Distance in units in the last place between two finite doubles of the
// same sign or zero.
int64_t UlpDistance(double a, double b) {
  if (a == b) return 0;
  int64_t steps = 0;
  for (double x = a; x != b && steps < 1000; ++steps) x = std::nextafter(x, b);
  return steps;
}

TEST(TimeSinusoid, WithinTwoUlpOfQuadOnTheExactPhase) {
  // The oracle: sin and cos in __float128 of the exact phase 2π·Turns·2^-64
  // (the 64-bit integer is exact in quad; ~1e-33 error), so this measures
  // the float32 path's angle rounding (relative < 2^-51) and kernel (< 1
  // ulp) together, relative to the value: next to a zero of sin or cos too.
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> pick(INT64_MIN + 1, INT64_MAX);
  int64_t worst_ulp = 0;
  int64_t float_mismatches = 0;
  int64_t values = 0;
  for (int64_t dim : {2, 6, 8, 10, 18}) {
    const TimeSinusoid sinusoid(dim, 1e-3, 3.0e9);
    std::vector<ExactPhase> phases;
    for (int64_t k = 0; k < dim / 2; ++k) {
      phases.emplace_back(LadderPeriodSeconds(k, dim / 2, 1e-3, 3.0e9));
    }
    std::vector<double> out(dim);
    for (int i = 0; i < 40000; ++i) {
      // Wide random instants, small ones and quarter periods of 1 ms (angles
      // at and next to multiples of π/2).
      const __int128 elapsed = i % 4 == 0   ? __int128{pick(rng)}
                               : i % 4 == 1 ? __int128{pick(rng)} * 2
                               : i % 4 == 2 ? __int128{i}
                                            : __int128{250000} * (i / 4) + (i % 3) - 1;
      sinusoid.Encode(elapsed, out.data());
      for (int64_t k = 0; k < dim / 2; ++k) {
        const auto turns = static_cast<int64_t>(phases[k].Turns(elapsed));
        const Quad angle = testing::TwoPiQuad() * Quad(turns) / Quad(0x1p64);
        const Quad want[2] = {sinq(angle), cosq(angle)};
        for (int j = 0; j < 2; ++j) {
          const double got = out[2 * k + j];
          ASSERT_TRUE(std::isfinite(got));
          const double nearest = testing::NearestDouble(want[j]);
          worst_ulp = std::max(worst_ulp, UlpDistance(got, nearest));
          float_mismatches += static_cast<float>(got) != static_cast<float>(want[j]);
          ++values;
        }
      }
    }
  }
  EXPECT_LE(worst_ulp, 2);
  // A float32 differs only where the exact value lies within ~2 ulp of a
  // double of a float32 rounding boundary (~2^-28 of values); none do here.
  EXPECT_EQ(float_mismatches, 0) << "of " << values;
  RecordProperty("max_ulp_vs_quad", std::to_string(worst_ulp));
}

TEST(TimeSinusoid, SameBitsOnEverySimdTarget) {
  // The kernel is compiled per Highway target and dispatched at run time;
  // -ffp-contract=off and a fixed operation order make them agree bitwise.
  std::mt19937_64 rng(12);
  std::uniform_int_distribution<int64_t> pick(INT64_MIN + 1, INT64_MAX);
  std::vector<__int128> elapsed(20000);
  for (__int128& e : elapsed) e = pick(rng);
  const TimeSinusoid sinusoid(/*dim=*/10, 1e-3, 3.0e9);
  std::vector<double> first;
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    std::vector<double> out(elapsed.size() * 10);
    for (size_t r = 0; r < elapsed.size(); ++r) {
      sinusoid.Encode(elapsed[r], &out[r * 10]);
    }
    if (first.empty()) {
      first = out;
    } else {
      EXPECT_EQ(0, std::memcmp(first.data(), out.data(), out.size() * sizeof(double)))
          << hwy::TargetName(target);
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// encoder.EncodeRows over `rows` random instants and a random origin gives
// the bytes of encoder.Encode row by row (rows `width` values apart in a
// wider stride; nothing past a row written).
template <typename Encoder>
void ExpectEncodeRowsIsRowByRow(const Encoder& encoder, int64_t width, int64_t rows,
                                std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> pick(INT64_MIN + 1, INT64_MAX);
  std::vector<int64_t> times(rows);
  for (int64_t& t : times) t = pick(rng);
  const int64_t origin = pick(rng);
  const int64_t stride = width + 3;
  std::vector<double> want(rows * stride, -7.0);
  std::vector<double> got(rows * stride, -7.0);
  for (int64_t r = 0; r < rows; ++r) {
    encoder.Encode(ElapsedNs(times[r], origin), &want[r * stride]);
  }
  encoder.EncodeRows(times, origin, got.data(), stride);
  // An empty vector's data() may be null, which memcmp must not see.
  EXPECT_TRUE(got.empty() ||
              std::memcmp(want.data(), got.data(), got.size() * sizeof(double)) == 0)
      << "width " << width << " rows " << rows;
}

TEST(TimeSinusoid, EncodeRowsIsEncodeRowByRow) {
  // On every SIMD target (vectors of 1, 2, 4 or 8 doubles), ladders of 1,
  // 2, 3, 4, 5 and 8 periods: narrower than a vector and dividing its lanes
  // (several rows to a vector), not dividing them (the angles of several
  // rows), a vector or more (a row at a time); and 65 periods, more than
  // one kernel call holds (row by row). The random instants
  // lie either side of the origin, a quarter of them past int64 from it
  // (the scalar path).
  OnEveryTarget([](const char*) {
    std::mt19937_64 rng(13);
    for (int64_t dim : {2, 4, 6, 8, 10, 16, 130}) {
      for (int64_t rows : {0, 1, 3, 37, 1000}) {
        ExpectEncodeRowsIsRowByRow(TimeSinusoid(dim, 1e-3, 3.0e9), dim, rows, rng);
      }
    }
  });
}

TEST(Time2Vec, MatchesLongDoubleReferenceFrom1900To2200) {
  Time2VecBlock block;
  block.omega = {1e-9, 2 * M_PI, 2 * M_PI / 86400, 0.37, 2 * M_PI / 604800};
  block.phi = {0.25, 0.5, -1.0, 3.0, 0.0};
  block.unit_seconds = 1.0;
  const Time2Vec t2v(block);
  ASSERT_EQ(t2v.width(), 5);
  const std::vector<int64_t> times = Instants1900To2200(20000, 9);
  double worst = 0;
  double naive_worst = 0;
  std::vector<double> out(5);
  for (int64_t t : times) {
    const __int128 elapsed = ElapsedNs(t, 0);
    t2v.Encode(elapsed, out.data());
    const long double tau = static_cast<long double>(elapsed) / 1e9L;
    const long double linear = static_cast<long double>(block.omega[0]) * tau + block.phi[0];
    EXPECT_NEAR(static_cast<float>(out[0]), static_cast<double>(linear),
                std::max(std::fabs(static_cast<double>(linear)) * 1e-7, 1e-9));
    for (size_t i = 1; i < 5; ++i) {
      const long double x =
          static_cast<long double>(block.omega[i]) * tau + block.phi[i];
      const long double ref = sinl(fmodl(x, kTwoPiL));
      worst = std::max<double>(worst, fabsl(static_cast<float>(out[i]) - ref));
      naive_worst = std::max<double>(
          naive_worst,
          fabsl(std::sin(block.omega[i] * (static_cast<double>(elapsed) * 1e-9) +
                         block.phi[i]) -
                ref));
    }
  }
  std::printf("time2vec max |float32 - long double| = %.3g\n", worst);
  EXPECT_LT(worst, 2e-6);
  EXPECT_GT(naive_worst, 2e-6);
}

TEST(SinCosOfAngles, SinWithinTwoUlpOfLibmAndTheSameFloat32) {
  // The calendar's angles took libm's sin per value before they used the
  // vector kernel: float32 outputs must not change, doubles by <= 2 ulp.
  // Angles 2π·turns + φ, small and huge φ (past 2^20 rad libm takes over,
  // bit for bit), and the tails of a chunk.
  std::mt19937_64 rng(14);
  std::uniform_real_distribution<double> turns(-0.5, 0.5);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  const double phis[] = {0.0, 0.3, -2.5, 1e3, 1e5, 1e6, 3e6, 1e15, -1e300};
  int64_t worst_ulp = 0;
  int64_t float_mismatches = 0;
  int64_t values = 0;
  for (double phi : phis) {
    for (int64_t count : {1, 3, 63, 64, 65, 4097}) {
      std::vector<double> angles(count);
      for (double& a : angles) {
        a = 6.283185307179586 * turns(rng) + phi * std::fabs(unit(rng));
      }
      std::vector<double> got(count);
      std::vector<double> cosines(count);
      SinCosOfAngles(angles, got.data(), cosines.data());
      std::vector<double> in_place = angles;
      SinCosOfAngles(in_place, in_place.data(), cosines.data());
      ASSERT_EQ(0, std::memcmp(got.data(), in_place.data(), count * sizeof(double)));
      for (int64_t i = 0; i < count; ++i) {
        const double want = std::sin(angles[i]);
        if (std::fabs(angles[i]) > 0x1p20) {
          ASSERT_EQ(got[i], want) << angles[i];
        }
        worst_ulp = std::max(
            worst_ulp, UlpDistance(std::fabs(got[i]), std::fabs(want)) +
                           (std::signbit(got[i]) != std::signbit(want) &&
                                    got[i] != 0 && want != 0
                                ? 1000
                                : 0));
        float_mismatches += static_cast<float>(got[i]) != static_cast<float>(want);
        ++values;
      }
    }
  }
  EXPECT_LE(worst_ulp, 2);
  EXPECT_EQ(float_mismatches, 0) << "of " << values;
}

TEST(Time2Vec, EncodeRowsIsEncodeRowByRow) {
  // On every SIMD target the binary holds: float32 EncodeRows takes the
  // sines of int64 elapsed times through a vector kernel, Encode through
  // the 128-bit path (the random instants and origin also leave elapsed
  // times past int64, which EncodeRows hands to that path).
  OnEveryTarget([&](const char*) {
  std::mt19937_64 rng(15);
  for (SinusoidAccuracy accuracy :
       {SinusoidAccuracy::kFloat32, SinusoidAccuracy::kFloat64}) {
    // 1, 5, 9, 12 and 70 terms: no sine, 4 sines (a narrower vector), 8,
    // 11 (every narrower width after a full vector) and more sines than a
    // 128-bit path's kernel call holds (a row at a time).
    for (int64_t terms : {1, 5, 9, 12, 70}) {
      Time2VecBlock block;
      for (int64_t i = 0; i < terms; ++i) {
        block.omega.push_back(2 * M_PI / (3600.0 * (i + 1)));
        block.phi.push_back(0.1 * static_cast<double>(i));
      }
      block.unit_seconds = 60;
      for (int64_t rows : {0, 1, 7, 8, 9, 1000}) {
        ExpectEncodeRowsIsRowByRow(Time2Vec(block, accuracy), terms, rows, rng);
      }
    }
  }
  });
}

TEST(Time2Vec, UnitAndOrigin) {
  // One day in units of days with ω = 2π/7 (weekly): sin(2π/7 + φ).
  Time2VecBlock block;
  block.omega = {2.0, 2 * M_PI / 7};
  block.phi = {1.0, 0.5};
  block.unit_seconds = 86400;
  const Time2Vec t2v(block);
  double out[2];
  t2v.Encode(static_cast<__int128>(86400) * 1000000000, out);
  EXPECT_NEAR(out[0], 3.0, 1e-15);
  EXPECT_NEAR(out[1], std::sin(2 * M_PI / 7 + 0.5), 1e-12);
}

TEST(ValidateTimeBlock, ErrorPaths) {
  const std::string p = "spec.temporal.time";
  PHASOR_ASSERT_OK(ValidateTimeBlock(TimeBlock{}, p));
  auto with = [](auto change) {
    TimeBlock b;
    change(b);
    return b;
  };
  EXPECT_THAT(ValidateTimeBlock(with([](TimeBlock& b) { b.dim = 7; }), p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".dim"));
  EXPECT_THAT(ValidateTimeBlock(with([](TimeBlock& b) { b.dim = 0; }), p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".dim"));
  EXPECT_THAT(ValidateTimeBlock(
                  with([](TimeBlock& b) { b.dim = kMaxEncodingWidth + 2; }), p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".dim"));
  PHASOR_ASSERT_OK(
      ValidateTimeBlock(with([](TimeBlock& b) { b.dim = kMaxEncodingWidth; }), p));
  EXPECT_THAT(
      ValidateTimeBlock(with([](TimeBlock& b) { b.min_period_seconds = 0; }), p),
      IsFieldError(absl::StatusCode::kInvalidArgument, p + ".min_period_seconds"));
  EXPECT_THAT(ValidateTimeBlock(
                  with([](TimeBlock& b) { b.min_period_seconds = NAN; }), p),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           p + ".min_period_seconds"));
  EXPECT_THAT(ValidateTimeBlock(
                  with([](TimeBlock& b) { b.max_period_seconds = 1e16; }), p),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           p + ".max_period_seconds"));
  EXPECT_THAT(ValidateTimeBlock(with([](TimeBlock& b) {
                                  b.min_period_seconds = 10;
                                  b.max_period_seconds = 5;
                                }),
                                p),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           p + ".max_period_seconds"));
}

TEST(ValidateTime2VecBlock, ErrorPaths) {
  const std::string p = "spec.temporal.time2vec";
  Time2VecBlock ok;
  ok.omega = {1.0, 2.0};
  ok.phi = {0.0, 0.0};
  PHASOR_ASSERT_OK(ValidateTime2VecBlock(ok, p));
  Time2VecBlock empty;
  EXPECT_THAT(ValidateTime2VecBlock(empty, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".omega"));
  Time2VecBlock wide;
  wide.omega.assign(kMaxEncodingWidth + 1, 1.0);
  wide.phi.assign(kMaxEncodingWidth + 1, 0.0);
  EXPECT_THAT(ValidateTime2VecBlock(wide, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".omega"));
  Time2VecBlock mismatch = ok;
  mismatch.phi = {0.0};
  EXPECT_THAT(ValidateTime2VecBlock(mismatch, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".phi"));
  Time2VecBlock inf = ok;
  inf.omega[1] = INFINITY;
  EXPECT_THAT(ValidateTime2VecBlock(inf, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".omega[1]"));
  Time2VecBlock nan_phi = ok;
  nan_phi.phi[0] = NAN;
  EXPECT_THAT(ValidateTime2VecBlock(nan_phi, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".phi[0]"));
  Time2VecBlock unit = ok;
  unit.unit_seconds = -1;
  EXPECT_THAT(ValidateTime2VecBlock(unit, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".unit_seconds"));
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

TEST(TimeSinusoid, ExplicitPeriodsAreProphetsFourierSeries) {
  // Prophet (prophet/forecaster.py fourier_series): t in days since the
  // epoch, columns sin(2π·k·t/P), cos(2π·k·t/P) for k = 1..order, per
  // seasonality; yearly P = 365.25 d order 10, weekly P = 7 d order 3.
  const std::vector<TimePeriod> periods = {{365.25 * 86400, 10}, {7 * 86400.0, 3}};
  for (SinusoidAccuracy accuracy : {SinusoidAccuracy::kFloat32, SinusoidAccuracy::kFloat64}) {
    const TimeSinusoid s(periods, accuracy);
    ASSERT_EQ(s.dim(), 26);
    const std::vector<double> per_pair = s.periods_seconds();
    ASSERT_EQ(per_pair.size(), 13u);
    EXPECT_EQ(per_pair[0], 365.25 * 86400);
    EXPECT_EQ(per_pair[9], 365.25 * 86400 / 10);
    EXPECT_EQ(per_pair[12], 7 * 86400.0 / 3);
    double worst = 0;
    std::vector<double> out(26);
    for (int64_t t : Instants1900To2200(3000, 5)) {
      s.Encode(ElapsedNs(t, 0), out.data());
      int column = 0;
      for (const TimePeriod& p : periods) {
        const long double period_ns = static_cast<long double>(p.period_seconds) * 1e9L;
        for (int64_t k = 1; k <= p.order; ++k, column += 2) {
          // (k·t) mod P exactly: k·t < 2^74, and period_ns is a whole number.
          const __int128 r = (static_cast<__int128>(t) * k) %
                             static_cast<__int128>(period_ns);
          const long double angle = kTwoPiL * (static_cast<long double>(r) / period_ns);
          worst = std::max<double>(worst, fabsl(out[column] - sinl(angle)));
          worst = std::max<double>(worst, fabsl(out[column + 1] - cosl(angle)));
        }
      }
    }
    EXPECT_LT(worst, accuracy == SinusoidAccuracy::kFloat64 ? 4e-16 : 1e-15);
  }
}

TEST(ValidateTimeBlock, ExplicitPeriodsErrorPaths) {
  const std::string p = "spec.temporal.time";
  TimeBlock block;
  block.periods = {{31557600, 10}, {604800, 3}};
  block.dim = 26;
  PHASOR_ASSERT_OK(ValidateTimeBlock(block, p));
  block.dim = 16;
  EXPECT_THAT(ValidateTimeBlock(block, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".dim"));
  block.dim = 26;
  block.periods[1].order = 0;
  EXPECT_THAT(ValidateTimeBlock(block, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".periods[1].order"));
  block.periods[1] = {0.5e-9, 3};
  EXPECT_THAT(ValidateTimeBlock(block, p),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           p + ".periods[1].period_seconds"));
  block.periods[1] = {NAN, 3};
  EXPECT_THAT(ValidateTimeBlock(block, p),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           p + ".periods[1].period_seconds"));
  block.periods = {{60, kMaxFourierOrder + 1}};
  block.dim = 2 * (kMaxFourierOrder + 1);
  EXPECT_THAT(ValidateTimeBlock(block, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".periods[0].order"));
}

}  // namespace
}  // namespace phasor
