#include "core/temporal/compose.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <sys/resource.h>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/temporal_test_data.h"

namespace phasor {
namespace {

using ::testing::HasSubstr;

constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

// Encodes rows [0, n) in random chunks, passing the state along, and checks
// the bytes and the final state against one call.
template <typename Series>
void ExpectChunkedEqualsWhole(const TemporalSpec& spec, const Series& series,
                              bool with_content, uint64_t seed) {
  const int64_t n = series.rows();
  const Result whole = Encode(spec, series.View(0, n, with_content), nullptr);
  ASSERT_TRUE(whole.status.ok()) << whole.status;
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 25; ++trial) {
    std::set<int64_t> cuts = {0, n};
    const int pieces = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < pieces; ++i) cuts.insert(static_cast<int64_t>(rng() % n));
    if (trial == 0) {  // Every row its own chunk.
      for (int64_t r = 0; r < n; ++r) cuts.insert(r);
    }
    std::vector<float> joined;
    SeriesState state;
    const SeriesState* in = nullptr;
    for (auto it = cuts.begin(); std::next(it) != cuts.end(); ++it) {
      const Result part = Encode(spec, series.View(*it, *std::next(it), with_content), in);
      ASSERT_TRUE(part.status.ok()) << part.status;
      joined.insert(joined.end(), part.features.begin(), part.features.end());
      state = part.state;
      in = &state;
    }
    EXPECT_TRUE(SameBytes(joined, whole.features))
        << "trial " << trial << " with " << cuts.size() - 1 << " chunks";
    ExpectSameState(state, whole.state);
  }
}

TEST(TemporalFeatureLayout, ConcatSchema) {
  const absl::StatusOr<FeatureLayout> layout =
      TemporalFeatureLayout(FullSpec(), /*num_channels=*/3, /*content_dim=*/0);
  ASSERT_TRUE(layout.ok()) << layout.status();
  // content 3+3, time 8, time2vec 3, gaps (1+1) + (3+3) + 3 + 3,
  // calendar 9·2 + offset + dst + holidays.
  EXPECT_EQ(layout->width, 6 + 8 + 3 + 14 + 21);
  std::vector<std::pair<std::string, int64_t>> got;
  int64_t expected_offset = 0;
  for (const SchemaEntry& e : layout->schema) {
    EXPECT_EQ(e.offset, expected_offset) << e.block;
    EXPECT_FALSE(e.meaning.empty()) << e.block;
    expected_offset += e.width;
    got.emplace_back(e.block, e.width);
  }
  EXPECT_EQ(expected_offset, layout->width);
  const std::vector<std::pair<std::string, int64_t>> want = {
      {"content.values", 3},        {"content.mask", 3},
      {"time", 8},                  {"time2vec", 3},
      {"gaps.global_delta", 1},     {"gaps.global_first_flag", 1},
      {"gaps.delta", 3},            {"gaps.first_flag", 3},
      {"gaps.mask", 3},             {"gaps.last_value", 3},
      {"calendar.hour_of_day", 2},  {"calendar.day_of_week", 2},
      {"calendar.day_of_month", 2}, {"calendar.day_of_year", 2},
      {"calendar.week_of_year", 2}, {"calendar.month_of_year", 2},
      {"calendar.quarter", 2},      {"calendar.minute_of_hour", 2},
      {"calendar.second_of_minute", 2}, {"calendar.utc_offset", 1},
      {"calendar.dst", 1},          {"calendar.holidays", 1}};
  EXPECT_EQ(got, want);
  // With embeddings the content block is the embeddings.
  const absl::StatusOr<FeatureLayout> with_content =
      TemporalFeatureLayout(FullSpec(), 3, 7);
  ASSERT_TRUE(with_content.ok());
  EXPECT_EQ(with_content->schema[0].block, "content");
  EXPECT_EQ(with_content->schema[0].width, 7);
  EXPECT_EQ(with_content->width, 7 + 8 + 3 + 14 + 21);
}

TEST(TemporalFeatureLayout, HolidayColumnsPerSet) {
  TemporalSpec spec;
  CalendarBlock cal;
  HolidaysBlock holidays;
  holidays.include_days_since = true;
  holidays.include_days_until = true;
  for (int i = 0; i < kMaxHolidaySets; ++i) {
    holidays.sets.push_back(HolidaySet{absl::StrCat("h", i), {"2026-01-01"}, {}});
  }
  cal.holidays = holidays;
  spec.calendar = cal;
  const absl::StatusOr<FeatureLayout> layout = TemporalFeatureLayout(spec, 0, 0);
  ASSERT_TRUE(layout.ok()) << layout.status();
  // The unnamed set (no sets excluded it here) and 256 named ones, three
  // columns each, named after their set.
  ASSERT_EQ(layout->width, 3 * (1 + kMaxHolidaySets));
  ASSERT_EQ(layout->schema.size(), static_cast<size_t>(layout->width));
  EXPECT_EQ(layout->schema[0].block, "calendar.holidays");
  EXPECT_EQ(layout->schema[1].block, "calendar.holidays.days_since");
  EXPECT_EQ(layout->schema[5].block, "calendar.holidays.h0.days_until");
  EXPECT_EQ(layout->schema.back().block, "calendar.holidays.h255.days_until");
  for (size_t i = 0; i < layout->schema.size(); ++i) {
    EXPECT_EQ(layout->schema[i].offset, static_cast<int64_t>(i));
    EXPECT_EQ(layout->schema[i].width, 1);
  }
}

