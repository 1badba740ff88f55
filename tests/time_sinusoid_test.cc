// The time sinusoid (core/temporal/time_sinusoid.h): float32 outputs within
// 2e-6 of a long-double reference and within 2 ulp of a __float128 one for
// 1900–2200, float64 outputs within 4e-16 of __float128 there and at the
// int64 extremes, the same bits on every SIMD target, rows as one row at a
// time, explicit periods as Prophet's Fourier series, and the validation.
#include "core/temporal/time_sinusoid.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "core/math/exact_phase.h"
#include "core/temporal/compose.h"
#include "core/temporal/elapsed_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "tests/hwy_targets.h"
#include "tests/float64_instants.h"
#include "tests/quad_reference.h"
#include "tests/status_matchers.h"

extern "C" __float128 fmodq(__float128, __float128);

namespace phasor {
namespace {

using testing::Quad;

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

// Distance in units in the last place between two finite doubles of the
// same sign or zero.
int64_t UlpDistance(double a, double b) {
  if (a == b) return 0;
  int64_t steps = 0;
  for (double x = a; x != b && steps < 1000; ++steps) x = std::nextafter(x, b);
  return steps;
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

TEST(TimeSinusoid, Float32WithinTwoMicroOfLongDoubleFrom1900To2200) {
  // The float32 contract: outputs within 2e-6 of a long-double reference for
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

// Float64 outputs against __float128.
namespace float64_output {

using testing::Quad;
using testing::TwoPiQuad;

using testing::AbsDiff;
using testing::CivilNs;
using testing::Instants;
using testing::kF64Bound;

// sin, cos of 2π·elapsed/P in quad: elapsed (< 2^65) and P_ns = P·1e9 (a
// 53-bit times a 30-bit integer) are exact in quad's 113 bits and fmodq is
// exact, so only the last division and the sine round (~1e-33).
void QuadSinCos(__int128 elapsed_ns, double period_seconds, Quad* s, Quad* c) {
  const Quad period_ns = Quad(period_seconds) * Quad(1e9);
  const Quad r = fmodq(Quad(elapsed_ns), period_ns);
  const Quad angle = TwoPiQuad() * (r / period_ns);
  *s = sinq(angle);
  *c = cosq(angle);
}

struct Ladder {
  int64_t dim;
  double min_period_seconds;
  double max_period_seconds;
};

TEST(TimeSinusoidFloat64, WithinFourE16OfQuadFrom1900To2200AndAtTheExtremes) {
  const std::vector<int64_t> times = Instants(2500, 11);
  const Ladder ladders[] = {
      {16, 1.0, 10 * 365.2425 * 86400.0},  // The default ladder.
      {12, 1e-9, 1e15},                    // Every period accepted.
      {6, 0.3, 7.7},                       // Periods no power of ten divides.
      {200, 1e-3, 3.15e9},                 // dim > 128: row by row.
  };
  const int64_t origins[] = {0, times.front(), times[times.size() / 2]};
  double max_f64 = 0;
  double max_f32_path = 0;
  for (const Ladder& ladder : ladders) {
    const TimeSinusoid exact(ladder.dim, ladder.min_period_seconds,
                             ladder.max_period_seconds, SinusoidAccuracy::kFloat64);
    const TimeSinusoid fast(ladder.dim, ladder.min_period_seconds,
                            ladder.max_period_seconds, SinusoidAccuracy::kFloat32);
    const std::vector<double> periods = exact.periods_seconds();
    for (int64_t origin : origins) {
      std::vector<double> rows(times.size() * ladder.dim);
      std::vector<double> fast_rows(rows.size());
      exact.EncodeRows(times, origin, rows.data(), ladder.dim);
      fast.EncodeRows(times, origin, fast_rows.data(), ladder.dim);
      for (size_t r = 0; r < times.size(); ++r) {
        const __int128 elapsed = ElapsedNs(times[r], origin);
        // Encode (one row) is EncodeRows' row, bit for bit.
        std::vector<double> one(ladder.dim);
        exact.Encode(elapsed, one.data());
        for (int64_t k = 0; k < ladder.dim / 2; ++k) {
          Quad s = 0;
          Quad c = 0;
          QuadSinCos(elapsed, periods[k], &s, &c);
          const double* row = &rows[r * ladder.dim + 2 * k];
          const double* fast_row = &fast_rows[r * ladder.dim + 2 * k];
          const double error = std::max(AbsDiff(row[0], s), AbsDiff(row[1], c));
          ASSERT_LE(error, kF64Bound)
              << "t=" << times[r] << " origin=" << origin << " P=" << periods[k];
          ASSERT_EQ(one[2 * k], row[0]);
          ASSERT_EQ(one[2 * k + 1], row[1]);
          max_f64 = std::max(max_f64, error);
          max_f32_path = std::max(
              max_f32_path, std::max(AbsDiff(fast_row[0], s), AbsDiff(fast_row[1], c)));
        }
      }
    }
  }
  std::printf("time sinusoid max |float64 - quad| = %.3g (float32 path's doubles: %.3g)\n",
              max_f64, max_f32_path);
  // The float64 path is the tighter one.
  EXPECT_LE(max_f64, 2e-16);
  EXPECT_LT(max_f64, max_f32_path);
}

}  // namespace float64_output

}  // namespace
}  // namespace phasor
