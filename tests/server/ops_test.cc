// Operations: health, reflection, /metrics, bearer-token auth, graceful
// shutdown, and the phasor-server binary's environment flags and SIGTERM.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/generic/generic_stub.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/unknown_field_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace phasor::server::testing {
namespace {

using ::testing::HasSubstr;

// --- Health and reflection through grpc::GenericStub ---------------------

// grpc.health.v1.HealthCheckResponse.status of `service`; -1 on error.
int HealthStatus(const std::shared_ptr<grpc::Channel>& channel,
                 const std::string& service, grpc::StatusCode* code = nullptr) {
  std::string response;
  const grpc::Status status = GenericUnary(channel, "/grpc.health.v1.Health/Check",
                                           StringField(1, service), &response);
  if (code != nullptr) *code = status.error_code();
  if (!status.ok()) return -1;
  google::protobuf::UnknownFieldSet fields;
  EXPECT_TRUE(fields.ParseFromString(response));
  // SERVING = 1 is a non-default enum value, so it is on the wire.
  for (int i = 0; i < fields.field_count(); ++i) {
    if (fields.field(i).number() == 1) return static_cast<int>(fields.field(i).varint());
  }
  return 0;
}
constexpr int kServing = 1;
constexpr int kNotServing = 2;

TEST(HealthTest, OverallAndEncoderServing) {
  TestServer server = StartTestServer(TestOptions());
  EXPECT_EQ(HealthStatus(server.channel, ""), kServing);
  EXPECT_EQ(HealthStatus(server.channel, "phasor.v1.Encoder"), kServing);
  grpc::StatusCode code;
  EXPECT_EQ(HealthStatus(server.channel, "no.such.Service", &code), -1);
  EXPECT_EQ(code, grpc::StatusCode::NOT_FOUND);
}

// Sends each request on one ServerReflectionInfo stream and returns the
// responses' fields.
std::vector<std::unique_ptr<google::protobuf::UnknownFieldSet>> Reflect(
    const std::shared_ptr<grpc::Channel>& channel, const std::vector<std::string>& requests) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  auto context = Context();
  auto call = stub.PrepareCall(
      context.get(), "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  call->StartCall(Tag(1));
  EXPECT_TRUE(Await(&cq, Tag(1)));
  std::vector<std::unique_ptr<google::protobuf::UnknownFieldSet>> out;
  for (const std::string& request : requests) {
    call->Write(ToBuffer(request), Tag(2));
    EXPECT_TRUE(Await(&cq, Tag(2)));
    grpc::ByteBuffer buffer;
    call->Read(&buffer, Tag(3));
    if (!Await(&cq, Tag(3))) break;
    out.push_back(std::make_unique<google::protobuf::UnknownFieldSet>());
    EXPECT_TRUE(out.back()->ParseFromString(FromBuffer(buffer)));
  }
  call->WritesDone(Tag(4));
  Await(&cq, Tag(4));
  grpc::Status status;
  call->Finish(&status, Tag(5));
  Await(&cq, Tag(5));
  EXPECT_TRUE(status.ok()) << status.error_message();
  Drain(&cq);
  return out;
}

// The length-delimited payloads of field `number`.
std::vector<std::string> Payloads(const google::protobuf::UnknownFieldSet& fields,
                                  int number) {
  std::vector<std::string> out;
  for (int i = 0; i < fields.field_count(); ++i) {
    if (fields.field(i).number() == number &&
        fields.field(i).type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      out.push_back(fields.field(i).length_delimited());
    }
  }
  return out;
}

TEST(ReflectionTest, ListsServicesAndServesTheEncoderDescriptor) {
  TestServer server = StartTestServer(TestOptions());
  // ServerReflectionRequest: list_services = 7, file_containing_symbol = 4.
  const std::vector<std::unique_ptr<google::protobuf::UnknownFieldSet>> responses =
      Reflect(server.channel,
              {StringField(7, ""), StringField(4, "phasor.v1.Encoder")});
  ASSERT_EQ(responses.size(), 2u);

  // list_services_response = 6 { repeated ServiceResponse service = 1 { name = 1 } }.
  std::vector<std::string> names;
  for (const std::string& list : Payloads(*responses[0], 6)) {
    google::protobuf::UnknownFieldSet list_fields;
    ASSERT_TRUE(list_fields.ParseFromString(list));
    for (const std::string& service : Payloads(list_fields, 1)) {
      google::protobuf::UnknownFieldSet service_fields;
      ASSERT_TRUE(service_fields.ParseFromString(service));
      for (const std::string& name : Payloads(service_fields, 1)) names.push_back(name);
    }
  }
  EXPECT_THAT(names, ::testing::IsSupersetOf({"phasor.v1.Encoder", "grpc.health.v1.Health"}));

  // file_descriptor_response = 4 { repeated bytes file_descriptor_proto = 1 }.
  const std::vector<std::string> descriptor_responses = Payloads(*responses[1], 4);
  ASSERT_EQ(descriptor_responses.size(), 1u);
  google::protobuf::UnknownFieldSet descriptor_fields;
  ASSERT_TRUE(descriptor_fields.ParseFromString(descriptor_responses[0]));
  std::vector<std::string> files;
  for (const std::string& bytes : Payloads(descriptor_fields, 1)) {
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(bytes));
    files.push_back(file.name());
    if (file.name() == "phasor/v1/encoder.proto") {
      ASSERT_EQ(file.service_size(), 1);
      EXPECT_EQ(file.service(0).name(), "Encoder");
      EXPECT_EQ(file.service(0).method_size(), 9);
    }
  }
  EXPECT_THAT(files, ::testing::Contains("phasor/v1/encoder.proto"));
}