TEST(TemporalFeatureLayout, Errors) {
  TemporalSpec content_only;
  content_only.content = ContentBlock{};
  EXPECT_THAT(TemporalFeatureLayout(content_only, 0, 0).status(),
              IsFieldError(kInvalid, "observations.content"));
  TemporalSpec sum;
  sum.combine = CombineMode::kSum;
  sum.d_model = 8;
  sum.content = ContentBlock{};
  EXPECT_THAT(TemporalFeatureLayout(sum, 0, 6).status(),
              IsFieldError(kInvalid, "observations.content"));
  EXPECT_THAT(TemporalFeatureLayout(sum, 3, 0).status(),  // 2·3 != 8
              IsFieldError(kInvalid, "observations.content"));
  EXPECT_TRUE(TemporalFeatureLayout(sum, 4, 0).ok());
}

TEST(ValidateTemporalSpec, EveryErrorPath) {
  struct Case {
    std::string field;
    std::function<void(TemporalSpec&)> change;
  };
  auto sum = [](TemporalSpec& s) {
    s.combine = CombineMode::kSum;
    s.d_model = 16;
    s.content.reset();
    s.time2vec->omega.assign(16, 1.0);
    s.time2vec->phi.assign(16, 0.0);
    s.time->dim = 0;
    s.gaps->per_channel_delta = false;
    s.gaps->include_mask = false;
    s.gaps->include_last_value = false;
    s.gaps->first_observation = FirstObservationPolicy::kZero;
    s.gaps->transform = GapTransform::kSinusoidal;
    s.gaps->sinusoidal_dim = 0;
    s.calendar->fractional = false;
    s.calendar->include_utc_offset = false;
    s.calendar->include_dst = false;
    s.calendar->holidays.reset();
  };
  const std::string p = "spec.temporal";
  const std::vector<Case> cases = {
      {p, [](TemporalSpec& s) { s = TemporalSpec{}; }},
      {p + ".combine", [](TemporalSpec& s) { s.combine = static_cast<CombineMode>(9); }},
      {p + ".content.scale", [](TemporalSpec& s) { s.content->scale = NAN; }},
      {p + ".time.dim", [](TemporalSpec& s) { s.time->dim = 5; }},
      {p + ".time.min_period_seconds", [](TemporalSpec& s) { s.time->min_period_seconds = -1; }},
      {p + ".time.max_period_seconds", [](TemporalSpec& s) { s.time->max_period_seconds = 0.5; }},
      {p + ".time.origin_ns",
       [](TemporalSpec& s) {
         s.time->origin = OriginKind::kExplicit;
         s.time->origin_ns = kNotATimeNs;
       }},
      {p + ".time2vec.omega", [](TemporalSpec& s) { s.time2vec->omega.clear(); }},
      {p + ".time2vec.phi", [](TemporalSpec& s) { s.time2vec->phi.pop_back(); }},
      {p + ".time2vec.omega[2]", [](TemporalSpec& s) { s.time2vec->omega[2] = NAN; }},
      {p + ".time2vec.unit_seconds", [](TemporalSpec& s) { s.time2vec->unit_seconds = 0; }},
      {p + ".time2vec.origin_ns",
       [](TemporalSpec& s) {
         s.time2vec->origin = OriginKind::kExplicit;
         s.time2vec->origin_ns = kNotATimeNs;
       }},
      {p + ".gaps",
       [](TemporalSpec& s) {
         s.gaps->global_delta = s.gaps->per_channel_delta = false;
         s.gaps->include_mask = s.gaps->include_last_value = false;
       }},
      {p + ".gaps.unit_seconds", [](TemporalSpec& s) { s.gaps->unit_seconds = INFINITY; }},
      {p + ".gaps.sinusoidal_dim",
       [](TemporalSpec& s) {
         s.gaps->transform = GapTransform::kSinusoidal;
         s.gaps->sinusoidal_dim = 0;
       }},
      {p + ".gaps.origin_ns",
       [](TemporalSpec& s) {
         s.gaps->origin = OriginKind::kExplicit;
         s.gaps->origin_ns = kNotATimeNs;
       }},
      {p + ".calendar.time_zone", [](TemporalSpec& s) { s.calendar->time_zone = "Mars/Base"; }},
      {p + ".calendar.fields[1]",
       [](TemporalSpec& s) {
         s.calendar->fields = {CalendarField::kQuarter, CalendarField::kQuarter};
       }},
      {p + ".calendar.fractional",
       [](TemporalSpec& s) { s.calendar->encoding = CalendarEncoding::kIndex; }},
      {p + ".calendar.holidays.dates[0]",
       [](TemporalSpec& s) { s.calendar->holidays->dates[0] = "2026-02-29"; }},
      {p + ".calendar.holidays.alpha",
       [](TemporalSpec& s) { s.calendar->holidays->alpha = -1; }},
      // combine SUM.
      {p + ".d_model",
       [&](TemporalSpec& s) {
         sum(s);
         s.d_model = 0;
       }},
      {p + ".d_model",
       [&](TemporalSpec& s) {
         sum(s);
         s.d_model = 15;
       }},
      {p + ".d_model",
       [&](TemporalSpec& s) {
         sum(s);
         s.d_model = kMaxEncodingWidth + 2;
       }},
      {p + ".time.dim",
       [&](TemporalSpec& s) {
         sum(s);
         s.time->dim = 8;
       }},
      {p + ".time2vec.omega",
       [&](TemporalSpec& s) {
         sum(s);
         s.time2vec->omega.pop_back();
       }},
      {p + ".gaps.global_delta",
       [&](TemporalSpec& s) {
         sum(s);
         s.gaps->global_delta = false;
         s.gaps->include_mask = true;
       }},
      {p + ".gaps.per_channel_delta",
       [&](TemporalSpec& s) {
         sum(s);
         s.gaps->per_channel_delta = true;
       }},
      {p + ".gaps.include_mask",
       [&](TemporalSpec& s) {
         sum(s);
         s.gaps->include_mask = true;
       }},
      {p + ".gaps.include_last_value",
       [&](TemporalSpec& s) {
         sum(s);
         s.gaps->include_last_value = true;
       }},
      {p + ".gaps.first_observation",
       [&](TemporalSpec& s) {
         sum(s);
         s.gaps->first_observation = FirstObservationPolicy::kFlag;
       }},
      {p + ".gaps.transform",
       [&](TemporalSpec& s) {
         sum(s);
         s.gaps->transform = GapTransform::kRaw;
       }},
      {p + ".gaps.sinusoidal_dim",
       [&](TemporalSpec& s) {
         sum(s);
         s.gaps->sinusoidal_dim = 8;
       }},
      {p + ".calendar.fields",
       [&](TemporalSpec& s) {
         sum(s);
         s.calendar->fields.clear();
       }},
      {p + ".calendar.fractional",
       [&](TemporalSpec& s) {
         sum(s);
         s.calendar->fractional = true;
       }},
      {p + ".calendar.include_utc_offset",
       [&](TemporalSpec& s) {
         sum(s);
         s.calendar->include_utc_offset = true;
       }},
      {p + ".calendar.include_dst",
       [&](TemporalSpec& s) {
         sum(s);
         s.calendar->include_dst = true;
       }},
      {p + ".calendar.holidays",
       [&](TemporalSpec& s) {
         sum(s);
         s.calendar->holidays = HolidaysBlock{{"2026-01-01"}, HolidayKernel::kIndicator, 1};
       }},
  };
  PHASOR_ASSERT_OK(ValidateTemporalSpec(FullSpec()));
  TemporalSpec valid_sum = FullSpec();
  sum(valid_sum);
  PHASOR_ASSERT_OK(ValidateTemporalSpec(valid_sum));
  for (const Case& c : cases) {
    TemporalSpec spec = FullSpec();
    c.change(spec);
    EXPECT_THAT(ValidateTemporalSpec(spec), IsFieldError(kInvalid, c.field));
  }
  TemporalSpec mars = FullSpec();
  mars.calendar->time_zone = "Mars/Base";
  EXPECT_EQ(ValidateTemporalSpec(mars).message(),
            "spec.temporal.calendar.time_zone: unknown IANA time zone \"Mars/Base\"");
}

