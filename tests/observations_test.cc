#include "core/temporal/observations.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

namespace phasor {
namespace {

using ::testing::HasSubstr;

const double kNaN = std::nan("");
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

struct Wide {
  std::vector<int64_t> times = {10, 20, 20, 30};
  std::vector<double> values = {1, kNaN, 2, 3, kNaN, kNaN, 4, 5};
  std::vector<uint8_t> mask;
  std::vector<float> content;
  ObservationsView View() const {
    ObservationsView v;
    v.num_channels = 2;
    v.timestamps = times;
    v.values.f64 = values;
    v.mask = mask;
    v.content = content;
    v.content_dim = content.empty() ? 0 : 3;
    return v;
  }
};

struct Long {
  std::vector<int64_t> times = {5, 5, 9};
  std::vector<int32_t> channels = {0, 2, 1};
  std::vector<float> values = {1.5f, 2.5f, std::nanf("")};
  ObservationsView View() const {
    ObservationsView v;
    v.layout = ObservationLayout::kLong;
    v.num_channels = 3;
    v.event_times = times;
    v.event_channels = channels;
    v.event_values.f32 = values;
    return v;
  }
};

TEST(ValidateObservations, AcceptsWideLongAndEmpty) {
  const Wide wide;
  const Long events;
  PHASOR_ASSERT_OK(ValidateObservations(wide.View()));
  PHASOR_ASSERT_OK(ValidateObservations(events.View()));
  PHASOR_ASSERT_OK(ValidateObservations(ObservationsView{}));
  Wide with_content;
  with_content.content.assign(4 * 3, 0.5f);
  PHASOR_ASSERT_OK(ValidateObservations(with_content.View()));
  // With a mask, unobserved values may hold anything, Inf included.
  Wide masked;
  masked.values[1] = INFINITY;
  masked.mask = {1, 0, 1, 1, 0, 0, 1, 1};
  PHASOR_ASSERT_OK(ValidateObservations(masked.View()));
}

TEST(ValidateObservations, DecreasingTimestampNamesFirstIndex) {
  Wide w;
  w.times = {10, 20, 20, 15};
  const absl::Status s = ValidateObservations(w.View());
  EXPECT_THAT(s, IsFieldError(kInvalid, "observations.timestamps[3]"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("decreasing"));
  Long l;
  l.times = {5, 4, 9};
  EXPECT_THAT(ValidateObservations(l.View()),
              IsFieldError(kInvalid, "observations.event_times[1]"));
}

TEST(ValidateObservations, NaTTimestamp) {
  Wide w;
  w.times[0] = kNotATimeNs;
  EXPECT_THAT(ValidateObservations(w.View()),
              IsFieldError(kInvalid, "observations.timestamps[0]"));
}

TEST(ValidateObservations, WideShapes) {
  Wide w;
  w.values.pop_back();
  EXPECT_THAT(ValidateObservations(w.View()),
              IsFieldError(kInvalid, "observations.values"));
  Wide m;
  m.mask = {1, 1, 1};
  EXPECT_THAT(ValidateObservations(m.View()),
              IsFieldError(kInvalid, "observations.mask"));
  Wide both;
  std::vector<float> f32(8, 1.0f);
  ObservationsView v = both.View();
  v.values.f32 = f32;
  EXPECT_THAT(ValidateObservations(v), IsFieldError(kInvalid, "observations.values"));
  const Wide base;
  ObservationsView negative = base.View();
  negative.num_channels = -1;
  EXPECT_THAT(ValidateObservations(negative),
              IsFieldError(kInvalid, "observations.num_channels"));
  ObservationsView too_many;  // No rows, so values.size() = 0 = T·C holds.
  too_many.num_channels = kMaxChannels + 1;
  EXPECT_THAT(ValidateObservations(too_many),
              IsFieldError(kInvalid, "observations.num_channels"));
  too_many.num_channels = kMaxChannels;
  PHASOR_ASSERT_OK(ValidateObservations(too_many));
  ObservationsView mixed = base.View();
  const std::vector<int64_t> events = {1};
  mixed.event_times = events;
  EXPECT_THAT(ValidateObservations(mixed),
              IsFieldError(kInvalid, "observations.event_times"));
}

TEST(ValidateObservations, ObservedValuesMustBeFinite) {
  Wide inf;
  inf.values[5] = -INFINITY;  // Row 2, channel 1.
  const absl::Status s = ValidateObservations(inf.View());
  EXPECT_THAT(s, IsFieldError(kInvalid, "observations.values[5]"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("-inf in channel 1"));
  Wide masked_nan;
  masked_nan.mask = {1, 1, 1, 1, 0, 0, 1, 1};  // Marks values[1] (NaN) observed.
  EXPECT_THAT(ValidateObservations(masked_nan.View()),
              IsFieldError(kInvalid, "observations.values[1]"));
}

TEST(ValidateObservations, LongShapesChannelsAndValues) {
  Long channel;
  channel.channels[2] = 3;
  EXPECT_THAT(ValidateObservations(channel.View()),
              IsFieldError(kInvalid, "observations.event_channels[2]"));
  Long negative;
  negative.channels[0] = -1;
  EXPECT_THAT(ValidateObservations(negative.View()),
              IsFieldError(kInvalid, "observations.event_channels[0]"));
  Long short_channels;
  short_channels.channels.pop_back();
  EXPECT_THAT(ValidateObservations(short_channels.View()),
              IsFieldError(kInvalid, "observations.event_channels"));
  Long short_values;
  short_values.values.pop_back();
  EXPECT_THAT(ValidateObservations(short_values.View()),
              IsFieldError(kInvalid, "observations.event_values"));
  Long inf;
  inf.values[1] = INFINITY;
  EXPECT_THAT(ValidateObservations(inf.View()),
              IsFieldError(kInvalid, "observations.event_values[1]"));
  const Long long_base;
  ObservationsView both = long_base.View();
  const std::vector<double> f64 = {1, 2, 3};
  both.event_values.f64 = f64;
  EXPECT_THAT(ValidateObservations(both),
              IsFieldError(kInvalid, "observations.event_values"));
  ObservationsView no_channels = long_base.View();
  no_channels.num_channels = 0;
  EXPECT_THAT(ValidateObservations(no_channels),
              IsFieldError(kInvalid, "observations.num_channels"));
  ObservationsView mixed = long_base.View();
  const std::vector<int64_t> wide_times = {1};
  mixed.timestamps = wide_times;
  EXPECT_THAT(ValidateObservations(mixed),
              IsFieldError(kInvalid, "observations.timestamps"));
}

TEST(ValidateObservations, Content) {
  Wide size;
  size.content.assign(11, 0.0f);
  EXPECT_THAT(ValidateObservations(size.View()),
              IsFieldError(kInvalid, "observations.content"));
  Wide nan;
  nan.content.assign(12, 0.0f);
  nan.content[7] = std::nanf("");
  EXPECT_THAT(ValidateObservations(nan.View()),
              IsFieldError(kInvalid, "observations.content[7]"));
  const Wide base;
  ObservationsView zero_dim = base.View();
  const std::vector<float> eight(8, 0.0f);
  zero_dim.content = eight;
  zero_dim.content_dim = 0;
  EXPECT_THAT(ValidateObservations(zero_dim),
              IsFieldError(kInvalid, "observations.content"));
  ObservationsView huge_dim = base.View();
  const std::vector<float> twelve(12, 0.0f);
  huge_dim.content = twelve;
  huge_dim.content_dim = int64_t{1} << 62;  // rows · content_dim overflows.
  EXPECT_THAT(ValidateObservations(huge_dim),
              IsFieldError(kInvalid, "observations.content"));
  ObservationsView dim_without_data = base.View();
  dim_without_data.content_dim = 4;
  EXPECT_THAT(ValidateObservations(dim_without_data),
              IsFieldError(kInvalid, "observations.content"));
}

TEST(ObservedAt, WideMaskAndLong) {
  const Wide w;
  const ObservationsView v = w.View();
  double value = 0;
  EXPECT_TRUE(v.ObservedAt(1, 1, &value));
  EXPECT_EQ(value, 3);
  EXPECT_TRUE(v.ObservedAt(3, 0, &value));
  EXPECT_EQ(value, 4);
  EXPECT_FALSE(v.ObservedAt(0, 1, &value));
  Wide m;
  m.mask = {0, 0, 1, 1, 0, 0, 1, 0};
  const ObservationsView mv = m.View();
  EXPECT_FALSE(mv.ObservedAt(0, 0, &value));  // Value 1 but masked out.
  EXPECT_FALSE(mv.ObservedAt(3, 1, &value));
  const Long l;
  const ObservationsView lv = l.View();
  EXPECT_TRUE(lv.ObservedAt(1, 2, &value));
  EXPECT_EQ(value, 2.5);
  EXPECT_FALSE(lv.ObservedAt(1, 0, &value));
  EXPECT_FALSE(lv.ObservedAt(2, 1, &value));  // NaN: no value.
}

TEST(ValidateSeriesState, ErrorPaths) {
  const Wide base;
  const ObservationsView v = base.View();
  SeriesState ok;
  ok.has_rows = true;
  ok.first_timestamp_ns = 0;
  ok.last_timestamp_ns = 10;
  ok.channels.resize(2);
  ok.channels[0] = {true, 10, 1.0, true, 4, 0.5};
  PHASOR_ASSERT_OK(ValidateSeriesState(ok, v));

  SeriesState channels = ok;
  channels.channels.resize(3);
  EXPECT_THAT(ValidateSeriesState(channels, v),
              IsFieldError(kInvalid, "state.channels"));
  SeriesState later = ok;
  later.last_timestamp_ns = 11;  // After the chunk's first timestamp (10).
  later.channels[0].last_seen_ns = 11;
  const absl::Status s = ValidateSeriesState(later, v);
  EXPECT_THAT(s, IsFieldError(kInvalid, "observations.timestamps[0]"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("previous chunk"));
  SeriesState seen_late = ok;
  seen_late.channels[1] = {true, 12, 1.0, false, 0, 0};
  EXPECT_THAT(ValidateSeriesState(seen_late, v),
              IsFieldError(kInvalid, "state.channels[1].last_seen_ns"));
  SeriesState before = ok;
  before.channels[0].before_last_seen_ns = 10;
  EXPECT_THAT(ValidateSeriesState(before, v),
              IsFieldError(kInvalid, "state.channels[0].before_last_seen_ns"));
  // Paths name the SeriesState proto's fields: `seen` travels as the
  // presence of last_seen_ns, `seen_before_last` as before_last_seen_ns.
  SeriesState empty_but_seen;
  empty_but_seen.channels.resize(2);
  empty_but_seen.channels[1].seen = true;
  EXPECT_THAT(ValidateSeriesState(empty_but_seen, v),
              IsFieldError(kInvalid, "state.channels[1].last_seen_ns"));
  SeriesState empty_but_seen_before;
  empty_but_seen_before.channels.resize(2);
  empty_but_seen_before.channels[0].seen_before_last = true;
  EXPECT_THAT(ValidateSeriesState(empty_but_seen_before, v),
              IsFieldError(kInvalid, "state.channels[0].before_last_seen_ns"));
  SeriesState backwards = ok;
  backwards.first_timestamp_ns = 20;
  backwards.channels[0] = {};
  EXPECT_THAT(ValidateSeriesState(backwards, v),
              IsFieldError(kInvalid, "state.last_timestamp_ns"));
  SeriesState nan_value = ok;
  nan_value.channels[0].last_value = kNaN;
  EXPECT_THAT(ValidateSeriesState(nan_value, v),
              IsFieldError(kInvalid, "state.channels[0].last_value"));
  SeriesState nan_before = ok;
  nan_before.channels[1].before_last_value = kNaN;
  EXPECT_THAT(ValidateSeriesState(nan_before, v),
              IsFieldError(kInvalid, "state.channels[1].before_last_value"));
}

TEST(TimestampsFromSeconds, RoundsAndRejectsNaNInfAndRange) {
  const std::vector<double> seconds = {1.5, -0.25, 1700000000.123456789, 0.0};
  std::vector<int64_t> ns(seconds.size());
  PHASOR_ASSERT_OK(TimestampsFromSeconds(seconds, absl::MakeSpan(ns),
                                         "observations.timestamps"));
  EXPECT_EQ(ns[0], 1500000000);
  EXPECT_EQ(ns[1], -250000000);
  // float64 holds 1700000000.123456789 only to ~0.24 µs.
  EXPECT_NEAR(static_cast<double>(ns[2] - int64_t{1700000000123456789}), 0, 300);
  EXPECT_EQ(ns[3], 0);
  for (double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL, 1e10, -9.3e9}) {
    std::vector<double> in = {0.0, bad};
    std::vector<int64_t> out(2);
    EXPECT_THAT(
        TimestampsFromSeconds(in, absl::MakeSpan(out), "observations.timestamps"),
        IsFieldError(kInvalid, "observations.timestamps[1]"))
        << bad;
  }
  // Near the int64 edges: no overflow.
  std::vector<double> edge = {-9223372036.85, 9223372036.85};
  std::vector<int64_t> edge_ns(2);
  PHASOR_ASSERT_OK(TimestampsFromSeconds(edge, absl::MakeSpan(edge_ns), "t"));
  EXPECT_LT(edge_ns[0], int64_t{-9223372036000000000});
  EXPECT_GT(edge_ns[1], int64_t{9223372036000000000});
}

}  // namespace
}  // namespace phasor
