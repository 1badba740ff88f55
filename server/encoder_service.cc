#include "server/encoder_service.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include "absl/strings/str_cat.h"
#include "google/protobuf/arena.h"
#include "core/base/errors.h"
#include "server/grpc_status.h"
#include "server/handlers.h"

namespace phasor::server {
namespace {

// Compares in time independent of where the strings first differ, so the
// token cannot be guessed byte by byte from response times.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return difference == 0;
}

// Runs `handler(const HandlerContext&)` with the service's settings and
// `context` watched: check_alive between the handler's steps, and
// stop_requested inside long kernels (core/parallel.h); `memory` is the
// call's share of the memory budget.
template <typename Handler>
absl::Status RunHandler(const EncoderService& service,
                        const grpc::CallbackServerContext& context, CallMemory* memory,
                        Handler&& handler) {
  const auto alive = [&context] { return CheckAlive(context); };
  const std::function<bool()> stop = [&context] { return !CheckAlive(context).ok(); };
  HandlerContext handler_context{service.profiles(), service.execution(),
                                 service.limits(), service.metrics(), alive};
  handler_context.execution.stop_requested = &stop;
  handler_context.caches = service.caches();
  handler_context.memory = memory;
  return handler(handler_context);
}

// Whether Request has the `profile` member of the config oneof.
template <typename Request, typename = void>
struct NamesProfile : std::false_type {};
template <typename Request>
struct NamesProfile<Request,
                    std::void_t<decltype(std::declval<const Request&>().profile())>>
    : std::true_type {};

// Request and response bytes of one call; response bytes only when a
// response is sent.
void RecordBytes(ServerMetrics* metrics, absl::string_view method,
                 const grpc::ByteBuffer& request, const grpc::ByteBuffer* response) {
  if (metrics == nullptr) return;
  metrics->RecordPayloadBytes(
      method, static_cast<int64_t>(request.Length()),
      response != nullptr ? static_cast<int64_t>(response->Length()) : 0);
}

// A call refused memory is counted by reason.
void RecordMemoryRefusal(ServerMetrics* metrics, absl::string_view method,
                         const absl::Status& status) {
  if (metrics == nullptr) return;
  if (const std::optional<MemoryRefusal> refusal = MemoryRefusalOf(status)) {
    metrics->RecordMemoryRefusal(method, *refusal);
  }
}

}  // namespace

