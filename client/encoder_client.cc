#include "client/encoder_client.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <thread>
#include <utility>

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "core/file.h"
#include "client/tensor_io.h"
#include "core/status_macros.h"
#include "core/uninitialized_string.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
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
  context->set_deadline(absl::ToChronoTime(absl::Now() + options_.deadline));
  if (!options_.bearer_token.empty()) {
    // Plain metadata rather than CallCredentials: gRPC refuses to send call
    // credentials over a plaintext channel, and loopback deployments
    // legitimately use one.
    context->AddMetadata("authorization",
                         absl::StrCat("Bearer ", options_.bearer_token));
  }
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

namespace {

// --- Panels: planning and joining (EncodeObservationsPanel) ----------------

// Every per-row tensor of Observations, wide and long; a sub-panel carries
// rows [begin, end) of each one present.
struct RowTensor {
  int field_number;
  bool (v1::Observations::*has)() const;
  const v1::Tensor& (v1::Observations::*get)() const;
};
constexpr RowTensor kRowTensors[] = {
    {v1::Observations::kTimestampsFieldNumber, &v1::Observations::has_timestamps,
     &v1::Observations::timestamps},
    {v1::Observations::kValuesFieldNumber, &v1::Observations::has_values,
     &v1::Observations::values},
    {v1::Observations::kMaskFieldNumber, &v1::Observations::has_mask,
     &v1::Observations::mask},
    {v1::Observations::kEventTimesFieldNumber,
     &v1::Observations::has_event_times, &v1::Observations::event_times},
    {v1::Observations::kEventChannelsFieldNumber,
     &v1::Observations::has_event_channels, &v1::Observations::event_channels},
    {v1::Observations::kEventValuesFieldNumber,
     &v1::Observations::has_event_values, &v1::Observations::event_values},
    {v1::Observations::kContentFieldNumber, &v1::Observations::has_content,
     &v1::Observations::content},
};

// Protobuf framing (tags, length prefixes, shape varints) is a few bytes per
// tensor and per field; this much per call covers it with room to spare.
constexpr int64_t kFramingSlackBytes = 4096;
// A SeriesState with C channels: two int64 times (≤ 11 bytes each with tag)
// plus, per channel, two int64 times and two doubles (≤ 42 bytes with
// framing). Rounded up.
int64_t SeriesStateBytesBound(int64_t channels) { return 32 + 48 * channels; }

// How series s's time zone travels (Observations.time_zones comment).
enum class TimeZoneMode { kShared, kIndexed, kPerSeries };

// One planned sub-call: series [series_begin, series_end) and rows
// [row_begin, row_end) of the panel. `continues` marks a chunk that starts
// inside series_begin: it needs the state the previous call returned.
struct SubCall {
  int64_t series_begin = 0;
  int64_t series_end = 0;
  int64_t row_begin = 0;
  int64_t row_end = 0;
  bool continues = false;
};

// What the planner knows about a panel it can cut; nullopt-like `ok` false
// when the request is malformed (it is then sent as is, for the server to
// name the field).
struct PanelShape {
  bool ok = false;
  bool single = false;             // No series_offsets: one series.
  int64_t rows = 0;                // R
  std::vector<int64_t> offsets;    // [S+1]
  int64_t request_row_bytes = 0;   // Sum over row tensors of one row's bytes.
  int64_t channels = 0;            // C, for the state size bound.
  bool set_num_channels = false;   // Long layout: pin C in every sub-call.
  TimeZoneMode time_zone_mode = TimeZoneMode::kShared;
  std::vector<v1::SeriesState> states;  // [S] or empty.
};

int64_t RowBytes(const v1::Tensor& tensor) {
  int64_t bytes = DTypeBytes(tensor.dtype());
  for (int d = 1; d < tensor.shape_size(); ++d) bytes *= tensor.shape(d);
  return bytes;
}

PanelShape InspectPanel(const v1::EncodeObservationsRequest& request) {
  PanelShape shape;
  const v1::Observations& observations = request.observations();
  const bool wide = observations.has_timestamps();
  if (wide == observations.has_event_times()) return shape;
  shape.rows = wide ? observations.timestamps().shape_size() > 0
                          ? observations.timestamps().shape(0)
                          : -1
                    : observations.event_times().shape_size() > 0
                          ? observations.event_times().shape(0)
                          : -1;
  if (shape.rows < 0) return shape;
  for (const RowTensor& row_tensor : kRowTensors) {
    if (!(observations.*row_tensor.has)()) continue;
    const v1::Tensor& tensor = (observations.*row_tensor.get)();
    if (tensor.shape_size() < 1 || tensor.shape(0) != shape.rows ||
        !CheckedElementCount(tensor, "").ok()) {
      return shape;
    }
    shape.request_row_bytes += RowBytes(tensor);
  }

  if (observations.has_series_offsets()) {
    const v1::Tensor& offsets = observations.series_offsets();
    if (offsets.dtype() != v1::INT64 || offsets.shape_size() != 1 ||
        offsets.shape(0) < 2 || !CheckedElementCount(offsets, "").ok()) {
      return shape;
    }
    shape.offsets.resize(static_cast<size_t>(offsets.shape(0)));
    std::memcpy(shape.offsets.data(), offsets.data().data(),
                offsets.data().size());
    if (shape.offsets.front() != 0 || shape.offsets.back() != shape.rows) {
      return shape;
    }
    for (size_t s = 1; s < shape.offsets.size(); ++s) {
      if (shape.offsets[s] < shape.offsets[s - 1]) return shape;
    }
    if (request.has_state()) return shape;  // A panel uses `states`.
    const int64_t series = offsets.shape(0) - 1;
    if (request.states_size() != 0 && request.states_size() != series) {
      return shape;
    }
    shape.states.assign(request.states().begin(), request.states().end());
  } else {
    if (request.states_size() != 0) return shape;
    shape.single = true;
    shape.offsets = {0, shape.rows};
    if (request.has_state()) shape.states.push_back(request.state());
  }
  const int64_t series = static_cast<int64_t>(shape.offsets.size()) - 1;

  if (observations.has_time_zone_index()) {
    const v1::Tensor& index = observations.time_zone_index();
    if (index.dtype() != v1::INT32 || index.shape_size() != 1 ||
        index.shape(0) != series || !CheckedElementCount(index, "").ok()) {
      return shape;
    }
    shape.time_zone_mode = TimeZoneMode::kIndexed;
  } else if (series > 1 && observations.time_zones_size() == series) {
    shape.time_zone_mode = TimeZoneMode::kPerSeries;
  }

  // C as the server derives it for the whole panel (Observations.num_channels
  // comment). A long chunk may not show every channel, so the long layout
  // pins it in every sub-call; wide chunks read it from the values' width.
  if (observations.num_channels() > 0) {
    shape.channels = observations.num_channels();
  } else if (wide) {
    if (observations.has_values() && observations.values().shape_size() == 2) {
      shape.channels = observations.values().shape(1);
    }
  } else if (observations.channel_names_size() > 0) {
    shape.channels = observations.channel_names_size();
  } else {
    for (const v1::SeriesState& state : shape.states) {
      shape.channels = std::max<int64_t>(shape.channels, state.channels_size());
    }
    if (shape.channels == 0 && observations.has_event_channels()) {
      const v1::Tensor& channels = observations.event_channels();
      if (channels.dtype() != v1::INT32) return shape;
      const size_t count = channels.data().size() / sizeof(int32_t);
      int32_t largest = -1;
      for (size_t i = 0; i < count; ++i) {
        int32_t channel;
        std::memcpy(&channel, channels.data().data() + i * sizeof(int32_t),
                    sizeof(channel));
        if (channel < 0) return shape;
        largest = std::max(largest, channel);
      }
      shape.channels = largest + 1;
    }
    shape.set_num_channels = shape.channels > 0;
  }
  shape.ok = true;
  return shape;
}

// The request without rows, offsets, time zone indices or states: what every
// sub-call shares.
v1::EncodeObservationsRequest TemplateRequest(
    const v1::EncodeObservationsRequest& request, const PanelShape& shape) {
  v1::EncodeObservationsRequest shared = request;
  v1::Observations* observations = shared.mutable_observations();
  observations->clear_timestamps();
  observations->clear_values();
  observations->clear_mask();
  observations->clear_event_times();
  observations->clear_event_channels();
  observations->clear_event_values();
  observations->clear_content();
  observations->clear_series_offsets();
  observations->clear_time_zone_index();
  if (shape.time_zone_mode == TimeZoneMode::kPerSeries) {
    observations->clear_time_zones();
  }
  if (shape.set_num_channels) observations->set_num_channels(shape.channels);
  shared.clear_state();
  shared.clear_states();
  return shared;
}

// Rows [begin, end) of a row tensor (shape[0] = rows).
void CopyRows(const v1::Tensor& from, int64_t begin, int64_t end,
              v1::Tensor* to) {
  to->set_dtype(from.dtype());
  *to->mutable_shape() = from.shape();
  to->set_shape(0, end - begin);
  const int64_t row_bytes = RowBytes(from);
  to->set_data(from.data().data() + begin * row_bytes,
               static_cast<size_t>((end - begin) * row_bytes));
}

// The sub-call's request without its rows: `shared` plus its offsets, time
// zones and states. `carried` is the previous chunk's state for a
// continuing chunk.
v1::EncodeObservationsRequest BuildSubRequest(
    const v1::EncodeObservationsRequest& request,
    const v1::EncodeObservationsRequest& shared, const PanelShape& shape,
    const SubCall& call, const v1::SeriesState* carried) {
  v1::EncodeObservationsRequest sub = shared;
  const v1::Observations& from = request.observations();
  v1::Observations* to = sub.mutable_observations();
  std::vector<int64_t> offsets;
  offsets.reserve(static_cast<size_t>(call.series_end - call.series_begin + 1));
  offsets.push_back(0);
  for (int64_t s = call.series_begin + 1; s < call.series_end; ++s) {
    offsets.push_back(shape.offsets[s] - call.row_begin);
  }
  offsets.push_back(call.row_end - call.row_begin);
  const int64_t series = call.series_end - call.series_begin;
  *to->mutable_series_offsets() = TensorFromInt64s(offsets, {series + 1});

  switch (shape.time_zone_mode) {
    case TimeZoneMode::kShared:
      break;
    case TimeZoneMode::kIndexed: {
      v1::Tensor* index = to->mutable_time_zone_index();
      CopyRows(from.time_zone_index(), call.series_begin, call.series_end,
               index);
      break;
    }
    case TimeZoneMode::kPerSeries:
      for (int64_t s = call.series_begin; s < call.series_end; ++s) {
        to->add_time_zones(from.time_zones(static_cast<int>(s)));
      }
      break;
  }

  if (carried != nullptr || !shape.states.empty()) {
    for (int64_t s = call.series_begin; s < call.series_end; ++s) {
      if (s == call.series_begin && carried != nullptr) {
        *sub.add_states() = *carried;
      } else if (!shape.states.empty()) {
        *sub.add_states() = shape.states[static_cast<size_t>(s)];
      } else {
        sub.add_states();  // An empty entry starts its series.
      }
    }
  }
  return sub;
}

// Wire-format tag of a length-delimited field (protobuf encoding, "Message
// Structure").
uint32_t LengthDelimitedTag(int field_number) {
  return google::protobuf::internal::WireFormatLite::MakeTag(
      field_number,
      google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
}

// The encoded sub-request: `sub` (BuildSubRequest) with rows [row_begin,
// row_end) of each of the panel's row tensors added to its observations.
// The rows are copied once, into the slices gRPC sends; protobuf never
// holds them. A singular message field may be split or reordered on the
// wire, but one `observations` field holding everything is written here.
grpc::ByteBuffer EncodeSubRequest(const v1::EncodeObservationsRequest& request,
                                  v1::EncodeObservationsRequest sub,
                                  const SubCall& call) {
  using google::protobuf::io::CodedOutputStream;
  const std::string observations_rest = sub.observations().SerializeAsString();
  sub.clear_observations();

  struct Piece {
    std::string head;  // Field tag and length, the dtype and shape, data tag.
    const char* data;
    size_t data_size;
  };
  std::vector<Piece> pieces;
  size_t observations_size = observations_rest.size();
  const v1::Observations& from = request.observations();
  for (const RowTensor& row_tensor : kRowTensors) {
    if (!(from.*row_tensor.has)()) continue;
    const v1::Tensor& tensor = (from.*row_tensor.get)();
    v1::Tensor meta;
    meta.set_dtype(tensor.dtype());
    *meta.mutable_shape() = tensor.shape();
    meta.set_shape(0, call.row_end - call.row_begin);
    const int64_t row_bytes = RowBytes(tensor);
    Piece piece;
    piece.data = tensor.data().data() + call.row_begin * row_bytes;
    piece.data_size = static_cast<size_t>((call.row_end - call.row_begin) * row_bytes);
    const uint32_t data_tag = LengthDelimitedTag(v1::Tensor::kDataFieldNumber);
    const size_t tensor_size =
        meta.ByteSizeLong() +
        (piece.data_size == 0 ? 0
                              : CodedOutputStream::VarintSize32(data_tag) +
                                    CodedOutputStream::VarintSize64(piece.data_size) +
                                    piece.data_size);
    {
      google::protobuf::io::StringOutputStream raw(&piece.head);
      CodedOutputStream out(&raw);
      out.WriteTag(LengthDelimitedTag(row_tensor.field_number));
      out.WriteVarint64(tensor_size);
      meta.SerializeWithCachedSizes(&out);
      if (piece.data_size > 0) {
        out.WriteTag(data_tag);
        out.WriteVarint64(piece.data_size);
      }
    }
    observations_size += piece.head.size() + piece.data_size;
    pieces.push_back(std::move(piece));
  }

  std::string head = sub.SerializeAsString();
  {
    google::protobuf::io::StringOutputStream raw(&head);
    CodedOutputStream out(&raw);
    out.WriteTag(LengthDelimitedTag(
        v1::EncodeObservationsRequest::kObservationsFieldNumber));
    out.WriteVarint64(observations_size);
    out.WriteString(observations_rest);
  }
  std::vector<grpc::Slice> slices;
  slices.reserve(1 + 2 * pieces.size());
  slices.emplace_back(head);
  for (const Piece& piece : pieces) {
    slices.emplace_back(piece.head);
    if (piece.data_size > 0) slices.emplace_back(piece.data, piece.data_size);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// Reads an EncodeObservationsResponse from the wire, copying features.data
// straight to `features_out` (which has room for `features_capacity`
// bytes) and parsing the rest into `response` (features without its data).
// `features_bytes` is how many bytes features.data held. DATA_LOSS when the
// bytes are not such a message or the data does not fit.
absl::Status DecodeSubResponse(grpc::ByteBuffer* buffer, char* features_out,
                               size_t features_capacity,
                               v1::EncodeObservationsResponse* response,
                               size_t* features_bytes) {
  using google::protobuf::internal::WireFormatLite;
  const uint32_t features_tag =
      LengthDelimitedTag(v1::EncodeObservationsResponse::kFeaturesFieldNumber);
  const uint32_t data_tag = LengthDelimitedTag(v1::Tensor::kDataFieldNumber);
  const auto malformed = [](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(
        "EncodeObservationsPanel: a sub-call's response is malformed (", what,
        ")"));
  };
  *features_bytes = 0;
  bool have_data = false;
  std::string rest, features_rest;
  {
    grpc::ProtoBufferReader reader(buffer);
    google::protobuf::io::CodedInputStream in(&reader);
    google::protobuf::io::StringOutputStream rest_raw(&rest);
    google::protobuf::io::CodedOutputStream rest_out(&rest_raw);
    google::protobuf::io::StringOutputStream features_raw(&features_rest);
    google::protobuf::io::CodedOutputStream features_out_stream(&features_raw);
    while (const uint32_t tag = in.ReadTag()) {
      if (tag != features_tag) {
        if (!WireFormatLite::SkipField(&in, tag, &rest_out)) {
          return malformed("a field");
        }
        continue;
      }
      uint64_t length;
      if (!in.ReadVarint64(&length) ||
          length > static_cast<uint64_t>(in.BytesUntilTotalBytesLimit())) {
        return malformed("features' length");
      }
      const auto limit = in.PushLimit(static_cast<int>(length));
      while (const uint32_t inner = in.ReadTag()) {
        if (inner != data_tag) {
          if (!WireFormatLite::SkipField(&in, inner, &features_out_stream)) {
            return malformed("a field of features");
          }
          continue;
        }
        uint64_t size;
        if (!in.ReadVarint64(&size) ||
            size > static_cast<uint64_t>(std::max(in.BytesUntilLimit(), 0))) {
          return malformed("features.data's length");
        }
        if (have_data) return malformed("features.data twice");
        if (size > features_capacity) {
          return malformed(absl::StrCat("features.data of ", size,
                                        " bytes where ", features_capacity,
                                        " were expected"));
        }
        if (size > 0 && !in.ReadRaw(features_out, static_cast<int>(size))) {
          return malformed("features.data cut short");
        }
        have_data = true;
        *features_bytes = size;
      }
      // The features field ended where its length said (not at the end of
      // the bytes before that).
      if (!in.ConsumedEntireMessage() || in.BytesUntilLimit() != 0) {
        return malformed("features");
      }
      in.PopLimit(limit);
    }
    if (!in.ConsumedEntireMessage()) return malformed("the message");
  }
  if (!response->ParseFromString(rest) ||
      !response->mutable_features()->ParseFromString(features_rest)) {
    return malformed("its fields");
  }
  return absl::OkStatus();
}

// Per-call costs, bytes, and what one call may carry.
struct Budget {
  int64_t request_limit = 0;   // For rows and per-series parts of a request.
  int64_t response_limit = 0;  // Likewise for a response.
  int64_t request_per_row = 0;
  int64_t response_per_row = 0;
  int64_t request_per_series = 0;  // Offset, time zone; plus the state in.
  int64_t response_per_series = 0;  // Offset and the state out.
};

int64_t RequestSeriesBytes(const Budget& budget, const PanelShape& shape,
                           int64_t s) {
  return budget.request_per_series +
         (shape.states.empty()
              ? 0
              : static_cast<int64_t>(
                    shape.states[static_cast<size_t>(s)].ByteSizeLong()));
}

// Cuts the panel greedily, in row order: whole series while both the request
// and the response fit, and a series that fits no call alone into chunks of
// as many rows as fit. RESOURCE_EXHAUSTED when not even one row fits.
absl::StatusOr<std::vector<SubCall>> PlanSubCalls(const PanelShape& shape,
                                                  const Budget& budget) {
  std::vector<SubCall> calls;
  const int64_t series = static_cast<int64_t>(shape.offsets.size()) - 1;
  SubCall open;
  int64_t open_request = 0, open_response = 0;
  bool has_open = false;
  auto flush = [&] {
    if (has_open) calls.push_back(open);
    has_open = false;
    open_request = open_response = 0;
  };
  for (int64_t s = 0; s < series; ++s) {
    const int64_t rows = shape.offsets[s + 1] - shape.offsets[s];
    const int64_t request_bytes =
        RequestSeriesBytes(budget, shape, s) + rows * budget.request_per_row;
    const int64_t response_bytes =
        budget.response_per_series + rows * budget.response_per_row;
    if (has_open && (open_request + request_bytes > budget.request_limit ||
                     open_response + response_bytes > budget.response_limit)) {
      flush();
    }
    if (request_bytes <= budget.request_limit &&
        response_bytes <= budget.response_limit) {
      if (!has_open) {
        open = SubCall{s, s, shape.offsets[s], shape.offsets[s], false};
        has_open = true;
      }
      open.series_end = s + 1;
      open.row_end = shape.offsets[s + 1];
      open_request += request_bytes;
      open_response += response_bytes;
      continue;
    }
    // Too large alone: consecutive chunks, each but the first continuing
    // from its predecessor's state (whose size the bound covers).
    const int64_t state_in = std::max(
        RequestSeriesBytes(budget, shape, s),
        budget.request_per_series + SeriesStateBytesBound(shape.channels));
    const int64_t by_request =
        budget.request_per_row > 0
            ? (budget.request_limit - state_in) / budget.request_per_row
            : rows;
    const int64_t by_response =
        budget.response_per_row > 0
            ? (budget.response_limit - budget.response_per_series) /
                  budget.response_per_row
            : rows;
    const int64_t chunk_rows = std::min(by_request, by_response);
    if (chunk_rows < 1) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "observations.series[", s, "]: one row needs ",
          budget.request_per_row, " request bytes and ",
          budget.response_per_row,
          " response bytes, more than a call may carry under the message "
          "limit; raise max_message_bytes"));
    }
    for (int64_t begin = shape.offsets[s]; begin < shape.offsets[s + 1];
         begin += chunk_rows) {
      calls.push_back(SubCall{s, s + 1, begin,
                              std::min(begin + chunk_rows, shape.offsets[s + 1]),
                              begin > shape.offsets[s]});
    }
  }
  flush();
  return calls;
}

