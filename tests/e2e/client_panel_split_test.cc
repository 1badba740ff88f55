// The panel splitter's plan (client/panel_split.h), without a server: what
// InspectPanel accepts and refuses, the plan's invariants over many panel
// shapes and budgets (row order, every row once, each piece within the
// budget, whole series except the chunks of a series too large alone, each
// chunk but the first continuing), and the sub-requests' offsets, time zones
// and states. That the joined responses equal one call, bytewise, needs a
// server: client_panel_test.cc.
#include "client/panel_split.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/tensor_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "phasor/v1/encoder.pb.h"

namespace phasor {
namespace panel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A tensor of `rows` rows of `per_row` elements of `dtype`, bytes all zero.
v1::Tensor Rows(v1::DType dtype, int64_t rows, int64_t per_row) {
  v1::Tensor tensor;
  tensor.set_dtype(dtype);
  tensor.add_shape(rows);
  if (per_row > 0) tensor.add_shape(per_row);
  tensor.set_data(std::string(
      static_cast<size_t>(rows * (per_row > 0 ? per_row : 1) * DTypeBytes(dtype)),
      '\0'));
  return tensor;
}

// A wide panel: int64 timestamps and `channels` float64 values per row,
// series of the given lengths.
v1::EncodeObservationsRequest WidePanel(const std::vector<int64_t>& lengths,
                                        int64_t channels) {
  v1::EncodeObservationsRequest request;
  std::vector<int64_t> offsets = {0};
  for (const int64_t length : lengths) offsets.push_back(offsets.back() + length);
  const int64_t rows = offsets.back();
  v1::Observations* observations = request.mutable_observations();
  *observations->mutable_timestamps() = Rows(v1::INT64, rows, 0);
  *observations->mutable_values() = Rows(v1::FLOAT64, rows, channels);
  *observations->mutable_series_offsets() = TensorFromInt64s(
      offsets, {static_cast<int64_t>(offsets.size())});
  return request;
}

std::vector<int64_t> OffsetsOf(const v1::Tensor& tensor) {
  std::vector<int64_t> offsets(static_cast<size_t>(tensor.shape(0)));
  std::memcpy(offsets.data(), tensor.data().data(), tensor.data().size());
  return offsets;
}

TEST(InspectPanelTest, WidePanel) {
  const PanelShape shape = InspectPanel(WidePanel({3, 0, 5}, /*channels=*/2));
  ASSERT_TRUE(shape.ok);
  EXPECT_FALSE(shape.single);
  EXPECT_EQ(shape.rows, 8);
  EXPECT_THAT(shape.offsets, ElementsAre(0, 3, 3, 8));
  EXPECT_EQ(shape.request_row_bytes, 8 + 2 * 8);  // int64 time, 2 float64.
  EXPECT_EQ(shape.channels, 2);
  EXPECT_FALSE(shape.set_num_channels);
  EXPECT_EQ(shape.time_zone_mode, TimeZoneMode::kShared);
}

TEST(InspectPanelTest, SingleSeriesWithState) {
  v1::EncodeObservationsRequest request = WidePanel({4}, /*channels=*/1);
  request.mutable_observations()->clear_series_offsets();
  request.mutable_state()->set_last_timestamp_ns(7);
  const PanelShape shape = InspectPanel(request);
  ASSERT_TRUE(shape.ok);
  EXPECT_TRUE(shape.single);
  EXPECT_THAT(shape.offsets, ElementsAre(0, 4));
  ASSERT_EQ(shape.states.size(), 1u);
  EXPECT_EQ(shape.states[0].last_timestamp_ns(), 7);
}

TEST(InspectPanelTest, LongPanelPinsTheChannelCount) {
  v1::EncodeObservationsRequest request;
  v1::Observations* observations = request.mutable_observations();
  *observations->mutable_event_times() = Rows(v1::INT64, 3, 0);
  const std::vector<int32_t> channels = {0, 4, 1};
  v1::Tensor* event_channels = observations->mutable_event_channels();
  event_channels->set_dtype(v1::INT32);
  event_channels->add_shape(3);
  event_channels->set_data(channels.data(), channels.size() * sizeof(int32_t));
  *observations->mutable_series_offsets() = TensorFromInt64s({0, 2, 3}, {3});
  PanelShape shape = InspectPanel(request);
  ASSERT_TRUE(shape.ok);
  EXPECT_EQ(shape.channels, 5);  // 1 + the largest channel.
  EXPECT_TRUE(shape.set_num_channels);
  EXPECT_EQ(TemplateRequest(request, shape).observations().num_channels(), 5);

  // Channel names say C themselves: nothing to pin.
  observations->add_channel_names("a");
  observations->add_channel_names("b");
  shape = InspectPanel(request);
  ASSERT_TRUE(shape.ok);
  EXPECT_EQ(shape.channels, 2);
  EXPECT_FALSE(shape.set_num_channels);

  // A negative channel is the server's to name.
  observations->clear_channel_names();
  const std::vector<int32_t> negative = {0, -1, 1};
  event_channels->set_data(negative.data(), negative.size() * sizeof(int32_t));
  EXPECT_FALSE(InspectPanel(request).ok);
}

TEST(InspectPanelTest, MalformedRequestsAreNotCut) {
  const v1::EncodeObservationsRequest good = WidePanel({2, 2}, 1);
  ASSERT_TRUE(InspectPanel(good).ok);
  const auto with_offsets = [&](std::vector<int64_t> offsets) {
    v1::EncodeObservationsRequest request = good;
    *request.mutable_observations()->mutable_series_offsets() = TensorFromInt64s(
        offsets, {static_cast<int64_t>(offsets.size())});
    return request;
  };
  EXPECT_FALSE(InspectPanel(with_offsets({1, 2, 4})).ok);  // Not from 0.
  EXPECT_FALSE(InspectPanel(with_offsets({0, 3, 2, 4})).ok);  // Decreasing.
  EXPECT_FALSE(InspectPanel(with_offsets({0, 2, 3})).ok);  // Not to R.
  EXPECT_FALSE(InspectPanel(with_offsets({0})).ok);  // No series.

  v1::EncodeObservationsRequest both = good;  // Wide and long at once.
  *both.mutable_observations()->mutable_event_times() = Rows(v1::INT64, 4, 0);
  EXPECT_FALSE(InspectPanel(both).ok);

  v1::EncodeObservationsRequest short_values = good;  // 3 rows of values.
  *short_values.mutable_observations()->mutable_values() =
      Rows(v1::FLOAT64, 3, 1);
  EXPECT_FALSE(InspectPanel(short_values).ok);

  v1::EncodeObservationsRequest state = good;  // A panel uses `states`.
  state.mutable_state();
  EXPECT_FALSE(InspectPanel(state).ok);

  v1::EncodeObservationsRequest states = good;  // 1 state for 2 series.
  states.add_states();
  EXPECT_FALSE(InspectPanel(states).ok);

  v1::EncodeObservationsRequest index = good;  // 3 zone indices, 2 series.
  *index.mutable_observations()->mutable_time_zone_index() =
      Rows(v1::INT32, 3, 0);
  EXPECT_FALSE(InspectPanel(index).ok);
}

// What the plan promises (client/panel_split.h), checked piece by piece
// with the budget's own arithmetic.
void ExpectPlanInvariants(const PanelShape& shape, const Budget& budget,
                          const std::vector<SubCall>& plan) {
  int64_t next_row = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const SubCall& piece = plan[i];
    SCOPED_TRACE(testing::Message() << "piece " << i << ": series ["
                                    << piece.series_begin << ", "
                                    << piece.series_end << ") rows ["
                                    << piece.row_begin << ", " << piece.row_end
                                    << ")");
    EXPECT_EQ(piece.row_begin, next_row);
    EXPECT_LE(piece.row_begin, piece.row_end);
    next_row = piece.row_end;
    const int64_t series = piece.series_end - piece.series_begin;
    ASSERT_GE(series, 1);
    int64_t request_bytes = 0, response_bytes = 0;
    const bool whole_series =
        piece.row_begin == shape.offsets[piece.series_begin] &&
        piece.row_end == shape.offsets[piece.series_end];
    if (whole_series && !piece.continues) {
      for (int64_t s = piece.series_begin; s < piece.series_end; ++s) {
        request_bytes += budget.request_per_series +
                         (shape.states.empty()
                              ? 0
                              : static_cast<int64_t>(
                                    shape.states[s].ByteSizeLong()));
      }
      response_bytes = series * budget.response_per_series;
    } else {
      // A chunk of one series too large alone; all but the first continue.
      EXPECT_EQ(series, 1);
      EXPECT_EQ(piece.continues,
                piece.row_begin > shape.offsets[piece.series_begin]);
      request_bytes = std::max<int64_t>(
          budget.request_per_series + SeriesStateBytesBound(shape.channels),
          budget.request_per_series +
              (shape.states.empty()
                   ? 0
                   : static_cast<int64_t>(
                         shape.states[piece.series_begin].ByteSizeLong())));
      response_bytes = budget.response_per_series;
    }
    const int64_t rows = piece.row_end - piece.row_begin;
    EXPECT_LE(request_bytes + rows * budget.request_per_row,
              budget.request_limit);
    EXPECT_LE(response_bytes + rows * budget.response_per_row,
              budget.response_limit);
  }
  EXPECT_EQ(next_row, shape.rows);  // Every row, once.
}