// One EncodeObservationsStream call: read a chunk, encode it with the state
// the previous chunk left, write the response, repeat until the client
// half-closes. Reads and writes strictly alternate, so at most one operation
// is in flight and the request/response buffers need no lock; mu_ guards
// only the flags Drain() shares with the reactor.
//
// No lock is held while calling StartRead/StartWrite/Finish (gRPC may run a
// reaction inline on the calling thread). The reactor stays alive between a
// decision under mu_ and the call after it because OnDone, which deletes
// it, runs only after Finish and every pending operation.
class EncoderService::StreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  StreamReactor(EncoderService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context) {}

  // Called once, right after construction.
  void Start() {
    absl::Status status = service_->Authorize(*context_);
    if (status.ok() && !service_->AddStream(this)) {
      status = DrainingError();
      if (service_->metrics() != nullptr) {
        service_->metrics()->RecordShutdownRefusal("EncodeObservationsStream");
      }
    }
    if (!status.ok()) {
      {
        absl::MutexLock lock(&mu_);
        finished_ = true;
      }
      Finish(ToGrpcStatus(status));
      return;
    }
    Read();
  }

  // From EncoderService::Drain, under its streams_mu_: true when the caller
  // must then call FinishDrained() (the stream was idle).
  bool MarkDraining() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    if (!reading_ || finished_) return false;
    finished_ = true;
    return true;
  }
  void FinishDrained() { Finish(ToGrpcStatus(DrainingError())); }

  void OnReadDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      reading_ = false;
      // Drain() finished the call while this read was pending.
      if (finished_) return;
      if (!ok) finished_ = true;
    }
    if (!ok) {
      // The client half-closed (or the call is gone): the stream is done.
      Finish(grpc::Status::OK);
      return;
    }
    ++chunks_read_;
    // The chunk's memory is held until its response has been written. The
    // first try runs here, on a gRPC thread, and must not wait for it.
    chunk_memory_ = service_->NewCallMemory(*context_, request_bytes_.Length());
    chunk_memory_.set_may_wait(service_->memory_wait_pool_ == nullptr);
    ProcessChunk();
  }

  // Encodes the chunk read, then writes its response or ends the stream.
  // When the chunk's memory did not fit at once it moves to the service's
  // BlockingPool and runs again there, where it may wait: no operation is
  // pending meanwhile, so nothing else touches the reactor.
  void ProcessChunk() {
    const absl::Status status = EncodeChunk();
    if (!status.ok() && chunk_memory_.would_have_waited()) {
      chunk_memory_.set_may_wait(true);
      if (service_->memory_wait_pool_->Submit([this] { ProcessChunk(); })) return;
    }
    RecordBytes(service_->metrics(), "EncodeObservationsStream", request_bytes_,
                status.ok() ? &response_bytes_ : nullptr);
    request_bytes_.Clear();
    if (!status.ok()) {
      chunk_memory_.Release();
      RecordMemoryRefusal(service_->metrics(), "EncodeObservationsStream", status);
      // gRPC retries a stream only before its first response; as for unary
      // calls, a limit is marked not to be retried.
      if (const std::optional<std::string> pushback = RetryPushback(status)) {
        context_->AddTrailingMetadata(kRetryPushbackKey, *pushback);
      }
      {
        absl::MutexLock lock(&mu_);
        finished_ = true;
      }
      Finish(ToGrpcStatus(status));
      return;
    }
    StartWrite(&response_bytes_);
  }

  void OnWriteDone(bool ok) override {
    response_bytes_.Clear();
    chunk_memory_.Release();
    bool drained = false;
    {
      absl::MutexLock lock(&mu_);
      if (ok && !draining_) {
        reading_ = true;
      } else {
        finished_ = true;
        drained = ok;
      }
    }
    if (drained) {
      FinishDrained();
    } else if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                          "the stream closed before the response was sent"));
    } else {
      StartRead(&request_bytes_);
    }
  }

  void OnDone() override {
    service_->RemoveStream(this);
    delete this;
  }

 private:
  static absl::Status DrainingError() {
    return absl::UnavailableError(
        "the server is draining; resume the stream on another replica from "
        "the state in the last response received");
  }

  void Read() {
    {
      absl::MutexLock lock(&mu_);
      reading_ = true;
    }
    StartRead(&request_bytes_);
  }

  absl::Status EncodeChunk() {
    google::protobuf::Arena arena;  // As in Unary.
    auto& request = *google::protobuf::Arena::CreateMessage<v1::EncodeObservationsRequest>(&arena);
    absl::Status status = ParseMessage(
        request_bytes_, absl::StrCat("chunk ", chunks_read_, " of the stream"),
        &request);
    if (status.ok()) status = CheckAlive(*context_);
    auto& response =
        *google::protobuf::Arena::CreateMessage<v1::EncodeObservationsResponse>(&arena);
    if (status.ok()) {
      status = RunHandler(*service_, *context_, &chunk_memory_,
                          [&](const HandlerContext& handler_context) {
                            return HandleEncodeObservations(handler_context, request,
                                                            &stream_, &response);
                          });
    }
    const std::string& profile =
        stream_.started ? stream_.config.profile() : request.profile();
    if (!status.ok() && !profile.empty()) status = SpecErrorsToProfile(status, profile);
    if (status.ok()) {
      status = SerializeWithinLimit(&response, service_->limits().max_message_bytes,
                                    "observations", &response_bytes_);
    }
    return status;
  }

  EncoderService* const service_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer request_bytes_;
  grpc::ByteBuffer response_bytes_;
  ObservationStream stream_;
  int64_t chunks_read_ = 0;  // Counted from 1 in messages.
  // The current chunk's share of the memory budget.
  CallMemory chunk_memory_{/*budget=*/nullptr, /*request_bytes=*/0, absl::InfinitePast()};

  absl::Mutex mu_;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

