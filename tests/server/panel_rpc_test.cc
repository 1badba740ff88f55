// Panels over gRPC: one EncodeObservations call with S series equals S
// single-series calls bytewise (features and states), states continue on
// another server, the stream carries every series' state, and errors name
// the series and its own row.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "google/protobuf/util/message_differencer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace phasor::server::testing {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;

constexpr int kChannels = 3;
const char* const kZones[] = {"America/New_York", "Europe/Berlin", "Asia/Kathmandu",
                              "UTC"};

v1::EncoderSpec Spec() {
  v1::EncoderSpec spec;
  v1::TemporalSpec* temporal = spec.mutable_temporal();
  temporal->mutable_content();
  temporal->mutable_time()->set_dim(8);
  v1::GapsBlock* gaps = temporal->mutable_gaps();
  gaps->set_first_observation(v1::GapsBlock::FLAG);
  gaps->set_include_mask(true);
  gaps->set_include_last_value(true);
  v1::CalendarBlock* calendar = temporal->mutable_calendar();
  calendar->set_time_zone("America/New_York");
  calendar->add_fields(v1::CalendarBlock::HOUR_OF_DAY);
  calendar->add_fields(v1::CalendarBlock::DAY_OF_WEEK);
  calendar->add_fields(v1::CalendarBlock::MONTH_OF_YEAR);
  calendar->set_include_utc_offset(true);
  return spec;
}

// One generated series: irregular times with ties, 30% of values missing.
struct Series {
  std::vector<int64_t> times;
  std::vector<double> values;  // [T, kChannels]
  int zone = 0;

  Series(int rows, uint64_t seed) {
    std::mt19937_64 rng(seed);
    int64_t t = int64_t{1710000000} * 1000000000 +
                static_cast<int64_t>(rng() % 86400) * 1000000000;
    zone = static_cast<int>(rng() % 4);
    for (int r = 0; r < rows; ++r) {
      if (r > 0 && rng() % 6 != 0) t += static_cast<int64_t>(rng() % 20000) * 1000000000;
      times.push_back(t);
      for (int c = 0; c < kChannels; ++c) {
        values.push_back(rng() % 10 < 3 ? std::nan("") : static_cast<double>(rng() % 100));
      }
    }
  }
  int64_t rows() const { return static_cast<int64_t>(times.size()); }
};

std::vector<Series> RandomPanel(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Series> panel;
  for (int s = 0; s < count; ++s) {
    const int kind = static_cast<int>(rng() % 5);
    panel.emplace_back(kind == 0 ? 0 : kind == 1 ? 1 : static_cast<int>(rng() % 80),
                       seed * 100 + s);
  }
  return panel;
}

// Rows [begin, end) of one series, alone, in its own zone.
v1::EncodeObservationsRequest SingleRequest(const Series& s, int64_t begin, int64_t end) {
  v1::EncodeObservationsRequest request;
  *request.mutable_spec() = Spec();
  request.mutable_spec()->mutable_temporal()->mutable_calendar()->set_time_zone(
      kZones[s.zone]);
  const std::vector<int64_t> times(s.times.begin() + begin, s.times.begin() + end);
  const std::vector<double> values(s.values.begin() + begin * kChannels,
                                   s.values.begin() + end * kChannels);
  *request.mutable_observations()->mutable_timestamps() = Int64Tensor(times, {end - begin});
  *request.mutable_observations()->mutable_values() =
      Float64Tensor(values, {end - begin, kChannels});
  return request;
}

