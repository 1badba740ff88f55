// Tests for EncoderClient::EncodeObservationsPanel against real in-process
// servers: a panel the client cuts to fit a small message limit (the
// client's and the server's, both 1 MiB) must come back bytewise equal to one
// uncut call on a server with room for it — features, schema, every series'
// state and the offsets — for wide and long panels, a series too large for
// one call (cut into chunks joined by state), states sent in, per-series time
// zones, and a single series without offsets. Errors name the panel's series,
// and their field violations the row within it, as one uncut call's do.
// Sub-call replies from a fake server that are malformed (features.data
// too long, too short or twice, a reply cut inside the features, a features
// length past the reply's end, states missing) are DATA_LOSS.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/server_callback.h>

#include <atomic>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/workload_p_request.h"
#include "client/encoder_client.h"
#include "client/tensor_io.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/server/test_util.h"

namespace phasor {
namespace {

using ::testing::HasSubstr;
using server::testing::StartTestServer;
using server::testing::TestOptions;
using server::testing::TestServer;

constexpr int kSmallLimitBytes = 1 << 20;  // 1 MiB, both ends.

class PanelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The reference: room for every panel here in one call.
    server::ServerOptions roomy = TestOptions();
    roomy.max_message_bytes = int64_t{256} << 20;
    roomy_ = new TestServer(StartTestServer(roomy));
    server::ServerOptions small = TestOptions();
    small.max_message_bytes = kSmallLimitBytes;
    small_ = new TestServer(StartTestServer(small));
  }
  static void TearDownTestSuite() {
    delete roomy_;
    delete small_;
  }

  static std::unique_ptr<EncoderClient> Client(const TestServer& server,
                                               int max_message_bytes) {
    ClientOptions options;
    options.target = server.address;
    options.deadline = absl::Seconds(60);
    options.max_message_bytes = max_message_bytes;
    auto client = EncoderClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return *std::move(client);
  }

  // One uncut call on the roomy server.
  static v1::EncodeObservationsResponse Reference(
      const v1::EncodeObservationsRequest& request) {
    auto client = Client(*roomy_, 256 << 20);
    auto response = client->EncodeObservations(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : v1::EncodeObservationsResponse();
  }

  // The panel through the splitting client on the 1 MiB server.
  static v1::EncodeObservationsResponse Split(
      const v1::EncodeObservationsRequest& request, PanelStats* stats,
      const PanelOptions& panel = PanelOptions()) {
    auto client = Client(*small_, kSmallLimitBytes);
    auto response = client->EncodeObservationsPanel(request, panel, stats);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : v1::EncodeObservationsResponse();
  }

  static void ExpectSameResponse(const v1::EncodeObservationsResponse& split,
                                 const v1::EncodeObservationsResponse& whole) {
    ASSERT_EQ(split.features().dtype(), whole.features().dtype());
    ASSERT_EQ(ShapeString(split.features()), ShapeString(whole.features()));
    // Bytewise, not approximately: the client only moves bytes.
    EXPECT_TRUE(split.features().data() == whole.features().data());
    ASSERT_EQ(split.states_size(), whole.states_size());
    for (int s = 0; s < whole.states_size(); ++s) {
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
          split.states(s), whole.states(s)))
          << "series " << s << ":\n" << split.states(s).DebugString()
          << "vs\n" << whole.states(s).DebugString();
    }
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
        split.state(), whole.state()));
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
        split.series_offsets(), whole.series_offsets()));
    ASSERT_EQ(split.schema_size(), whole.schema_size());
    for (int i = 0; i < whole.schema_size(); ++i) {
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
          split.schema(i), whole.schema(i)));
    }
  }

  static TestServer* roomy_;
  static TestServer* small_;
};
TestServer* PanelTest::roomy_ = nullptr;
TestServer* PanelTest::small_ = nullptr;

bench::WorkloadP SmallWorkload(int64_t series) {
  bench::WorkloadPShape shape;
  shape.series = series;
  return bench::MakeWorkloadP(shape);
}

