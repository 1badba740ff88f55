// What reaches the Encoder as bytes: requests that do not parse, stream
// chunks that do not parse, responses at the message limit, streams that
// outlive connection recycling, and the library log limiter.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/generic/generic_stub.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/log_limit.h"
#include "test_util.h"

namespace phasor::server::testing {
namespace {

using ::testing::HasSubstr;

grpc::Status RawUnary(const std::shared_ptr<grpc::Channel>& channel,
                      const std::string& method, const std::string& request,
                      const std::string& authorization = "") {
  return GenericUnary(channel, method, request, /*response=*/nullptr, authorization);
}

// Field 1 declared as 100 bytes long, with 2 present: no message parses it.
const std::string kGarbage("\x0a\x64\x01\x02", 4);

// An EncodePositionsRequest whose `profile` (a proto3 string) is not UTF-8.
std::string InvalidUtf8Profile() {
  v1::EncodePositionsRequest request;
  request.set_profile("A");
  std::string bytes = request.SerializeAsString();
  const size_t at = bytes.find('A');
  EXPECT_NE(at, std::string::npos);
  bytes[at] = '\xff';
  return bytes;
}

constexpr const char* kUnaryMethods[] = {
    "EncodePositions", "ApplyRope", "RopeTables", "AlibiBias",
    "EncodeObservations", "Describe", "ListProfiles"};

// gRPC's typed handlers answered these with UNIMPLEMENTED and no message.
TEST(RawRequestTest, UnparseableUnaryRequestsAreInvalidArgumentNamingTheType) {
  TestServer server = StartTestServer(TestOptions());
  for (const char* method : kUnaryMethods) {
    SCOPED_TRACE(method);
    const grpc::Status status =
        RawUnary(server.channel, absl::StrCat("/phasor.v1.Encoder/", method), kGarbage);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(),
                HasSubstr(absl::StrCat("is not a valid phasor.v1.", method, "Request")));
  }
  const grpc::Status utf8 = RawUnary(
      server.channel, "/phasor.v1.Encoder/EncodePositions", InvalidUtf8Profile());
  EXPECT_EQ(utf8.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(utf8.error_message(), HasSubstr("invalid UTF-8"));
  ExpectServing(*server.stub);
}

// The token is checked before the bytes: a caller without it hears
// UNAUTHENTICATED, whatever it sent.
TEST(RawRequestTest, TokenIsCheckedBeforeTheBytesAreParsed) {
  TempDir dir;
  ServerOptions options = TestOptions();
  options.auth_token_path = dir.WriteFile("token", "s3cret\n");
  TestServer server = StartTestServer(options);
  const std::string method = "/phasor.v1.Encoder/EncodePositions";
  EXPECT_EQ(RawUnary(server.channel, method, kGarbage).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(RawUnary(server.channel, method, kGarbage, "Bearer wrong").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(RawUnary(server.channel, method, kGarbage, "Bearer s3cret").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

v1::EncodeObservationsRequest GapsChunk(std::vector<int64_t> times) {
  v1::EncodeObservationsRequest request;
  *request.mutable_observations()->mutable_timestamps() =
      Int64Tensor(times, {static_cast<int64_t>(times.size())});
  request.mutable_spec()->mutable_temporal()->mutable_gaps()->set_global_delta(true);
  return request;
}

// Sends `chunks` (raw bytes) on one EncodeObservationsStream; returns how
// many responses came back and the final status.
grpc::Status RawStream(const std::shared_ptr<grpc::Channel>& channel,
                       const std::vector<std::string>& chunks, int* responses) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  auto context = Context();
  auto call =
      stub.PrepareCall(context.get(), "/phasor.v1.Encoder/EncodeObservationsStream", &cq);
  call->StartCall(Tag(1));
  EXPECT_TRUE(Await(&cq, Tag(1)));
  *responses = 0;
  for (const std::string& chunk : chunks) {
    call->Write(ToBuffer(chunk), Tag(2));
    if (!Await(&cq, Tag(2))) break;
    grpc::ByteBuffer response;
    call->Read(&response, Tag(3));
    if (!Await(&cq, Tag(3))) break;
    ++*responses;
  }
  call->WritesDone(Tag(4));
  Await(&cq, Tag(4));
  grpc::Status status;
  call->Finish(&status, Tag(5));
  Await(&cq, Tag(5));
  Drain(&cq);
  return status;
}

// Before, a chunk that did not parse ended the stream with OK, and it and
// every later chunk were dropped without a word.
TEST(RawRequestTest, UnparseableStreamChunkEndsTheStreamNamingTheChunk) {
  TestServer server = StartTestServer(TestOptions());
  const std::string good = GapsChunk({1, 2, 3}).SerializeAsString();
  v1::EncodeObservationsRequest next;
  *next.mutable_observations()->mutable_timestamps() = Int64Tensor({4, 5}, {2});
  const std::string good_next = next.SerializeAsString();

  int responses = 0;
  grpc::Status status = RawStream(server.channel, {good, kGarbage, good_next}, &responses);
  EXPECT_EQ(responses, 1);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("chunk 2 of the stream is not a valid "
                        "phasor.v1.EncodeObservationsRequest"));

  // Invalid UTF-8 in a string field (channel_names) of the third chunk.
  v1::EncodeObservationsRequest named = next;
  named.mutable_observations()->add_channel_names("B");
  std::string named_bytes = named.SerializeAsString();
  named_bytes[named_bytes.rfind('B')] = '\xfe';
  status = RawStream(server.channel, {good, good_next, named_bytes}, &responses);
  EXPECT_EQ(responses, 2);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("chunk 3 of the stream"));
  EXPECT_THAT(status.error_message(), HasSubstr("invalid UTF-8"));

  // A well-formed stream still ends OK.
  status = RawStream(server.channel, {good, good_next}, &responses);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(responses, 2);
}

// The serialized response, not just its tensor bytes, must fit the limit:
// shapes, dtype and length prefixes add a few bytes. Before, a response a
// few bytes under the limit in tensor bytes passed the check and then failed
// in the transport ("Sent message larger than max", no field path).
TEST(ResponseLimitTest, ResponsesAtTheLimitAreSentOrRefusedWithTheField) {
  ServerOptions options = TestOptions();
  options.max_message_bytes = 1 << 20;
  TestServer server = StartTestServer(options);
  // dim 2 float32: 8 bytes a row. Rows around the limit, either side.
  const int64_t limit_rows = options.max_message_bytes / 8;
  int sent = 0;
  int refused = 0;
  for (int64_t rows = limit_rows - 6; rows <= limit_rows + 1; ++rows) {
    SCOPED_TRACE(rows);
    v1::EncodePositionsRequest request;
    request.mutable_positions()->mutable_range()->set_count(rows);
    request.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(2);
    v1::EncodePositionsResponse response;
    const grpc::Status status =
        server.stub->EncodePositions(Context().get(), request, &response);
    if (status.ok()) {
      ++sent;
      EXPECT_LE(response.ByteSizeLong(), static_cast<size_t>(options.max_message_bytes));
      EXPECT_EQ(response.encodings().shape(0), rows);
      continue;
    }
    ++refused;
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << status.error_message();
    const google::rpc::BadRequest details = BadRequestOf(status);
    ASSERT_EQ(details.field_violations_size(), 1) << status.error_message();
    EXPECT_EQ(details.field_violations(0).field(), "positions");
    EXPECT_THAT(status.error_message(), HasSubstr("server's message limit"));
  }
  // Rows whose tensor alone is under the limit but whose message is over it
  // exist in that window, and so do rows that fit.
  EXPECT_GT(sent, 0);
  EXPECT_GT(refused, 1);
  ExpectServing(*server.stub);
}

// Connections are recycled (GOAWAY) after max_connection_age; a stream open
// on such a connection keeps it until the stream ends. Before, a fixed 30 s
// grace cut every stream 5.5 minutes into its connection with UNAVAILABLE.
TEST(ConnectionAgeTest, StreamOutlivesConnectionRecycling) {
  ServerOptions options = TestOptions();
  options.max_connection_age = absl::Milliseconds(500);
  TestServer server = StartTestServer(options);
  auto context = Context();
  auto stream = server.stub->EncodeObservationsStream(context.get());
  const auto start = std::chrono::steady_clock::now();
  int64_t t = 0;
  int chunks = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(2500)) {
    v1::EncodeObservationsRequest chunk = GapsChunk({t, t + 1});
    if (chunks > 0) chunk.clear_spec();
    ASSERT_TRUE(stream->Write(chunk)) << "chunk " << chunks;
    v1::EncodeObservationsResponse response;
    ASSERT_TRUE(stream->Read(&response)) << "chunk " << chunks;
    EXPECT_EQ(response.features().shape(0), 2);
    t += 2;
    ++chunks;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  stream->WritesDone();
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_GE(chunks, 8);
  // New calls go over a new connection.
  ExpectServing(*server.stub);
}

TEST(LogRateLimiterTest, BurstThenOneLinePerIntervalCountingTheRest) {
  LogRateLimiter limiter(/*burst=*/3, /*interval=*/absl::Seconds(1));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  int64_t suppressed = -1;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(limiter.Allow(t0, &suppressed));
    EXPECT_EQ(suppressed, 0);
  }
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(limiter.Allow(t0, &suppressed));
  EXPECT_FALSE(limiter.Allow(t0 + absl::Milliseconds(900), &suppressed));
  ASSERT_TRUE(limiter.Allow(t0 + absl::Milliseconds(1000), &suppressed));
  EXPECT_EQ(suppressed, 101);
  // Refills stop at the burst.
  const absl::Time later = t0 + absl::Hours(1);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Allow(later, &suppressed));
  EXPECT_FALSE(limiter.Allow(later, &suppressed));
}

}  // namespace
}  // namespace phasor::server::testing