namespace {

// A tensor field moved out of a response: its number, the tensor without
// its data serialized, and the data.
struct DetachedTensor {
  int field_number = 0;
  std::string meta;
  std::unique_ptr<std::string> data;
};

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

size_t VarintSize(uint64_t value) {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

// Frees a detached tensor's data once gRPC has sent the slice over it.
void DeleteString(void* owned) { delete static_cast<std::string*>(owned); }

// Length-delimited wire type (protobuf encoding, "Message Structure").
constexpr uint64_t kLengthDelimited = 2;

}  // namespace

absl::Status SerializeWithinLimit(google::protobuf::Message* message,
                                  int64_t max_message_bytes,
                                  absl::string_view size_field,
                                  grpc::ByteBuffer* buffer) {
  const size_t size = message->ByteSizeLong();
  if (size > static_cast<size_t>(max_message_bytes)) {
    return FieldError(
        absl::StatusCode::kResourceExhausted, size_field,
        absl::StrCat("the response would be ", size,
                     " bytes, over the server's message limit of ",
                     max_message_bytes,
                     " bytes (phasor-server --max_message_bytes or "
                     "PHASOR_MAX_MESSAGE_BYTES raises it; the client's receive "
                     "limit must allow it too)"));
  }
  std::vector<DetachedTensor> detached;
  const google::protobuf::Descriptor* descriptor = message->GetDescriptor();
  const google::protobuf::Reflection* reflection = message->GetReflection();
  const google::protobuf::Descriptor* tensor_type = v1::Tensor::descriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    if (field->is_repeated() || field->message_type() != tensor_type ||
        !reflection->HasField(*message, field)) {
      continue;
    }
    auto* tensor = static_cast<v1::Tensor*>(reflection->MutableMessage(message, field));
    if (tensor->data().size() < kZeroCopyTensorBytes) continue;
    DetachedTensor out;
    out.field_number = field->number();
    out.data = std::make_unique<std::string>();
    out.data->swap(*tensor->mutable_data());  // The buffer moves; no copy.
    tensor->SerializeToString(&out.meta);
    reflection->ClearField(message, field);
    detached.push_back(std::move(out));
  }
  bool own_buffer = false;
  const grpc::Status serialized = grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::MessageLite>(
      *message, buffer, &own_buffer);
  if (!serialized.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot serialize the response: ", serialized.error_message()));
  }
  if (detached.empty()) return absl::OkStatus();
  std::vector<grpc::Slice> slices;
  if (!buffer->Dump(&slices).ok()) {
    return absl::InternalError("cannot read back the serialized response");
  }
  const uint64_t data_tag =
      (static_cast<uint64_t>(v1::Tensor::kDataFieldNumber) << 3) | kLengthDelimited;
  for (DetachedTensor& tensor : detached) {
    const uint64_t data_size = tensor.data->size();
    const uint64_t tensor_size = tensor.meta.size() + VarintSize(data_tag) +
                                 VarintSize(data_size) + data_size;
    std::string head;
    AppendVarint((static_cast<uint64_t>(tensor.field_number) << 3) | kLengthDelimited, &head);
    AppendVarint(tensor_size, &head);
    head += tensor.meta;
    AppendVarint(data_tag, &head);
    AppendVarint(data_size, &head);
    slices.emplace_back(head);
    std::string* data = tensor.data.release();
    slices.emplace_back(data->data(), data->size(), &DeleteString, data);
  }
  grpc::ByteBuffer joined(slices.data(), slices.size());
  buffer->Swap(&joined);
  return absl::OkStatus();
}

absl::Status ParseMessage(const grpc::ByteBuffer& buffer, absl::string_view what,
                          google::protobuf::Message* message) {
  // A copy of a ByteBuffer shares its slices; the reader consumes the copy.
  grpc::ByteBuffer copy(buffer);
  bool parsed = false;
  {
    grpc::ProtoBufferReader reader(&copy);
    parsed = reader.status().ok() && message->ParseFromZeroCopyStream(&reader);
  }
  if (parsed) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, " is not a valid ", message->GetDescriptor()->full_name(),
      " message (", buffer.Length(),
      " bytes): the bytes do not parse, or a string field holds invalid UTF-8"));
}

absl::Status CheckAlive(const grpc::CallbackServerContext& context) {
  // The deadline first: once it passes gRPC cancels the call as well, and
  // the client should hear which of the two ended it.
  if (std::chrono::system_clock::now() >= context.deadline()) {
    return absl::DeadlineExceededError(
        "the call's deadline passed before the result was ready");
  }
  if (context.IsCancelled()) {
    return absl::CancelledError("the call was cancelled");
  }
  return absl::OkStatus();
}

EncoderService::EncoderService(const ServerOptions& options,
                               const ProfileRegistry* profiles,
                               ServerMetrics* metrics, std::string auth_token,
                               MemoryBudget* memory_budget,
                               BlockingPool* memory_wait_pool)
    : profiles_(profiles),
      metrics_(metrics),
      enable_echo_(options.enable_echo),
      memory_budget_(memory_budget),
      memory_wait_(options.memory_wait),
      memory_wait_pool_(memory_wait_pool) {
  execution_.max_threads =
      options.threads > 0
          ? options.threads
          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  if (execution_.max_threads > 1) {
    region_thread_ = std::make_unique<RegionThread>();
    execution_.region_thread = region_thread_.get();
  }
  limits_.max_elements = options.max_elements_per_request;
  limits_.max_message_bytes = options.max_message_bytes;
  if (!auth_token.empty()) {
    expected_authorization_ = absl::StrCat("Bearer ", auth_token);
  }
}

