#include "core/gaps.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

namespace phasor {
namespace {

constexpr int64_t kSec = 1000000000;
constexpr int64_t kT0 = int64_t{1700000000} * kSec;
const double kNaN = std::nan("");

// The hand-worked example: three channels on different schedules, a tie at
// t = 10 s.
//   row  t(s)  c0   c1   c2
//   0     0    1    -    -
//   1    10    -    2    -
//   2    10    3    -    -
//   3    25    -    -    5
//   4    60    6    7    -
struct Example {
  std::vector<int64_t> times = {kT0, kT0 + 10 * kSec, kT0 + 10 * kSec,
                                kT0 + 25 * kSec, kT0 + 60 * kSec};
  std::vector<double> values = {1,    kNaN, kNaN,  //
                                kNaN, 2,    kNaN,  //
                                3,    kNaN, kNaN,  //
                                kNaN, kNaN, 5,     //
                                6,    7,    kNaN};
  ObservationsView View() const {
    ObservationsView v;
    v.num_channels = 3;
    v.timestamps = times;
    v.values.f64 = values;
    return v;
  }
};

// Hand-derived δ in seconds (−1 = no observation strictly before t):
//   row 0: none, none, none
//   row 1: c0 10 (seen at 0); c1, c2 none
//   row 2: same as row 1 (c1's observation at 10 s is not strictly before)
//   row 3: c0 15 (seen at 10), c1 15, c2 none
//   row 4: c0 50, c1 50, c2 35
const double kDelta[5][3] = {{-1, -1, -1},
                             {10, -1, -1},
                             {10, -1, -1},
                             {15, 15, -1},
                             {50, 50, 35}};
const double kGlobal[5] = {-1, 10, 0, 15, 35};
const double kMask[5][3] = {
    {1, 0, 0}, {0, 1, 0}, {1, 0, 0}, {0, 0, 1}, {1, 1, 0}};
// x̂ = m·x + (1−m)·x_last, x_last from strictly earlier times, 0 before any.
const double kLast[5][3] = {
    {1, 0, 0}, {1, 2, 0}, {3, 0, 0}, {3, 2, 5}, {6, 7, 5}};

std::vector<std::vector<double>> RunGaps(const GapsBlock& block,
                                     const ObservationsView& obs,
                                     int64_t origin_ns) {
  const GapsEncoder encoder(block, obs.num_channels);
  GapTracker tracker(obs.num_channels);
  std::vector<std::vector<double>> rows;
  const auto times = obs.row_times();
  for (int64_t r = 0; r < obs.num_rows(); ++r) {
    std::vector<double> row(encoder.width());
    tracker.BeginRow(times[r]);
    encoder.EncodeRow(tracker, obs, r, times[r], origin_ns, row.data());
    tracker.ObserveRow(obs, r);
    rows.push_back(row);
  }
  return rows;
}

TEST(Gaps, ZeroPolicyRawSecondsWithMaskAndLastValue) {
  const Example ex;
  GapsBlock block;
  block.first_observation = FirstObservationPolicy::kZero;
  block.include_mask = true;
  block.include_last_value = true;
  ASSERT_EQ(GapsWidth(block, 3), 1 + 3 + 3 + 3);
  const auto rows = RunGaps(block, ex.View(), kT0);
  for (int r = 0; r < 5; ++r) {
    SCOPED_TRACE(r);
    EXPECT_EQ(rows[r][0], kGlobal[r] < 0 ? 0 : kGlobal[r]);
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(rows[r][1 + c], kDelta[r][c] < 0 ? 0 : kDelta[r][c]);
      EXPECT_EQ(rows[r][4 + c], kMask[r][c]);
      EXPECT_EQ(rows[r][7 + c], kLast[r][c]);
    }
  }
}

TEST(Gaps, SinceOriginPolicy) {
  const Example ex;
  GapsBlock block;
  block.first_observation = FirstObservationPolicy::kSinceOrigin;
  block.unit_seconds = 60;  // Minutes.
  // Origin 100 s before the first row.
  const int64_t origin = kT0 - 100 * kSec;
  const auto rows = RunGaps(block, ex.View(), origin);
  const double since_origin[5] = {100, 110, 110, 125, 160};
  for (int r = 0; r < 5; ++r) {
    SCOPED_TRACE(r);
    EXPECT_DOUBLE_EQ(rows[r][0],
                     (kGlobal[r] < 0 ? since_origin[r] : kGlobal[r]) / 60);
    for (int c = 0; c < 3; ++c) {
      EXPECT_DOUBLE_EQ(rows[r][1 + c],
                       (kDelta[r][c] < 0 ? since_origin[r] : kDelta[r][c]) / 60);
    }
  }
}

TEST(Gaps, FlagPolicyAddsIndicators) {
  const Example ex;
  GapsBlock block;
  block.first_observation = FirstObservationPolicy::kFlag;
  ASSERT_EQ(GapsWidth(block, 3), (1 + 1) + (3 + 3));
  const auto rows = RunGaps(block, ex.View(), kT0);
  for (int r = 0; r < 5; ++r) {
    SCOPED_TRACE(r);
    EXPECT_EQ(rows[r][0], kGlobal[r] < 0 ? 0 : kGlobal[r]);
    EXPECT_EQ(rows[r][1], kGlobal[r] < 0 ? 1 : 0);
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(rows[r][2 + c], kDelta[r][c] < 0 ? 0 : kDelta[r][c]);
      EXPECT_EQ(rows[r][5 + c], kDelta[r][c] < 0 ? 1 : 0);
    }
  }
}