TEST_F(PanelTest, WidePanelOverTheLimitIsSplitAndEqualsOneCall) {
  // 3000 series x 100 rows: 9.6 MB up, 25 MB down; 1 MiB per call.
  const bench::WorkloadP workload = SmallWorkload(3000);
  const v1::EncodeObservationsRequest request =
      bench::WorkloadPPanelRequest(workload);
  ASSERT_GT(request.ByteSizeLong(), size_t{kSmallLimitBytes});

  // The plain call is refused by the limit...
  auto plain = Client(*small_, kSmallLimitBytes)->EncodeObservations(request);
  EXPECT_EQ(plain.status().code(), absl::StatusCode::kResourceExhausted);

  // ...the panel call is not.
  PanelStats stats;
  const v1::EncodeObservationsResponse split = Split(request, &stats);
  EXPECT_GT(stats.calls, 20);
  EXPECT_EQ(stats.series_split, 0);
  EXPECT_EQ(stats.probe_calls, 1);
  const v1::EncodeObservationsResponse whole = Reference(request);
  EXPECT_EQ(whole.features().shape(1), 21);  // Workload P's F.
  ExpectSameResponse(split, whole);
}

// A client whose limit is above the server's: the server refuses the first
// attempt as too large, and the panel goes again in smaller calls.
TEST_F(PanelTest, ServerLimitsBelowTheClientsAreRetriedSmaller) {
  const v1::EncodeObservationsRequest request =
      bench::WorkloadPPanelRequest(SmallWorkload(1000));
  const v1::EncodeObservationsResponse whole = Reference(request);
  PanelStats stats;
  auto client = Client(*small_, 64 << 20);  // The server allows 1 MiB.
  auto response = client->EncodeObservationsPanel(request, PanelOptions(), &stats);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_GE(stats.retries, 1);
  ExpectSameResponse(*response, whole);

  // Likewise for the element limit, which float16 outputs reach first.
  server::ServerOptions few_elements = TestOptions();
  few_elements.max_message_bytes = int64_t{64} << 20;
  few_elements.max_elements_per_request = 200000;
  const TestServer server = StartTestServer(few_elements);
  v1::EncodeObservationsRequest half = request;
  half.set_output_dtype(v1::FLOAT16);
  const v1::EncodeObservationsResponse half_whole = Reference(half);
  auto half_split = Client(server, 64 << 20)->EncodeObservationsPanel(half, PanelOptions(), &stats);
  ASSERT_TRUE(half_split.ok()) << half_split.status();
  EXPECT_GE(stats.retries, 1);
  ExpectSameResponse(*half_split, half_whole);
  // The element cap alone keeps calls within the server's default.
  PanelOptions capped;
  capped.max_call_elements = 200000;
  half_split = Client(server, 64 << 20)->EncodeObservationsPanel(half, capped, &stats);
  ASSERT_TRUE(half_split.ok()) << half_split.status();
  EXPECT_EQ(stats.retries, 0);
  EXPECT_GT(stats.calls, 1);
  ExpectSameResponse(*half_split, half_whole);
}

TEST_F(PanelTest, OneInFlightEqualsFour) {
  const v1::EncodeObservationsRequest request =
      bench::WorkloadPPanelRequest(SmallWorkload(1000));
  PanelStats stats;
  PanelOptions one;
  one.max_in_flight = 1;
  const v1::EncodeObservationsResponse serial = Split(request, &stats, one);
  const v1::EncodeObservationsResponse parallel = Split(request, &stats);
  ExpectSameResponse(parallel, serial);
}

// By default a sub-call carries at most half the client's limit, so that
// one call's transfer overlaps the server's work on the next: a panel whose
// features take ~64% of the limit goes in two calls or more, and in one when
// max_call_bytes allows the whole limit.
TEST_F(PanelTest, DefaultCallsCarryHalfTheLimit) {
  EXPECT_EQ(DefaultCallBytes(kSmallLimitBytes), kSmallLimitBytes / 2);
  const v1::EncodeObservationsRequest request =
      bench::WorkloadPPanelRequest(SmallWorkload(80));
  const v1::EncodeObservationsResponse whole = Reference(request);
  ASSERT_GT(whole.features().data().size(), kSmallLimitBytes / 2);
  ASSERT_LT(whole.ByteSizeLong(), kSmallLimitBytes * 3 / 4);
  PanelStats stats;
  ExpectSameResponse(Split(request, &stats), whole);
  EXPECT_GE(stats.calls, 2);
  PanelOptions full;
  full.max_call_bytes = kSmallLimitBytes;
  ExpectSameResponse(Split(request, &stats, full), whole);
  EXPECT_EQ(stats.calls, 1);
}

