// SignedLog1p (core/math/log1p.h): within 1 ulp of libm with the same
// float32 values, and the same bits on every SIMD target and for every
// split of the array.
#include "core/math/log1p.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "tests/hwy_targets.h"

namespace phasor {
namespace {

// Distance in units in the last place between two finite doubles.
int64_t UlpDistance(double a, double b) {
  int64_t steps = 0;
  for (double x = a; x != b && steps < 1000; ++steps) x = std::nextafter(x, b);
  return steps;
}


TEST(SignedLog1p, WithinOneUlpOfLibmAndTheSameFloat32) {
  // LOG1P gaps took libm's log1p per value before the vector kernel:
  // float32 outputs must not change, doubles by at most 1 ulp. Magnitudes
  // from 2^-60 to 2^60 (log-uniform: every branch of fdlibm's algorithm,
  // the 2^53 libm fallback), both signs, zeros, infinities.
  std::mt19937_64 rng(21);
  std::uniform_real_distribution<double> exponent(-60.0, 60.0);
  std::vector<double> x(400000);
  for (size_t i = 0; i < x.size(); ++i) {
    const double magnitude = std::exp2(exponent(rng));
    x[i] = (i % 2 == 0) ? magnitude : -magnitude;
  }
  // Edges: around sqrt(2) − 1, sqrt(2)/2 − 1 + 1, 2^-29, 2^-54, 2^53.
  for (double edge : {0.41421356237309503, 0.41421356237309515, 0x1p-29, 0x1p-54,
                      0x1p53, 1.0, 0.0, 0x1.6a09ep0 - 1.0, 0x1.6a09fp0 - 1.0,
                      std::numeric_limits<double>::infinity(), 0x1p-1074}) {
    for (double e : {edge, std::nextafter(edge, 0.0), std::nextafter(edge, 1e300)}) {
      x.push_back(e);
      x.push_back(-e);
    }
  }
  std::vector<double> got = x;
  SignedLog1p(absl::MakeSpan(got));
  int64_t worst_ulp = 0;
  int64_t float_mismatches = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::copysign(std::log1p(std::fabs(x[i])), x[i]);
    ASSERT_EQ(std::signbit(got[i]), std::signbit(want)) << x[i];
    if (std::isinf(want)) {
      ASSERT_EQ(got[i], want);
      continue;
    }
    worst_ulp = std::max(worst_ulp, UlpDistance(got[i], want));
    float_mismatches += static_cast<float>(got[i]) != static_cast<float>(want);
  }
  EXPECT_LE(worst_ulp, 1);
  EXPECT_EQ(float_mismatches, 0) << "of " << x.size();
  RecordProperty("max_ulp_vs_libm", std::to_string(worst_ulp));
}

TEST(SignedLog1p, SameBitsOnEverySimdTargetAndSplit) {
  std::mt19937_64 rng(22);
  std::uniform_real_distribution<double> exponent(-40.0, 40.0);
  std::vector<double> x(10001);
  for (double& v : x) v = std::exp2(exponent(rng));
  std::vector<double> first;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    std::vector<double> whole = x;
    SignedLog1p(absl::MakeSpan(whole));
    // Split into odd pieces: the tail lanes give the same bits.
    std::vector<double> pieces = x;
    for (size_t i = 0; i < pieces.size(); i += 7) {
      SignedLog1p(absl::MakeSpan(pieces).subspan(i, std::min<size_t>(7, pieces.size() - i)));
    }
    EXPECT_EQ(0, std::memcmp(whole.data(), pieces.data(), x.size() * sizeof(double)));
    if (first.empty()) {
      first = whole;
    } else {
      EXPECT_EQ(0, std::memcmp(first.data(), whole.data(), x.size() * sizeof(double)))
          << hwy::TargetName(target);
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace
}  // namespace phasor