TEST(Gaps, Log1pAndSinusoidalTransforms) {
  const Example ex;
  GapsBlock block;
  block.per_channel_delta = true;
  block.global_delta = false;
  block.transform = GapTransform::kLog1p;
  block.unit_seconds = 10;
  auto rows = RunGaps(block, ex.View(), kT0);
  EXPECT_DOUBLE_EQ(rows[4][0], std::log1p(50.0 / 10));
  EXPECT_DOUBLE_EQ(rows[4][2], std::log1p(35.0 / 10));
  EXPECT_EQ(rows[0][0], 0.0);

  block.transform = GapTransform::kSinusoidal;
  block.sinusoidal_dim = 4;
  block.sinusoidal_min_period_seconds = 20;
  block.sinusoidal_max_period_seconds = 200;
  ASSERT_EQ(GapsWidth(block, 3), 12);
  rows = RunGaps(block, ex.View(), kT0);
  // Row 4, channel 2: δ = 35 s; periods 20 s and 200 s.
  EXPECT_NEAR(rows[4][8], std::sin(2 * M_PI * 35 / 20), 1e-12);
  EXPECT_NEAR(rows[4][9], std::cos(2 * M_PI * 35 / 20), 1e-12);
  EXPECT_NEAR(rows[4][10], std::sin(2 * M_PI * 35 / 200), 1e-12);
  EXPECT_NEAR(rows[4][11], std::cos(2 * M_PI * 35 / 200), 1e-12);
  // No history under ZERO: δ = 0 → (sin 0, cos 0).
  EXPECT_EQ(rows[0][0], 0.0);
  EXPECT_EQ(rows[0][1], 1.0);
}

TEST(Gaps, Log1pKeepsTheSignOfNegativeGaps) {
  // SINCE_ORIGIN with an explicit origin after the row.
  const Example ex;
  GapsBlock block;
  block.first_observation = FirstObservationPolicy::kSinceOrigin;
  block.transform = GapTransform::kLog1p;
  block.per_channel_delta = false;
  const auto rows = RunGaps(block, ex.View(), kT0 + 9 * kSec);
  EXPECT_DOUBLE_EQ(rows[0][0], -std::log1p(9.0));
}

TEST(Gaps, LongLayoutMatchesAndIgnoresOrderWithinATie) {
  // The same data as events; the two events at t = 10 s in both orders.
  for (bool swap : {false, true}) {
    std::vector<int64_t> times = {kT0,           kT0 + 10 * kSec, kT0 + 10 * kSec,
                                  kT0 + 25 * kSec, kT0 + 60 * kSec, kT0 + 60 * kSec};
    std::vector<int32_t> channels = {0, 1, 0, 2, 0, 1};
    std::vector<double> values = {1, 2, 3, 5, 6, 7};
    if (swap) {
      std::swap(channels[1], channels[2]);
      std::swap(values[1], values[2]);
    }
    ObservationsView obs;
    obs.layout = ObservationLayout::kLong;
    obs.num_channels = 3;
    obs.event_times = times;
    obs.event_channels = channels;
    obs.event_values.f64 = values;
    PHASOR_ASSERT_OK(ValidateObservations(obs));
    GapsBlock block;
    block.global_delta = false;
    block.include_last_value = true;
    const auto rows = RunGaps(block, obs, kT0);
    // δ rows: events 1 and 2 share row 1's δ, events 4 and 5 share row 4's.
    const int as_wide[6] = {0, 1, 2, 3, 4, 4};
    for (int r = 0; r < 6; ++r) {
      SCOPED_TRACE(testing::Message() << "swap " << swap << " event " << r);
      for (int c = 0; c < 3; ++c) {
        const double d = kDelta[as_wide[r]][c];
        EXPECT_EQ(rows[r][c], d < 0 ? 0 : d);
      }
    }
    // Last value at the event for channel 0 at t = 10 s: its own value 3;
    // channel 1 there has no earlier value (0) unless it is the event.
    const int c0_event = swap ? 1 : 2;
    EXPECT_EQ(rows[c0_event][3 + 0], 3);
    EXPECT_EQ(rows[c0_event][3 + 1], 0);
    EXPECT_EQ(rows[3 - c0_event][3 + 0], 1);  // c1's event: c0 from t = 0.
    EXPECT_EQ(rows[3 - c0_event][3 + 1], 2);
  }
}

