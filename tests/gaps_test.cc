#include "core/temporal/gaps.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "tests/status_matchers.h"
#include "tests/temporal_test_data.h"

namespace phasor {
namespace {

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
// Distance in units in the last place between two finite doubles.
int64_t UlpDistance(double a, double b) {
  int64_t steps = 0;
  for (double x = a; x != b && steps < 1000; ++steps) x = std::nextafter(x, b);
  return steps;
}

// The scalar oracle: every gap column from its definition (gaps.h), one row
// at a time by searching the rows before it, the transform by libm.
std::vector<double> OracleGaps(const GapsBlock& block, const ObservationsView& obs,
                               int64_t origin_ns) {
  const int64_t c_count = obs.num_channels;
  const int64_t width = GapsWidth(block, c_count);
  const auto times = obs.row_times();
  const bool flag = block.first_observation == FirstObservationPolicy::kFlag;
  std::vector<double> out;
  const auto transform = [&](bool seen, __int128 gap, int64_t t) {
    if (!seen) {
      gap = block.first_observation == FirstObservationPolicy::kSinceOrigin
                ? static_cast<__int128>(t) - origin_ns
                : 0;
    }
    const double x = static_cast<double>(gap) / (block.unit_seconds * 1e9);
    return block.transform == GapTransform::kLog1p
               ? std::copysign(std::log1p(std::fabs(x)), x)
               : x;
  };
  for (int64_t r = 0; r < obs.num_rows(); ++r) {
    const int64_t t = times[r];
    std::vector<double> row;
    if (block.global_delta) {
      row.push_back(transform(r > 0, r > 0 ? static_cast<__int128>(t) - times[r - 1] : 0, t));
      if (flag) row.push_back(r > 0 ? 0 : 1);
    }
    // Channel c's latest observation strictly before t (the last row wins
    // among equal times), and whether row r observes it.
    std::vector<bool> seen(c_count, false);
    std::vector<int64_t> seen_ns(c_count, 0);
    std::vector<double> seen_value(c_count, 0.0);
    std::vector<double> value_now(c_count, 0.0);
    std::vector<bool> observed_now(c_count, false);
    for (int64_t s = 0; s < obs.num_rows(); ++s) {
      for (int64_t c = 0; c < c_count; ++c) {
        double v = 0;
        if (!obs.ObservedAt(s, c, &v)) continue;
        if (times[s] < t) {
          seen[c] = true;
          seen_ns[c] = times[s];
          seen_value[c] = v;
        }
        if (s == r) {
          observed_now[c] = true;
          value_now[c] = v;
        }
      }
    }
    if (block.per_channel_delta) {
      for (int64_t c = 0; c < c_count; ++c) {
        row.push_back(transform(seen[c], static_cast<__int128>(t) - seen_ns[c], t));
      }
      if (flag) {
        for (int64_t c = 0; c < c_count; ++c) row.push_back(seen[c] ? 0 : 1);
      }
    }
    if (block.include_mask) {
      for (int64_t c = 0; c < c_count; ++c) row.push_back(observed_now[c] ? 1 : 0);
    }
    if (block.include_last_value) {
      for (int64_t c = 0; c < c_count; ++c) {
        row.push_back(observed_now[c] ? value_now[c] : seen[c] ? seen_value[c] : 0.0);
      }
    }
    EXPECT_EQ(static_cast<int64_t>(row.size()), width);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

void CheckEncodeRowsAgainstTheOracle(int64_t channels, int64_t rows, uint64_t seed) {
  // Wide (float64 and float32 values, with and without a mask) and long
  // layouts, every policy, RAW and LOG1P, tiles of odd sizes (a wide tile of
  // 300 rows spans column blocks), ties and gaps past int64 (an EXPLICIT
  // origin near INT64_MIN: the row path); then the tracker's state. RAW and every
  // other column: the same doubles; LOG1P: the same float32 values and
  // within 1 ulp as doubles (the vector kernel, kFloat32) or the same
  // doubles (libm, kFloat64).
  std::mt19937_64 rng(seed);
  std::vector<int64_t> times(rows);
  int64_t t = kT0;
  for (int64_t& v : times) {
    t += (rng() % 4 == 0) ? 0 : static_cast<int64_t>(rng() % (100 * kSec));
    v = t;
  }
  std::vector<double> values(rows * channels);
  std::vector<float> values_f32(rows * channels);
  std::vector<uint8_t> mask(rows * channels);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = rng() % 3 == 0 ? kNaN : static_cast<double>(rng() % 1000) / 8.0;
    values_f32[i] = static_cast<float>(values[i]);
    mask[i] = rng() % 2;
  }
  std::vector<double> masked = values;  // Observed values must be finite.
  for (size_t i = 0; i < masked.size(); ++i) {
    if (std::isnan(masked[i])) masked[i] = mask[i] != 0 ? 2.5 : kNaN;
  }
  std::vector<int32_t> event_channels(rows);
  std::vector<double> event_values(rows);
  for (int64_t i = 0; i < rows; ++i) {
    event_channels[i] = static_cast<int32_t>(rng() % channels);
    event_values[i] = rng() % 5 == 0 ? kNaN : static_cast<double>(i);
  }
  std::vector<ObservationsView> views(5);
  for (ObservationsView& v : views) {
    v.num_channels = channels;
    v.timestamps = times;
  }
  views[0].values.f64 = values;
  views[1].values.f32 = values_f32;
  views[2].values.f64 = masked;
  views[2].mask = mask;
  views[3].values.f32 = values_f32;
  views[4].layout = ObservationLayout::kLong;
  views[4].timestamps = {};
  views[4].event_times = times;
  views[4].event_channels = event_channels;
  views[4].event_values.f64 = event_values;
  for (const ObservationsView& obs : views) PHASOR_ASSERT_OK(ValidateObservations(obs));
  int64_t cases = 0;
  for (size_t v = 0; v < views.size(); ++v) {
    const ObservationsView& obs = views[v];
    for (GapTransform transform : {GapTransform::kRaw, GapTransform::kLog1p}) {
      for (FirstObservationPolicy policy :
           {FirstObservationPolicy::kZero, FirstObservationPolicy::kSinceOrigin,
            FirstObservationPolicy::kFlag}) {
        for (int columns = 0; columns < 4; ++columns) {
          GapsBlock block;
          block.transform = transform;
          block.first_observation = policy;
          block.unit_seconds = columns == 3 ? 1e-9 : 3600.0;
          block.global_delta = columns != 1;
          block.per_channel_delta = columns != 2;
          block.include_mask = columns >= 2;
          block.include_last_value = columns != 0;
          const int64_t origin =
              columns == 3 ? std::numeric_limits<int64_t>::min() + 1 : kT0 - 77 * kSec;
          const std::vector<double> want = OracleGaps(block, obs, origin);
          for (SinusoidAccuracy accuracy :
               {SinusoidAccuracy::kFloat32, SinusoidAccuracy::kFloat64}) {
            // The channel-lane kernel on every SIMD target the binary holds.
            for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
              hwy::SetSupportedTargetsForTest(target);
              SCOPED_TRACE(hwy::TargetName(target));
              const GapsEncoder encoder(block, channels, accuracy);
              const int64_t width = encoder.width();
              const int64_t stride = width + 3;
              std::vector<double> got(rows * stride, -9.0);
              GapTracker tracker(channels);
              // Tiles of 1, 64, 37 and 150 rows.
              const int64_t tiles[] = {1, 64, 37, 150};
              for (int64_t begin = 0, k = 0; begin < rows;
                   begin += tiles[k], k = std::min<int64_t>(k + 1, 3)) {
                const int64_t n = std::min(tiles[k], rows - begin);
                encoder.EncodeRows(&tracker, obs, begin, n, origin,
                                   got.data() + begin * stride, stride);
              }
              for (int64_t r = 0; r < rows; ++r) {
                for (int64_t j = 0; j < width; ++j) {
                  const double g = got[r * stride + j];
                  const double w = want[r * width + j];
                  const auto where = [&] {
                    return testing::Message() << "view " << v << " columns " << columns
                                              << " row " << r << " col " << j;
                  };
                  if (transform == GapTransform::kLog1p &&
                      accuracy == SinusoidAccuracy::kFloat32) {
                    ASSERT_EQ(static_cast<float>(g), static_cast<float>(w)) << where();
                    ASSERT_LE(UlpDistance(g, w), 1) << where();
                  } else {
                    ASSERT_EQ(g, w) << where();
                  }
                }
                ASSERT_EQ(got[r * stride + width], -9.0);  // Nothing past the row.
              }
              // The tracker remembers what row-by-row tracking does.
              GapTracker serial(channels);
              serial.AdvanceRows(obs, 0, rows);
              ExpectSameState(tracker.ToState(), serial.ToState());
            }
            hwy::SetSupportedTargetsForTest(0);
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 5 * 2 * 3 * 4 * 2);
}

TEST(GapsEncoder, EncodeRowsMatchesTheScalarOracle) {
  CheckEncodeRowsAgainstTheOracle(/*channels=*/5, /*rows=*/300, /*seed=*/23);
  // Two groups of the channel-lane kernel, the second partial; tiles of
  // 1, 64, 37 and 150 rows still cross column blocks.
  CheckEncodeRowsAgainstTheOracle(/*channels=*/21, /*rows=*/160, /*seed=*/24);
}

// A wide float64 series without a mask (views the vectors).
ObservationsView WideF64(const std::vector<int64_t>& times,
                         const std::vector<double>& values, int64_t channels) {
  ObservationsView obs;
  obs.num_channels = channels;
  obs.timestamps = times;
  obs.values.f64 = values;
  return obs;
}

TEST(GapsEncoder, Log1pPastTwoToThe53TakesLibmInTheChannelKernel) {
  // Gaps of months in nanoseconds (unit 1e-9 s): x >= 2^53, which the
  // vector log1p leaves to libm lane by lane, mixed in vectors with small
  // gaps (ties and near rows).
  std::mt19937_64 rng(31);
  const int64_t rows = 90;
  const int64_t channels = 11;
  std::vector<int64_t> times(rows);
  int64_t t = kT0;
  for (int64_t& v : times) {
    const uint64_t kind = rng() % 4;
    t += kind == 0 ? 0 : kind == 1 ? 5 : static_cast<int64_t>(rng() % (300 * 86400 * kSec));
    v = t;
  }
  std::vector<double> values(rows * channels);
  for (double& v : values) v = rng() % 2 == 0 ? kNaN : 1.0;
  const ObservationsView obs = WideF64(times, values, channels);
  PHASOR_ASSERT_OK(ValidateObservations(obs));
  GapsBlock block;
  block.transform = GapTransform::kLog1p;
  block.unit_seconds = 1e-9;
  const std::vector<double> want = OracleGaps(block, obs, /*origin_ns=*/0);
  int64_t past = 0;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    const GapsEncoder encoder(block, channels, SinusoidAccuracy::kFloat32);
    const int64_t width = encoder.width();
    std::vector<double> got(rows * width);
    GapTracker tracker(channels);
    encoder.EncodeRows(&tracker, obs, 0, rows, 0, got.data(), width);
    for (int64_t k = 0; k < rows * width; ++k) {
      // Libm's doubles past 2^53 exactly; within 1 ulp below.
      if (std::fabs(want[k]) >= std::log1p(0x1p53)) {
        ++past;
        ASSERT_EQ(got[k], want[k]) << hwy::TargetName(target) << " value " << k;
      } else {
        ASSERT_LE(UlpDistance(got[k], want[k]), 1) << hwy::TargetName(target);
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GT(past, 100);
}

TEST(GapsEncoder, TilesSwitchingBetweenColumnAndRowPathsMatchTheOracle) {
  // A series that jumps from 1677 to 2262 (gaps past int64): the tile with
  // the jump, and those after it while a channel still remembers 1677, take
  // the row path (128-bit gaps); the tiles before and after take the column
  // path. The memory one path leaves must be what the other reads.
  {
    std::mt19937_64 rng(41);
    const int64_t rows = 120;
    const int64_t channels = 3;
    std::vector<int64_t> times(rows);
    int64_t t = std::numeric_limits<int64_t>::min() + 1000 * kSec;
    for (int64_t r = 0; r < rows; ++r) {
      if (r == 10) t = std::numeric_limits<int64_t>::max() - 1000 * kSec;
      t += (rng() % 3 == 0) ? 0 : static_cast<int64_t>(rng() % kSec);
      times[r] = t;
    }
    std::vector<double> values(rows * channels);
    for (double& v : values) {
      v = rng() % 3 == 0 ? kNaN : static_cast<double>(rng() % 100);
    }
    // Channel 2: seen in 1677, then not until row 40.
    values[5 * channels + 2] = 7.0;
    for (int64_t r = 10; r < 40; ++r) values[r * channels + 2] = kNaN;
    values[40 * channels + 2] = 8.0;
    const ObservationsView obs = WideF64(times, values, channels);
    PHASOR_ASSERT_OK(ValidateObservations(obs));
    GapsBlock block;
    block.transform = GapTransform::kRaw;
    block.unit_seconds = 1e-9;
    block.include_mask = true;
    block.include_last_value = true;
    const std::vector<double> want = OracleGaps(block, obs, /*origin_ns=*/0);
    const GapsEncoder encoder(block, channels);
    const int64_t width = encoder.width();
    std::vector<double> got(rows * width);
    GapTracker tracker(channels);
    for (int64_t begin = 0; begin < rows; begin += 7) {
      const int64_t n = std::min<int64_t>(7, rows - begin);
      encoder.EncodeRows(&tracker, obs, begin, n, 0, got.data() + begin * width, width);
    }
    for (int64_t k = 0; k < rows * width; ++k) {
      ASSERT_EQ(got[k], want[k]) << "row " << k / width << " col " << k % width;
    }
    GapTracker serial(channels);
    serial.AdvanceRows(obs, 0, rows);
    ExpectSameState(tracker.ToState(), serial.ToState());
  }
}

}  // namespace
}  // namespace phasor
