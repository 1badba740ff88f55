// Test data for the temporal encoder: irregular wide and long series, a
// spec with every block, and helpers that encode and compare bytewise.
// Shared by compose_test and panel_test.
#ifndef PHASOR_TESTS_TEMPORAL_TEST_DATA_H_
#define PHASOR_TESTS_TEMPORAL_TEST_DATA_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/temporal/compose.h"
#include "gtest/gtest.h"

namespace phasor {

constexpr int64_t kSec = 1000000000;

inline int64_t UtcNs(int64_t y, int m, int d, int hh = 0) {
  return absl::ToUnixNanos(absl::FromCivil(absl::CivilSecond(y, m, d, hh, 0, 0),
                                           absl::UTCTimeZone()));
}

// A wide series across both 2026 New York DST changes: irregular gaps (with
// ties), channels observed on different schedules, content embeddings.
struct WideSeries {
  int64_t channels = 3;
  int64_t content_dim = 4;
  std::vector<int64_t> times;
  std::vector<double> values;
  std::vector<float> content;

  WideSeries(int rows, uint64_t seed) {
    std::mt19937_64 rng(seed);
    int64_t t = UtcNs(2026, 3, 1);
    for (int r = 0; r < rows; ++r) {
      // 1 in 8 rows repeats the previous time; others advance up to 6 hours.
      if (r == 0 || rng() % 8 != 0) {
        t += static_cast<int64_t>(rng() % (6 * 3600)) * kSec +
             static_cast<int64_t>(rng() % kSec);
      }
      times.push_back(t);
      for (int64_t c = 0; c < channels; ++c) {
        // Channel c is observed with probability 1/(c+1).
        const bool observed = rng() % static_cast<uint64_t>(c + 1) == 0;
        values.push_back(observed ? static_cast<double>(rng() % 1000) / 10.0
                                  : std::nan(""));
      }
      for (int64_t j = 0; j < content_dim; ++j) {
        content.push_back(static_cast<float>(rng() % 200) / 100.0f - 1.0f);
      }
    }
  }
  int64_t rows() const { return static_cast<int64_t>(times.size()); }
  // Rows [begin, end) as a view.
  ObservationsView View(int64_t begin, int64_t end, bool with_content) const {
    ObservationsView v;
    v.num_channels = channels;
    v.timestamps = absl::MakeConstSpan(times).subspan(begin, end - begin);
    v.values.f64 = absl::MakeConstSpan(values).subspan(begin * channels,
                                                       (end - begin) * channels);
    if (with_content) {
      v.content = absl::MakeConstSpan(content).subspan(
          begin * content_dim, (end - begin) * content_dim);
      v.content_dim = content_dim;
    }
    return v;
  }
};

// The same kind of data as long-layout events.
struct LongSeries {
  int64_t channels = 4;
  std::vector<int64_t> times;
  std::vector<int32_t> event_channels;
  std::vector<float> values;