// The server names rows as observations.series[k]... with k counted within
// the sub-call; this shifts k to the panel's numbering.
std::string RenumberSeries(absl::string_view message, int64_t first_series) {
  constexpr absl::string_view kSeries = "series[";
  std::string out;
  size_t at = 0;
  while (true) {
    const size_t found = message.find(kSeries, at);
    if (found == absl::string_view::npos) break;
    const size_t digits = found + kSeries.size();
    const size_t close = message.find(']', digits);
    int64_t index;
    if (close == absl::string_view::npos ||
        !absl::SimpleAtoi(message.substr(digits, close - digits), &index)) {
      absl::StrAppend(&out, message.substr(at, digits - at));
      at = digits;
      continue;
    }
    absl::StrAppend(&out, message.substr(at, digits - at),
                    index + first_series);
    at = close;
  }
  absl::StrAppend(&out, message.substr(at));
  return out;
}

// A sub-call's field path in the panel's numbering, for the structured
// field violations (RenumberSeries does the message): series[k] becomes
// series[first_series + k] and, in a chunk that continues its series
// `row_shift` rows in, the index of the row tensor after it moves by that
// many rows (by row_shift times the values per row for values, mask and
// content, which the server indexes per value).
std::string PanelFieldPath(absl::string_view path, int64_t first_series,
                           int64_t row_shift, const v1::Observations& observations) {
  constexpr absl::string_view kSeries = "observations.series[";
  if (!absl::StartsWith(path, kSeries)) return std::string(path);
  const size_t close = path.find(']', kSeries.size());
  int64_t series;
  if (close == absl::string_view::npos ||
      !absl::SimpleAtoi(path.substr(kSeries.size(), close - kSeries.size()),
                        &series)) {
    return std::string(path);
  }
  absl::string_view rest = path.substr(close + 1);
  const std::string renumbered = absl::StrCat(kSeries, first_series + series, "]");
  const size_t open = rest.find('[');
  if (row_shift == 0 || series != 0 || !absl::StartsWith(rest, ".") ||
      open == absl::string_view::npos || !absl::EndsWith(rest, "]")) {
    return absl::StrCat(renumbered, rest);
  }
  const absl::string_view name = rest.substr(1, open - 1);
  int64_t index;
  if (!absl::SimpleAtoi(rest.substr(open + 1, rest.size() - open - 2), &index)) {
    return absl::StrCat(renumbered, rest);
  }
  const v1::Tensor* per_value = name == "values"    ? &observations.values()
                                : name == "mask"    ? &observations.mask()
                                : name == "content" ? &observations.content()
                                                    : nullptr;
  int64_t per_row = 1;
  if (per_value != nullptr) {
    for (int d = 1; d < per_value->shape_size(); ++d) per_row *= per_value->shape(d);
  } else if (name != "timestamps" && name != "event_times" &&
             name != "event_channels" && name != "event_values") {
    return absl::StrCat(renumbered, rest);
  }
  return absl::StrCat(renumbered, ".", name, "[", index + row_shift * per_row, "]");
}

