// Time2Vec (core/temporal/time2vec.h): float32 phases within their bound of
// a __float128 reference at any instant and against long double for
// 1900–2200, float64 outputs within 4e-16 of __float128, a huge φ reduced
// exactly, rows as one row at a time, unit and origin, and the validation.
#include "core/temporal/time2vec.h"

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
#include "core/temporal/compose.h"
#include "core/temporal/elapsed_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/hwy_targets.h"
#include "tests/float64_instants.h"
#include "tests/quad_reference.h"
#include "tests/status_matchers.h"

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

TEST(Time2Vec, Float32PhaseWithinItsBoundOfQuadAtAnyInstant) {
  // The float32 path's phase is e·step + φ/2π in fixed point: within
  // |ω·τ|/2π·2^-104 + 2^-62 turns of exact (time2vec.h), so each
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

// Float64 outputs against __float128.
namespace float64_output {

using testing::Quad;
using testing::TwoPiQuad;

using testing::AbsDiff;
using testing::CivilNs;
using testing::Instants;
using testing::kF64Bound;

TEST(Time2VecFloat64, WithinFourE16OfQuadFrom1900To2200) {
  const std::vector<int64_t> times = Instants(3000, 13);
  Time2VecBlock block;
  // Up to ω = 2π rad/s over 300 years (~2^33 turns) and φ far from [−π, π].
  block.omega = {1e-6, 2 * M_PI / 86400, 2 * M_PI / 3600, 2 * M_PI, 0.7, 1e-9, 3.3};
  block.phi = {0.1, 0.2, -3.0, 100.5, 1e6, 0.0, -0.25};
  double max_sin = 0;
  double max_sin_f32_path = 0;
  double max_linear_ulps = 0;
  for (double unit_seconds : {1.0, 86400.0, 1e-3}) {
    block.unit_seconds = unit_seconds;
    const Time2Vec exact(block, SinusoidAccuracy::kFloat64);
    const Time2Vec fast(block, SinusoidAccuracy::kFloat32);
    const int width = static_cast<int>(block.omega.size());
    std::vector<double> row(width);
    std::vector<double> fast_row(width);
    for (int64_t origin : {int64_t{0}, times.front()}) {
      for (int64_t t : times) {
        const __int128 elapsed = ElapsedNs(t, origin);
        exact.Encode(elapsed, row.data());
        fast.Encode(elapsed, fast_row.data());
        // τ exactly: elapsed / (unit·1e9), both exact in quad.
        const Quad unit_ns = Quad(unit_seconds) * Quad(1e9);
        for (int i = 0; i < width; ++i) {
          const Quad x = Quad(block.omega[i]) * Quad(elapsed) / unit_ns + Quad(block.phi[i]);
          if (i == 0) {
            const double ulp = std::nextafter(std::fabs(static_cast<double>(x)),
                                              INFINITY) -
                               std::fabs(static_cast<double>(x));
            const double ulps = AbsDiff(row[0], x) / ulp;
            ASSERT_LE(ulps, 1.0) << "t=" << t << " unit=" << unit_seconds;
            max_linear_ulps = std::max(max_linear_ulps, ulps);
            continue;
          }
          const Quad exact_sin = sinq(x);
          const double error = AbsDiff(row[i], exact_sin);
          ASSERT_LE(error, kF64Bound) << "t=" << t << " term " << i << " unit="
                                      << unit_seconds << " origin=" << origin;
          max_sin = std::max(max_sin, error);
          max_sin_f32_path = std::max(max_sin_f32_path, AbsDiff(fast_row[i], exact_sin));
        }
      }
    }
  }
  std::printf("time2vec max |float64 sin - quad| = %.3g (float32 path's doubles: %.3g), "
              "linear term within %.2f ulp\n",
              max_sin, max_sin_f32_path, max_linear_ulps);
}

TEST(Time2VecFloat64, PhaseBeyondDoubleRangeIsNaN) {
  Time2VecBlock block;
  block.omega = {1.0, 1e300, 0.5};
  block.phi = {0.0, 0.25, 0.0};
  const Time2Vec exact(block, SinusoidAccuracy::kFloat64);
  double out[3];
  exact.Encode(0, out);  // τ = 0: sin φ.
  EXPECT_EQ(out[1], std::sin(0.25));
  exact.Encode(ElapsedNs(std::numeric_limits<int64_t>::max(), 0), out);
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_TRUE(std::isfinite(out[2]));  // The other terms are unaffected.
}

}  // namespace float64_output

}  // namespace
}  // namespace phasor