TEST(EncodeObservations, ErrorPaths) {
  const WideSeries series(50, 1);
  const TemporalSpec spec = FullSpec();
  const ObservationsView obs = series.View(0, 50, false);
  // Output of the wrong size.
  std::vector<float> small(10);
  EXPECT_THAT(EncodeObservations(spec, obs, nullptr, {}, absl::MakeSpan(small), nullptr),
              IsFieldError(kInvalid, "features"));
  // Spec, observation and state errors come through with their paths.
  TemporalSpec bad = spec;
  bad.time->dim = 3;
  EXPECT_THAT(Encode(bad, obs, nullptr).status,
              IsFieldError(kInvalid, "spec.temporal.time.dim"));
  std::vector<int64_t> times = series.times;
  std::swap(times[10], times[20]);
  ObservationsView decreasing = obs;
  decreasing.timestamps = times;
  const Result r = Encode(spec, decreasing, nullptr);
  EXPECT_THAT(r.status, IsFieldError(kInvalid, "observations.timestamps[11]"));
  const Result first = Encode(spec, series.View(0, 30, false), nullptr);
  PHASOR_ASSERT_OK(first.status);
  // Resending an earlier chunk after the state is a decreasing timestamp.
  EXPECT_THAT(Encode(spec, series.View(0, 30, false), &first.state).status,
              IsFieldError(kInvalid, "observations.timestamps[0]"));
  SeriesState wrong_channels = first.state;
  wrong_channels.channels.pop_back();
  EXPECT_THAT(Encode(spec, series.View(30, 50, false), &wrong_channels).status,
              IsFieldError(kInvalid, "state.channels"));
}