TEST_F(PanelTest, PanelThatFitsGoesInOneCall) {
  const v1::EncodeObservationsRequest request =
      bench::WorkloadPPanelRequest(SmallWorkload(20));
  PanelStats stats;
  const v1::EncodeObservationsResponse split = Split(request, &stats);
  EXPECT_EQ(stats.calls, 1);
  ExpectSameResponse(split, Reference(request));
}

// Series 1 holds 40000 rows (3.4 MB of features): it is cut into chunks,
// each continued from the previous chunk's state.
v1::EncodeObservationsRequest PanelWithHugeSeries() {
  bench::WorkloadPShape shape;
  shape.series = 1;
  shape.rows_per_series = 40000;
  const bench::WorkloadP huge = bench::MakeWorkloadP(shape);
  const bench::WorkloadP small = SmallWorkload(3);
  std::vector<int64_t> timestamps;
  std::vector<double> values;
  std::vector<int64_t> offsets = {0};
  auto append = [&](const bench::WorkloadP& w, int64_t s) {
    const int64_t begin = w.series_offsets[s], end = w.series_offsets[s + 1];
    timestamps.insert(timestamps.end(), w.timestamps_ns.begin() + begin,
                      w.timestamps_ns.begin() + end);
    values.insert(values.end(), w.values.begin() + begin * 3,
                  w.values.begin() + end * 3);
    offsets.push_back(offsets.back() + end - begin);
  };
  append(small, 0);
  append(huge, 0);
  append(small, 1);
  append(small, 2);
  v1::EncodeObservationsRequest request;
  *request.mutable_spec() = bench::WorkloadPSpec();
  const int64_t rows = static_cast<int64_t>(timestamps.size());
  *request.mutable_observations()->mutable_timestamps() =
      TensorFromInt64s(timestamps, {rows});
  *request.mutable_observations()->mutable_values() =
      *TensorFromDoubles(values, {rows, 3}, v1::FLOAT64);
  *request.mutable_observations()->mutable_series_offsets() =
      TensorFromInt64s(offsets, {static_cast<int64_t>(offsets.size())});
  return request;
}

TEST_F(PanelTest, SeriesLargerThanOneCallIsChunkedWithItsState) {
  const v1::EncodeObservationsRequest request = PanelWithHugeSeries();
  PanelStats stats;
  const v1::EncodeObservationsResponse split = Split(request, &stats);
  EXPECT_EQ(stats.series_split, 1);
  EXPECT_GE(stats.calls, 4);
  ExpectSameResponse(split, Reference(request));
}

TEST_F(PanelTest, SingleSeriesWithoutOffsetsReturnsState) {
  v1::EncodeObservationsRequest request = PanelWithHugeSeries();
  // Only the huge series, as a plain single-series request.
  const std::vector<int64_t> offsets = {0, 100, 40100};
  v1::Observations* observations = request.mutable_observations();
  observations->clear_series_offsets();
  auto slice = [](v1::Tensor* tensor, int64_t begin, int64_t end) {
    const int64_t row_bytes =
        static_cast<int64_t>(tensor->data().size()) / tensor->shape(0);
    tensor->set_data(tensor->data().substr(begin * row_bytes,
                                           (end - begin) * row_bytes));
    tensor->set_shape(0, end - begin);
  };
  slice(observations->mutable_timestamps(), offsets[1], offsets[2]);
  slice(observations->mutable_values(), offsets[1], offsets[2]);
  PanelStats stats;
  const v1::EncodeObservationsResponse split = Split(request, &stats);
  EXPECT_GT(stats.calls, 1);
  EXPECT_TRUE(split.has_state());
  EXPECT_EQ(split.states_size(), 0);
  EXPECT_FALSE(split.has_series_offsets());
  ExpectSameResponse(split, Reference(request));
}