TEST(PlanSubCallsTest, InvariantsHoldOverManyPanelsAndBudgets) {
  std::mt19937_64 random(/*seed=*/20240611);
  for (int trial = 0; trial < 500; ++trial) {
    SCOPED_TRACE(trial);
    std::vector<int64_t> lengths(1 + random() % 12);
    for (int64_t& length : lengths) {
      // Mostly short series, some empty, some far over one call.
      length = random() % 8 == 0 ? 0 : static_cast<int64_t>(random() % 40);
      if (random() % 6 == 0) length *= 25;
    }
    const int64_t channels = 1 + static_cast<int64_t>(random() % 4);
    const PanelShape shape = InspectPanel(WidePanel(lengths, channels));
    ASSERT_TRUE(shape.ok);
    Budget budget;
    budget.request_per_row = shape.request_row_bytes;
    budget.response_per_row = 4 * static_cast<int64_t>(1 + random() % 16);
    budget.request_per_series = 10;
    budget.response_per_series = 11 + SeriesStateBytesBound(channels);
    const int64_t limit = 400 + static_cast<int64_t>(random() % 4000);
    budget.request_limit = limit;
    budget.response_limit = limit;
    const absl::StatusOr<std::vector<SubCall>> plan = PlanSubCalls(shape, budget);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ExpectPlanInvariants(shape, budget, *plan);
  }
}