TEST(EncodeObservations, ContentValuesAndMask) {
  TemporalSpec spec;
  spec.content = ContentBlock{3.0};  // Scale applies to embeddings only.
  const std::vector<int64_t> times = {1, 2};
  const std::vector<double> values = {1.5, std::nan(""), -2.0, 4.0};
  ObservationsView wide;
  wide.num_channels = 2;
  wide.timestamps = times;
  wide.values.f64 = values;
  Result r = Encode(spec, wide, nullptr);
  PHASOR_ASSERT_OK(r.status);
  EXPECT_EQ(r.features, (std::vector<float>{1.5f, 0, 1, 0, -2, 4, 1, 1}));
  // A mask overrides NaN-ness.
  const std::vector<uint8_t> mask = {0, 0, 1, 1};
  wide.mask = mask;
  r = Encode(spec, wide, nullptr);
  PHASOR_ASSERT_OK(r.status);
  EXPECT_EQ(r.features, (std::vector<float>{0, 0, 0, 0, -2, 4, 1, 1}));
  // Long layout: one-hot per event.
  const std::vector<int32_t> channels = {1, 0};
  const std::vector<double> event_values = {7.0, std::nan("")};
  ObservationsView events;
  events.layout = ObservationLayout::kLong;
  events.num_channels = 2;
  events.event_times = times;
  events.event_channels = channels;
  events.event_values.f64 = event_values;
  r = Encode(spec, events, nullptr);
  PHASOR_ASSERT_OK(r.status);
  EXPECT_EQ(r.features, (std::vector<float>{0, 7, 0, 1, 0, 0, 0, 0}));
  // Embeddings are scaled.
  const std::vector<float> content = {1, 2, 3, 4, 5, 6};
  wide.content = content;
  wide.content_dim = 3;
  r = Encode(spec, wide, nullptr);
  PHASOR_ASSERT_OK(r.status);
  EXPECT_EQ(r.features, (std::vector<float>{3, 6, 9, 12, 15, 18}));
}

TEST(EncodeObservations, FirstObservationOriginTravelsInTheState) {
  TemporalSpec spec;
  spec.time = TimeBlock{2, 40.0, 40.0, OriginKind::kFirstObservation, 0, {}};
  const std::vector<int64_t> first = {UtcNs(2026, 1, 1)};
  const std::vector<int64_t> second = {UtcNs(2026, 1, 1) + 10 * kSec};
  ObservationsView a;
  a.timestamps = first;
  const Result ra = Encode(spec, a, nullptr);
  PHASOR_ASSERT_OK(ra.status);
  EXPECT_EQ(ra.features, (std::vector<float>{0, 1}));
  EXPECT_EQ(ra.state.first_timestamp_ns, first[0]);
  ObservationsView b;
  b.timestamps = second;
  const Result rb = Encode(spec, b, &ra.state);
  PHASOR_ASSERT_OK(rb.status);
  // 10 s into a 40 s period: a quarter turn, not the origin.
  EXPECT_NEAR(rb.features[0], 1.0f, 1e-7);
  EXPECT_NEAR(rb.features[1], 0.0f, 1e-7);
  EXPECT_EQ(rb.state.first_timestamp_ns, first[0]);
  EXPECT_EQ(rb.state.last_timestamp_ns, second[0]);
}

TEST(EncodeObservations, ChunkedEqualsWholeWide) {
  const WideSeries series(700, 17);
  ExpectChunkedEqualsWhole(FullSpec(), series, /*with_content=*/false, 1);
  ExpectChunkedEqualsWhole(FullSpec(), series, /*with_content=*/true, 2);
  ExpectChunkedEqualsWhole(
      FullSpec(FirstObservationPolicy::kSinceOrigin, GapTransform::kSinusoidal),
      series, false, 3);
  ExpectChunkedEqualsWhole(
      FullSpec(FirstObservationPolicy::kZero, GapTransform::kRaw), series, true, 4);
}

TEST(EncodeObservations, ChunkedEqualsWholeLong) {
  const LongSeries series(900, 23);
  TemporalSpec spec = FullSpec();
  spec.calendar->time_zone = "Australia/Lord_Howe";
  ExpectChunkedEqualsWhole(spec, series, false, 5);
  ExpectChunkedEqualsWhole(
      FullSpec(FirstObservationPolicy::kSinceOrigin, GapTransform::kRaw), series,
      false, 6);
}

TEST(EncodeObservations, ThreadCountDoesNotChangeBytes) {
  const WideSeries wide(5000, 29);
  const LongSeries events(5000, 31);
  for (const TemporalSpec& spec :
       {FullSpec(), FullSpec(FirstObservationPolicy::kSinceOrigin,
                             GapTransform::kSinusoidal)}) {
    const Result serial = Encode(spec, wide.View(0, wide.rows(), true), nullptr);
    const Result serial_long = Encode(spec, events.View(0, events.rows(), false), nullptr);
    PHASOR_ASSERT_OK(serial.status);
    PHASOR_ASSERT_OK(serial_long.status);
    for (int threads : {2, 3, 4, 7}) {
      const ExecutionOptions options{.max_threads = threads, .grain_elements = 1};
      const Result parallel =
          Encode(spec, wide.View(0, wide.rows(), true), nullptr, options);
      PHASOR_ASSERT_OK(parallel.status);
      EXPECT_TRUE(SameBytes(parallel.features, serial.features)) << threads;
      ExpectSameState(parallel.state, serial.state);
      const Result parallel_long =
          Encode(spec, events.View(0, events.rows(), false), nullptr, options);
      PHASOR_ASSERT_OK(parallel_long.status);
      EXPECT_TRUE(SameBytes(parallel_long.features, serial_long.features)) << threads;
    }
  }
}

