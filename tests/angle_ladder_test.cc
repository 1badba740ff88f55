// The angle-addition ladder (core/math/angle_ladder.h): which positions take
// a step, where the anchors are, and the step itself against the formula.
// Its rows are tested through the encoders that use it (sinusoidal_test.cc
// and rope_test.cc: ladder rows against long double and __float128, any
// chunking and thread count bytewise equal).
#include "core/math/angle_ladder.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace phasor {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

TEST(AngleLadderStep, TheFirstDifferenceWhenSmallAndNonZero) {
  EXPECT_EQ(AngleLadderStep(std::vector<int64_t>{0, 1, 2}), 1);
  EXPECT_EQ(AngleLadderStep(std::vector<int64_t>{10, 7}), -3);
  EXPECT_EQ(AngleLadderStep(std::vector<int64_t>{5, 5 + kMaxLadderStep}), kMaxLadderStep);
  EXPECT_EQ(AngleLadderStep(std::vector<int64_t>{5, 5 - kMaxLadderStep}), -kMaxLadderStep);
  // Every row exact: too few positions, no progress, too large a step, or
  // a difference past int64.
  EXPECT_EQ(AngleLadderStep(std::vector<int64_t>{}), 0);
  EXPECT_EQ(AngleLadderStep(std::vector<int64_t>{42}), 0);
  EXPECT_EQ(AngleLadderStep(std::vector<int64_t>{3, 3, 3}), 0);
  EXPECT_EQ(AngleLadderStep(std::vector<int64_t>{0, kMaxLadderStep + 1}), 0);
  EXPECT_EQ(AngleLadderStep(std::vector<int64_t>{kInt64Min, kInt64Max}), 0);
}

TEST(StepsFromPrevious, AnchorsEveryLadderAnchorRowsAndAtEveryBreak) {
  std::vector<int64_t> positions(3 * kLadderAnchorRows);
  for (size_t t = 0; t < positions.size(); ++t) positions[t] = 100 + 2 * static_cast<int64_t>(t);
  positions[300] += 1;  // Breaks the run: rows 300 and 301 are exact.
  const int64_t step = AngleLadderStep(positions);
  ASSERT_EQ(step, 2);
  for (int64_t t = 0; t < static_cast<int64_t>(positions.size()); ++t) {
    const bool anchor = t % kLadderAnchorRows == 0 || t == 300 || t == 301;
    EXPECT_EQ(StepsFromPrevious(positions, step, t), !anchor) << t;
  }
  // Without a step no row steps.
  EXPECT_FALSE(StepsFromPrevious(positions, /*step=*/0, 1));
  // A step that would overflow is a break.
  const std::vector<int64_t> top = {kInt64Max - 1, kInt64Max, kInt64Min};
  EXPECT_TRUE(StepsFromPrevious(top, 1, 1));
  EXPECT_FALSE(StepsFromPrevious(top, 1, 2));
}

TEST(StepAnglePair, IsTheAngleAdditionFormulaWithEachProductRounded) {
  const double theta = 0.37;
  const double delta = 3.0;
  double c = std::cos(11 * theta);
  double s = std::sin(11 * theta);
  const double step_cos = std::cos(delta * theta);
  const double step_sin = std::sin(delta * theta);
  const double want_sin = s * step_cos + c * step_sin;
  const double want_cos = c * step_cos - s * step_sin;
  StepAnglePair(step_cos, step_sin, &c, &s);
  EXPECT_EQ(c, want_cos);
  EXPECT_EQ(s, want_sin);
  EXPECT_NEAR(c, std::cos(14 * theta), 1e-15);
  EXPECT_NEAR(s, std::sin(14 * theta), 1e-15);
}

}  // namespace
}  // namespace phasor
