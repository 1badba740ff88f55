// The vector sin/cos kernels (core/math/sincos.h): angles against libm (the
// float32 bits unchanged, doubles within 2 ulp); phases in 2^-64 turn, the
// vector quarter-turn split against the scalar one on every SIMD target and
// against a __float128 reference (tests/quad_reference.h).
#include "core/math/sincos.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "core/math/exact_angle.h"
#include "core/math/turns.h"
#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "tests/quad_reference.h"

namespace phasor {
namespace {

using testing::QuadCos;
using testing::QuadSin;

// Distance in units in the last place between two finite doubles of the
// same sign or zero.
int64_t UlpDistance(double a, double b) {
  if (a == b) return 0;
  int64_t steps = 0;
  for (double x = a; x != b && steps < 1000; ++steps) x = std::nextafter(x, b);
  return steps;
}


// Phases at and next to the quarter-turn boundaries (where the split picks
// the other quadrant and the residual changes sign), at the residual's
// halves (2^32) and extremes, and random ones.
std::vector<uint64_t> SplitTurns() {
  std::vector<uint64_t> turns;
  for (uint64_t quarter = 0; quarter < 4; ++quarter) {
    for (uint64_t base : {quarter << 62, (quarter << 62) + (uint64_t{1} << 61)}) {
      for (uint64_t delta : {uint64_t{0}, uint64_t{1}, uint64_t{2}, (uint64_t{1} << 32) - 1,
                             uint64_t{1} << 32, (uint64_t{1} << 32) + 1, uint64_t{1} << 40}) {
        turns.push_back(base + delta);
        turns.push_back(base - delta);
      }
    }
  }
  turns.push_back(std::numeric_limits<uint64_t>::max());
  std::mt19937_64 rng(17);
  for (int i = 0; i < 4000; ++i) turns.push_back(rng());
  for (int i = 0; i < 1000; ++i) turns.push_back(rng() >> (i % 64));  // Small phases.
  return turns;
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

TEST(SinCosOfTurns, VectorSplitIsTheScalarSplitThenTheKernelOnEveryTarget) {
  const std::vector<uint64_t> turns = SplitTurns();
  // The expected bits, one phase at a time: the scalar split, the kernel on
  // its residual (SinCosOfAngles, one angle), and the quadrant's rotation.
  std::vector<double> cos_expected(turns.size()), sin_expected(turns.size());
  for (size_t i = 0; i < turns.size(); ++i) {
    uint32_t quadrant = 0;
    const double residual = ExactAngle::QuarterTurnSplit(turns[i], &quadrant);
    ASSERT_LE(std::fabs(residual), M_PI / 4 + 1e-15) << turns[i];
    double s = 0, c = 0;
    SinCosOfAngles(absl::MakeConstSpan(&residual, 1), &s, &c);
    const double rotated_cos[4] = {c, -s, -c, s};
    const double rotated_sin[4] = {s, c, -s, -c};
    cos_expected[i] = rotated_cos[quadrant];
    sin_expected[i] = rotated_sin[quadrant];
  }
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    std::vector<double> cos_row(turns.size()), sin_row(turns.size());
    // Odd lengths too: the last lanes go one at a time.
    for (size_t begin = 0, length = 1; begin < turns.size(); begin += length, ++length) {
      const size_t n = std::min(length, turns.size() - begin);
      SinCosOfTurns(absl::MakeConstSpan(turns).subspan(begin, n), &sin_row[begin],
                    &cos_row[begin]);
    }
    EXPECT_EQ(0, std::memcmp(cos_row.data(), cos_expected.data(),
                             turns.size() * sizeof(double)))
        << hwy::TargetName(target);
    EXPECT_EQ(0, std::memcmp(sin_row.data(), sin_expected.data(),
                             turns.size() * sizeof(double)))
        << hwy::TargetName(target);
    double c = 0, s = 0;
    ExactAngle::CosSinOfTurns(turns[5], &c, &s);
    EXPECT_EQ(c, cos_expected[5]) << hwy::TargetName(target);
    EXPECT_EQ(s, sin_expected[5]) << hwy::TargetName(target);
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(SinCosOfTurns, WithinTwoTenthsOfAQuadrillionthOfQuadReference) {
  const std::vector<uint64_t> turns = SplitTurns();
  std::vector<double> cos_row(turns.size()), sin_row(turns.size());
  SinCosOfTurns(turns, sin_row.data(), cos_row.data());
  double worst = 0;
  for (size_t i = 0; i < turns.size(); ++i) {
    // 2π·turns·2^-64 in binary128 (the integer is exact in its 113 bits),
    // 2π to 2^-190 from the reference's pieces.
    testing::Quad two_pi = 0;
    for (double piece : testing::kTwoPiPieces) two_pi += testing::Quad(piece);
    const testing::Quad angle =
        static_cast<testing::Quad>(turns[i]) * testing::Quad(0x1p-64) * two_pi;
    worst = std::max({worst, std::fabs(static_cast<double>(cos_row[i] - cosq(angle))),
                      std::fabs(static_cast<double>(sin_row[i] - sinq(angle)))});
  }
  // The split's 2^-54 rad, the kernel's < 1 ulp and the rotation's none.
  EXPECT_LE(worst, 2e-16);
  std::printf("SinCosOfTurns max |error| vs __float128: %.3g\n", worst);
}

}  // namespace
}  // namespace phasor