TEST(EncodeObservations, SumAddsBlocksAtDModelWithInformerCalendarTables) {
  const int64_t d = 16;
  const WideSeries base(300, 37);
  // Content of width d_model.
  std::vector<float> content(base.rows() * d);
  for (size_t i = 0; i < content.size(); ++i) content[i] = std::sin(0.37 * i);
  ObservationsView obs;
  obs.timestamps = base.times;
  obs.content = content;
  obs.content_dim = d;

  TemporalSpec sum;
  sum.combine = CombineMode::kSum;
  sum.d_model = d;
  sum.content = ContentBlock{2.0};
  sum.time = TimeBlock{0, 60.0, 1e6, OriginKind::kUnixEpoch, 0, {}};
  Time2VecBlock t2v;
  for (int64_t i = 0; i < d; ++i) {
    t2v.omega.push_back(1e-9 * (i + 1));
    t2v.phi.push_back(0.1 * i);
  }
  sum.time2vec = t2v;
  GapsBlock gaps;
  gaps.per_channel_delta = false;
  gaps.transform = GapTransform::kSinusoidal;
  gaps.sinusoidal_dim = 0;
  gaps.sinusoidal_min_period_seconds = 10;
  gaps.sinusoidal_max_period_seconds = 1e5;
  sum.gaps = gaps;
  CalendarBlock cal;
  cal.time_zone = "America/New_York";
  cal.fields = {CalendarField::kMonthOfYear, CalendarField::kDayOfMonth,
                CalendarField::kDayOfWeek, CalendarField::kHourOfDay,
                CalendarField::kMinuteOfHour};
  sum.calendar = cal;
  const Result summed = Encode(sum, obs, nullptr);
  PHASOR_ASSERT_OK(summed.status);
  ASSERT_EQ(summed.features.size(), static_cast<size_t>(base.rows() * d));

  // The same blocks one at a time under CONCAT (time at dim d, gaps with a
  // d-wide sinusoid), and the calendar's civil values through INDEX.
  auto alone = [&](std::function<void(TemporalSpec&)> set) {
    TemporalSpec one;
    set(one);
    const Result r = Encode(one, obs, nullptr);
    EXPECT_TRUE(r.status.ok()) << r.status;
    return r.features;
  };
  const auto time = alone([&](TemporalSpec& s) {
    s.time = sum.time;
    s.time->dim = d;
  });
  const auto time2vec = alone([&](TemporalSpec& s) { s.time2vec = sum.time2vec; });
  const auto gap = alone([&](TemporalSpec& s) {
    s.gaps = sum.gaps;
    s.gaps->sinusoidal_dim = d;
  });
  const auto index = alone([&](TemporalSpec& s) {
    s.calendar = cal;
    s.calendar->encoding = CalendarEncoding::kIndex;
  });
  double worst = 0;
  for (int64_t r = 0; r < base.rows(); ++r) {
    for (int64_t j = 0; j < d; ++j) {
      double expected = 2.0 * content[r * d + j] + time[r * d + j] +
                        time2vec[r * d + j] + gap[r * d + j];
      // Informer FixedEmbedding: w[pos, 2i] = sin(pos·div), w[pos, 2i+1] =
      // cos(pos·div), div = exp(2i · −ln(10000)/d_model).
      const int64_t i = j / 2;
      const double div = std::exp(2.0 * i * -(std::log(10000.0) / d));
      for (size_t f = 0; f < cal.fields.size(); ++f) {
        const double pos = index[r * cal.fields.size() + f];
        expected += j % 2 == 0 ? std::sin(pos * div) : std::cos(pos * div);
      }
      worst = std::max(worst, std::fabs(summed.features[r * d + j] - expected));
    }
  }
  EXPECT_LT(worst, 1e-5);
  // Schema: every block spans all columns.
  const absl::StatusOr<FeatureLayout> layout = TemporalFeatureLayout(sum, 0, d);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->width, d);
  for (const SchemaEntry& e : layout->schema) {
    EXPECT_EQ(e.offset, 0) << e.block;
    EXPECT_EQ(e.width, d) << e.block;
  }
}

