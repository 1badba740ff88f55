// Tests for SharedMemorySession (client/shared_memory_session.h) against a
// phasor-server process started with --system_shared_memory=true: ApplyRope
// and panels through shared memory equal the native EncoderClient calls of
// the same profile byte for byte; the region is reused, and replaced by a
// larger one when a call does not fit, while views of the old one keep
// their bytes; Close() and the destructor leave no /dev/shm object and no
// registration; copies outlive the next call; bad inputs name their field;
// a server without the flag answers UNIMPLEMENTED saying how to enable it.
#include "client/shared_memory_session.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <glob.h>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/encoder_client.h"
#include "client/tensor_io.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/server/test_util.h"

namespace phasor {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using server::testing::Child;
using server::testing::ReadPort;
using server::testing::Spawn;
using server::testing::TempDir;
using server::testing::WaitExit;

constexpr int64_t kStartNs = int64_t{1704067200} * 1000000000;  // 2024-01-01.

constexpr char kProfiles[] = R"pb(
profile { name: "rope" spec { rope { rotary_dim: 32 } } }
profile {
  name: "yarn"
  spec { rope { scaling { yarn { factor: 4 original_max_position_embeddings: 64 } } } }
}
profile {
  name: "panel"
  spec {
    temporal {
      time { dim: 8 }
      gaps { include_mask: true }
      calendar { fields: [HOUR_OF_DAY, DAY_OF_WEEK, MONTH_OF_YEAR] }
    }
  }
}
)pb";

// A phasor-server process on a free loopback port, killed by pid.
class ServerProcess final {
 public:
  explicit ServerProcess(const std::vector<std::string>& extra_args) {
    std::vector<std::string> args = {"--grpc_address=127.0.0.1:0", "--metrics_address=",
                                     "--threads=2",
                                     "--profiles=" + dir_.WriteFile("profiles.txtpb", kProfiles)};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    child_ = Spawn(args, {});
    std::string log;
    port_ = ReadPort(child_, &log);
    EXPECT_GT(port_, 0) << log;
  }
  ~ServerProcess() {
    if (child_.pid > 0) {
      kill(child_.pid, SIGTERM);
      WaitExit(child_);
    }
  }

  std::unique_ptr<EncoderClient> Client() const {
    ClientOptions options;
    options.target = absl::StrCat("127.0.0.1:", port_);
    options.deadline = absl::Seconds(60);
    auto client = EncoderClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return *std::move(client);
  }

 private:
  TempDir dir_;
  Child child_;
  int port_ = 0;
};

v1::Tensor RandomFloats(std::vector<int64_t> shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  int64_t count = 1;
  for (const int64_t dim : shape) count *= dim;
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values) v = normal(rng);
  v1::Tensor tensor;
  tensor.set_dtype(v1::FLOAT32);
  for (const int64_t dim : shape) tensor.add_shape(dim);
  tensor.set_data(values.data(), values.size() * sizeof(float));
  return tensor;
}

v1::Tensor Int64s(const std::vector<int64_t>& values) {
  v1::Tensor tensor;
  tensor.set_dtype(v1::INT64);
  tensor.add_shape(static_cast<int64_t>(values.size()));
  tensor.set_data(values.data(), values.size() * sizeof(int64_t));
  return tensor;
}

v1::ApplyRopeRequest RopeRequest(const std::string& profile, int64_t tokens, uint32_t seed) {
  v1::ApplyRopeRequest request;
  request.set_profile(profile);
  *request.mutable_query() = RandomFloats({tokens, 4, 64}, seed);
  *request.mutable_key() = RandomFloats({tokens, 2, 64}, seed + 1);
  std::vector<int64_t> positions(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) positions[static_cast<size_t>(t)] = 1000 + 3 * t;
  *request.mutable_positions()->mutable_values() = Int64s(positions);
  return request;
}

