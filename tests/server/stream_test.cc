// Chunked encoding: the gaps memory carried across chunks, by the bidi stream
// and by the returned state, equals encoding the whole series at once.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace phasor::server::testing {
namespace {

constexpr int kChannels = 2;

// Nine rows in seconds, with a tie across the first chunk boundary (20, 20)
// and one inside the last chunk; channel 1 is silent in the middle chunk.
const std::vector<int64_t> kSeconds = {0, 10, 20, 20, 35, 50, 60, 60, 90};
const std::vector<int> kChunkStarts = {0, 3, 5, 9};

std::vector<double> Values() {
  const double nan = std::nan("");
  return {1, 10,  2, nan, nan, 11,  // rows 0-2
          3, nan, 4, nan,           // rows 3-4: channel 1 silent
          nan, 12, 5, nan, 6, 13, nan, 14};
}

v1::EncoderSpec Spec() {
  v1::EncoderSpec spec;
  v1::TemporalSpec* temporal = spec.mutable_temporal();
  temporal->mutable_content();
  temporal->mutable_time()->set_dim(6);
  temporal->mutable_time()->set_min_period_seconds(5);
  temporal->mutable_time()->set_max_period_seconds(500);
  v1::GapsBlock* gaps = temporal->mutable_gaps();
  gaps->set_first_observation(v1::GapsBlock::FLAG);
  gaps->set_transform(v1::GapsBlock::LOG1P);
  gaps->set_include_mask(true);
  gaps->set_include_last_value(true);
  return spec;
}

// Rows [begin, end) of the series as observations.
v1::Observations Chunk(int begin, int end) {
  std::vector<int64_t> times;
  for (int r = begin; r < end; ++r) times.push_back(kSeconds[r] * 1000000000);
  const std::vector<double> all = Values();
  const std::vector<double> values(all.begin() + begin * kChannels,
                                   all.begin() + end * kChannels);
  v1::Observations observations;
  *observations.mutable_timestamps() = Int64Tensor(times, {end - begin});
  *observations.mutable_values() = Float64Tensor(values, {end - begin, kChannels});
  return observations;
}

std::string WholeSeriesFeatures(v1::Encoder::Stub* stub) {
  v1::EncodeObservationsRequest request;
  *request.mutable_observations() = Chunk(0, 9);
  *request.mutable_spec() = Spec();
  v1::EncodeObservationsResponse response;
  const grpc::Status status = stub->EncodeObservations(Context().get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.features().shape(0), 9);
  return response.features().data();
}

class StreamTest : public ::testing::Test {
 protected:
  void SetUp() override { server_ = StartTestServer(TestOptions()); }
  TestServer server_;
};

TEST_F(StreamTest, StreamChunksEqualWholeSeries) {
  const std::string whole = WholeSeriesFeatures(server_.stub.get());
  ASSERT_FALSE(whole.empty());
  auto context = Context();
  auto stream = server_.stub->EncodeObservationsStream(context.get());
  std::string chunked;
  for (size_t c = 0; c + 1 < kChunkStarts.size(); ++c) {
    v1::EncodeObservationsRequest request;
    *request.mutable_observations() = Chunk(kChunkStarts[c], kChunkStarts[c + 1]);
    if (c == 0) *request.mutable_spec() = Spec();  // Later chunks inherit it.
    ASSERT_TRUE(stream->Write(request));
    v1::EncodeObservationsResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.features().shape(0), kChunkStarts[c + 1] - kChunkStarts[c]);
    chunked += response.features().data();
  }
  stream->WritesDone();
  const grpc::Status status = stream->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(chunked, whole);  // Bytewise.
}