TEST_F(PanelTest, StatesInContinueEverySeries) {
  // Every series in two halves: the first halves in one call give the
  // states the second halves (split by the client) continue from.
  const bench::WorkloadP workload = SmallWorkload(2000);
  bench::WorkloadPShape half_shape = workload.shape;
  half_shape.rows_per_series = 50;
  auto halves = [&](int64_t half) {
    bench::WorkloadP part;
    part.shape = half_shape;
    for (int64_t s = 0; s < workload.shape.series; ++s) {
      const int64_t begin = s * 100 + half * 50;
      part.timestamps_ns.insert(part.timestamps_ns.end(),
                                workload.timestamps_ns.begin() + begin,
                                workload.timestamps_ns.begin() + begin + 50);
      part.values.insert(part.values.end(),
                         workload.values.begin() + begin * 3,
                         workload.values.begin() + (begin + 50) * 3);
    }
    for (int64_t s = 0; s <= workload.shape.series; ++s) {
      part.series_offsets.push_back(s * 50);
    }
    return bench::WorkloadPPanelRequest(part);
  };
  const v1::EncodeObservationsResponse first = Reference(halves(0));
  ASSERT_EQ(first.states_size(), 2000);
  v1::EncodeObservationsRequest second = halves(1);
  *second.mutable_states() = first.states();
  // One series starts afresh: an empty entry.
  second.mutable_states(7)->Clear();

  PanelStats stats;
  const v1::EncodeObservationsResponse split = Split(second, &stats);
  EXPECT_GT(stats.calls, 1);
  ExpectSameResponse(split, Reference(second));
}

TEST_F(PanelTest, LongPanelWithPerSeriesTimeZones) {
  // S series of N events each over C = 4 channels; some series never show
  // channel 3, so the client must pin num_channels in every chunk.
  constexpr int64_t kSeries = 1500, kEvents = 120;
  std::vector<double> times;
  std::vector<int32_t> channels;
  std::vector<double> values;
  std::vector<int64_t> offsets = {0};
  std::vector<int32_t> zone_index;
  for (int64_t s = 0; s < kSeries; ++s) {
    for (int64_t i = 0; i < kEvents; ++i) {
      const int64_t k = s * kEvents + i;
      times.push_back(1.7e18 + static_cast<double>(s) * 1e12 +
                      static_cast<double>(i / 2) * 6e11);
      channels.push_back(static_cast<int32_t>(
          (bench::WorkloadPHash(static_cast<uint64_t>(k)) % 4) %
          (s % 5 == 0 ? 3 : 4)));
      values.push_back(std::sin(0.01 * static_cast<double>(k)));
    }
    offsets.push_back(offsets.back() + kEvents);
    zone_index.push_back(static_cast<int32_t>(s % 3));
  }
  const int64_t rows = kSeries * kEvents;
  v1::EncodeObservationsRequest request;
  *request.mutable_spec() = bench::WorkloadPSpec();
  request.mutable_spec()->mutable_temporal()->mutable_content();
  v1::Observations* observations = request.mutable_observations();
  std::vector<int64_t> times_ns(times.begin(), times.end());
  *observations->mutable_event_times() = TensorFromInt64s(times_ns, {rows});
  v1::Tensor* channel_tensor = observations->mutable_event_channels();
  channel_tensor->set_dtype(v1::INT32);
  channel_tensor->add_shape(rows);
  channel_tensor->set_data(std::string(
      reinterpret_cast<const char*>(channels.data()),
      channels.size() * sizeof(int32_t)));
  *observations->mutable_event_values() =
      *TensorFromDoubles(values, {rows}, v1::FLOAT64);
  *observations->mutable_series_offsets() =
      TensorFromInt64s(offsets, {kSeries + 1});
  observations->add_time_zones("America/New_York");
  observations->add_time_zones("Asia/Kolkata");
  observations->add_time_zones("UTC");
  v1::Tensor* index = observations->mutable_time_zone_index();
  index->set_dtype(v1::INT32);
  index->add_shape(kSeries);
  index->set_data(std::string(reinterpret_cast<const char*>(zone_index.data()),
                              zone_index.size() * sizeof(int32_t)));

  PanelStats stats;
  const v1::EncodeObservationsResponse split = Split(request, &stats);
  EXPECT_GT(stats.calls, 1);
  ExpectSameResponse(split, Reference(request));
}