TEST(PlanSubCallsTest, GroupsWholeSeriesAndChunksOneTooLarge) {
  const PanelShape shape = InspectPanel(WidePanel({2, 3, 30, 1}, 1));
  ASSERT_TRUE(shape.ok);
  Budget budget;
  budget.request_per_row = 16;
  budget.response_per_row = 16;
  budget.request_per_series = 10;
  budget.response_per_series = 10 + SeriesStateBytesBound(1);
  // A response of series 0 and 1 is 2·90 + 5·16 = 260 bytes; series 2's
  // 30 rows need 570, so it goes in chunks of (300 - 90) / 16 = 13 rows;
  // series 3 after it alone.
  budget.request_limit = budget.response_limit = 300;
  const absl::StatusOr<std::vector<SubCall>> plan = PlanSubCalls(shape, budget);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectPlanInvariants(shape, budget, *plan);
  ASSERT_EQ(plan->size(), 5u);
  EXPECT_EQ((*plan)[0].series_begin, 0);
  EXPECT_EQ((*plan)[0].series_end, 2);
  EXPECT_FALSE((*plan)[1].continues);  // Series 2's first chunk.
  EXPECT_EQ((*plan)[1].row_end - (*plan)[1].row_begin, 13);
  EXPECT_TRUE((*plan)[2].continues);
  EXPECT_TRUE((*plan)[3].continues);
  EXPECT_EQ((*plan)[3].row_end, 35);
  EXPECT_EQ(plan->back().series_begin, 3);
  EXPECT_EQ(SeriesSplit(*plan), 1);
}