// The caller's stop predicate is polled between blocks of rows, not only
// once: a stop that comes mid-call ends it with CANCELLED. A predicate that
// never fires changes nothing.
TEST(EncodeObservations, StopRequestedEndsTheCallBetweenRowBlocks) {
  const WideSeries series(4000, 43);
  const ObservationsView obs = series.View(0, series.rows(), true);
  const Result plain = Encode(FullSpec(), obs, nullptr);
  PHASOR_ASSERT_OK(plain.status);
  // 50 columns (content 4, time 8, time2vec 3, gaps 14, calendar 21): a
  // 600-value grain is 12 rows, so the rows give 334 polls; with two threads
  // the second chunk first replays the gaps memory of rows 0..1999 (3
  // channels a row), polling every 200 rows, 10 more times.
  for (int threads : {1, 2}) {
    std::atomic<int> polls{0};
    const std::function<bool()> never = [&polls] {
      ++polls;
      return false;
    };
    const ExecutionOptions watched{.max_threads = threads,
                                   .grain_elements = 600,
                                   .stop_requested = &never};
    const Result same = Encode(FullSpec(), obs, nullptr, watched);
    PHASOR_ASSERT_OK(same.status);
    EXPECT_TRUE(SameBytes(same.features, plain.features)) << threads;
    ExpectSameState(same.state, plain.state);
    EXPECT_GE(polls.load(), (threads > 1 ? 10 : 0) + 334) << threads;

    // Stops on the 40th poll, inside the rows.
    std::atomic<int> calls{0};
    const std::function<bool()> later = [&calls] { return ++calls >= 40; };
    const ExecutionOptions stopping{.max_threads = threads,
                                    .grain_elements = 600,
                                    .stop_requested = &later};
    const Result stopped = Encode(FullSpec(), obs, nullptr, stopping);
    EXPECT_EQ(stopped.status.code(), absl::StatusCode::kCancelled) << threads;
    // Each thread stops at its next poll: far fewer polls than a full run.
    EXPECT_LT(calls.load(), polls.load() / 2) << threads;
  }
}

// The gaps memory is per channel, so copies of it must not multiply with
// the rows: 200k events declared over 2^20 channels once took 256
// checkpoints of 40 MB each (10 GB). Each chunk now holds one, and the call
// fits in 2 GiB of address space (set in a child process, where running out
// aborts).
TEST(EncodeObservationsDeathTest, ManyChannelsKeepCheckpointMemoryBounded) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto encode = [] {
    const rlimit limit{int64_t{2} << 30, int64_t{2} << 30};
    if (setrlimit(RLIMIT_AS, &limit) != 0) std::exit(3);
    const int64_t events = 200000;
    std::vector<int64_t> times(events);
    for (int64_t i = 0; i < events; ++i) times[i] = i * kSec;
    const std::vector<int32_t> channels(events, 0);
    const std::vector<float> values(events, 1.0f);
    ObservationsView obs;
    obs.layout = ObservationLayout::kLong;
    obs.num_channels = kMaxChannels;
    obs.event_times = times;
    obs.event_channels = channels;
    obs.event_values.f32 = values;
    GapsBlock gaps;
    gaps.per_channel_delta = false;  // One column: Δt.
    TemporalSpec spec;
    spec.gaps = gaps;
    const Result result =
        Encode(spec, obs, nullptr, ExecutionOptions{.max_threads = 2});
    // Row i is 1 s after row i − 1.
    const bool ok = result.status.ok() && result.features.size() == 200000u &&
                    result.features[1] == 1.0f &&
                    result.state.channels.size() == static_cast<size_t>(kMaxChannels);
    std::exit(ok ? 0 : 1);
  };
  EXPECT_EXIT(encode(), ::testing::ExitedWithCode(0), "");
}

// Informer's calendar tables under combine SUM hold 367 rows of d_model for
// day_of_year alone: a one-row request at d_model 65536 once built 326 MB of
// tables for 256 KB of output. Tables are now built only while they are no
// larger than the output; the call fits in 256 MiB of address space.
TEST(EncodeObservationsDeathTest, SumCalendarTablesDoNotOutgrowTheOutput) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto encode = [] {
    const rlimit limit{int64_t{256} << 20, int64_t{256} << 20};
    if (setrlimit(RLIMIT_AS, &limit) != 0) std::exit(3);
    const std::vector<int64_t> times = {UtcNs(2026, 7, 4, 12)};
    ObservationsView obs;
    obs.timestamps = times;
    TemporalSpec spec;
    spec.combine = CombineMode::kSum;
    spec.d_model = kMaxEncodingWidth;
    CalendarBlock cal;
    cal.fields = {CalendarField::kDayOfYear, CalendarField::kWeekOfYear,
                  CalendarField::kDayOfMonth, CalendarField::kMinuteOfHour};
    spec.calendar = cal;
    const Result result = Encode(spec, obs, nullptr);
    // Column 0 is Σ sin(v·ω_0) with ω_0 = 1: day 185, ISO week 27, day 4,
    // minute 0 (2026-07-04 12:00 UTC).
    const double expected = std::sin(185.0) + std::sin(27.0) + std::sin(4.0);
    const bool ok = result.status.ok() &&
                    result.features.size() == static_cast<size_t>(kMaxEncodingWidth) &&
                    std::fabs(result.features[0] - expected) < 1e-6;
    std::exit(ok ? 0 : 1);
  };
  EXPECT_EXIT(encode(), ::testing::ExitedWithCode(0), "");
}

TEST(EncodeObservations, EmptyChunkKeepsTheState) {
  const WideSeries series(40, 41);
  const Result first = Encode(FullSpec(), series.View(0, 20, false), nullptr);
  PHASOR_ASSERT_OK(first.status);
  const Result empty = Encode(FullSpec(), series.View(20, 20, false), &first.state);
  PHASOR_ASSERT_OK(empty.status);
  EXPECT_TRUE(empty.features.empty());
  ExpectSameState(empty.state, first.state);
}