// Rows [begin(s), end(s)) of every series as one panel, zones as a list
// plus an index.
template <typename Begin, typename End>
v1::EncodeObservationsRequest PanelRequest(const std::vector<Series>& panel, Begin begin,
                                           End end) {
  std::vector<int64_t> times;
  std::vector<double> values;
  std::vector<int64_t> offsets = {0};
  std::vector<int32_t> zone_index;
  for (size_t s = 0; s < panel.size(); ++s) {
    const Series& series = panel[s];
    for (int64_t r = begin(s); r < end(s); ++r) {
      times.push_back(series.times[r]);
      for (int c = 0; c < kChannels; ++c) values.push_back(series.values[r * kChannels + c]);
    }
    offsets.push_back(static_cast<int64_t>(times.size()));
    zone_index.push_back(series.zone);
  }
  v1::EncodeObservationsRequest request;
  *request.mutable_spec() = Spec();
  v1::Observations* obs = request.mutable_observations();
  const int64_t rows = static_cast<int64_t>(times.size());
  *obs->mutable_timestamps() = Int64Tensor(times, {rows});
  *obs->mutable_values() = Float64Tensor(values, {rows, kChannels});
  *obs->mutable_series_offsets() =
      Int64Tensor(offsets, {static_cast<int64_t>(offsets.size())});
  for (const char* zone : kZones) obs->add_time_zones(zone);
  v1::Tensor* index = obs->mutable_time_zone_index();
  index->set_dtype(v1::INT32);
  index->add_shape(static_cast<int64_t>(zone_index.size()));
  index->set_data(std::string(reinterpret_cast<const char*>(zone_index.data()),
                              zone_index.size() * sizeof(int32_t)));
  return request;
}