// `status` with the field paths of its google.rpc.BadRequest details passed
// through `renumber`.
void RenumberViolations(
    const std::function<std::string(absl::string_view)>& renumber,
    absl::Status* status) {
  const auto payload = status->GetPayload(kGrpcStatusDetailsPayload);
  if (!payload) return;
  google::rpc::Status details;
  if (!details.ParseFromString(std::string(*payload))) return;
  for (google::protobuf::Any& any : *details.mutable_details()) {
    google::rpc::BadRequest bad_request;
    if (!any.UnpackTo(&bad_request)) continue;
    for (auto& violation : *bad_request.mutable_field_violations()) {
      violation.set_field(renumber(violation.field()));
    }
    any.PackFrom(bad_request);
  }
  status->SetPayload(kGrpcStatusDetailsPayload,
                     absl::Cord(details.SerializeAsString()));
}

}  // namespace

int64_t DefaultCallBytes(int64_t max_message_bytes) {
  // Half the limit: room for estimates that are a little low, and pieces
  // small enough that the transfer of one overlaps the server's work on the
  // next (workload P, 84 MB of features: 3 calls of ~28 MB ran 1.2x faster
  // than 2 of 42 MB, docs/BENCHMARKS.md). The Python client does the same.
  return std::max<int64_t>(1, max_message_bytes / 2);
}