// Irregular timestamps from `start_ns` on (series s shifted by s * 7919 s,
// steps of 1 min to 2 h), values [T, 3] float64 with NaN = not observed,
// offsets of `num_series` series of `rows_per_series` rows.
v1::EncodeObservationsRequest PanelRequest(int num_series, int rows_per_series, uint32_t seed,
                                           int64_t start_ns = kStartNs) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> step_seconds(60, 7200);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform;
  const int64_t rows = int64_t{num_series} * rows_per_series;
  std::vector<int64_t> timestamps;
  std::vector<double> values;
  std::vector<int64_t> offsets = {0};
  for (int s = 0; s < num_series; ++s) {
    int64_t t = start_ns + int64_t{s} * 7919 * 1000000000;
    for (int r = 0; r < rows_per_series; ++r) {
      t += step_seconds(rng) * 1000000000;
      timestamps.push_back(t);
      for (int c = 0; c < 3; ++c) {
        values.push_back(uniform(rng) < 0.3 ? std::nan("") : normal(rng));
      }
    }
    offsets.push_back(offsets.back() + rows_per_series);
  }
  v1::EncodeObservationsRequest request;
  request.set_profile("panel");
  v1::Observations* observations = request.mutable_observations();
  *observations->mutable_timestamps() = Int64s(timestamps);
  v1::Tensor* value_tensor = observations->mutable_values();
  value_tensor->set_dtype(v1::FLOAT64);
  value_tensor->add_shape(rows);
  value_tensor->add_shape(3);
  value_tensor->set_data(values.data(), values.size() * sizeof(double));
  *observations->mutable_series_offsets() = Int64s(offsets);
  return request;
}

PanelInputs InputsOf(const v1::EncodeObservationsRequest& request) {
  PanelInputs inputs;
  inputs.timestamps = TensorRef::Of(request.observations().timestamps());
  inputs.values = TensorRef::Of(request.observations().values());
  inputs.series_offsets = TensorRef::Of(request.observations().series_offsets());
  inputs.states.assign(request.states().begin(), request.states().end());
  return inputs;
}

bool ObjectExists(const std::string& key) {
  struct stat info;
  return stat(absl::StrCat("/dev/shm", key).c_str(), &info) == 0;
}

// This process's objects under the default prefix.
std::vector<std::string> OwnObjects() {
  std::vector<std::string> paths;
  glob_t found;
  if (glob(absl::StrCat("/dev/shm/phasor_", getpid(), "_*").c_str(), 0, nullptr, &found) == 0) {
    for (size_t i = 0; i < found.gl_pathc; ++i) paths.push_back(found.gl_pathv[i]);
  }
  globfree(&found);
  return paths;
}

class SharedMemorySessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess({"--system_shared_memory=true"}); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { client_ = server_->Client(); }

  std::unique_ptr<SharedMemorySession> Session(
      SharedMemorySessionOptions options = SharedMemorySessionOptions()) {
    auto session = client_->SharedMemory(options);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? *std::move(session) : nullptr;
  }

  v1::ApplyRopeResponse NativeRope(const v1::ApplyRopeRequest& request) {
    auto response = client_->ApplyRope(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : v1::ApplyRopeResponse();
  }

  static absl::StatusOr<SharedRopeResult> ShmRope(SharedMemorySession& session,
                                                  const v1::ApplyRopeRequest& request,
                                                  ResultCopy copy = ResultCopy::kSessionDefault) {
    return session.ApplyRope(request.profile(), TensorRef::Of(request.query()),
                             request.has_key() ? TensorRef::Of(request.key()) : TensorRef(),
                             TensorRef::Of(request.positions().values()),
                             request.tensor_layout(), copy);
  }

  static void ExpectSameTensor(const SharedTensor& shm, const v1::Tensor& native) {
    EXPECT_EQ(shm.dtype, native.dtype());
    EXPECT_THAT(shm.shape, ::testing::ElementsAreArray(native.shape()));
    ASSERT_EQ(shm.data.size(), native.data().size());
    // Bytewise: the server runs the same handler.
    EXPECT_TRUE(shm.data == native.data());
  }

  static ServerProcess* server_;
  std::unique_ptr<EncoderClient> client_;
};

ServerProcess* SharedMemorySessionTest::server_ = nullptr;

TEST_F(SharedMemorySessionTest, ApplyRopeIsBytewiseTheNativeCall) {
  auto session = Session();
  ASSERT_NE(session, nullptr);
  for (const std::string profile : {"rope", "yarn"}) {
    const v1::ApplyRopeRequest request = RopeRequest(profile, 96, 7);
    const v1::ApplyRopeResponse native = NativeRope(request);
    auto shm = ShmRope(*session, request);
    ASSERT_TRUE(shm.ok()) << shm.status();
    ExpectSameTensor(shm->query, native.query());
    ExpectSameTensor(shm->key, native.key());
    EXPECT_EQ(shm->attention_factor, native.attention_factor()) << profile;
    // Views of one region (its mapping holds both), not copies.
    EXPECT_NE(shm->query.owner, nullptr);
    EXPECT_EQ(shm->query.owner, shm->key.owner);
  }
  // Without a key, continuous (float64) positions, fp16 query: still equal.
  v1::ApplyRopeRequest request = RopeRequest("rope", 33, 11);
  request.clear_key();
  auto half = CastTensor(request.query(), v1::FLOAT16, "query");
  ASSERT_TRUE(half.ok()) << half.status();
  *request.mutable_query() = *std::move(half);
  std::vector<double> positions(33);
  for (size_t t = 0; t < positions.size(); ++t) positions[t] = 0.37 * static_cast<double>(t);
  v1::Tensor* values = request.mutable_positions()->mutable_values();
  values->set_dtype(v1::FLOAT64);
  values->set_data(positions.data(), positions.size() * sizeof(double));
  const v1::ApplyRopeResponse native = NativeRope(request);
  auto shm = ShmRope(*session, request);
  ASSERT_TRUE(shm.ok()) << shm.status();
  ExpectSameTensor(shm->query, native.query());
  EXPECT_EQ(shm->query.dtype, v1::FLOAT16);
  EXPECT_EQ(shm->key.dtype, v1::DTYPE_UNSPECIFIED);
  EXPECT_FALSE(native.has_key());
  // One region served every call.
  EXPECT_EQ(session->region_bytes(), int64_t{1} << 20);
}

