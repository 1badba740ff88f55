// ExactAngle against the __float128 reference of tests/quad_reference.h at
// the positions where a double or float32 angle goes wrong (2^24 + 1,
// 2^31 − 1, −2^31, 2^53 ± 1, INT64_MAX, INT64_MIN) and random int64s, for frequencies across the range
// RoPE and the sinusoid use.
#include "core/math/exact_angle.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "core/math/sincos.h"
#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "tests/quad_reference.h"

namespace phasor {
namespace {

using testing::QuadCos;
using testing::QuadSin;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

std::vector<int64_t> NamedPositions() {
  return {0,
          1,
          -1,
          (int64_t{1} << 24) + 1,
          (int64_t{1} << 31) - 1,
          -(int64_t{1} << 31),
          (int64_t{1} << 53) - 1,
          int64_t{1} << 53,
          (int64_t{1} << 53) + 1,
          kMax,
          kMax - 1,
          kMin,
          kMin + 1};
}

std::vector<double> Frequencies() {
  std::vector<double> thetas = {1.0, 0.5, 2.0, 3.0, 1e-4, 1e-9, 6.283185307179586,
                                3.141592653589793, 0.1, 7.9};
  for (int i = 0; i < 64; ++i) thetas.push_back(std::pow(10000.0, -i / 64.0));
  for (int i = 0; i < 64; ++i) thetas.push_back(std::pow(500000.0, -i / 64.0) / 8.0);
  return thetas;
}

TEST(ExactAngle, WithinFourTenthsOfAQuadrillionthOfQuadReference) {
  std::vector<int64_t> positions = NamedPositions();
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200; ++i) positions.push_back(static_cast<int64_t>(rng()));
  double worst = 0;
  int64_t worst_position = 0;
  double worst_theta = 0;
  for (double theta : Frequencies()) {
    const ExactAngle angle(theta);
    for (int64_t p : positions) {
      double c = 0, s = 0;
      angle.CosSin(p, &c, &s);
      const double error_c = std::fabs(static_cast<double>(c - QuadCos(theta, p)));
      const double error_s = std::fabs(static_cast<double>(s - QuadSin(theta, p)));
      EXPECT_LE(error_c, 4e-16) << "theta " << theta << " p " << p;
      EXPECT_LE(error_s, 4e-16) << "theta " << theta << " p " << p;
      if (std::max(error_c, error_s) > worst) {
        worst = std::max(error_c, error_s);
        worst_position = p;
        worst_theta = theta;
      }
    }
  }
  std::printf("ExactAngle max |error| vs __float128: %.3g (theta %.17g, p %lld)\n",
              worst, worst_theta, static_cast<long long>(worst_position));
}

TEST(QuadReference, AgreesWithLibmWhereTheDoubleProductIsExact) {
  // θ = 1 and |p| <= 2^53: p·θ is an exact double, and glibc's cos/sin reduce
  // it exactly; the quad reference must agree to their rounding.
  for (int64_t p : {int64_t{1}, int64_t{355}, (int64_t{1} << 24) + 1,
                    (int64_t{1} << 31) - 1, -(int64_t{1} << 31),
                    (int64_t{1} << 53) - 1}) {
    const double x = static_cast<double>(p);
    EXPECT_LE(std::fabs(static_cast<double>(QuadCos(1.0, p) - std::cos(x))), 1.2e-16) << p;
    EXPECT_LE(std::fabs(static_cast<double>(QuadSin(1.0, p) - std::sin(x))), 1.2e-16) << p;
  }
}

TEST(ExactAngle, NeighboursPast2To53AreDistinct) {
  // A double position would make these pairs equal.
  const ExactAngle angle(1.0);
  double c0, s0, c1, s1;
  angle.CosSin(int64_t{1} << 53, &c0, &s0);
  angle.CosSin((int64_t{1} << 53) + 1, &c1, &s1);
  EXPECT_NE(c0, c1);
  angle.CosSin(kMax, &c0, &s0);
  angle.CosSin(kMin, &c1, &s1);
  EXPECT_NE(c0, c1);
}

TEST(ExactAngle, SymmetricInTheSign) {
  // cos(−x) = cos(x), sin(−x) = −sin(x), exactly: the quadrant split mirrors.
  for (double theta : Frequencies()) {
    const ExactAngle angle(theta);
    for (int64_t p : NamedPositions()) {
      if (p == kMin) continue;
      double c, s, cn, sn;
      angle.CosSin(p, &c, &s);
      angle.CosSin(-p, &cn, &sn);
      EXPECT_LE(std::fabs(c - cn), 2.3e-16) << theta << " " << p;
      EXPECT_LE(std::fabs(s + sn), 2.3e-16) << theta << " " << p;
    }
  }
}

TEST(ExactAngle, ZeroFrequencyAndZeroPosition) {
  double c, s;
  ExactAngle(0.0).CosSin(kMax, &c, &s);
  EXPECT_EQ(c, 1.0);
  EXPECT_EQ(s, 0.0);
  ExactAngle(1.0).CosSin(0, &c, &s);
  EXPECT_EQ(c, 1.0);
  EXPECT_EQ(s, 0.0);
}

TEST(ExactAngle, HugeAndTinyFrequencies) {
  // Every finite θ has its bits of 1/(2π); compare where quad can follow.
  for (double theta : {1e-300, 4.9e-324, 1e10, 1e300, 1.7976931348623157e308}) {
    const ExactAngle angle(theta);
    double c, s;
    angle.CosSin(1, &c, &s);
    EXPECT_NEAR(c, std::cos(theta), 2.3e-16) << theta;
    EXPECT_NEAR(s, std::sin(theta), 2.3e-16) << theta;
  }
}
}  // namespace
}  // namespace phasor