// --- Metrics ---------------------------------------------------------------

TEST(MetricsTest, ScrapeCountsCallsCodesBytesAndValues) {
  ServerOptions options = TestOptions();
  options.metrics_address = "127.0.0.1:0";
  TestServer server = StartTestServer(options);
  ASSERT_GT(server.server->metrics_port(), 0);

  v1::EncodePositionsRequest request;
  request.mutable_positions()->mutable_range()->set_count(10);
  request.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(8);
  int64_t request_bytes = 0, response_bytes = 0;
  for (int i = 0; i < 3; ++i) {
    v1::EncodePositionsResponse response;
    ASSERT_TRUE(server.stub->EncodePositions(Context().get(), request, &response).ok());
    request_bytes += static_cast<int64_t>(request.ByteSizeLong());
    response_bytes += static_cast<int64_t>(response.ByteSizeLong());
  }
  // A failed call's request bytes count too; it sends no response.
  v1::EncodePositionsRequest bad = request;
  bad.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(7);
  v1::EncodePositionsResponse ignored;
  ASSERT_EQ(server.stub->EncodePositions(Context().get(), bad, &ignored).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  request_bytes += static_cast<int64_t>(bad.ByteSizeLong());
  ASSERT_EQ(HealthStatus(server.channel, ""), kServing);

  const std::string text = HttpGet(server.server->metrics_port(), "/metrics");
  ASSERT_FALSE(text.empty());
  const std::string labels =
      R"(grpc_method="EncodePositions",grpc_service="phasor.v1.Encoder",grpc_type="unary")";
  EXPECT_EQ(MetricValue(text, absl::StrCat("grpc_server_started_total{", labels, "}")), 4);
  EXPECT_EQ(MetricValue(text, absl::StrCat(R"(grpc_server_handled_total{grpc_code="OK",)",
                                           labels, "}")),
            3);
  EXPECT_EQ(MetricValue(text, absl::StrCat(
                                  R"(grpc_server_handled_total{grpc_code="InvalidArgument",)",
                                  labels, "}")),
            1);
  EXPECT_EQ(MetricValue(text, absl::StrCat("grpc_server_handling_seconds_count{", labels, "}")),
            4);
  EXPECT_EQ(MetricValue(text, absl::StrCat("grpc_server_msg_received_total{", labels, "}")), 4);
  EXPECT_EQ(MetricValue(text, absl::StrCat("grpc_server_msg_sent_total{", labels, "}")), 3);
  EXPECT_EQ(MetricValue(text, R"(phasor_encoded_values_total{kind="sinusoidal"})"), 3 * 10 * 8);
  EXPECT_EQ(MetricValue(text, R"(phasor_request_bytes_total{grpc_method="EncodePositions"})"),
            request_bytes);
  EXPECT_EQ(MetricValue(text, R"(phasor_response_bytes_total{grpc_method="EncodePositions"})"),
            response_bytes);
  EXPECT_EQ(MetricValue(text, "phasor_in_flight_requests"), 0);
  EXPECT_EQ(MetricValue(text,
                        R"(grpc_server_handled_total{grpc_code="OK",grpc_method="Check",)"
                        R"(grpc_service="grpc.health.v1.Health",grpc_type="unary"})"),
            1);
  EXPECT_THAT(text, HasSubstr("phasor_build_info{"));
  EXPECT_THAT(text, HasSubstr("grpc_server_handling_seconds_bucket{"));
}

// --- Auth --------------------------------------------------------------------

TEST(AuthTest, BearerTokenRequiredForEncoderButNotHealth) {
  TempDir dir;
  ServerOptions options = TestOptions();
  options.auth_token_path = dir.WriteFile("token", "s3cret-token\n");
  TestServer server = StartTestServer(options);

  v1::ListProfilesResponse response;
  const grpc::Status missing =
      server.stub->ListProfiles(Context().get(), v1::ListProfilesRequest(), &response);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);

  auto wrong = Context();
  wrong->AddMetadata("authorization", "Bearer s3cret-tokeX");
  EXPECT_EQ(server.stub->ListProfiles(wrong.get(), v1::ListProfilesRequest(), &response)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  auto right = Context();
  right->AddMetadata("authorization", "Bearer s3cret-token");
  const grpc::Status ok =
      server.stub->ListProfiles(right.get(), v1::ListProfilesRequest(), &response);
  EXPECT_TRUE(ok.ok()) << ok.error_message();

  // Streams are checked too.
  auto stream_context = Context();
  auto stream = server.stub->EncodeObservationsStream(stream_context.get());
  stream->WritesDone();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // Probes need no token.
  EXPECT_EQ(HealthStatus(server.channel, ""), kServing);
}

// --- Graceful shutdown -------------------------------------------------------

// Draining ends what would otherwise hold the server for the whole grace: a
// health Watch (client-side health checking keeps one open per
// subchannel) and a stream waiting for its next chunk. With gRPC's built-in
// health service both stayed open until the grace ran out.
TEST(ShutdownTest, DrainEndsWatchesAndIdleStreamsAtOnce) {
  ServerOptions options = TestOptions();
  options.shutdown_grace = absl::Seconds(20);
  TestServer server = StartTestServer(options);

  grpc::GenericStub generic(server.channel);
  grpc::CompletionQueue cq;
  auto watch_context = Context();
  auto watch = StartHealthWatch(&generic, watch_context.get(), &cq, "");
  auto watch_status = [&]() {
    grpc::ByteBuffer buffer;
    watch->Read(&buffer, Tag(3));
    if (!Await(&cq, Tag(3))) return -1;
    google::protobuf::UnknownFieldSet fields;
    EXPECT_TRUE(fields.ParseFromString(FromBuffer(buffer)));
    return fields.field_count() > 0 ? static_cast<int>(fields.field(0).varint()) : 0;
  };
  ASSERT_EQ(watch_status(), kServing);

  // A stream that has been answered and now waits for its next chunk.
  auto stream_context = Context();
  auto stream = server.stub->EncodeObservationsStream(stream_context.get());
  v1::EncodeObservationsRequest request;
  const std::vector<int64_t> times = {1, 2, 3};
  *request.mutable_observations()->mutable_timestamps() = Int64Tensor(times, {3});
  request.mutable_spec()->mutable_temporal()->mutable_gaps();
  ASSERT_TRUE(stream->Write(request));
  v1::EncodeObservationsResponse response;
  ASSERT_TRUE(stream->Read(&response));

  const auto start = std::chrono::steady_clock::now();
  std::thread shutdown([&] { server.server->Shutdown(options.shutdown_grace); });

  // The watcher hears NOT_SERVING, then the call ends: UNAVAILABLE, which
  // health-checking clients retry (elsewhere) with backoff.
  EXPECT_EQ(watch_status(), kNotServing);
  EXPECT_EQ(watch_status(), -1);
  grpc::Status watch_finish;
  watch->Finish(&watch_finish, Tag(4));
  Await(&cq, Tag(4));
  EXPECT_EQ(watch_finish.error_code(), grpc::StatusCode::UNAVAILABLE)
      << watch_finish.error_message();
  Drain(&cq);

  // The idle stream ends with UNAVAILABLE telling the client to resume from
  // the last state it received; nothing it sent was dropped.
  EXPECT_FALSE(stream->Read(&response));
  const grpc::Status stream_status = stream->Finish();
  EXPECT_EQ(stream_status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(stream_status.error_message(), HasSubstr("resume"));

  shutdown.join();
  // Nothing was left to wait for: the grace (20 s) was not used.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  v1::ListProfilesResponse profiles;
  EXPECT_FALSE(
      server.stub->ListProfiles(Context().get(), v1::ListProfilesRequest(), &profiles).ok());
}

// grpc.health.v1.Health/Watch of the whole server through the callback API,
// recording every status it is sent.
class HealthWatcher final
    : public grpc::ClientReadReactor<grpc::health::v1::HealthCheckResponse> {
 public:
  explicit HealthWatcher(const std::shared_ptr<grpc::Channel>& channel)
      : stub_(grpc::health::v1::Health::NewStub(channel)) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stub_->async()->Watch(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows.
    {
      absl::MutexLock lock(&mu_);
      statuses_.push_back(response_.status());
    }
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    status_ = status;
    done_ = true;
  }

  bool WaitForUpdates(size_t count) {
    absl::MutexLock lock(&mu_);
    const auto enough = [&] { return statuses_.size() >= count || done_; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(30));
    return statuses_.size() >= count;
  }
  // Waits for the call to end (the destructor must not run before).
  grpc::Status WaitForEnd() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
    return status_;
  }
  std::vector<int> statuses() {
    absl::MutexLock lock(&mu_);
    return statuses_;
  }
  ~HealthWatcher() override {
    context_.TryCancel();
    WaitForEnd();
  }

 private:
  std::unique_ptr<grpc::health::v1::Health::Stub> stub_;
  grpc::ClientContext context_;
  grpc::health::v1::HealthCheckRequest request_;
  grpc::health::v1::HealthCheckResponse response_;
  absl::Mutex mu_;
  std::vector<int> statuses_ ABSL_GUARDED_BY(mu_);
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

// --- The binary ----------------------------------------------------------------

TEST(BinaryTest, EnvironmentFlagsAndSigtermExitZero) {
  // The command line wins over the environment: the bogus PHASOR_GRPC_ADDRESS
  // is overridden, while the metrics address and grace come from the
  // environment.
  Child child = Spawn({"--grpc_address=127.0.0.1:0"},
                      {"PHASOR_GRPC_ADDRESS=256.0.0.1:-1",
                       "PHASOR_METRICS_ADDRESS=127.0.0.1:0",
                       "PHASOR_SHUTDOWN_GRACE_SECONDS=3", "PHASOR_ENABLE_ECHO=true"});
  std::string log;
  const int port = ReadPort(child, &log);
  ASSERT_GT(port, 0) << log;
  EXPECT_THAT(log, HasSubstr(" metrics_address=127.0.0.1:0 "));

  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  EXPECT_EQ(HealthStatus(channel, "phasor.v1.Encoder"), kServing);
  auto stub = v1::Encoder::NewStub(channel);
  v1::EchoRequest echo;
  echo.set_payload("ping");
  v1::EchoResponse echoed;
  EXPECT_TRUE(stub->Echo(Context().get(), echo, &echoed).ok());  // PHASOR_ENABLE_ECHO
  EXPECT_EQ(echoed.payload(), "ping");

  ASSERT_EQ(kill(child.pid, SIGTERM), 0);
  ReadUntil(child, "stopped", &log);
  EXPECT_THAT(log, HasSubstr(" event=draining signal=Terminated grace_seconds=3"));
  EXPECT_EQ(WaitExit(child), 0) << log;
}

// The binary with /metrics on, an open health Watch and a 20 s grace exits
// within about a second of SIGTERM (the bound allows for a loaded machine).
// Before, the watch held the drain for the whole grace, and stopping the
// metrics listener added up to 2 s.
TEST(BinaryTest, SigtermWithAnOpenWatchExitsWithinASecond) {
  Child child = Spawn({"--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                       "--shutdown_grace_seconds=20"},
                      {});
  std::string log;
  const int port = ReadPort(child, &log);
  ASSERT_GT(port, 0) << log;
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  // A health-checking client, on gRPC's callback API: its connection is
  // polled in the background, as real clients' are (one that neither polls
  // nor closes an idle connection leaves gRPC's closing GOAWAY ping
  // unanswered, which holds the server's transport for about 5 s; see
  // docs/DEPLOY.md).
  HealthWatcher watcher(channel);
  ASSERT_TRUE(watcher.WaitForUpdates(1));

  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(child.pid, SIGTERM), 0);
  ReadUntil(child, "stopped", &log);
  EXPECT_EQ(WaitExit(child), 0) << log;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  // The watch saw SERVING, NOT_SERVING and then its end.
  const grpc::Status status = watcher.WaitForEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_EQ(watcher.statuses(),
            (std::vector<int>{grpc::health::v1::HealthCheckResponse::SERVING,
                              grpc::health::v1::HealthCheckResponse::NOT_SERVING}));
}

// protobuf logs an ERROR line for every string field with invalid UTF-8 it
// is asked to parse; a client sending such requests must not control how
// much the server logs (server/log_limit.h).
TEST(BinaryTest, ClientCausedLibraryLogLinesAreRateLimited) {
  Child child = Spawn({"--grpc_address=127.0.0.1:0", "--metrics_address="}, {});
  std::string log;
  const int port = ReadPort(child, &log);
  ASSERT_GT(port, 0) << log;
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  v1::EncodePositionsRequest request;
  request.set_profile("A");
  std::string bytes = request.SerializeAsString();
  bytes[bytes.find('A')] = '\xff';
  constexpr int kCalls = 300;
  for (int i = 0; i < kCalls; ++i) {
    std::string response;
    ASSERT_EQ(GenericUnary(channel, "/phasor.v1.Encoder/EncodePositions", bytes, &response)
                  .error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  // One more after a refill: its line says how many were dropped.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  std::string response;
  GenericUnary(channel, "/phasor.v1.Encoder/EncodePositions", bytes, &response);
  ASSERT_EQ(kill(child.pid, SIGTERM), 0);
  ReadUntil(child, "stopped", &log);
  EXPECT_EQ(WaitExit(child), 0) << log;
  // protobuf's lines are "library" records; the failed calls have their
  // own, separately limited, "call" records (server/call_log.h).
  int utf8_lines = 0;
  int64_t most_suppressed = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (!absl::StrContains(line, " event=library ")) continue;
    if (absl::StrContains(line, "UTF-8")) ++utf8_lines;
    const size_t at = line.find(" suppressed=");
    if (at != absl::string_view::npos) {
      most_suppressed =
          std::max<int64_t>(most_suppressed, std::atoll(std::string(line.substr(at + 12)).c_str()));
    }
  }
  // The burst (20) and a refill or two, not one line per call; the line
  // after the refill counts the ones dropped.
  EXPECT_GE(utf8_lines, 1) << log;
  EXPECT_LE(utf8_lines, 30) << log;
  EXPECT_GT(most_suppressed, 0) << log;
}

TEST(BinaryTest, BadEnvironmentValueExitsWithUsageError) {
  Child child = Spawn({}, {"PHASOR_THREADS=many"});
  std::string log;
  ReadUntil(child, "\n", &log);
  EXPECT_EQ(WaitExit(child), 2);
  EXPECT_THAT(log, HasSubstr("PHASOR_THREADS=many"));
}

TEST(BinaryTest, MissingProfilesFileFailsToStart) {
  Child child = Spawn({"--grpc_address=127.0.0.1:0", "--metrics_address=",
                       "--profiles=/nonexistent/profiles.txtpb"},
                      {});
  std::string log;
  ReadUntil(child, "\n", &log);
  EXPECT_EQ(WaitExit(child), 1);
  EXPECT_THAT(log, HasSubstr("/nonexistent/profiles.txtpb"));
}

}  // namespace
}  // namespace phasor::server::testing