TEST_F(SharedMemorySessionTest, EncodePanelIsBytewiseTheNativeCall) {
  auto session = Session();
  ASSERT_NE(session, nullptr);
  for (const v1::DType dtype : {v1::FLOAT32, v1::FLOAT64, v1::BFLOAT16}) {
    v1::EncodeObservationsRequest request = PanelRequest(7, 120, 3);
    request.set_output_dtype(dtype);
    auto native = client_->EncodeObservations(request);
    ASSERT_TRUE(native.ok()) << native.status();
    PanelCallOptions options;
    options.output_dtype = dtype;
    options.return_states = true;
    auto shm = session->EncodePanel("panel", InputsOf(request), options);
    ASSERT_TRUE(shm.ok()) << shm.status();
    ExpectSameTensor(shm->features, native->features());
    ASSERT_EQ(static_cast<int>(shm->schema.size()), native->schema_size());
    for (int i = 0; i < native->schema_size(); ++i) {
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
          shm->schema[static_cast<size_t>(i)], native->schema(i)));
    }
    ASSERT_EQ(static_cast<int>(shm->states.size()), native->states_size());
    for (int s = 0; s < native->states_size(); ++s) {
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
          shm->states[static_cast<size_t>(s)], native->states(s)))
          << "series " << s;
    }

    // Continued from those states, a second panel is the native
    // continuation too.
    // (The first panel spans at most 120 * 2 h + 7 * 7919 s < 11 days.)
    v1::EncodeObservationsRequest later =
        PanelRequest(7, 40, 5, kStartNs + int64_t{30} * 86400 * 1000000000);
    later.set_output_dtype(dtype);
    *later.mutable_states() = native->states();
    auto native_later = client_->EncodeObservations(later);
    ASSERT_TRUE(native_later.ok()) << native_later.status();
    auto shm_later = session->EncodePanel("panel", InputsOf(later), options);
    ASSERT_TRUE(shm_later.ok()) << shm_later.status();
    ExpectSameTensor(shm_later->features, native_later->features());
  }
  EXPECT_TRUE(ObjectExists(session->region_key()));
}