v1::EncodeObservationsResponse Call(v1::Encoder::Stub* stub,
                                    const v1::EncodeObservationsRequest& request) {
  v1::EncodeObservationsResponse response;
  const grpc::Status status = stub->EncodeObservations(Context().get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

// Series s's rows of a panel response's features.
std::string SeriesBytes(const v1::EncodeObservationsResponse& response, size_t s) {
  const std::vector<int64_t> offsets(
      reinterpret_cast<const int64_t*>(response.series_offsets().data().data()),
      reinterpret_cast<const int64_t*>(response.series_offsets().data().data()) +
          response.series_offsets().shape(0));
  const int64_t row_bytes = response.features().shape(1) * 4;
  return response.features().data().substr(offsets[s] * row_bytes,
                                           (offsets[s + 1] - offsets[s]) * row_bytes);
}

class PanelRpcTest : public ::testing::Test {
 protected:
  void SetUp() override { server_ = StartTestServer(TestOptions()); }
  TestServer server_;
};

TEST_F(PanelRpcTest, PanelEqualsSingleSeriesCallsBytewise) {
  const std::vector<Series> panel = RandomPanel(40, 3);
  const v1::EncodeObservationsResponse whole = Call(
      server_.stub.get(),
      PanelRequest(panel, [](size_t) { return 0; }, [&](size_t s) { return panel[s].rows(); }));
  ASSERT_EQ(whole.states_size(), 40);
  EXPECT_FALSE(whole.has_state());
  EXPECT_EQ(whole.series_offsets().shape(0), 41);
  for (size_t s = 0; s < panel.size(); ++s) {
    const v1::EncodeObservationsResponse alone =
        Call(server_.stub.get(), SingleRequest(panel[s], 0, panel[s].rows()));
    EXPECT_EQ(SeriesBytes(whole, s), alone.features().data()) << "series " << s;
    EXPECT_TRUE(MessageDifferencer::Equals(whole.states(static_cast<int>(s)), alone.state()))
        << "series " << s;
  }
  // The offset and DST columns say the zone is per series; the spec's zone
  // (here UTC, also the offset's reference) is not named.
  for (const char* spec_zone : {"America/New_York", "UTC"}) {
    v1::EncodeObservationsRequest request = PanelRequest(
        panel, [](size_t) { return 0; }, [&](size_t s) { return panel[s].rows(); });
    request.mutable_spec()->mutable_temporal()->mutable_calendar()->set_time_zone(spec_zone);
    bool found = false;
    const v1::EncodeObservationsResponse response = Call(server_.stub.get(), request);
    for (const v1::SchemaEntry& entry : response.schema()) {
      if (entry.block() == "calendar.utc_offset") {
        found = true;
        EXPECT_EQ(entry.meaning(),
                  "hours east of UTC in the series' zone (observations.time_zones)");
      }
    }
    EXPECT_TRUE(found) << spec_zone;
  }
}

// The states of a first panel chunk, sent to another server with the
// second chunk, give the bytes of the whole panel in one call.
TEST_F(PanelRpcTest, StatesContinueOnAnotherServer) {
  const TestServer other = StartTestServer(TestOptions());
  const std::vector<Series> panel = RandomPanel(30, 5);
  std::vector<int64_t> cut;
  std::mt19937_64 rng(9);
  for (const Series& s : panel) cut.push_back(s.rows() == 0 ? 0 : rng() % (s.rows() + 1));
  const auto zero = [](size_t) { return 0; };
  const auto at_cut = [&](size_t s) { return cut[s]; };
  const auto at_end = [&](size_t s) { return panel[s].rows(); };
  const v1::EncodeObservationsResponse whole =
      Call(server_.stub.get(), PanelRequest(panel, zero, at_end));
  const v1::EncodeObservationsResponse first =
      Call(server_.stub.get(), PanelRequest(panel, zero, at_cut));
  v1::EncodeObservationsRequest second_request = PanelRequest(panel, at_cut, at_end);
  *second_request.mutable_states() = first.states();
  const v1::EncodeObservationsResponse second = Call(other.stub.get(), second_request);
  for (size_t s = 0; s < panel.size(); ++s) {
    EXPECT_EQ(SeriesBytes(first, s) + SeriesBytes(second, s), SeriesBytes(whole, s))
        << "series " << s << " cut at " << cut[s];
    EXPECT_TRUE(MessageDifferencer::Equals(second.states(static_cast<int>(s)),
                                           whole.states(static_cast<int>(s))));
  }
}

TEST_F(PanelRpcTest, StreamCarriesEveryStateBetweenPanels) {
  const std::vector<Series> panel = RandomPanel(12, 8);
  const auto zero = [](size_t) { return 0; };
  const auto half = [&](size_t s) { return panel[s].rows() / 2; };
  const auto at_end = [&](size_t s) { return panel[s].rows(); };
  const v1::EncodeObservationsResponse whole =
      Call(server_.stub.get(), PanelRequest(panel, zero, at_end));
  auto context = Context();
  auto stream = server_.stub->EncodeObservationsStream(context.get());
  ASSERT_TRUE(stream->Write(PanelRequest(panel, zero, half)));
  v1::EncodeObservationsResponse first, second;
  ASSERT_TRUE(stream->Read(&first));
  v1::EncodeObservationsRequest next = PanelRequest(panel, half, at_end);
  next.clear_spec();
  ASSERT_TRUE(stream->Write(next));
  ASSERT_TRUE(stream->Read(&second));
  // A panel with a different series count is refused.
  v1::EncodeObservationsRequest fewer = PanelRequest(
      std::vector<Series>(panel.begin(), panel.begin() + 3), at_end, at_end);
  fewer.clear_spec();
  ASSERT_TRUE(stream->Write(fewer));
  v1::EncodeObservationsResponse unused;
  EXPECT_FALSE(stream->Read(&unused));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("observations.series_offsets"));
  for (size_t s = 0; s < panel.size(); ++s) {
    EXPECT_EQ(SeriesBytes(first, s) + SeriesBytes(second, s), SeriesBytes(whole, s)) << s;
  }
}

grpc::Status CallStatus(v1::Encoder::Stub* stub, const v1::EncodeObservationsRequest& request) {
  v1::EncodeObservationsResponse response;
  return stub->EncodeObservations(Context().get(), request, &response);
}

TEST_F(PanelRpcTest, ErrorsNameTheSeriesAndItsRow) {
  std::vector<Series> panel = RandomPanel(3, 1);
  panel[0] = Series(4, 11);
  panel[1] = Series(5, 12);
  panel[2] = Series(3, 13);
  panel[1].times[3] = panel[1].times[2] - 1;  // Series 1, row 3 decreases.
  const auto zero = [](size_t) { return 0; };
  const auto at_end = [&](size_t s) { return panel[s].rows(); };
  v1::EncodeObservationsRequest request = PanelRequest(panel, zero, at_end);
  grpc::Status status = CallStatus(server_.stub.get(), request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("observations.series[1].timestamps[3]"));
  EXPECT_EQ(BadRequestOf(status).field_violations(0).field(),
            "observations.series[1].timestamps[3]");

  panel[1].times[3] = panel[1].times[2];
  const v1::EncodeObservationsRequest good = PanelRequest(panel, zero, at_end);
  ASSERT_TRUE(CallStatus(server_.stub.get(), good).ok());
  const auto expect_field = [&](const v1::EncodeObservationsRequest& bad,
                                const std::string& field) {
    const grpc::Status s = CallStatus(server_.stub.get(), bad);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << field;
    EXPECT_EQ(BadRequestOf(s).field_violations(0).field(), field) << s.error_message();
  };
  v1::EncodeObservationsRequest bad = good;
  bad.add_states();
  expect_field(bad, "states");  // One entry for three series.
  bad = good;
  *bad.mutable_state() = v1::SeriesState();
  bad.mutable_state()->set_last_timestamp_ns(1);
  expect_field(bad, "state");  // A panel takes `states`.
  bad = SingleRequest(panel[0], 0, 4);
  bad.add_states();
  expect_field(bad, "states");  // Per-series states need a panel.
  bad = good;
  bad.mutable_observations()->clear_time_zone_index();
  expect_field(bad, "observations.time_zone_index");  // 4 zones, 3 series.
  bad = good;
  bad.mutable_spec()->mutable_temporal()->clear_calendar();
  expect_field(bad, "observations.time_zones");  // No calendar block.
  bad = good;
  bad.mutable_observations()->set_time_zones(2, "Mars/Olympus_Mons");
  expect_field(bad, "observations.time_zones[2]");
  bad = good;
  *bad.mutable_observations()->mutable_series_offsets() = Int64Tensor({0, 4, 9, 11}, {4});
  expect_field(bad, "observations.series_offsets[3]");  // 12 rows.
  bad = good;
  std::string index = bad.observations().time_zone_index().data();
  index[8] = 7;  // Series 2's zone index: 7 of 4.
  bad.mutable_observations()->mutable_time_zone_index()->set_data(index);
  expect_field(bad, "observations.time_zone_index[2]");
  // A state for series 2 whose last time is after the series' first row.
  bad = good;
  for (int s = 0; s < 3; ++s) bad.add_states();
  v1::SeriesState* late = bad.mutable_states(2);
  late->set_first_timestamp_ns(panel[2].times[0] + 1);
  late->set_last_timestamp_ns(panel[2].times[0] + 1);
  for (int c = 0; c < kChannels; ++c) late->add_channels();
  expect_field(bad, "observations.series[2].timestamps[0]");
  late->clear_channels();
  late->add_channels();
  expect_field(bad, "states[2].channels");
}

// One zone for every series needs no index; so does one zone per series.
TEST_F(PanelRpcTest, ZoneListsWithoutIndex) {
  std::vector<Series> panel = RandomPanel(3, 2);
  for (Series& s : panel) s.zone = 1;
  const auto zero = [](size_t) { return 0; };
  const auto at_end = [&](size_t s) { return panel[s].rows(); };
  const v1::EncodeObservationsResponse indexed =
      Call(server_.stub.get(), PanelRequest(panel, zero, at_end));
  v1::EncodeObservationsRequest one = PanelRequest(panel, zero, at_end);
  one.mutable_observations()->clear_time_zone_index();
  one.mutable_observations()->clear_time_zones();
  one.mutable_observations()->add_time_zones(kZones[1]);
  EXPECT_EQ(Call(server_.stub.get(), one).features().data(), indexed.features().data());
  v1::EncodeObservationsRequest each = one;
  each.mutable_observations()->add_time_zones(kZones[1]);
  each.mutable_observations()->add_time_zones(kZones[1]);
  EXPECT_EQ(Call(server_.stub.get(), each).features().data(), indexed.features().data());
}

}  // namespace
}  // namespace phasor::server::testing
