// Hostile-client limits: bounded error statuses, sizes checked before
// anything is allocated, and no client string kept in a cache.
//
// HardeningTest runs an in-process server. BinaryMemoryTest runs the
// phasor-server binary and reads its memory from /proc/<pid>/status; those
// tests carry the ctest label no_sanitizer (tests/server/CMakeLists.txt):
// under ASan the quarantine and shadow memory change RSS beyond any useful
// bound.
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "gmock/gmock.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "server/convert.h"
#include "server/grpc_status.h"
#include "test_util.h"

namespace phasor::server::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// True when `text` is well-formed UTF-8 (no check for overlongs: the
// inputs here are cut from well-formed text).
bool IsUtf8(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t length = lead < 0x80 ? 1 : lead >> 5 == 0x6 ? 2 : lead >> 4 == 0xE ? 3
                                        : lead >> 3 == 0x1E ? 4 : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (size_t j = 1; j < length; ++j) {
      if ((static_cast<unsigned char>(text[i + j]) & 0xC0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

// --- The capping function --------------------------------------------------

// Guards CapUtf8: short text is untouched; long text is cut to the budget at
// a character boundary with a note of how much was cut.
TEST(CapUtf8, CutsAtACharacterBoundaryWithinTheBudget) {
  EXPECT_EQ(CapUtf8("short", 64), "short");
  EXPECT_EQ(CapUtf8(std::string(64, 'a'), 64), std::string(64, 'a'));
  const std::string ascii = CapUtf8(std::string(1000, 'a'), 64);
  EXPECT_LE(ascii.size(), 64u);
  EXPECT_THAT(ascii, StartsWith(std::string(20, 'a')));
  EXPECT_THAT(ascii, HasSubstr(absl::StrCat("...(", 1000 - ascii.find('.'), " more bytes)")));
  // Two-, three- and four-byte characters at every offset of the cut.
  for (const std::string unit : {"\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"}) {
    for (size_t prefix = 0; prefix < 4; ++prefix) {
      std::string text(prefix, 'x');
      for (int i = 0; i < 300; ++i) text += unit;
      for (size_t budget : {32u, 33u, 34u, 35u, 100u, 512u}) {
        const std::string capped = CapUtf8(text, budget);
        EXPECT_LE(capped.size(), budget);
        EXPECT_TRUE(IsUtf8(capped)) << budget << " " << prefix;
        const size_t kept = capped.find("...(");
        ASSERT_NE(kept, std::string::npos);
        EXPECT_EQ(capped.substr(kept),
                  absl::StrCat("...(", text.size() - kept, " more bytes)"));
        EXPECT_EQ(capped.substr(0, kept), text.substr(0, kept));
      }
    }
  }
}

// Guards ToGrpcStatus: whatever a status quotes, the message, the field
// violation and the serialized details stay well under gRPC's 8 KiB
// metadata limit.
TEST(ToGrpcStatus, MessageFieldAndDetailsAreBounded) {
  const std::string field = absl::StrCat("spec.", std::string(5000, 'f'));
  const absl::Status status =
      FieldError(absl::StatusCode::kInvalidArgument, field,
                 absl::StrCat("unknown thing \"", std::string(3 << 20, 'x'), "\""));
  const grpc::Status wire = ToGrpcStatus(status);
  EXPECT_EQ(wire.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // (Plain comparisons: a failing matcher would print megabytes.)
  ASSERT_LE(wire.error_message().size(), kMaxStatusMessageBytes);
  EXPECT_THAT(wire.error_message(), HasSubstr("more bytes)"));
  EXPECT_LT(wire.error_details().size(), 2048u);
  const google::rpc::BadRequest bad = BadRequestOf(wire);
  ASSERT_EQ(bad.field_violations_size(), 1);
  ASSERT_LE(bad.field_violations(0).field().size(), kMaxFieldPathBytes);
  EXPECT_THAT(bad.field_violations(0).field(), StartsWith("spec.fff"));
  ASSERT_LE(bad.field_violations(0).description().size(), kMaxDescriptionBytes);
  EXPECT_THAT(bad.field_violations(0).description(), StartsWith("unknown thing \"xxx"));

  // Small statuses pass unchanged.
  const grpc::Status small = ToGrpcStatus(
      FieldError(absl::StatusCode::kNotFound, "profile", "unknown profile 'p'"));
  EXPECT_EQ(small.error_message(), "profile: unknown profile 'p'");
  EXPECT_EQ(BadRequestOf(small).field_violations(0).description(), "unknown profile 'p'");
}

TEST(ShapeString, LongShapesAreAbbreviated) {
  EXPECT_EQ(ShapeString(std::vector<int64_t>{2, 4, 128}), "[2,4,128]");
  EXPECT_EQ(ShapeString(std::vector<int64_t>(8, 1)), "[1,1,1,1,1,1,1,1]");
  EXPECT_EQ(ShapeString(std::vector<int64_t>(10000, 1)),
            "[1,1,1,1,1,1,1,1,...(10000 dims)]");
}

// --- In-process server ------------------------------------------------------

class HardeningTest : public ::testing::Test {
 protected:
  HardeningTest() : server_(StartTestServer(TestOptions())) {}

  // A bounded error on `field`, then a quick successful call on the same
  // channel: the status crossed as ordinary trailers and stalled nothing.
  void ExpectBoundedError(const grpc::Status& status, grpc::StatusCode code,
                          const std::string& field) {
    EXPECT_EQ(status.error_code(), code) << status.error_message().substr(0, 300);
    ASSERT_LE(status.error_message().size(), 1024u) << status.error_message().substr(0, 300);
    EXPECT_THAT(status.error_message(), StartsWith(field + ": "));
    EXPECT_LE(status.error_details().size(), 4096u);
    const google::rpc::BadRequest bad = BadRequestOf(status);
    ASSERT_EQ(bad.field_violations_size(), 1);
    EXPECT_EQ(bad.field_violations(0).field(), field);
    const auto start = std::chrono::steady_clock::now();
    ExpectServing(*server_.stub);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  }

  TestServer server_;
};

// Guards against echoing a client's shape whole: 10,000 dimensions used to
// make a 20 KB message, which the client refused as oversized metadata
// (RESOURCE_EXHAUSTED "received initial metadata size exceeds limit").
TEST_F(HardeningTest, TenThousandDimensionShapeGetsABoundedError) {
  v1::EncodePositionsRequest request;
  v1::Tensor* values = request.mutable_positions()->mutable_values();
  for (int i = 0; i < 10000; ++i) values->add_shape(1);
  values->set_dtype(v1::INT64);
  values->set_data(std::string(8, '\0'));
  request.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(8);
  v1::EncodePositionsResponse response;
  const grpc::Status status =
      server_.stub->EncodePositions(Context().get(), request, &response);
  ExpectBoundedError(status, grpc::StatusCode::INVALID_ARGUMENT, "positions.values.shape");
  EXPECT_THAT(status.error_message(), HasSubstr("(10000 dims)"));

  // The same through a query tensor.
  v1::ApplyRopeRequest rope;
  rope.mutable_positions()->mutable_range()->set_count(1);
  rope.mutable_spec()->mutable_rope();
  v1::Tensor* query = rope.mutable_query();
  for (int i = 0; i < 10000; ++i) query->add_shape(1);
  query->set_dtype(v1::FLOAT32);
  v1::ApplyRopeResponse rope_response;
  ExpectBoundedError(server_.stub->ApplyRope(Context().get(), rope, &rope_response),
                     grpc::StatusCode::INVALID_ARGUMENT, "query.shape");
}

// Guards against echoing a 3 MB client string: such a status stalled the
// connection for 13–18 s and failed the calls after it.
TEST_F(HardeningTest, ThreeMegabyteStringsGetBoundedErrors) {
  const std::string huge(3 << 20, 'Q');
  v1::EncodePositionsRequest positions;
  positions.mutable_positions()->mutable_range()->set_count(3);
  positions.set_profile(huge);
  v1::EncodePositionsResponse positions_response;
  const grpc::Status profile = server_.stub->EncodePositions(
      Context().get(), positions, &positions_response);
  ExpectBoundedError(profile, grpc::StatusCode::NOT_FOUND, "profile");
  EXPECT_THAT(profile.error_message(),
              HasSubstr(absl::StrCat("...(", huge.size(), " bytes)'")));

  v1::EncodeObservationsRequest observations;
  const std::vector<int64_t> times = {0, 1000};
  *observations.mutable_observations()->mutable_timestamps() = Int64Tensor(times, {2});
  v1::CalendarBlock* calendar = observations.mutable_spec()->mutable_temporal()->mutable_calendar();
  calendar->set_time_zone(huge);
  calendar->add_fields(v1::CalendarBlock::HOUR_OF_DAY);
  v1::EncodeObservationsResponse observations_response;
  const grpc::Status zone = server_.stub->EncodeObservations(
      Context().get(), observations, &observations_response);
  ExpectBoundedError(zone, grpc::StatusCode::INVALID_ARGUMENT,
                     "spec.temporal.calendar.time_zone");
  EXPECT_THAT(zone.error_message(), HasSubstr(absl::StrCat("(", huge.size(), " bytes)")));

  // A holiday date is quoted at most 32 bytes long.
  calendar->set_time_zone("UTC");
  calendar->mutable_holidays()->add_dates(huge);
  ExpectBoundedError(server_.stub->EncodeObservations(Context().get(), observations,
                                                      &observations_response),
                     grpc::StatusCode::INVALID_ARGUMENT,
                     "spec.temporal.calendar.holidays.dates[0]");
}

// Every size is checked from the shapes before anything is allocated; these
// pin which check answers (the memory itself is measured on the binary
// below).
TEST_F(HardeningTest, SizesAreCheckedBeforeRangesAreMaterialised) {
  constexpr int64_t kCount = int64_t{1} << 24;
  v1::EncodePositionsRequest positions;
  positions.mutable_positions()->mutable_range()->set_count(kCount);
  positions.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(2);
  v1::EncodePositionsResponse positions_response;
  const grpc::Status encode = server_.stub->EncodePositions(
      Context().get(), positions, &positions_response);
  ExpectBoundedError(encode, grpc::StatusCode::RESOURCE_EXHAUSTED, "positions");
  EXPECT_THAT(encode.error_message(), HasSubstr("[16777216,2]"));

  v1::RopeTablesRequest tables;
  tables.mutable_positions()->mutable_range()->set_count(kCount);
  tables.mutable_spec()->mutable_rope()->set_rotary_dim(2);
  v1::RopeTablesResponse tables_response;
  ExpectBoundedError(server_.stub->RopeTables(Context().get(), tables, &tables_response),
                     grpc::StatusCode::RESOURCE_EXHAUSTED, "positions");

  // ApplyRope: a range is checked against the query's token count first.
  v1::ApplyRopeRequest rope;
  rope.mutable_positions()->mutable_range()->set_count(kCount);
  rope.mutable_spec()->mutable_rope();
  const std::vector<float> one_token(4, 1.0f);
  *rope.mutable_query() = FloatTensor(one_token, {1, 1, 4});
  v1::ApplyRopeResponse rope_response;
  const grpc::Status apply = server_.stub->ApplyRope(Context().get(), rope, &rope_response);
  ExpectBoundedError(apply, grpc::StatusCode::INVALID_ARGUMENT, "positions");
  EXPECT_THAT(apply.error_message(), HasSubstr("one position per query token (1)"));
}

// Response fields sized by a spec count toward the message limit before
// they are computed: they used to be built in full (tens of MB) and then
// fail at the transport with no field path.
TEST_F(HardeningTest, ResponseFieldsSizedBySpecsAreCheckedFirst) {
  // RopeTables' inv_freq: 2^20 doubles = 8 MiB > the 4 MiB limit, no rows.
  v1::RopeTablesRequest tables;
  tables.mutable_positions()->mutable_range()->set_count(0);
  tables.mutable_spec()->mutable_rope()->set_rotary_dim(int64_t{1} << 21);
  v1::RopeTablesResponse tables_response;
  ExpectBoundedError(server_.stub->RopeTables(Context().get(), tables, &tables_response),
                     grpc::StatusCode::RESOURCE_EXHAUSTED, "positions");

  // Describe's frequencies and wavelengths: 2 · 2^20 doubles = 16 MiB.
  v1::DescribeRequest describe;
  describe.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(
      int64_t{1} << 21);
  v1::DescribeResponse describe_response;
  ExpectBoundedError(
      server_.stub->Describe(Context().get(), describe, &describe_response),
      grpc::StatusCode::RESOURCE_EXHAUSTED, "spec.positional.sinusoidal.dim");

  // A time ladder wider than one row of any response, with no rows.
  v1::EncodeObservationsRequest wide;
  *wide.mutable_observations()->mutable_timestamps() = Int64Tensor({}, {0});
  wide.mutable_spec()->mutable_temporal()->mutable_time()->set_dim(int64_t{1} << 22);
  v1::EncodeObservationsResponse observations_response;
  ExpectBoundedError(
      server_.stub->EncodeObservations(Context().get(), wide, &observations_response),
      grpc::StatusCode::RESOURCE_EXHAUSTED, "spec.temporal.time.dim");

  // A query with no tokens but a head dimension of 2^22 (the frequency
  // table would be 16 MiB).
  v1::ApplyRopeRequest rope;
  rope.mutable_positions()->mutable_range()->set_count(0);
  rope.mutable_spec()->mutable_rope();
  *rope.mutable_query() = FloatTensor({}, {0, 1, int64_t{1} << 22});
  v1::ApplyRopeResponse rope_response;
  ExpectBoundedError(server_.stub->ApplyRope(Context().get(), rope, &rope_response),
                     grpc::StatusCode::RESOURCE_EXHAUSTED, "query.shape");

  // Millions of channels and no events: one state record per channel.
  v1::EncodeObservationsRequest channels;
  v1::Observations* events = channels.mutable_observations();
  *events->mutable_event_times() = Int64Tensor({}, {0});
  events->mutable_event_channels()->add_shape(0);
  events->mutable_event_channels()->set_dtype(v1::INT32);
  *events->mutable_event_values() = FloatTensor({}, {0});
  events->set_num_channels(int64_t{1} << 21);
  channels.mutable_spec()->mutable_temporal()->mutable_time()->set_dim(8);
  ExpectBoundedError(
      server_.stub->EncodeObservations(Context().get(), channels, &observations_response),
      grpc::StatusCode::RESOURCE_EXHAUSTED, "observations.num_channels");
}

// --- The binary ----------------------------------------------------------------

// phasor-server on a free loopback port, stopped (SIGKILL) at destruction.
class ServerProcess final {
 public:
  ServerProcess() {
    child_ = Spawn({"--grpc_address=127.0.0.1:0", "--metrics_address=", "--threads=2"}, {});
    std::string log;
    port_ = ReadPort(child_, &log);
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(64 << 20);
    arguments.SetMaxSendMessageSize(64 << 20);
    channel_ = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port_),
                                         grpc::InsecureChannelCredentials(), arguments);
    stub_ = v1::Encoder::NewStub(channel_);
  }
  ~ServerProcess() {
    if (child_.pid > 0) {
      kill(child_.pid, SIGKILL);
      WaitExit(child_);
    }
  }

  bool started() const { return port_ > 0; }
  v1::Encoder::Stub& stub() { return *stub_; }

  // A "VmRSS:"/"VmHWM:" line of /proc/<pid>/status, in bytes.
  int64_t StatusBytes(const std::string& key) const {
    std::ifstream status(absl::StrCat("/proc/", child_.pid, "/status"));
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind(key, 0) == 0) return std::atoll(line.c_str() + key.size()) * 1024;
    }
    return -1;
  }

 private:
  Child child_;
  int port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Encoder::Stub> stub_;
};

// A calendar request whose zone is `zone`.
v1::EncodeObservationsRequest ZoneRequest(const std::string& zone) {
  v1::EncodeObservationsRequest request;
  const std::vector<int64_t> times = {0, 1000};
  *request.mutable_observations()->mutable_timestamps() = Int64Tensor(times, {2});
  v1::CalendarBlock* calendar = request.mutable_spec()->mutable_temporal()->mutable_calendar();
  calendar->set_time_zone(zone);
  calendar->add_fields(v1::CalendarBlock::HOUR_OF_DAY);
  return request;
}

// Guards the zone cache: absl keeps every name it is asked to load for the
// life of the process, failures included, so 40 different ~1 MB bogus zones
// grew the server by 53 MB for good. Now only names on the tzdata zone list
// reach absl.
TEST(BinaryMemoryTest, BogusTimeZonesAreNotKept) {
  ServerProcess server;
  ASSERT_TRUE(server.started());
  v1::EncodeObservationsResponse response;
  // Warm up: a real zone, and a few bogus ones so gRPC's and malloc's
  // buffers for megabyte requests exist before the baseline.
  ASSERT_TRUE(server.stub()
                  .EncodeObservations(Context().get(), ZoneRequest("Europe/Paris"), &response)
                  .ok());
  const auto bogus = [](int i) {
    std::string zone = absl::StrCat("Bogus/", i, "/");
    zone.resize(1 << 20, 'A' + i % 26);
    return zone;
  };
  for (int i = 0; i < 4; ++i) {
    server.stub().EncodeObservations(Context().get(), ZoneRequest(bogus(1000 + i)), &response);
  }
  const int64_t before = server.StatusBytes("VmRSS:");
  ASSERT_GT(before, 0);
  for (int i = 0; i < 40; ++i) {
    const grpc::Status status =
        server.stub().EncodeObservations(Context().get(), ZoneRequest(bogus(i)), &response);
    ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << status.error_message().substr(0, 200);
  }
  const int64_t after = server.StatusBytes("VmRSS:");
  EXPECT_LT(after - before, int64_t{16} << 20)
      << "VmRSS " << before << " -> " << after << " bytes";
}

// Guards the size checks' order: a 17-byte EncodePositions or RopeTables
// request with positions.range.count = 2^24 used to materialise the range
// (128 MiB) before its output was found too large.
TEST(BinaryMemoryTest, HugeRangesAreRejectedBeforeAllocation) {
  ServerProcess server;
  ASSERT_TRUE(server.started());
  ExpectServing(server.stub());
  const int64_t before = server.StatusBytes("VmHWM:");
  ASSERT_GT(before, 0);
  for (int i = 0; i < 3; ++i) {
    v1::EncodePositionsRequest positions;
    positions.mutable_positions()->mutable_range()->set_count(int64_t{1} << 24);
    positions.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(2);
    v1::EncodePositionsResponse positions_response;
    const grpc::Status encode =
        server.stub().EncodePositions(Context().get(), positions, &positions_response);
    EXPECT_EQ(encode.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(encode.error_message(), StartsWith("positions"));

    v1::RopeTablesRequest tables;
    tables.mutable_positions()->mutable_range()->set_count(int64_t{1} << 24);
    tables.mutable_spec()->mutable_rope()->set_rotary_dim(2);
    v1::RopeTablesResponse tables_response;
    const grpc::Status rope =
        server.stub().RopeTables(Context().get(), tables, &tables_response);
    EXPECT_EQ(rope.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(rope.error_message(), StartsWith("positions"));
  }
  const int64_t after = server.StatusBytes("VmHWM:");
  EXPECT_LT(after - before, int64_t{32} << 20)
      << "VmHWM " << before << " -> " << after << " bytes";
}

}  // namespace
}  // namespace phasor::server::testing