TEST_F(PanelTest, ErrorNamesThePanelsSeries) {
  v1::EncodeObservationsRequest request =
      bench::WorkloadPPanelRequest(SmallWorkload(3000));
  // Series 2500, row 3 goes back in time.
  v1::Tensor* timestamps = request.mutable_observations()->mutable_timestamps();
  int64_t* data = reinterpret_cast<int64_t*>(timestamps->mutable_data()->data());
  data[2500 * 100 + 3] = data[2500 * 100 + 2] - 1;

  auto reference = Client(*roomy_, 256 << 20)->EncodeObservations(request);
  ASSERT_FALSE(reference.ok());
  auto split =
      Client(*small_, kSmallLimitBytes)->EncodeObservationsPanel(request);
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.status().code(), reference.status().code());
  EXPECT_THAT(std::string(reference.status().message()),
              HasSubstr("series[2500]"));
  EXPECT_THAT(std::string(split.status().message()),
              HasSubstr("series[2500]"));
  // The structured violations too, for callers that map them back to their
  // input (phasor-client's CSV lines).
  std::vector<std::string> split_fields, reference_fields;
  for (const FieldViolation& v : FieldViolationsOf(split.status())) {
    split_fields.push_back(v.field);
  }
  for (const FieldViolation& v : FieldViolationsOf(reference.status())) {
    reference_fields.push_back(v.field);
  }
  EXPECT_THAT(reference_fields,
              ::testing::ElementsAre("observations.series[2500].timestamps[3]"));
  EXPECT_EQ(split_fields, reference_fields);
}

// In a series cut into chunks, a violation in a later chunk names its row
// within the whole series, as one uncut call would: timestamps per row,
// values [T, C] per value.
TEST_F(PanelTest, ErrorInAContinuedChunkNamesTheRowOfTheSeries) {
  constexpr int64_t kRow = 30000;  // Of series 1, which starts at row 100.
  for (const bool bad_value : {false, true}) {
    v1::EncodeObservationsRequest request = PanelWithHugeSeries();
    v1::Observations* observations = request.mutable_observations();
    if (bad_value) {
      double* values =
          reinterpret_cast<double*>(observations->mutable_values()->mutable_data()->data());
      values[(100 + kRow) * 3 + 2] = std::numeric_limits<double>::infinity();
    } else {
      int64_t* times = reinterpret_cast<int64_t*>(
          observations->mutable_timestamps()->mutable_data()->data());
      times[100 + kRow] = times[100 + kRow - 1] - 1;
    }
    auto reference = Client(*roomy_, 256 << 20)->EncodeObservations(request);
    ASSERT_FALSE(reference.ok());
    PanelStats stats;
    auto split = Client(*small_, kSmallLimitBytes)
                     ->EncodeObservationsPanel(request, PanelOptions(), &stats);
    ASSERT_FALSE(split.ok());
    const std::vector<FieldViolation> want = FieldViolationsOf(reference.status());
    const std::vector<FieldViolation> got = FieldViolationsOf(split.status());
    ASSERT_EQ(want.size(), 1u) << reference.status();
    ASSERT_EQ(got.size(), 1u) << split.status();
    EXPECT_EQ(want[0].field, bad_value ? "observations.series[1].values[90002]"
                                       : "observations.series[1].timestamps[30000]");
    EXPECT_EQ(got[0].field, want[0].field) << split.status();
    EXPECT_THAT(std::string(split.status().message()),
                HasSubstr("(continuing the series)"));
  }
}


// How FakeEncoder answers a call with rows.
enum class Reply {
  kGood,            // features [rows, 2] float32 and one state per series
  kDataTooLong,     // features.data 4 bytes longer than [rows, 2] float32
  kDataTooShort,    // 4 bytes shorter
  kDataTwice,       // features.data sent twice
  kCutShort,        // a good reply cut in the middle of features.data
  kLengthPastEnd,   // features' length 16 bytes more than the reply holds
  kStatesMissing,   // no states
};