// Guards against signed overflow on extreme timestamps: every block at the
// ends of int64 nanoseconds (INT64_MIN itself is NaT and rejected), with
// origins at the far end, so t − origin spans 2^64 ns. Under
// -fsanitize=undefined this failed in the calendar block (its subsecond
// part overflowed for instants before −9223372036 s); everywhere it must
// give finite features.
TEST(EncodeObservations, ExtremeTimestampsAndOriginsGiveFiniteFeatures) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::vector<int64_t> times = {kMin + 1, kMin + 2, -1, 0, kMax - 1, kMax};
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  ObservationsView obs;
  obs.num_channels = 1;
  obs.timestamps = times;
  obs.values.f32 = values;
  for (const GapTransform transform :
       {GapTransform::kRaw, GapTransform::kLog1p, GapTransform::kSinusoidal}) {
    for (const int64_t origin : {kMin + 1, int64_t{0}, kMax}) {
      TemporalSpec spec = FullSpec(FirstObservationPolicy::kSinceOrigin, transform);
      spec.time->origin = OriginKind::kExplicit;
      spec.time->origin_ns = origin;
      spec.time2vec->origin = OriginKind::kExplicit;
      spec.time2vec->origin_ns = origin;
      spec.gaps->origin = OriginKind::kExplicit;
      spec.gaps->origin_ns = origin;
      const Result result = Encode(spec, obs, nullptr);
      PHASOR_ASSERT_OK(result.status);
      for (size_t i = 0; i < result.features.size(); ++i) {
        ASSERT_TRUE(std::isfinite(result.features[i]))
            << "feature " << i << " origin " << origin;
      }
      EXPECT_EQ(result.state.first_timestamp_ns, kMin + 1);
      EXPECT_EQ(result.state.last_timestamp_ns, kMax);
    }
  }
}