// Long (event triplet) panels learn C from the events, and per-series time
// zones travel as BYTES and INT32 inputs in the region.
TEST_F(SharedMemorySessionTest, LongPanelWithZonesIsBytewiseTheNativeCall) {
  auto session = Session();
  ASSERT_NE(session, nullptr);
  constexpr int kSeries = 5;
  constexpr int kEventsPerSeries = 90;
  std::mt19937 rng(71);
  std::uniform_int_distribution<int> channel(0, 2);
  std::uniform_int_distribution<int64_t> step_seconds(1, 3600);
  std::normal_distribution<float> normal;
  std::vector<int64_t> times;
  std::vector<int32_t> channels;
  std::vector<float> values;
  std::vector<int64_t> offsets = {0};
  for (int s = 0; s < kSeries; ++s) {
    int64_t t = kStartNs + int64_t{s} * 86400 * 1000000000;
    for (int e = 0; e < kEventsPerSeries; ++e) {
      t += step_seconds(rng) * 1000000000;
      times.push_back(t);
      channels.push_back(channel(rng));
      values.push_back(normal(rng));
    }
    offsets.push_back(offsets.back() + kEventsPerSeries);
  }
  v1::EncodeObservationsRequest request;
  request.set_profile("panel");
  v1::Observations* observations = request.mutable_observations();
  *observations->mutable_event_times() = Int64s(times);
  v1::Tensor* channel_tensor = observations->mutable_event_channels();
  channel_tensor->set_dtype(v1::INT32);
  channel_tensor->add_shape(static_cast<int64_t>(channels.size()));
  channel_tensor->set_data(channels.data(), channels.size() * sizeof(int32_t));
  v1::Tensor* value_tensor = observations->mutable_event_values();
  value_tensor->set_dtype(v1::FLOAT32);
  value_tensor->add_shape(static_cast<int64_t>(values.size()));
  value_tensor->set_data(values.data(), values.size() * sizeof(float));
  *observations->mutable_series_offsets() = Int64s(offsets);
  observations->add_time_zones("UTC");
  observations->add_time_zones("America/New_York");
  const std::vector<int32_t> zone_index = {0, 1, 1, 0, 1};
  v1::Tensor* index_tensor = observations->mutable_time_zone_index();
  index_tensor->set_dtype(v1::INT32);
  index_tensor->add_shape(kSeries);
  index_tensor->set_data(zone_index.data(), zone_index.size() * sizeof(int32_t));
  auto native = client_->EncodeObservations(request);
  ASSERT_TRUE(native.ok()) << native.status();

  PanelInputs inputs;
  inputs.event_times = TensorRef::Of(observations->event_times());
  inputs.event_channels = TensorRef::Of(observations->event_channels());
  inputs.event_values = TensorRef::Of(observations->event_values());
  inputs.series_offsets = TensorRef::Of(observations->series_offsets());
  inputs.time_zones.assign(observations->time_zones().begin(), observations->time_zones().end());
  inputs.time_zone_index = TensorRef::Of(observations->time_zone_index());
  auto shm = session->EncodePanel("panel", inputs);
  ASSERT_TRUE(shm.ok()) << shm.status();
  ExpectSameTensor(shm->features, native->features());
  EXPECT_THAT(shm->states, IsEmpty()) << "return_states was not asked for";
}

TEST_F(SharedMemorySessionTest, ACallLargerThanTheRegionGrowsIt) {
  auto session = Session();
  ASSERT_NE(session, nullptr);
  const v1::ApplyRopeRequest small = RopeRequest("rope", 16, 21);
  auto first = ShmRope(*session, small);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string first_key = session->region_key();
  EXPECT_EQ(session->region_bytes(), int64_t{1} << 20);
  EXPECT_TRUE(ObjectExists(first_key));
  const std::string first_query(first->query.data);

  // 1024 tokens: query 1 MiB + key 512 KiB in, as much out: 3 MiB.
  const v1::ApplyRopeRequest large = RopeRequest("rope", 1024, 22);
  const v1::ApplyRopeResponse native = NativeRope(large);
  auto second = ShmRope(*session, large);
  ASSERT_TRUE(second.ok()) << second.status();
  ExpectSameTensor(second->query, native.query());
  ExpectSameTensor(second->key, native.key());
  const std::string second_key = session->region_key();
  EXPECT_NE(second_key, first_key);
  EXPECT_GE(session->region_bytes(), 3 * (int64_t{1} << 20));
  EXPECT_FALSE(ObjectExists(first_key)) << "the replaced object is unlinked";
  EXPECT_TRUE(ObjectExists(second_key));
  auto regions = session->ServerRegions();
  ASSERT_TRUE(regions.ok()) << regions.status();
  ASSERT_EQ(regions->size(), 1u);
  EXPECT_EQ((*regions)[0].key, second_key);
  EXPECT_EQ(static_cast<int64_t>((*regions)[0].byte_size), session->region_bytes());
  // The view of the replaced region still maps its memory and its bytes.
  EXPECT_TRUE(first->query.data == first_query);

  // The grown region serves the small call again without growing.
  auto third = ShmRope(*session, small);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(session->region_key(), second_key);
  EXPECT_TRUE(third->query.data == first_query);
}

TEST_F(SharedMemorySessionTest, CopiesOutliveTheNextCall) {
  SharedMemorySessionOptions options;
  options.copy = true;
  auto session = Session(options);
  ASSERT_NE(session, nullptr);
  const v1::ApplyRopeRequest a = RopeRequest("rope", 64, 31);
  const v1::ApplyRopeRequest b = RopeRequest("rope", 64, 32);
  const v1::ApplyRopeResponse native_a = NativeRope(a);
  auto copied = ShmRope(*session, a);
  ASSERT_TRUE(copied.ok()) << copied.status();
  auto viewed = ShmRope(*session, a, ResultCopy::kView);
  ASSERT_TRUE(viewed.ok()) << viewed.status();
  EXPECT_TRUE(viewed->query.data == native_a.query().data());
  ASSERT_TRUE(ShmRope(*session, b).ok());
  // The copy kept call a's bytes; the view now shows call b's.
  ExpectSameTensor(copied->query, native_a.query());
  EXPECT_FALSE(viewed->query.data == native_a.query().data());
  EXPECT_TRUE(copied->query.ToTensor().data() == native_a.query().data());
}