TEST_F(StreamTest, ReturnedStateChunksEqualWholeSeries) {
  const std::string whole = WholeSeriesFeatures(server_.stub.get());
  std::string chunked;
  v1::SeriesState state;
  for (size_t c = 0; c + 1 < kChunkStarts.size(); ++c) {
    v1::EncodeObservationsRequest request;
    *request.mutable_observations() = Chunk(kChunkStarts[c], kChunkStarts[c + 1]);
    *request.mutable_spec() = Spec();
    if (c > 0) *request.mutable_state() = state;
    v1::EncodeObservationsResponse response;
    const grpc::Status status =
        server_.stub->EncodeObservations(Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    chunked += response.features().data();
    state = response.state();
  }
  EXPECT_EQ(chunked, whole);
  // Without the state the second chunk starts a new series: different bytes.
  v1::EncodeObservationsRequest fresh;
  *fresh.mutable_observations() = Chunk(3, 5);
  *fresh.mutable_spec() = Spec();
  v1::EncodeObservationsResponse response;
  ASSERT_TRUE(server_.stub->EncodeObservations(Context().get(), fresh, &response).ok());
  const size_t row_bytes = whole.size() / 9;
  EXPECT_NE(response.features().data(), whole.substr(3 * row_bytes, 2 * row_bytes));
}

TEST_F(StreamTest, ChangingTheSpecMidStreamIsRejected) {
  auto context = Context();
  auto stream = server_.stub->EncodeObservationsStream(context.get());
  v1::EncodeObservationsRequest first;
  *first.mutable_observations() = Chunk(0, 3);
  *first.mutable_spec() = Spec();
  ASSERT_TRUE(stream->Write(first));
  v1::EncodeObservationsResponse response;
  ASSERT_TRUE(stream->Read(&response));
  // Repeating the same spec is fine.
  v1::EncodeObservationsRequest same = first;
  *same.mutable_observations() = Chunk(3, 5);
  ASSERT_TRUE(stream->Write(same));
  ASSERT_TRUE(stream->Read(&response));
  // A different one ends the stream with INVALID_ARGUMENT.
  v1::EncodeObservationsRequest changed;
  *changed.mutable_observations() = Chunk(5, 9);
  *changed.mutable_spec() = Spec();
  changed.mutable_spec()->mutable_temporal()->mutable_time()->set_dim(8);
  stream->Write(changed);
  EXPECT_FALSE(stream->Read(&response));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const google::rpc::BadRequest bad = BadRequestOf(status);
  ASSERT_EQ(bad.field_violations_size(), 1);
  EXPECT_EQ(bad.field_violations(0).field(), "spec");
}

TEST_F(StreamTest, DecreasingTimeAcrossChunksIsRejected) {
  auto context = Context();
  auto stream = server_.stub->EncodeObservationsStream(context.get());
  v1::EncodeObservationsRequest first;
  *first.mutable_observations() = Chunk(3, 5);  // Ends at 35 s.
  *first.mutable_spec() = Spec();
  ASSERT_TRUE(stream->Write(first));
  v1::EncodeObservationsResponse response;
  ASSERT_TRUE(stream->Read(&response));
  v1::EncodeObservationsRequest earlier;
  *earlier.mutable_observations() = Chunk(0, 3);  // Starts at 0 s.
  stream->Write(earlier);
  EXPECT_FALSE(stream->Read(&response));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), ::testing::StartsWith("observations"));
}

// phasor_request_bytes_total counts every message the stream read, the one
// that failed included; phasor_response_bytes_total every message it wrote.
TEST(StreamMetricsTest, BytesCountEveryMessageReadAndEveryResponseWritten) {
  ServerOptions options = TestOptions();
  options.metrics_address = "127.0.0.1:0";
  TestServer server = StartTestServer(options);
  ASSERT_NE(server.server, nullptr);
  auto context = Context();
  auto stream = server.stub->EncodeObservationsStream(context.get());
  v1::EncodeObservationsRequest first;
  *first.mutable_observations() = Chunk(0, 3);
  *first.mutable_spec() = Spec();
  v1::EncodeObservationsRequest second;
  *second.mutable_observations() = Chunk(3, 5);
  v1::EncodeObservationsRequest earlier;  // Decreasing time: fails.
  *earlier.mutable_observations() = Chunk(0, 3);
  int64_t request_bytes = 0, response_bytes = 0;
  for (const v1::EncodeObservationsRequest* request : {&first, &second}) {
    ASSERT_TRUE(stream->Write(*request));
    v1::EncodeObservationsResponse response;
    ASSERT_TRUE(stream->Read(&response));
    request_bytes += static_cast<int64_t>(request->ByteSizeLong());
    response_bytes += static_cast<int64_t>(response.ByteSizeLong());
  }
  stream->Write(earlier);
  request_bytes += static_cast<int64_t>(earlier.ByteSizeLong());
  v1::EncodeObservationsResponse none;
  EXPECT_FALSE(stream->Read(&none));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  const std::string text = HttpGet(server.server->metrics_port(), "/metrics");
  EXPECT_EQ(MetricValue(
                text, R"(phasor_request_bytes_total{grpc_method="EncodeObservationsStream"})"),
            request_bytes);
  EXPECT_EQ(MetricValue(
                text, R"(phasor_response_bytes_total{grpc_method="EncodeObservationsStream"})"),
            response_bytes);
}

}  // namespace
}  // namespace phasor::server::testing
