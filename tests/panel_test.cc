// Panels: S series in one EncodePanel call give, series by series, the bytes
// and states of S separate EncodeObservations calls, for any thread count
// and chunking; errors name the series and its own row.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/temporal/calendar.h"
#include "core/temporal/compose.h"
#include "core/temporal/time_zone.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/temporal_test_data.h"

namespace phasor {
namespace {

constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

const std::vector<std::string>& ZoneNames() {
  static const auto* names = new std::vector<std::string>{
      "America/New_York", "Europe/Berlin", "Asia/Kolkata", "UTC",
      "Australia/Lord_Howe"};
  return *names;
}

std::vector<absl::TimeZone> LoadZones() {
  std::vector<absl::TimeZone> zones;
  for (const std::string& name : ZoneNames()) {
    absl::StatusOr<absl::TimeZone> zone = LoadIanaTimeZone(name, "zone");
    EXPECT_TRUE(zone.ok()) << zone.status();
    zones.push_back(*zone);
  }
  return zones;
}

// One series of a panel: rows [begin, end) of its own generated series,
// continued from the state of rows [0, begin) when begin > 0.
template <typename Series>
struct Member {
  Series data;
  int64_t begin;
  int64_t end;
  int32_t zone;
  SeriesState state;  // After rows [0, begin); meaningful when begin > 0.
};

// The panel's tensors: every member's rows, stacked.
struct Stacked {
  std::vector<int64_t> times;
  std::vector<double> values_f64;
  std::vector<float> values_f32;
  std::vector<int32_t> channels;
  std::vector<float> content;
  std::vector<int64_t> offsets = {0};
  std::vector<int32_t> zone_index;
  std::vector<const SeriesState*> states;
  PanelView panel;
};

void Append(const WideSeries& data, int64_t begin, int64_t end, Stacked* out) {
  for (int64_t r = begin; r < end; ++r) {
    out->times.push_back(data.times[r]);
    for (int64_t c = 0; c < data.channels; ++c) {
      out->values_f64.push_back(data.values[r * data.channels + c]);
    }
    for (int64_t j = 0; j < data.content_dim; ++j) {
      out->content.push_back(data.content[r * data.content_dim + j]);
    }
  }
}

void Append(const LongSeries& data, int64_t begin, int64_t end, Stacked* out) {
  for (int64_t r = begin; r < end; ++r) {
    out->times.push_back(data.times[r]);
    out->channels.push_back(data.event_channels[r]);
    out->values_f32.push_back(data.values[r]);
  }
}

template <typename Series>
void Stack(const std::vector<Member<Series>>& members, bool wide, bool with_content,
           int64_t num_channels, Stacked* out) {
  for (const Member<Series>& m : members) {
    Append(m.data, m.begin, m.end, out);
    out->offsets.push_back(static_cast<int64_t>(out->times.size()));
    out->zone_index.push_back(m.zone);
    out->states.push_back(m.begin > 0 ? &m.state : nullptr);
  }
  ObservationsView& v = out->panel.rows;
  v.num_channels = num_channels;
  if (wide) {
    v.layout = ObservationLayout::kWide;
    v.timestamps = out->times;
    v.values.f64 = out->values_f64;
    if (with_content) {
      v.content = out->content;
      v.content_dim = 4;
    }
  } else {
    v.layout = ObservationLayout::kLong;
    v.event_times = out->times;
    v.event_channels = out->channels;
    v.event_values.f32 = out->values_f32;
  }
  out->panel.series_offsets = out->offsets;
  out->panel.zone_index = out->zone_index;
}

// Random members: empty, one-row and longer series, some continuing from a
// state, in random zones.
template <typename Series>
std::vector<Member<Series>> RandomMembers(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Member<Series>> members;
  for (int i = 0; i < count; ++i) {
    const int kind = static_cast<int>(rng() % 6);
    const int length = kind == 0 ? 0 : kind == 1 ? 1 : 2 + static_cast<int>(rng() % 300);
    const int64_t begin = rng() % 3 == 0 ? static_cast<int64_t>(rng() % 40) : 0;
    Series data(static_cast<int>(begin) + length, seed * 1000 + i);
    members.push_back(Member<Series>{std::move(data), begin, begin + length,
                                     static_cast<int32_t>(rng() % ZoneNames().size()),
                                     SeriesState{}});
  }
  return members;
}

// Encodes each member alone (its zone in the spec, its prefix's state) and
// the whole panel with `options`, and compares bytes and states.
template <typename Series>
void ExpectPanelEqualsSeparateCalls(const TemporalSpec& spec,
                                    std::vector<Member<Series>> members, bool wide,
                                    bool with_content, int64_t num_channels,
                                    const ExecutionOptions& options) {
  std::vector<std::vector<float>> expected;
  std::vector<SeriesState> expected_states;
  for (Member<Series>& m : members) {
    TemporalSpec own = spec;
    own.calendar->time_zone = ZoneNames()[m.zone];
    const SeriesState* in = nullptr;
    if (m.begin > 0) {
      const Result prefix = Encode(own, m.data.View(0, m.begin, with_content), nullptr);
      ASSERT_TRUE(prefix.status.ok()) << prefix.status;
      m.state = prefix.state;
      in = &m.state;
    }
    const Result alone = Encode(own, m.data.View(m.begin, m.end, with_content), in);
    ASSERT_TRUE(alone.status.ok()) << alone.status;
    expected.push_back(alone.features);
    expected_states.push_back(alone.state);
  }
  Stacked stacked;
  Stack(members, wide, with_content, num_channels, &stacked);
  const absl::StatusOr<FeatureLayout> layout = TemporalFeatureLayout(
      spec, num_channels, with_content ? 4 : 0);
  ASSERT_TRUE(layout.ok()) << layout.status();
  std::vector<float> out(stacked.times.size() * layout->width);
  std::vector<SeriesState> states(members.size());
  const std::vector<absl::TimeZone> zones = LoadZones();
  PHASOR_ASSERT_OK(EncodePanel(spec, stacked.panel, zones, stacked.states, options,
                               absl::MakeSpan(out), absl::MakeSpan(states)));
  for (size_t s = 0; s < members.size(); ++s) {
    const int64_t begin = stacked.offsets[s] * layout->width;
    const int64_t end = stacked.offsets[s + 1] * layout->width;
    const std::vector<float> got(out.begin() + begin, out.begin() + end);
    EXPECT_TRUE(SameBytes(got, expected[s]))
        << "series " << s << " of " << members.size() << ", rows "
        << stacked.offsets[s] << ".." << stacked.offsets[s + 1];
    ExpectSameState(states[s], expected_states[s]);
  }
}

TEST(EncodePanel, WideEqualsSeparateCallsForAnyThreadCount) {
  for (int threads : {1, 2, 4}) {
    // A 600-value grain puts chunk starts inside series, past checkpoints.
    const ExecutionOptions options{.max_threads = threads, .grain_elements = 600};
    ExpectPanelEqualsSeparateCalls(FullSpec(), RandomMembers<WideSeries>(40, threads),
                                   /*wide=*/true, /*with_content=*/true, 3, options);
    ExpectPanelEqualsSeparateCalls(FullSpec(FirstObservationPolicy::kSinceOrigin,
                                            GapTransform::kSinusoidal),
                                   RandomMembers<WideSeries>(25, 10 + threads),
                                   /*wide=*/true, /*with_content=*/false, 3, options);
  }
}

TEST(EncodePanel, LongEqualsSeparateCallsForAnyThreadCount) {
  for (int threads : {1, 3}) {
    const ExecutionOptions options{.max_threads = threads, .grain_elements = 500};
    ExpectPanelEqualsSeparateCalls(FullSpec(), RandomMembers<LongSeries>(40, 7 + threads),
                                   /*wide=*/false, /*with_content=*/false, 4, options);
  }
}

TEST(EncodePanel, EveryKindOfShortPanel) {
  // Only empty series, a lone one-row series, one big series among empty ones.
  const ExecutionOptions two{.max_threads = 2, .grain_elements = 100};
  std::vector<Member<WideSeries>> empties;
  for (int i = 0; i < 5; ++i) empties.push_back({WideSeries(0, i), 0, 0, 0, {}});
  ExpectPanelEqualsSeparateCalls(FullSpec(), empties, true, false, 3, two);
  ExpectPanelEqualsSeparateCalls(FullSpec(),
                                 std::vector<Member<WideSeries>>{{WideSeries(1, 3), 0, 1, 2, {}}}, true,
                                 false, 3, two);
  std::vector<Member<WideSeries>> big = empties;
  big.insert(big.begin() + 2, {WideSeries(3000, 9), 0, 3000, 1, {}});
  ExpectPanelEqualsSeparateCalls(FullSpec(), big, true, true, 3, two);
}

// A panel of three wide series; series 1 has rows 3..5.
struct SmallPanel {
  WideSeries a{3, 1}, b{3, 2}, c{3, 3};
  Stacked stacked;
  SmallPanel() {
    std::vector<Member<WideSeries>> members = {
        {a, 0, 3, 0, {}}, {b, 0, 3, 1, {}}, {c, 0, 3, 2, {}}};
    Stack(members, true, false, 3, &stacked);
  }
  absl::Status Run(const std::vector<const SeriesState*>& states = {},
                   size_t num_zones = 5) {
    std::vector<absl::TimeZone> zones = LoadZones();
    zones.resize(num_zones);
    std::vector<float> out(stacked.times.size() * 1000);
    return EncodePanel(FullSpec(), stacked.panel, zones, states, {},
                       absl::MakeSpan(out), {});
  }
};

TEST(EncodePanel, ErrorsNameTheSeriesAndItsOwnRow) {
  {
    SmallPanel p;
    std::swap(p.stacked.times[4], p.stacked.times[5]);  // Series 1, rows 1 and 2.
    if (p.stacked.times[4] != p.stacked.times[5]) {
      EXPECT_THAT(p.Run(), IsFieldError(kInvalid, "observations.series[1].timestamps[2]"));
    }
  }
  {
    SmallPanel p;
    p.stacked.times[6] = kNotATimeNs;
    EXPECT_THAT(p.Run(), IsFieldError(kInvalid, "observations.series[2].timestamps[0]"));
  }
  {
    SmallPanel p;
    p.stacked.values_f64[3 * 3 + 1] = INFINITY;  // Series 1, row 0, channel 1.
    EXPECT_THAT(p.Run(), IsFieldError(kInvalid, "observations.series[1].values[1]"));
  }
  {
    SmallPanel p;
    p.stacked.offsets[0] = 1;
    EXPECT_THAT(p.Run(), IsFieldError(kInvalid, "observations.series_offsets[0]"));
  }
  {
    SmallPanel p;
    p.stacked.offsets[2] = 2;  // Decreasing after 3.
    EXPECT_THAT(p.Run(), IsFieldError(kInvalid, "observations.series_offsets[2]"));
  }
  {
    SmallPanel p;
    p.stacked.offsets[3] = 8;  // Not the row count 9.
    EXPECT_THAT(p.Run(), IsFieldError(kInvalid, "observations.series_offsets[3]"));
  }
  {
    SmallPanel p;
    p.stacked.zone_index[2] = 4;
    EXPECT_THAT(p.Run({}, 4), IsFieldError(kInvalid, "observations.time_zone_index[2]"));
  }
  {
    SmallPanel p;
    const SeriesState none;
    EXPECT_THAT(p.Run({&none}), IsFieldError(kInvalid, "states"));
    // Series 2's state has no channels; the panel has 3.
    EXPECT_THAT(p.Run({nullptr, nullptr, &none}),
                IsFieldError(kInvalid, "states[2].channels"));
  }
  {
    SmallPanel p;
    // A state that ends after series 0's first row.
    const Result later = Encode(FullSpec(), p.c.View(0, 3, false), nullptr);
    PHASOR_ASSERT_OK(later.status);
    SeriesState state = later.state;
    state.last_timestamp_ns = p.stacked.times[0] + 1;
    state.first_timestamp_ns = p.stacked.times[0] + 1;
    for (ChannelState& c : state.channels) c = ChannelState{};
    EXPECT_THAT(p.Run({&state, nullptr, nullptr}),
                IsFieldError(kInvalid, "observations.series[0].timestamps[0]"));
  }
}


// Calendar fields Informer's SUM tables cover, nothing else (d_model 8).
TemporalSpec SumSpec() {
  TemporalSpec spec;
  spec.combine = CombineMode::kSum;
  spec.d_model = 8;
  spec.time = TimeBlock{0, 1.0, 1e7, OriginKind::kFirstObservation, 0, {}};
  CalendarBlock cal;
  cal.time_zone = "Europe/Berlin";
  cal.fields = {CalendarField::kHourOfDay, CalendarField::kDayOfWeek};
  spec.calendar = cal;
  return spec;
}

// EncodeValidatedPanel's output bytes (features, then each state's fields
// that the tracker writes) with `encoders`, or building its own when null.
template <typename T>
std::string EncodeWith(const TemporalSpec& spec, const PanelView& panel,
                       absl::Span<const absl::TimeZone> zones,
                       const std::vector<const SeriesState*>& states_in, int threads,
                       const TemporalEncoders* encoders) {
  const absl::StatusOr<FeatureLayout> layout =
      TemporalFeatureLayout(spec, panel.rows.num_channels, 0);
  EXPECT_TRUE(layout.ok()) << layout.status();
  std::vector<T> out(static_cast<size_t>(panel.rows.num_rows() * layout->width));
  std::vector<SeriesState> states(static_cast<size_t>(panel.num_series()));
  const ExecutionOptions options{.max_threads = threads, .grain_elements = 600};
  const absl::Status status =
      EncodeValidatedPanel(spec, *layout, panel, zones, states_in, options,
                           absl::MakeSpan(out), absl::MakeSpan(states), encoders);
  EXPECT_TRUE(status.ok()) << status;
  std::string bytes(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(T));
  for (const SeriesState& state : states) {
    absl::StrAppend(&bytes, "|", state.has_rows, ",", state.first_timestamp_ns, ",",
                    state.last_timestamp_ns);
    for (const ChannelState& c : state.channels) {
      absl::StrAppend(&bytes, ";", c.seen, ",", c.last_seen_ns, ",", c.last_value);
    }
  }
  return bytes;
}

// Encoders built once and passed in give the bytes of calls that build their
// own: panels in the spec's zone and in per-series zones, float32 and
// float64 outputs, a SUM calendar (which is built per call either way), any
// thread count, and one set of encoders shared by calls on four threads.
TEST(TemporalEncoders, SharedGiveTheBytesOfCallsBuildingTheirOwn) {
  const std::vector<absl::TimeZone> zones = LoadZones();
  const std::vector<TemporalSpec> specs = {
      FullSpec(), FullSpec(FirstObservationPolicy::kSinceOrigin, GapTransform::kSinusoidal),
      SumSpec()};
  for (size_t k = 0; k < specs.size(); ++k) {
    const TemporalSpec& spec = specs[k];
    const int64_t channels = 3;
    // Every member from its first row, so that no state is needed.
    std::vector<Member<WideSeries>> members = RandomMembers<WideSeries>(30, 50 + k);
    for (Member<WideSeries>& m : members) {
      m.end -= m.begin;
      m.begin = 0;
    }
    Stacked per_zone;
    Stack(members, /*wide=*/true, /*with_content=*/false, channels, &per_zone);
    Stacked spec_zone;
    Stack(members, true, false, channels, &spec_zone);
    spec_zone.zone_index.clear();
    spec_zone.panel.zone_index = {};
    const absl::StatusOr<TemporalEncoders> f32 =
        TemporalEncoders::Make(spec, channels, SinusoidAccuracy::kFloat32);
    const absl::StatusOr<TemporalEncoders> f64 =
        TemporalEncoders::Make(spec, channels, SinusoidAccuracy::kFloat64);
    PHASOR_ASSERT_OK(f32.status());
    PHASOR_ASSERT_OK(f64.status());
    EXPECT_EQ(f32->calendar() == nullptr, spec.combine == CombineMode::kSum) << "spec " << k;
    EXPECT_GT(f32->approximate_bytes(), sizeof(TemporalEncoders));
    if (spec.gaps.has_value() && spec.gaps->transform == GapTransform::kSinusoidal) {
      // A wide gaps sinusoid is charged its ladder (a cache's bound).
      TemporalSpec wide_gaps = spec;
      wide_gaps.gaps->sinusoidal_dim = 65536;
      const absl::StatusOr<TemporalEncoders> wide =
          TemporalEncoders::Make(wide_gaps, channels, SinusoidAccuracy::kFloat32);
      PHASOR_ASSERT_OK(wide.status());
      EXPECT_GE(wide->approximate_bytes(), size_t{65536} * 16) << "spec " << k;
    }
    for (int threads : {1, 2}) {
      for (const Stacked* stacked : {&spec_zone, &per_zone}) {
        const absl::Span<const absl::TimeZone> call_zones =
            stacked == &per_zone ? absl::MakeConstSpan(zones)
                                 : absl::Span<const absl::TimeZone>();
        const std::string own = EncodeWith<float>(spec, stacked->panel, call_zones,
                                                  stacked->states, threads, nullptr);
        EXPECT_EQ(own, EncodeWith<float>(spec, stacked->panel, call_zones, stacked->states,
                                         threads, &*f32))
            << "spec " << k << ", threads " << threads;
        const std::string own64 = EncodeWith<double>(spec, stacked->panel, call_zones,
                                                     stacked->states, threads, nullptr);
        EXPECT_EQ(own64, EncodeWith<double>(spec, stacked->panel, call_zones,
                                            stacked->states, threads, &*f64))
            << "spec " << k << ", threads " << threads << ", float64";
      }
    }
    const std::string expected = EncodeWith<float>(spec, spec_zone.panel, {},
                                                   spec_zone.states, 1, nullptr);
    std::vector<int> mismatches(4, 0);
    std::vector<std::thread> callers;
    for (int t = 0; t < 4; ++t) {
      callers.emplace_back([&, t] {
        for (int i = 0; i < 5; ++i) {
          if (EncodeWith<float>(spec, spec_zone.panel, {}, spec_zone.states, 1, &*f32) !=
              expected) {
            ++mismatches[t];
          }
        }
      });
    }
    for (std::thread& caller : callers) caller.join();
    for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "spec " << k << ", caller " << t;
  }
}

}  // namespace
}  // namespace phasor