  LongSeries(int events, uint64_t seed) {
    std::mt19937_64 rng(seed);
    int64_t t = UtcNs(1969, 12, 30);  // Crosses the epoch.
    for (int i = 0; i < events; ++i) {
      if (i == 0 || rng() % 3 != 0) {
        t += static_cast<int64_t>(rng() % 7200) * kSec + static_cast<int64_t>(rng() % 997);
      }
      times.push_back(t);
      event_channels.push_back(static_cast<int32_t>(rng() % channels));
      values.push_back(rng() % 10 == 0 ? std::nanf("")
                                       : static_cast<float>(rng() % 100) / 7.0f);
    }
  }
  int64_t rows() const { return static_cast<int64_t>(times.size()); }
  ObservationsView View(int64_t begin, int64_t end, bool /*with_content*/) const {
    ObservationsView v;
    v.layout = ObservationLayout::kLong;
    v.num_channels = channels;
    v.event_times = absl::MakeConstSpan(times).subspan(begin, end - begin);
    v.event_channels =
        absl::MakeConstSpan(event_channels).subspan(begin, end - begin);
    v.event_values.f32 = absl::MakeConstSpan(values).subspan(begin, end - begin);
    return v;
  }
};

// Every block, CONCAT.
inline TemporalSpec FullSpec(FirstObservationPolicy policy = FirstObservationPolicy::kFlag,
                      GapTransform transform = GapTransform::kLog1p) {
  TemporalSpec spec;
  spec.content = ContentBlock{0.5};
  spec.time = TimeBlock{8, 1.0, 1e7, OriginKind::kFirstObservation, 0, {}};
  Time2VecBlock t2v;
  t2v.omega = {1e-6, 2 * M_PI / 86400, 2 * M_PI / 3600};
  t2v.phi = {0.1, 0.2, 0.3};
  t2v.unit_seconds = 1.0;
  spec.time2vec = t2v;
  GapsBlock gaps;
  gaps.first_observation = policy;
  gaps.transform = transform;
  gaps.unit_seconds = 60;
  gaps.include_mask = true;
  gaps.include_last_value = true;
  gaps.sinusoidal_dim = 4;
  gaps.sinusoidal_min_period_seconds = 60;
  gaps.sinusoidal_max_period_seconds = 86400;
  spec.gaps = gaps;
  CalendarBlock cal;
  cal.time_zone = "America/New_York";
  cal.fields = {CalendarField::kHourOfDay,   CalendarField::kDayOfWeek,
                CalendarField::kDayOfMonth,  CalendarField::kDayOfYear,
                CalendarField::kWeekOfYear,  CalendarField::kMonthOfYear,
                CalendarField::kQuarter,     CalendarField::kMinuteOfHour,
                CalendarField::kSecondOfMinute};
  cal.encoding = CalendarEncoding::kCyclic;
  cal.fractional = true;
  cal.include_utc_offset = true;
  cal.include_dst = true;
  cal.holidays = HolidaysBlock{{"2026-05-25", "2026-07-04", "2026-09-07"},
                               HolidayKernel::kExponential, 0.3};
  spec.calendar = cal;
  return spec;
}

struct Result {
  absl::Status status;
  std::vector<float> features;
  SeriesState state;
};

inline Result Encode(const TemporalSpec& spec, const ObservationsView& obs,
              const SeriesState* state_in, ExecutionOptions options = {}) {
  Result result;
  absl::StatusOr<FeatureLayout> layout =
      TemporalFeatureLayout(spec, obs.num_channels,
                            obs.content.empty() ? 0 : obs.content_dim);
  if (!layout.ok()) {
    result.status = layout.status();
    return result;
  }
  result.features.resize(obs.num_rows() * layout->width);
  result.status = EncodeObservations(spec, obs, state_in, options,
                                     absl::MakeSpan(result.features),
                                     &result.state);
  return result;
}

inline bool SameBytes(const std::vector<float>& a, const std::vector<float>& b) {
  // memcmp's pointers must not be null, even for zero bytes.
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

inline void ExpectSameState(const SeriesState& a, const SeriesState& b) {
  EXPECT_EQ(a.has_rows, b.has_rows);
  EXPECT_EQ(a.first_timestamp_ns, b.first_timestamp_ns);
  EXPECT_EQ(a.last_timestamp_ns, b.last_timestamp_ns);
  ASSERT_EQ(a.channels.size(), b.channels.size());
  for (size_t c = 0; c < a.channels.size(); ++c) {
    const ChannelState& x = a.channels[c];
    const ChannelState& y = b.channels[c];
    EXPECT_EQ(x.seen, y.seen) << c;
    EXPECT_EQ(x.last_seen_ns, y.last_seen_ns) << c;
    EXPECT_EQ(x.last_value, y.last_value) << c;
    EXPECT_EQ(x.seen_before_last, y.seen_before_last) << c;
    if (x.seen_before_last) {
      EXPECT_EQ(x.before_last_seen_ns, y.before_last_seen_ns) << c;
      EXPECT_EQ(x.before_last_value, y.before_last_value) << c;
    }
  }
}

}  // namespace phasor

#endif  // PHASOR_TESTS_TEMPORAL_TEST_DATA_H_