TEST_F(SharedMemorySessionTest, CloseLeavesNoObjectAndNoRegistration) {
  auto session = Session();
  ASSERT_NE(session, nullptr);
  auto rope = ShmRope(*session, RopeRequest("rope", 16, 41));
  ASSERT_TRUE(rope.ok()) << rope.status();
  const std::string key = session->region_key();
  ASSERT_TRUE(ObjectExists(key));
  const std::string rotated(rope->query.data);
  auto before = session->ServerRegions();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->size(), 1u);

  ASSERT_TRUE(session->Close().ok());
  EXPECT_FALSE(ObjectExists(key));
  EXPECT_THAT(OwnObjects(), IsEmpty());
  EXPECT_EQ(session->region_key(), "");
  auto after = session->ServerRegions();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT(*after, IsEmpty());
  EXPECT_TRUE(session->Close().ok()) << "idempotent";
  auto closed = ShmRope(*session, RopeRequest("rope", 16, 41));
  EXPECT_EQ(closed.status().code(), absl::StatusCode::kFailedPrecondition);
  // A view taken before Close still maps its memory and its bytes.
  EXPECT_TRUE(rope->query.data == rotated);

  // The destructor does what Close does.
  auto dropped = Session();
  ASSERT_NE(dropped, nullptr);
  ASSERT_TRUE(ShmRope(*dropped, RopeRequest("rope", 16, 42)).ok());
  const std::string dropped_key = dropped->region_key();
  ASSERT_TRUE(ObjectExists(dropped_key));
  dropped.reset();
  EXPECT_FALSE(ObjectExists(dropped_key));
  EXPECT_THAT(OwnObjects(), IsEmpty());
  auto observer = Session();
  ASSERT_NE(observer, nullptr);
  auto regions = observer->ServerRegions();
  ASSERT_TRUE(regions.ok()) << regions.status();
  EXPECT_THAT(*regions, IsEmpty());
}

TEST_F(SharedMemorySessionTest, BadInputsNameTheirField) {
  auto session = Session();
  ASSERT_NE(session, nullptr);
  v1::ApplyRopeRequest request = RopeRequest("rope", 16, 51);
  // Caught by the session: bytes that do not match dtype and shape.
  request.mutable_query()->mutable_data()->resize(100);
  auto short_query = ShmRope(*session, request);
  EXPECT_EQ(short_query.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_query.status().message(), HasSubstr("query.data"));
  EXPECT_EQ(session->region_key(), "") << "nothing was created for it";

  // Caught by the server: positions that do not match the tokens.
  request = RopeRequest("rope", 16, 51);
  *request.mutable_positions()->mutable_values() = Int64s({1, 2, 3});
  auto positions = ShmRope(*session, request);
  EXPECT_EQ(positions.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(positions.status().message(), HasSubstr("positions"));

  // A profile that is not a model.
  request = RopeRequest("no_such_profile", 16, 51);
  auto unknown = ShmRope(*session, request);
  EXPECT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("no_such_profile"));

  // The session still works after its errors.
  request = RopeRequest("rope", 16, 52);
  auto fine = ShmRope(*session, request);
  ASSERT_TRUE(fine.ok()) << fine.status();
  ExpectSameTensor(fine->query, NativeRope(request).query());

  // Options are checked when the session is made.
  SharedMemorySessionOptions bad;
  bad.key_prefix = "phasor/x";
  auto refused = client_->SharedMemory(bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("key_prefix"));
}

TEST(SharedMemorySessionDisabledTest, ServerWithoutTheFlagIsUnimplemented) {
  ServerProcess server({});
  auto client = server.Client();
  auto session = client->SharedMemory();
  ASSERT_TRUE(session.ok()) << session.status();
  const v1::ApplyRopeRequest request = RopeRequest("rope", 16, 61);
  auto rope = (*session)->ApplyRope("rope", TensorRef::Of(request.query()),
                                    TensorRef::Of(request.key()),
                                    TensorRef::Of(request.positions().values()));
  EXPECT_EQ(rope.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(rope.status().message(), HasSubstr("--system_shared_memory=true"));
  // The object made for the registration is gone again.
  EXPECT_EQ((*session)->region_key(), "");
  EXPECT_THAT(OwnObjects(), IsEmpty());
  EXPECT_TRUE((*session)->Close().ok());
}

}  // namespace
}  // namespace phasor
