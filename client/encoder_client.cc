#include "client/encoder_client.h"

#include <cstdint>
#include <functional>
#include <thread>
#include <utility>

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/panel_calls.h"
#include "client/shared_memory_session.h"
#include "core/base/file.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace phasor {
namespace {

// gRPC's transport reports a message over a limit as RESOURCE_EXHAUSTED
// "Sent message larger than max (N vs. L)" or "Received message larger than
// max (N vs. L)", from either end, without saying whose limit L is. The
// client knows its own limit: when L is that, the limit was the client's.
std::string ExplainMessageLimit(const std::string& message, int client_limit) {
  const size_t at = message.find("message larger than max (");
  if (at == std::string::npos) return message;
  const size_t vs = message.find(" vs. ", at);
  int64_t limit = -1;
  if (vs == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(message).substr(
                            vs + 5, message.find(')', vs) - vs - 5),
                        &limit)) {
    return message;
  }
  if (limit == client_limit) {
    return absl::StrCat(message,
                        ": the client's message limit (ClientOptions::"
                        "max_message_bytes, phasor-client --max_message_bytes or "
                        "PHASOR_MAX_MESSAGE_BYTES raises it)");
  }
  return absl::StrCat(message,
                      ": the server's message limit (phasor-server "
                      "--max_message_bytes or PHASOR_MAX_MESSAGE_BYTES raises it)");
}

absl::Status FromGrpcStatus(const grpc::Status& status, int client_limit) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()),
                   status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED
                       ? ExplainMessageLimit(status.error_message(), client_limit)
                       : status.error_message());
  if (!status.error_details().empty()) {
    out.SetPayload(kGrpcStatusDetailsPayload,
                   absl::Cord(status.error_details()));
  }
  return out;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeCredentials(
    const ClientOptions& options) {
  const bool tls = options.use_tls || !options.tls_ca_file.empty() ||
                   !options.tls_cert_file.empty() ||
                   !options.tls_key_file.empty();
  if (!tls) return grpc::InsecureChannelCredentials();
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "tls_cert_file and tls_key_file: give both for mutual TLS, or neither");
  }
  grpc::SslCredentialsOptions ssl;
  if (!options.tls_ca_file.empty()) {
    auto roots = ReadFileToString(options.tls_ca_file, "tls_ca_file");
    if (!roots.ok()) return roots.status();
    ssl.pem_root_certs = *std::move(roots);
  }
  if (!options.tls_cert_file.empty()) {
    auto cert = ReadFileToString(options.tls_cert_file, "tls_cert_file");
    if (!cert.ok()) return cert.status();
    auto key = ReadFileToString(options.tls_key_file, "tls_key_file");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

// One unary call through the generic stub, waited for; the call's own
// deadline bounds the wait.
grpc::Status CallAndWait(grpc::GenericStub& stub, grpc::ClientContext* context,
                         const std::string& method,
                         const grpc::ByteBuffer& request,
                         grpc::ByteBuffer* response) {
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(context, method, grpc::StubOptions(), &request, response,
                 [&status, &done](grpc::Status result) {
                   status = std::move(result);
                   done.Notify();
                 });
  done.WaitForNotification();
  return status;
}

// grpc.health.v1 messages are one field each: HealthCheckRequest{string
// service = 1} and HealthCheckResponse{ServingStatus status = 1}. Encoding
// them by hand keeps a second copy of their generated descriptors out of any
// binary that also links gRPC's own health service.
std::string EncodeHealthCheckRequest(absl::string_view service) {
  std::string bytes;
  if (service.empty()) return bytes;  // proto3: a default field is omitted.
  google::protobuf::io::StringOutputStream raw(&bytes);
  google::protobuf::io::CodedOutputStream out(&raw);
  out.WriteTag(/*field 1, length-delimited=*/(1 << 3) | 2);
  out.WriteVarint32(static_cast<uint32_t>(service.size()));
  out.WriteRaw(service.data(), static_cast<int>(service.size()));
  return bytes;
}

absl::StatusOr<ServingStatus> DecodeHealthCheckResponse(
    const std::string& bytes) {
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(bytes.data()),
      static_cast<int>(bytes.size()));
  uint64_t status = 0;  // Absent = UNKNOWN.
  while (const uint32_t tag = in.ReadTag()) {
    if (tag == ((1 << 3) | 0)) {  // Field 1, varint.
      if (!in.ReadVarint64(&status)) break;
      continue;
    }
    // Unknown fields from a newer protocol version are skipped.
    bool skipped = false;
    switch (tag & 7) {
      case 0: {
        uint64_t ignored;
        skipped = in.ReadVarint64(&ignored);
        break;
      }
      case 1:
        skipped = in.Skip(8);
        break;
      case 2: {
        uint32_t length;
        skipped = in.ReadVarint32(&length) && in.Skip(static_cast<int>(length));
        break;
      }
      case 5:
        skipped = in.Skip(4);
        break;
      default:
        break;
    }
    if (!skipped) break;
  }
  if (!in.ConsumedEntireMessage()) {  // Stopped early on a bad field.
    return absl::DataLossError("grpc.health.v1.HealthCheckResponse: malformed");
  }
  if (status > 3) return ServingStatus::kUnknown;
  return static_cast<ServingStatus>(status);
}