// Float64 outputs: narrowed to float32, in chunks, threads and panels, content in double.
namespace float64_output {

// The float64 features of a spec, as EncodeObservations writes them.
struct DoubleResult {
  absl::Status status;
  std::vector<double> features;
  SeriesState state;
};

DoubleResult EncodeF64(const TemporalSpec& spec, const ObservationsView& obs,
                       const SeriesState* state_in, ExecutionOptions options = {}) {
  DoubleResult result;
  absl::StatusOr<FeatureLayout> layout = TemporalFeatureLayout(
      spec, obs.num_channels, obs.has_content() ? obs.content_dim : 0);
  if (!layout.ok()) {
    result.status = layout.status();
    return result;
  }
  result.features.resize(obs.num_rows() * layout->width);
  result.status = EncodeObservations(spec, obs, state_in, options,
                                     absl::MakeSpan(result.features), &result.state);
  return result;
}

// Float64 narrowed to float32 against the float32 output. Both round a
// double once; the two doubles differ only in the sinusoid and CYCLIC
// columns, by at most the float32 path's angle error (≤ 5.2e-16 rad before
// the sine, core/math/sincos.h) plus the float64 path's (≤ 1.7e-16): so the
// float32 values are equal, or one float32 ulp apart where the exact value
// lies that close to a float32 rounding boundary, or, for a sine or cosine
// within ~1e-8 of zero (where a float32 ulp is below that absolute
// difference), up to 7e-16 apart. Returns the count of unequal values.
int64_t CompareNarrowed(const std::vector<double>& f64, const std::vector<float>& f32,
                        int64_t* beyond_one_ulp) {
  EXPECT_EQ(f64.size(), f32.size());
  int64_t differing = 0;
  for (size_t i = 0; i < std::min(f64.size(), f32.size()); ++i) {
    const float narrowed = static_cast<float>(f64[i]);
    if (narrowed == f32[i]) continue;
    ++differing;
    if (std::nextafter(narrowed, f32[i]) == f32[i]) continue;
    ++*beyond_one_ulp;
    EXPECT_LE(std::fabs(static_cast<double>(narrowed) - f32[i]), 7e-16)
        << "value " << i << ": float64 " << f64[i] << " float32 " << f32[i];
    EXPECT_LT(std::fabs(f64[i]), 1e-8) << "value " << i;
  }
  return differing;
}

TEST(EncodeObservationsFloat64, NarrowedMatchesTheFloat32Output) {
  int64_t values = 0;
  int64_t differing = 0;
  int64_t beyond_one_ulp = 0;
  for (GapTransform transform :
       {GapTransform::kRaw, GapTransform::kLog1p, GapTransform::kSinusoidal}) {
    const TemporalSpec spec = FullSpec(FirstObservationPolicy::kFlag, transform);
    const WideSeries wide(3000, 21);
    const LongSeries events(3000, 22);
    for (const ObservationsView& obs :
         {wide.View(0, wide.rows(), /*with_content=*/true),
          events.View(0, events.rows(), false)}) {
      TemporalSpec s = spec;
      if (!obs.has_content()) s.content.reset();
      const Result f32 = Encode(s, obs, nullptr);
      const DoubleResult f64 = EncodeF64(s, obs, nullptr);
      PHASOR_ASSERT_OK(f32.status);
      PHASOR_ASSERT_OK(f64.status);
      differing += CompareNarrowed(f64.features, f32.features, &beyond_one_ulp);
      values += static_cast<int64_t>(f64.features.size());
      ExpectSameState(f64.state, f32.state);
    }
  }
  std::printf("float64 -> float32: %lld of %lld values differ from the float32 "
              "output, %lld by more than one float32 ulp (all within 7e-16)\n",
              static_cast<long long>(differing), static_cast<long long>(values),
              static_cast<long long>(beyond_one_ulp));
  // Tiny gaps (a few ns against a 60 s period) give sines near 1e-10.
  EXPECT_LE(differing, values / 10000);
}

TEST(EncodeObservationsFloat64, ChunksThreadsAndPanelsGiveTheSameBytes) {
  const TemporalSpec spec = FullSpec(FirstObservationPolicy::kSinceOrigin,
                                     GapTransform::kSinusoidal);
  const WideSeries wide(2000, 31);
  const ObservationsView all = wide.View(0, wide.rows(), true);
  const DoubleResult whole = EncodeF64(spec, all, nullptr);
  PHASOR_ASSERT_OK(whole.status);
  // Chunked, the state carried between the calls.
  std::vector<double> chunked;
  SeriesState state;
  const SeriesState* in = nullptr;
  for (int64_t begin = 0; begin < wide.rows(); begin += 333) {
    const int64_t end = std::min(wide.rows(), begin + 333);
    const DoubleResult part = EncodeF64(spec, wide.View(begin, end, true), in);
    PHASOR_ASSERT_OK(part.status);
    chunked.insert(chunked.end(), part.features.begin(), part.features.end());
    state = part.state;
    in = &state;
  }
  EXPECT_EQ(chunked, whole.features);
  ExpectSameState(state, whole.state);
  // Threads: 1 == 4, small grains.
  ExecutionOptions threads;
  threads.max_threads = 4;
  threads.grain_elements = 1000;
  const DoubleResult parallel = EncodeF64(spec, all, nullptr, threads);
  PHASOR_ASSERT_OK(parallel.status);
  EXPECT_EQ(parallel.features, whole.features);
  // A panel of the whole series and two halves of it.
  const int64_t half = wide.rows() / 2;
  const int64_t offsets[] = {0, half, wide.rows()};
  const PanelView panel{all, offsets, {}};
  std::vector<double> panel_out(whole.features.size());
  std::vector<SeriesState> states(2);
  PHASOR_ASSERT_OK(EncodePanel(spec, panel, {}, {}, threads, absl::MakeSpan(panel_out),
                        absl::MakeSpan(states)));
  const DoubleResult first = EncodeF64(spec, wide.View(0, half, true), nullptr);
  const DoubleResult second = EncodeF64(spec, wide.View(half, wide.rows(), true), nullptr);
  std::vector<double> separate = first.features;
  separate.insert(separate.end(), second.features.begin(), second.features.end());
  EXPECT_EQ(panel_out, separate);
  // A float32 output for a float64 call's size is refused, and vice versa.
  std::vector<double> short_out(whole.features.size() - 1);
  EXPECT_EQ(EncodeObservations(spec, all, nullptr, {}, absl::MakeSpan(short_out), nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EncodeObservationsFloat64, Float64ContentIsScaledInDouble) {
  TemporalSpec spec;
  spec.content = ContentBlock{1.0 / 3.0};
  const std::vector<int64_t> times = {0, 1000, 2000};
  const std::vector<double> content = {0.1, 1e-300, 1.0 + 0x1p-52,
                                       -7.25, 3.0000000000000004, 1e300};
  ObservationsView obs;
  obs.timestamps = times;
  obs.content_f64 = content;
  obs.content_dim = 2;
  // 3 rows x 2 columns, not 6 rows x 1.
  std::vector<double> out(6);
  std::vector<float> out32(6);
  ObservationsView too_short = obs;
  too_short.content_f64 = absl::MakeConstSpan(content).subspan(0, 4);
  EXPECT_EQ(EncodeObservations(spec, too_short, nullptr, {}, absl::MakeSpan(out), nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
  PHASOR_ASSERT_OK(EncodeObservations(spec, obs, nullptr, {}, absl::MakeSpan(out), nullptr));
  PHASOR_ASSERT_OK(EncodeObservations(spec, obs, nullptr, {}, absl::MakeSpan(out32), nullptr));
  for (size_t i = 0; i < content.size(); ++i) {
    EXPECT_EQ(out[i], content[i] * (1.0 / 3.0)) << i;
    EXPECT_EQ(out32[i], static_cast<float>(content[i] * (1.0 / 3.0))) << i;
  }
  // Both dtypes at once, or a non-finite value, are refused.
  const std::vector<float> content32(6, 1.0f);
  ObservationsView both = obs;
  both.content = content32;
  EXPECT_EQ(EncodeObservations(spec, both, nullptr, {}, absl::MakeSpan(out), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<double> bad = content;
  bad[3] = std::nan("");
  ObservationsView with_nan = obs;
  with_nan.content_f64 = bad;
  const absl::Status status =
      EncodeObservations(spec, with_nan, nullptr, {}, absl::MakeSpan(out), nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("observations.content[3]"), std::string::npos)
      << status.message();
}

}  // namespace float64_output

}  // namespace
}  // namespace phasor