TEST(GapTracker, StateRoundTripInsideATie) {
  // Stop after row 1 (t = 10 s), while row 2 shares its time: the state must
  // keep both the observation at 10 s and what came before it.
  const Example ex;
  const ObservationsView obs = ex.View();
  GapTracker tracker(3);
  for (int r = 0; r < 2; ++r) {
    tracker.BeginRow(ex.times[r]);
    tracker.ObserveRow(obs, r);
  }
  const SeriesState state = tracker.ToState();
  EXPECT_TRUE(state.has_rows);
  EXPECT_EQ(state.first_timestamp_ns, kT0);
  EXPECT_EQ(state.last_timestamp_ns, kT0 + 10 * kSec);
  ASSERT_EQ(state.channels.size(), 3u);
  EXPECT_TRUE(state.channels[0].seen);
  EXPECT_EQ(state.channels[0].last_seen_ns, kT0);
  EXPECT_EQ(state.channels[0].last_value, 1);
  EXPECT_TRUE(state.channels[1].seen);
  EXPECT_EQ(state.channels[1].last_seen_ns, kT0 + 10 * kSec);
  EXPECT_EQ(state.channels[1].last_value, 2);
  EXPECT_FALSE(state.channels[1].seen_before_last);
  EXPECT_FALSE(state.channels[2].seen);

  // Continue from the state for rows 2..4: same features as one pass.
  GapsBlock block;
  block.include_last_value = true;
  block.first_observation = FirstObservationPolicy::kFlag;
  const auto whole = RunGaps(block, obs, kT0);
  const GapsEncoder encoder(block, 3);
  GapTracker resumed(state);
  for (int r = 2; r < 5; ++r) {
    std::vector<double> row(encoder.width());
    resumed.BeginRow(ex.times[r]);
    encoder.EncodeRow(resumed, obs, r, ex.times[r], kT0, row.data());
    resumed.ObserveRow(obs, r);
    EXPECT_EQ(row, whole[r]) << r;
  }
}

TEST(ValidateGapsBlock, ErrorPaths) {
  const std::string p = "spec.temporal.gaps";
  PHASOR_ASSERT_OK(ValidateGapsBlock(GapsBlock{}, p));
  GapsBlock none;
  none.global_delta = false;
  none.per_channel_delta = false;
  EXPECT_THAT(ValidateGapsBlock(none, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p));
  GapsBlock unit;
  unit.unit_seconds = 0;
  EXPECT_THAT(ValidateGapsBlock(unit, p),
              IsFieldError(absl::StatusCode::kInvalidArgument, p + ".unit_seconds"));
  GapsBlock odd;
  odd.transform = GapTransform::kSinusoidal;
  odd.sinusoidal_dim = 3;
  EXPECT_THAT(ValidateGapsBlock(odd, p),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           p + ".sinusoidal_dim"));
  GapsBlock periods;
  periods.transform = GapTransform::kSinusoidal;
  periods.sinusoidal_min_period_seconds = -1;
  EXPECT_THAT(ValidateGapsBlock(periods, p),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           p + ".sinusoidal_min_period_seconds"));
  periods.sinusoidal_min_period_seconds = 100;
  periods.sinusoidal_max_period_seconds = 10;
  EXPECT_THAT(ValidateGapsBlock(periods, p),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           p + ".sinusoidal_max_period_seconds"));
}

}  // namespace
}  // namespace phasor