// The deadline and credentials of one call (EncoderClient::PrepareContext,
// and the SharedMemorySession's calls).
void PrepareCallContext(absl::Duration deadline, const std::string& bearer_token,
                        grpc::ClientContext* context) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  if (!bearer_token.empty()) {
    // Plain metadata rather than CallCredentials: gRPC refuses to send call
    // credentials over a plaintext channel, and loopback deployments
    // legitimately use one.
    context->AddMetadata("authorization", absl::StrCat("Bearer ", bearer_token));
  }
}

}  // namespace

absl::string_view ServingStatusName(ServingStatus status) {
  switch (status) {
    case ServingStatus::kUnknown:
      return "UNKNOWN";
    case ServingStatus::kServing:
      return "SERVING";
    case ServingStatus::kNotServing:
      return "NOT_SERVING";
    case ServingStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
  }
  return "UNKNOWN";
}

std::vector<FieldViolation> FieldViolationsOf(const absl::Status& status) {
  std::vector<FieldViolation> violations;
  const auto payload = status.GetPayload(kGrpcStatusDetailsPayload);
  if (!payload) return violations;
  google::rpc::Status details;
  if (!details.ParseFromString(std::string(*payload))) return violations;
  for (const google::protobuf::Any& any : details.details()) {
    google::rpc::BadRequest bad_request;
    if (!any.UnpackTo(&bad_request)) continue;
    for (const auto& violation : bad_request.field_violations()) {
      violations.push_back({violation.field(), violation.description()});
    }
  }
  return violations;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  auto contents = ReadFileToString(path, "token_file");
  if (!contents.ok()) return contents.status();
  absl::string_view token = *contents;
  token = token.substr(0, token.find('\n'));
  token = absl::StripAsciiWhitespace(token);
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token_file: ", path, " holds no token"));
  }
  return std::string(token);
}

absl::StatusOr<std::unique_ptr<EncoderClient>> EncoderClient::Create(
    const ClientOptions& options) {
  if (options.deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("deadline: must be positive");
  }
  if (options.max_message_bytes <= 0) {
    return absl::InvalidArgumentError("max_message_bytes: must be positive");
  }
  auto credentials = MakeCredentials(options);
  if (!credentials.ok()) return credentials.status();

  grpc::ChannelArguments arguments;
  arguments.SetMaxSendMessageSize(options.max_message_bytes);
  arguments.SetMaxReceiveMessageSize(options.max_message_bytes);
  if (!options.tls_server_name.empty()) {
    arguments.SetSslTargetNameOverride(options.tls_server_name);
  }
  if (!options.load_balancing_policy.empty()) {
    arguments.SetLoadBalancingPolicyName(options.load_balancing_policy);
  }
  if (!options.service_config_json.empty()) {
    arguments.SetServiceConfigJSON(options.service_config_json);
  }
  auto channel = grpc::CreateCustomChannel(options.target, *credentials,
                                           arguments);
  return std::make_unique<EncoderClient>(std::move(channel), options);
}

EncoderClient::EncoderClient(std::shared_ptr<grpc::Channel> channel,
                             ClientOptions options)
    : channel_(std::move(channel)),
      stub_(v1::Encoder::NewStub(channel_)),
      options_(std::move(options)) {}

void EncoderClient::PrepareContext(grpc::ClientContext* context) const {
  PrepareCallContext(options_.deadline, options_.bearer_token, context);
}

absl::StatusOr<v1::EncodePositionsResponse> EncoderClient::EncodePositions(
    const v1::EncodePositionsRequest& request) const {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::EncodePositionsResponse response;
  const grpc::Status status =
      stub_->EncodePositions(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, options_.max_message_bytes);
  return response;
}

absl::StatusOr<v1::ApplyRopeResponse> EncoderClient::ApplyRope(
    const v1::ApplyRopeRequest& request) const {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::ApplyRopeResponse response;
  const grpc::Status status = stub_->ApplyRope(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, options_.max_message_bytes);
  return response;
}

absl::StatusOr<v1::RopeTablesResponse> EncoderClient::RopeTables(
    const v1::RopeTablesRequest& request) const {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::RopeTablesResponse response;
  const grpc::Status status = stub_->RopeTables(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, options_.max_message_bytes);
  return response;
}

absl::StatusOr<v1::AlibiBiasResponse> EncoderClient::AlibiBias(
    const v1::AlibiBiasRequest& request) const {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::AlibiBiasResponse response;
  const grpc::Status status = stub_->AlibiBias(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, options_.max_message_bytes);
  return response;
}

absl::StatusOr<v1::EncodeObservationsResponse>
EncoderClient::EncodeObservations(
    const v1::EncodeObservationsRequest& request) const {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::EncodeObservationsResponse response;
  const grpc::Status status =
      stub_->EncodeObservations(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, options_.max_message_bytes);
  return response;
}