TEST(PlanSubCallsTest, OneRowOverTheLimitIsResourceExhausted) {
  const PanelShape shape = InspectPanel(WidePanel({1, 1}, 1));
  ASSERT_TRUE(shape.ok);
  Budget budget;
  budget.request_per_row = 16;
  budget.response_per_row = 1 << 20;
  budget.request_limit = budget.response_limit = 4096;
  const absl::StatusOr<std::vector<SubCall>> plan = PlanSubCalls(shape, budget);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(plan.status().message(), HasSubstr("observations.series[0]"));
}

TEST(SeriesSplitTest, CountsSeriesNotChunks) {
  const std::vector<SubCall> plan = {
      {0, 2, 0, 5, false},   {2, 3, 5, 9, false},  {2, 3, 9, 12, true},
      {2, 3, 12, 14, true},  {3, 4, 14, 20, false}, {3, 4, 20, 21, true},
  };
  EXPECT_EQ(SeriesSplit(plan), 2);
  EXPECT_EQ(SeriesSplit({}), 0);
}

TEST(BuildSubRequestTest, OffsetsZonesAndStatesOfThePiece) {
  v1::EncodeObservationsRequest request = WidePanel({2, 3, 4}, 1);
  v1::Observations* observations = request.mutable_observations();
  for (const char* zone : {"UTC", "Europe/Paris", "Asia/Tokyo"}) {
    observations->add_time_zones(zone);
  }
  for (int s = 0; s < 3; ++s) request.add_states()->set_last_timestamp_ns(100 + s);
  request.set_output_dtype(v1::FLOAT16);
  const PanelShape shape = InspectPanel(request);
  ASSERT_TRUE(shape.ok);
  EXPECT_EQ(shape.time_zone_mode, TimeZoneMode::kPerSeries);
  const v1::EncodeObservationsRequest shared = TemplateRequest(request, shape);
  EXPECT_FALSE(shared.observations().has_timestamps());
  EXPECT_FALSE(shared.observations().has_series_offsets());
  EXPECT_EQ(shared.observations().time_zones_size(), 0);
  EXPECT_EQ(shared.states_size(), 0);
  EXPECT_EQ(shared.output_dtype(), v1::FLOAT16);

  // Series 1 and 2 whole: offsets from the piece's first row.
  const v1::EncodeObservationsRequest whole = BuildSubRequest(
      request, shared, shape, SubCall{1, 3, 2, 9, false}, nullptr);
  EXPECT_THAT(OffsetsOf(whole.observations().series_offsets()),
              ElementsAre(0, 3, 7));
  EXPECT_THAT(whole.observations().time_zones(),
              ElementsAre("Europe/Paris", "Asia/Tokyo"));
  ASSERT_EQ(whole.states_size(), 2);
  EXPECT_EQ(whole.states(0).last_timestamp_ns(), 101);
  EXPECT_EQ(whole.states(1).last_timestamp_ns(), 102);

  // A chunk continuing series 2 starts from the carried state.
  v1::SeriesState carried;
  carried.set_last_timestamp_ns(999);
  const v1::EncodeObservationsRequest chunk = BuildSubRequest(
      request, shared, shape, SubCall{2, 3, 7, 9, true}, &carried);
  EXPECT_THAT(OffsetsOf(chunk.observations().series_offsets()),
              ElementsAre(0, 2));
  ASSERT_EQ(chunk.states_size(), 1);
  EXPECT_EQ(chunk.states(0).last_timestamp_ns(), 999);
}

}  // namespace
}  // namespace panel
}  // namespace phasor