absl::Status EncoderService::Authorize(
    const grpc::CallbackServerContext& context) const {
  if (expected_authorization_.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "missing \"authorization: Bearer <token>\" metadata");
  }
  const absl::string_view sent(it->second.data(), it->second.size());
  if (!ConstantTimeEquals(sent, expected_authorization_)) {
    return absl::UnauthenticatedError("invalid bearer token");
  }
  return absl::OkStatus();
}

EncoderService::~EncoderService() = default;

CallMemory EncoderService::NewCallMemory(const grpc::CallbackServerContext& context,
                                         int64_t request_bytes) const {
  const absl::Time wait_deadline =
      std::min(absl::Now() + memory_wait_, absl::FromChrono(context.deadline()));
  return CallMemory(memory_budget_, request_bytes, wait_deadline);
}

bool EncoderService::AddStream(StreamReactor* stream) {
  absl::MutexLock lock(&streams_mu_);
  if (draining_) return false;
  streams_.insert(stream);
  return true;
}

void EncoderService::RemoveStream(StreamReactor* stream) {
  absl::MutexLock lock(&streams_mu_);
  streams_.erase(stream);
}

void EncoderService::Drain() {
  std::vector<StreamReactor*> idle;
  {
    absl::MutexLock lock(&streams_mu_);
    draining_ = true;
    refusing_calls_.store(true);
    for (StreamReactor* stream : streams_) {
      if (stream->MarkDraining()) idle.push_back(stream);
    }
  }
  for (StreamReactor* stream : idle) stream->FinishDrained();
}

// One unary call, from its bytes to its status. It is the call's reactor,
// and holds the call's share of the memory budget until gRPC is done with
// the call: the response's bytes live until they have been sent, after
// Finish. The handler first runs on the gRPC thread that delivered the
// call, which must not block (server/blocking_pool.h); when the call's
// memory does not fit at once, the call moves to the service's
// BlockingPool and its handler runs again there, where it may wait. A
// handler reserves memory before it writes any output and touches nothing
// outside its response, so a second run starts from a fresh response.
//
// After Finish the reactor may be deleted at any time (OnDone, on another
// thread), so nothing touches it afterwards. Finish may come before the
// method that created the reactor returns it: gRPC keeps the status until
// the reactor is bound, and calls OnDone only after that.
template <typename Request, typename Response, typename Handler>
class EncoderService::UnaryCall final : public grpc::ServerUnaryReactor {
 public:
  UnaryCall(EncoderService* service, grpc::CallbackServerContext* context,
            absl::string_view method, absl::string_view size_field,
            const grpc::ByteBuffer* request_bytes, grpc::ByteBuffer* response_bytes,
            Handler handler)
      : service_(service),
        context_(context),
        method_(method),
        size_field_(size_field),
        request_bytes_(request_bytes),
        response_bytes_(response_bytes),
        handler_(std::move(handler)),
        memory_(service->NewCallMemory(*context,
                                       static_cast<int64_t>(request_bytes->Length()))) {}

  void Start() {
    // The token before the bytes: a caller without it learns nothing about
    // what the server would make of its request.
    absl::Status status = service_->Authorize(*context_);
    if (status.ok() && service_->refusing_calls_.load()) {
      if (service_->metrics_ != nullptr) service_->metrics_->RecordShutdownRefusal(method_);
      Complete(absl::UnavailableError(
          "server shutting down: the call was not run; retry it on another replica"));
      return;
    }
    // One arena for both messages: a panel's request and response hold a
    // SeriesState per series, which would otherwise be an allocation each.
    request_ = google::protobuf::Arena::CreateMessage<Request>(&arena_);
    if (status.ok()) status = ParseMessage(*request_bytes_, "the request", request_);
    if (status.ok()) status = CheckAlive(*context_);
    if (!status.ok()) {
      Complete(status);
      return;
    }
    memory_.set_may_wait(service_->memory_wait_pool_ == nullptr);
    Run();
  }

  void OnDone() override { delete this; }

 private:
  void Run() {
    Response& response = *google::protobuf::Arena::CreateMessage<Response>(&arena_);
    absl::Status status =
        RunHandler(*service_, *context_, &memory_, [&](const HandlerContext& handler_context) {
          return handler_(handler_context, *request_, &response);
        });
    if (!status.ok() && memory_.would_have_waited()) {
      memory_.set_may_wait(true);
      if (service_->memory_wait_pool_->Submit([this] { Run(); })) return;
    }
    if constexpr (NamesProfile<Request>::value) {
      if (!status.ok() && request_->has_profile()) {
        status = SpecErrorsToProfile(status, request_->profile());
      }
    }
    if (status.ok()) {
      status = SerializeWithinLimit(&response, service_->limits_.max_message_bytes,
                                    size_field_, response_bytes_);
    }
    Complete(status);
  }