// An EncodeObservations that answers the zero-row probe with [0, 2] float32
// and every other call as `reply` says.
class FakeEncoder final : public grpc::CallbackGenericService {
 public:
  std::atomic<Reply> reply{Reply::kGood};

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* /*context*/) override {
    return new Call(this);
  }

 private:
  class Call final : public grpc::ServerGenericBidiReactor {
   public:
    explicit Call(FakeEncoder* fake) : fake_(fake) { StartRead(&request_); }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
        return;
      }
      v1::EncodeObservationsRequest request;
      grpc::ProtoBufferReader reader(&request_);
      if (!request.ParseFromZeroCopyStream(&reader)) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unparsable"));
        return;
      }
      const int64_t rows = request.observations().timestamps().shape(0);
      const int64_t series = request.observations().series_offsets().shape(0) - 1;
      const Reply reply = rows == 0 ? Reply::kGood : fake_->reply.load();
      v1::EncodeObservationsResponse response;
      v1::Tensor* features = response.mutable_features();
      features->set_dtype(v1::FLOAT32);
      features->add_shape(rows);
      features->add_shape(2);
      int64_t bytes = rows * 2 * 4;
      if (reply == Reply::kDataTooLong) bytes += 4;
      if (reply == Reply::kDataTooShort) bytes -= 4;
      features->set_data(std::string(static_cast<size_t>(bytes), '\x5a'));
      if (reply != Reply::kStatesMissing) {
        for (int64_t s = 0; s < series; ++s) response.add_states();
      }
      std::string wire = response.SerializeAsString();
      if (reply == Reply::kDataTwice) {
        v1::EncodeObservationsResponse again;
        again.mutable_features()->set_data(features->data());
        wire += again.SerializeAsString();
      }
      if (reply == Reply::kCutShort || reply == Reply::kLengthPastEnd) {
        // The states first, so that only the features are wrong: field 1
        // (tag 0x0a), its length as a varint, then the tensor, cut in the
        // middle of its data or with a length 16 bytes past the end.
        v1::EncodeObservationsResponse states_only = response;
        states_only.clear_features();
        std::string tensor = features->SerializeAsString();
        const uint64_t length =
            tensor.size() + (reply == Reply::kLengthPastEnd ? 16 : 0);
        if (reply == Reply::kCutShort) tensor.resize(tensor.size() / 2);
        std::string head = "\x0a";
        for (uint64_t n = length;; n >>= 7) {
          head.push_back(static_cast<char>((n & 0x7f) | (n > 0x7f ? 0x80 : 0)));
          if (n <= 0x7f) break;
        }
        wire = states_only.SerializeAsString() + head + tensor;
      }
      grpc::Slice slice(wire);
      response_ = grpc::ByteBuffer(&slice, 1);
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    FakeEncoder* fake_;
    grpc::ByteBuffer request_;
    grpc::ByteBuffer response_;
  };
};

TEST(PanelRepliesTest, MalformedSubCallRepliesAreDataLoss) {
  FakeEncoder fake;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterCallbackGenericService(&fake);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);

  ClientOptions options;
  options.target = absl::StrCat("127.0.0.1:", port);
  options.deadline = absl::Seconds(30);
  auto client = EncoderClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  const v1::EncodeObservationsRequest request =
      bench::WorkloadPPanelRequest(SmallWorkload(100));
  PanelOptions panel;
  panel.max_call_bytes = 64 << 10;  // 10,000 rows: several sub-calls.

  PanelStats stats;
  auto good = (*client)->EncodeObservationsPanel(request, panel, &stats);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_GT(stats.calls, 1);
  EXPECT_EQ(ShapeString(good->features()), "[10000,2]");
  EXPECT_EQ(good->features().data(), std::string(10000 * 2 * 4, '\x5a'));
  EXPECT_EQ(good->states_size(), 100);

  for (const Reply reply : {Reply::kDataTooLong, Reply::kDataTooShort,
                            Reply::kDataTwice, Reply::kCutShort,
                            Reply::kLengthPastEnd, Reply::kStatesMissing}) {
    SCOPED_TRACE(static_cast<int>(reply));
    fake.reply = reply;
    auto bad = (*client)->EncodeObservationsPanel(request, panel);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss) << bad.status();
    EXPECT_THAT(std::string(bad.status().message()),
                HasSubstr("panel sub-call for series ["));
  }
  server->Shutdown();
}

}  // namespace
}  // namespace phasor