absl::StatusOr<v1::EncodeObservationsResponse>
EncoderClient::EncodeObservationsPanel(
    const v1::EncodeObservationsRequest& request, const PanelOptions& panel,
    PanelStats* stats) const {
  panel::PanelChannel channel;
  channel.channel = channel_;
  channel.max_message_bytes = options_.max_message_bytes;
  channel.prepare_context = [this](grpc::ClientContext* context) {
    PrepareContext(context);
  };
  channel.from_grpc_status = [this](const grpc::Status& status) {
    return FromGrpcStatus(status, options_.max_message_bytes);
  };
  channel.encode_whole = [this](const v1::EncodeObservationsRequest& whole) {
    return EncodeObservations(whole);
  };
  return panel::EncodePanel(channel, request, panel, stats);
}

absl::Status EncoderClient::EncodeObservationsStream(
    absl::Span<const v1::EncodeObservationsRequest> chunks,
    const std::function<absl::Status(const v1::EncodeObservationsResponse&)>&
        on_response) const {
  grpc::ClientContext context;
  PrepareContext(&context);
  auto stream = stub_->EncodeObservationsStream(&context);

  // Write() blocks while the server is not reading; reading concurrently
  // keeps the server's response window open, so neither side waits forever.
  std::thread writer([&stream, chunks] {
    for (const v1::EncodeObservationsRequest& chunk : chunks) {
      if (!stream->Write(chunk)) return;  // Stream broken: Finish() says why.
    }
    stream->WritesDone();
  });

  absl::Status callback_status;
  v1::EncodeObservationsResponse response;
  size_t received = 0;
  while (stream->Read(&response)) {
    ++received;
    callback_status = on_response(response);
    if (!callback_status.ok()) {
      context.TryCancel();
      break;
    }
  }
  // After TryCancel the remaining responses are dropped by gRPC; drain any
  // that were already queued so Finish() does not wait on them.
  while (!callback_status.ok() && stream->Read(&response)) {
  }
  writer.join();
  const grpc::Status status = stream->Finish();
  if (!callback_status.ok()) return callback_status;
  if (!status.ok()) return FromGrpcStatus(status, options_.max_message_bytes);
  if (received != chunks.size()) {
    return absl::DataLossError(absl::StrCat(
        "EncodeObservationsStream: sent ", chunks.size(), " chunks, got ",
        received, " responses"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::DescribeResponse> EncoderClient::Describe(
    const v1::DescribeRequest& request) const {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::DescribeResponse response;
  const grpc::Status status = stub_->Describe(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, options_.max_message_bytes);
  return response;
}

absl::StatusOr<v1::ListProfilesResponse> EncoderClient::ListProfiles() const {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::ListProfilesResponse response;
  const grpc::Status status =
      stub_->ListProfiles(&context, v1::ListProfilesRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status, options_.max_message_bytes);
  return response;
}

absl::StatusOr<v1::EchoResponse> EncoderClient::Echo(
    const v1::EchoRequest& request) const {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::EchoResponse response;
  const grpc::Status status = stub_->Echo(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, options_.max_message_bytes);
  return response;
}

absl::StatusOr<std::unique_ptr<SharedMemorySession>>
EncoderClient::SharedMemory() const {
  return SharedMemory(SharedMemorySessionOptions());
}

absl::StatusOr<std::unique_ptr<SharedMemorySession>>
EncoderClient::SharedMemory(const SharedMemorySessionOptions& options) const {
  // Copies of what the calls need, so the session may outlive this client.
  SharedMemoryTransport transport;
  transport.channel = channel_;
  transport.prepare_context = [deadline = options_.deadline,
                               token = options_.bearer_token](grpc::ClientContext* context) {
    PrepareCallContext(deadline, token, context);
  };
  transport.from_grpc_status = [limit = options_.max_message_bytes](
                                   const grpc::Status& status) {
    return FromGrpcStatus(status, limit);
  };
  return SharedMemorySession::Create(std::move(transport), options);
}

absl::StatusOr<ServingStatus> EncoderClient::CheckHealth(
    absl::string_view service) const {
  grpc::ClientContext context;
  PrepareContext(&context);
  const std::string request_bytes = EncodeHealthCheckRequest(service);
  grpc::Slice slice(request_bytes);
  const grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;

  grpc::GenericStub stub(channel_);
  const grpc::Status status = CallAndWait(
      stub, &context, "/grpc.health.v1.Health/Check", request, &response);
  if (!status.ok()) return FromGrpcStatus(status, options_.max_message_bytes);

  std::vector<grpc::Slice> slices;
  const grpc::Status dump = response.Dump(&slices);
  if (!dump.ok()) return FromGrpcStatus(dump, options_.max_message_bytes);
  std::string response_bytes;
  for (const grpc::Slice& piece : slices) {
    response_bytes.append(reinterpret_cast<const char*>(piece.begin()),
                          piece.size());
  }
  return DecodeHealthCheckResponse(response_bytes);
}

}  // namespace phasor