  void Complete(const absl::Status& status) {
    RecordBytes(service_->metrics_, method_, *request_bytes_,
                status.ok() ? response_bytes_ : nullptr);
    if (!status.ok()) {
      memory_.Release();  // An error holds no response.
      RecordMemoryRefusal(service_->metrics_, method_, status);
      if (const std::optional<std::string> pushback = RetryPushback(status)) {
        context_->AddTrailingMetadata(kRetryPushbackKey, *pushback);
      }
    }
    Finish(ToGrpcStatus(status));
  }

  EncoderService* const service_;
  grpc::CallbackServerContext* const context_;
  const absl::string_view method_;
  const absl::string_view size_field_;
  const grpc::ByteBuffer* const request_bytes_;
  grpc::ByteBuffer* const response_bytes_;
  Handler handler_;
  CallMemory memory_;
  google::protobuf::Arena arena_;
  Request* request_ = nullptr;
};

template <typename Request, typename Response, typename Handler>
grpc::ServerUnaryReactor* EncoderService::Unary(
    grpc::CallbackServerContext* context, absl::string_view method,
    absl::string_view size_field, const grpc::ByteBuffer* request_bytes,
    grpc::ByteBuffer* response_bytes, Handler handler) {
  auto* call = new UnaryCall<Request, Response, Handler>(
      this, context, method, size_field, request_bytes, response_bytes, std::move(handler));
  call->Start();
  return call;
}

grpc::ServerUnaryReactor* EncoderService::EncodePositions(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<v1::EncodePositionsRequest, v1::EncodePositionsResponse>(
      context, "EncodePositions", "positions", request, response,
      HandleEncodePositions);
}

grpc::ServerUnaryReactor* EncoderService::ApplyRope(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<v1::ApplyRopeRequest, v1::ApplyRopeResponse>(
      context, "ApplyRope", "query", request, response, HandleApplyRope);
}

grpc::ServerUnaryReactor* EncoderService::RopeTables(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<v1::RopeTablesRequest, v1::RopeTablesResponse>(
      context, "RopeTables", "positions", request, response, HandleRopeTables);
}

grpc::ServerUnaryReactor* EncoderService::AlibiBias(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<v1::AlibiBiasRequest, v1::AlibiBiasResponse>(
      context, "AlibiBias", "k_len", request, response, HandleAlibiBias);
}

grpc::ServerUnaryReactor* EncoderService::RelativeBias(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<v1::RelativeBiasRequest, v1::RelativeBiasResponse>(
      context, "RelativeBias", "key_positions", request, response, HandleRelativeBias);
}

grpc::ServerUnaryReactor* EncoderService::EncodeObservations(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<v1::EncodeObservationsRequest, v1::EncodeObservationsResponse>(
      context, "EncodeObservations", "observations", request, response,
      [](const HandlerContext& handler_context,
         const v1::EncodeObservationsRequest& unary_request,
         v1::EncodeObservationsResponse* unary_response) {
        return HandleEncodeObservations(handler_context, unary_request,
                                        /*stream=*/nullptr, unary_response);
      });
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
EncoderService::EncodeObservationsStream(grpc::CallbackServerContext* context) {
  auto* stream = new StreamReactor(this, context);
  stream->Start();
  return stream;
}

grpc::ServerUnaryReactor* EncoderService::Describe(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<v1::DescribeRequest, v1::DescribeResponse>(
      context, "Describe", "num_offsets", request, response, HandleDescribe);
}

grpc::ServerUnaryReactor* EncoderService::ListProfiles(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<v1::ListProfilesRequest, v1::ListProfilesResponse>(
      context, "ListProfiles", "profile", request, response, HandleListProfiles);
}

grpc::ServerUnaryReactor* EncoderService::Echo(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) {
  const bool enabled = enable_echo_;
  return Unary<v1::EchoRequest, v1::EchoResponse>(
      context, "Echo", "payload", request, response,
      [enabled](const HandlerContext&, const v1::EchoRequest& echo_request,
                v1::EchoResponse* echo_response) {
        if (!enabled) {
          return absl::UnimplementedError(
              "Echo is disabled; start phasor-server with --enable_echo");
        }
        echo_response->set_payload(echo_request.payload());
        return absl::OkStatus();
      });
}

}  // namespace phasor::server