absl::StatusOr<v1::EncodeObservationsResponse>
EncoderClient::EncodeObservationsPanel(
    const v1::EncodeObservationsRequest& request, const PanelOptions& panel,
    PanelStats* stats) const {
  PanelStats local_stats;
  PanelStats& counts = stats != nullptr ? *stats : local_stats;
  counts = PanelStats();
  // The smallest sub-call size tried when the server's limits are below
  // the client's.
  constexpr int64_t kMinCallBytes = int64_t{64} << 10;
  int64_t limit = panel.max_call_bytes > 0 ? panel.max_call_bytes
                                           : DefaultCallBytes(options_.max_message_bytes);
  int64_t retries = 0;
  for (;;) {
    absl::StatusOr<v1::EncodeObservationsResponse> result =
        EncodePanelWithin(request, panel, limit, &counts);
    counts.retries = retries;
    if (result.ok() || result.status().code() != absl::StatusCode::kResourceExhausted ||
        limit <= kMinCallBytes) {
      return result;
    }
    // The server's message or element limit is lower than this client's:
    // the same panel in smaller calls.
    limit = std::max(kMinCallBytes, limit / 2);
    ++retries;
  }
}

absl::StatusOr<v1::EncodeObservationsResponse> EncoderClient::EncodePanelWithin(
    const v1::EncodeObservationsRequest& request, const PanelOptions& panel,
    int64_t limit, PanelStats* stats) const {
  PanelStats& counts = *stats;
  counts = PanelStats();
  const PanelShape shape = InspectPanel(request);
  if (!shape.ok || shape.rows == 0) {
    counts.calls = 1;
    return EncodeObservations(request);
  }

  // The feature width F and dtype, the schema and the response's fixed
  // part: from the same request with zero rows (series 0 only, empty).
  const v1::EncodeObservationsRequest shared = TemplateRequest(request, shape);
  // Sub-calls go through the generic stub, so that their rows and features
  // are copied straight between the panel's tensors and gRPC's slices.
  grpc::GenericStub generic(channel_);
  const std::string method =
      absl::StrCat("/", v1::Encoder::service_full_name(), "/EncodeObservations");
  v1::EncodeObservationsResponse probe;
  {
    const SubCall zero_rows{/*series_begin=*/0, /*series_end=*/1,
                            /*row_begin=*/0, /*row_end=*/0,
                            /*continues=*/false};
    const grpc::ByteBuffer probe_request = EncodeSubRequest(
        request, BuildSubRequest(request, shared, shape, zero_rows, nullptr),
        zero_rows);
    counts.probe_calls = 1;
    grpc::ClientContext context;
    PrepareContext(&context);
    grpc::ByteBuffer probe_response;
    const grpc::Status status =
        CallAndWait(generic, &context, method, probe_request, &probe_response);
    if (!status.ok()) return FromGrpcStatus(status, options_.max_message_bytes);
    size_t probe_bytes;
    PHASOR_RETURN_IF_ERROR(DecodeSubResponse(&probe_response, nullptr, 0,
                                             &probe, &probe_bytes));
  }
  const v1::Tensor& probe_features = probe.features();
  if (probe_features.shape_size() != 2) {
    return absl::DataLossError(absl::StrCat(
        "EncodeObservationsPanel: the zero-row call returned features of shape ",
        ShapeString(probe_features), ", not [0, F]"));
  }
  const int64_t width = probe_features.shape(1);
  const int64_t element_bytes = DTypeBytes(probe_features.dtype());
  // The joined features are rows·F elements: a width the server could not
  // have meant (negative, or a size past int64) is not sized.
  if (width < 0 || element_bytes <= 0 ||
      (width > 0 && shape.rows > std::numeric_limits<int64_t>::max() / width /
                                     element_bytes)) {
    return absl::DataLossError(absl::StrCat(
        "EncodeObservationsPanel: the zero-row call returned features of shape ",
        ShapeString(probe_features), " and dtype ",
        DTypeString(probe_features.dtype()), ", which cannot be joined for ",
        shape.rows, " rows"));
  }

  Budget budget;
  const int64_t slack = kFramingSlackBytes + limit / 128;
  budget.request_per_row = shape.request_row_bytes;
  budget.response_per_row = width * element_bytes;
  budget.request_per_series =
      sizeof(int64_t) + 2 +
      (shape.time_zone_mode == TimeZoneMode::kIndexed ? sizeof(int32_t) : 0);
  budget.response_per_series =
      sizeof(int64_t) + 3 + SeriesStateBytesBound(shape.channels);
  budget.request_limit =
      limit - static_cast<int64_t>(shared.ByteSizeLong()) - slack;
  if (shape.time_zone_mode == TimeZoneMode::kPerSeries) {
    // Names are small; the longest one bounds each series' share.
    int64_t longest = 0;
    for (const std::string& name : request.observations().time_zones()) {
      longest = std::max<int64_t>(longest, static_cast<int64_t>(name.size()));
    }
    budget.request_per_series += longest + 2;
  }
  budget.response_limit =
      limit - static_cast<int64_t>(probe.ByteSizeLong()) - slack;
  // The server's element limit applies to the features alone.
  if (panel.max_call_elements > 0) {
    budget.response_limit =
        std::min(budget.response_limit, panel.max_call_elements * element_bytes);
  }

  const int64_t series = static_cast<int64_t>(shape.offsets.size()) - 1;
  const bool fits =
      static_cast<int64_t>(request.ByteSizeLong()) <= limit - slack &&
      series * budget.response_per_series + shape.rows * budget.response_per_row <=
          budget.response_limit;
  if (fits) {
    counts.calls = 1;
    return EncodeObservations(request);
  }
  PHASOR_ASSIGN_OR_RETURN(const std::vector<SubCall> plan,
                          PlanSubCalls(shape, budget));
  counts.calls = static_cast<int64_t>(plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    if (plan[i].continues &&
        (i == 0 || !plan[i - 1].continues ||
         plan[i - 1].series_begin != plan[i].series_begin)) {
      ++counts.series_split;
    }
  }

  // The joined response, filled in place as sub-calls finish.
  v1::EncodeObservationsResponse joined;
  *joined.mutable_schema() = probe.schema();
  v1::Tensor* features = joined.mutable_features();
  features->set_dtype(probe_features.dtype());
  features->add_shape(shape.rows);
  features->add_shape(width);
  std::string* feature_bytes = features->mutable_data();
  // Every byte is a sub-call's (a DATA_LOSS error otherwise): not zeroed
  // first.
  ResizeUninitialized(feature_bytes,
                      static_cast<size_t>(shape.rows * width * element_bytes));
  std::vector<v1::SeriesState> states(static_cast<size_t>(series));

  struct Call {
    grpc::ClientContext context;
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls(plan.size());
  std::vector<bool> launched(plan.size(), false), finished(plan.size(), false);
  absl::Mutex mutex;
  std::vector<size_t> completed;  // Guarded by mutex.
  const int max_in_flight = std::max(1, panel.max_in_flight);
  int in_flight = 0;
  size_t first_unlaunched = 0, done = 0;
  absl::Status error;

  while (done < plan.size()) {
    // Start every call whose predecessor state is known, in row order, up
    // to max_in_flight.
    for (size_t i = first_unlaunched; error.ok() && i < plan.size() &&
                                      in_flight < max_in_flight;
         ++i) {
      if (launched[i]) continue;
      if (plan[i].continues && !finished[i - 1]) continue;
      const v1::SeriesState* carried =
          plan[i].continues
              ? &states[static_cast<size_t>(plan[i].series_begin)]
              : nullptr;
      auto call = std::make_unique<Call>();
      call->request = EncodeSubRequest(
          request, BuildSubRequest(request, shared, shape, plan[i], carried),
          plan[i]);
      PrepareContext(&call->context);
      Call* raw = call.get();
      calls[i] = std::move(call);
      launched[i] = true;
      ++in_flight;
      generic.UnaryCall(
          &raw->context, method, grpc::StubOptions(), &raw->request,
          &raw->response, [raw, i, &mutex, &completed](grpc::Status status) {
            raw->status = std::move(status);
            absl::MutexLock lock(&mutex);
            completed.push_back(i);
          });
    }
    while (first_unlaunched < plan.size() && launched[first_unlaunched]) {
      ++first_unlaunched;
    }
    if (in_flight == 0) break;  // Only after an error: nothing left to wait on.

    std::vector<size_t> ready;
    {
      absl::MutexLock lock(&mutex);
      mutex.Await(absl::Condition(
          +[](std::vector<size_t>* pending) { return !pending->empty(); },
          &completed));
      ready.swap(completed);
    }
    for (const size_t i : ready) {
      --in_flight;
      ++done;
      finished[i] = true;
      std::unique_ptr<Call> call = std::move(calls[i]);
      const SubCall& part = plan[i];
      if (!error.ok()) continue;
      if (!call->status.ok()) {
        const absl::Status status =
            FromGrpcStatus(call->status, options_.max_message_bytes);
        error = absl::Status(
            status.code(),
            absl::StrCat("panel sub-call for series [", part.series_begin,
                         ", ", part.series_end, ") rows [", part.row_begin,
                         ", ", part.row_end, ")",
                         part.continues ? " (continuing the series)" : "",
                         ": ",
                         RenumberSeries(status.message(), part.series_begin)));
        status.ForEachPayload(
            [&](absl::string_view url, const absl::Cord& payload) {
              error.SetPayload(url, payload);
            });
        const int64_t row_shift = part.row_begin - shape.offsets[part.series_begin];
        RenumberViolations(
            [&](absl::string_view field) {
              return PanelFieldPath(field, part.series_begin, row_shift,
                                    request.observations());
            },
            &error);
        for (size_t j = 0; j < calls.size(); ++j) {
          if (calls[j] != nullptr) calls[j]->context.TryCancel();
        }
        continue;
      }
      const int64_t rows = part.row_end - part.row_begin;
      const size_t expected_bytes = static_cast<size_t>(rows * width * element_bytes);
      v1::EncodeObservationsResponse response;
      size_t got_bytes = 0;
      const absl::Status decoded = DecodeSubResponse(
          &call->response,
          feature_bytes->data() + part.row_begin * width * element_bytes,
          expected_bytes, &response, &got_bytes);
      const v1::Tensor& got = response.features();
      if (!decoded.ok() || got.dtype() != features->dtype() ||
          got.shape_size() != 2 || got.shape(0) != rows ||
          got.shape(1) != width || got_bytes != expected_bytes ||
          response.states_size() != part.series_end - part.series_begin) {
        error = absl::DataLossError(absl::StrCat(
            "panel sub-call for series [", part.series_begin, ", ",
            part.series_end, "): expected features [", rows, ",", width, "] ",
            DTypeString(features->dtype()), " and ",
            part.series_end - part.series_begin, " states, got ",
            DTypeString(got.dtype()), " ", ShapeString(got), " (", got_bytes,
            " bytes) and ", response.states_size(), " states",
            decoded.ok() ? "" : absl::StrCat(": ", decoded.message())));
        for (size_t j = 0; j < calls.size(); ++j) {
          if (calls[j] != nullptr) calls[j]->context.TryCancel();
        }
        continue;
      }
      for (int64_t s = part.series_begin; s < part.series_end; ++s) {
        states[static_cast<size_t>(s)] = std::move(
            *response.mutable_states(static_cast<int>(s - part.series_begin)));
      }
    }
  }
  if (!error.ok()) return error;

  if (shape.single) {
    *joined.mutable_state() = std::move(states.front());
  } else {
    for (v1::SeriesState& state : states) *joined.add_states() = std::move(state);
    *joined.mutable_series_offsets() = request.observations().series_offsets();
  }
  return joined;
}

}  // namespace phasor
