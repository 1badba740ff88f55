#include "server/inference_service.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <grpcpp/support/proto_buffer_writer.h>

#include "absl/strings/str_cat.h"
#include "common/binary_info.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "google/protobuf/arena.h"
#include "server/grpc_status.h"
#include "server/inference_models.h"

namespace phasor::server {
namespace {

using inference::ModelInferResponse;

// Length-delimited wire type (protobuf encoding, "Message Structure").
constexpr uint64_t kLengthDelimited = 2;

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Frees a detached raw output once gRPC has sent the slice over it.
void DeleteString(void* owned) { delete static_cast<std::string*>(owned); }

absl::Status MessageLimitError(size_t size, int64_t max_message_bytes,
                               absl::string_view size_field) {
  return FieldError(absl::StatusCode::kResourceExhausted, size_field,
                    absl::StrCat("the response would be ", size,
                                 " bytes, over the server's message limit of ",
                                 max_message_bytes,
                                 " bytes (phasor-server --max_message_bytes or "
                                 "PHASOR_MAX_MESSAGE_BYTES raises it; the client's "
                                 "receive limit must allow it too)"));
}

}  // namespace

absl::Status SerializeInferResponse(ModelInferResponse* response, int64_t max_message_bytes,
                                    absl::string_view size_field, grpc::ByteBuffer* buffer) {
  const size_t size = response->ByteSizeLong();
  if (size > static_cast<size_t>(max_message_bytes)) {
    return MessageLimitError(size, max_message_bytes, size_field);
  }
  bool detach = false;
  for (const std::string& raw : response->raw_output_contents()) {
    detach |= raw.size() >= kZeroCopyTensorBytes;
  }
  std::vector<std::unique_ptr<std::string>> detached;
  if (detach) {
    for (std::string& raw : *response->mutable_raw_output_contents()) {
      detached.push_back(std::make_unique<std::string>());
      detached.back()->swap(raw);  // The buffer moves; no copy.
    }
    response->clear_raw_output_contents();
  }
  bool own_buffer = false;
  const grpc::Status serialized =
      grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::MessageLite>(
          *response, buffer, &own_buffer);
  if (!serialized.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot serialize the response: ", serialized.error_message()));
  }
  if (detached.empty()) return absl::OkStatus();
  std::vector<grpc::Slice> slices;
  if (!buffer->Dump(&slices).ok()) {
    return absl::InternalError("cannot read back the serialized response");
  }
  const uint64_t tag =
      (static_cast<uint64_t>(ModelInferResponse::kRawOutputContentsFieldNumber) << 3) |
      kLengthDelimited;
  for (std::unique_ptr<std::string>& raw : detached) {
    std::string head;
    AppendVarint(tag, &head);
    AppendVarint(raw->size(), &head);
    slices.emplace_back(head);
    if (raw->empty()) continue;
    std::string* data = raw.release();
    slices.emplace_back(data->data(), data->size(), &DeleteString, data);
  }
  grpc::ByteBuffer joined(slices.data(), slices.size());
  buffer->Swap(&joined);
  return absl::OkStatus();
}

// One unary call, from its bytes to its status, as EncoderService's unary
// calls run: it is the call's reactor and holds the call's share of the
// memory budget until gRPC is done with the call. The handler first runs on
// the gRPC thread that delivered the call, which must not block; when the
// call's memory does not fit at once the call moves to the memory-wait pool
// and runs again there, where it may wait. ModelInfer moves the request's
// raw bytes into the native request, so a second run parses the request
// bytes again (they live until the call ends) rather than reuse them.
template <typename Request, typename Response, typename Handler>
class InferenceService::UnaryCall final : public grpc::ServerUnaryReactor {
 public:
  UnaryCall(const InferenceService* service, grpc::CallbackServerContext* context,
            absl::string_view method, CallPolicy policy, absl::string_view size_field,
            const grpc::ByteBuffer* request_bytes, grpc::ByteBuffer* response_bytes,
            Handler handler)
      : service_(service),
        context_(context),
        method_(method),
        policy_(policy),
        size_field_(size_field),
        request_bytes_(request_bytes),
        response_bytes_(response_bytes),
        handler_(std::move(handler)),
        memory_(service->encoder_->NewCallMemory(
            *context, static_cast<int64_t>(request_bytes->Length()))) {}

  void Start() {
    // The token before the bytes, as on the Encoder.
    const absl::Status status = policy_.authorize
                                    ? service_->encoder_->Authorize(*context_)
                                    : absl::OkStatus();
    if (!status.ok()) {
      Complete(status);
      return;
    }
    // Draining: as on the Encoder, a call that reaches the service now was
    // queued behind running calls, and another replica answers it sooner.
    if (policy_.refuse_when_draining && service_->draining_.load(std::memory_order_relaxed)) {
      ServerMetrics* metrics = service_->encoder_->metrics();
      if (metrics != nullptr) metrics->RecordShutdownRefusal(method_);
      Complete(absl::UnavailableError(
          "server shutting down: the call was not run; retry it on another replica"));
      return;
    }
    memory_.set_may_wait(service_->memory_wait_pool_ == nullptr);
    Run();
  }

  void OnDone() override { delete this; }

 private:
  void Run() {
    // One arena for the request, the native messages HandleModelInfer
    // builds on it, and the response.
    Request& request = *google::protobuf::Arena::CreateMessage<Request>(&arena_);
    absl::Status status = ParseMessage(*request_bytes_, "the request", &request);
    if (status.ok()) status = CheckAlive(*context_);
    Response& response = *google::protobuf::Arena::CreateMessage<Response>(&arena_);
    if (status.ok()) {
      const EncoderService& encoder = *service_->encoder_;
      const auto alive = [this] { return CheckAlive(*context_); };
      const std::function<bool()> stop = [this] { return !CheckAlive(*context_).ok(); };
      HandlerContext handler_context{encoder.profiles(), encoder.execution(),
                                     encoder.limits(), encoder.metrics(), alive};
      handler_context.execution.stop_requested = &stop;
      handler_context.caches = encoder.caches();
      handler_context.memory = &memory_;
      status = handler_(handler_context, &request, &response);
    }
    if (!status.ok() && memory_.would_have_waited()) {
      memory_.set_may_wait(true);
      if (service_->memory_wait_pool_->Submit([this] { Run(); })) return;
    }
    if (status.ok()) {
      const int64_t limit = service_->encoder_->limits().max_message_bytes;
      if constexpr (std::is_same_v<Response, ModelInferResponse>) {
        status = SerializeInferResponse(&response, limit, size_field_, response_bytes_);
      } else {
        status = SerializeWithinLimit(&response, limit, size_field_, response_bytes_);
      }
    }
    Complete(status);
  }

  void Complete(const absl::Status& status) {
    ServerMetrics* metrics = service_->encoder_->metrics();
    if (metrics != nullptr) {
      metrics->RecordPayloadBytes(
          method_, static_cast<int64_t>(request_bytes_->Length()),
          status.ok() ? static_cast<int64_t>(response_bytes_->Length()) : 0);
    }
    if (!status.ok()) {
      memory_.Release();  // An error holds no response.
      if (metrics != nullptr) {
        if (const std::optional<MemoryRefusal> refusal = MemoryRefusalOf(status)) {
          metrics->RecordMemoryRefusal(method_, *refusal);
        }
      }
      if (const std::optional<std::string> pushback = RetryPushback(status)) {
        context_->AddTrailingMetadata(kRetryPushbackKey, *pushback);
      }
    }
    Finish(ToGrpcStatus(status));
  }

  const InferenceService* const service_;
  grpc::CallbackServerContext* const context_;
  const absl::string_view method_;
  const CallPolicy policy_;
  const absl::string_view size_field_;
  const grpc::ByteBuffer* const request_bytes_;
  grpc::ByteBuffer* const response_bytes_;
  Handler handler_;
  CallMemory memory_;
  google::protobuf::Arena arena_;
};

namespace {

// Liveness and readiness answer everyone and while draining (that is when
// they matter); ModelReady needs the token (it confirms model names) and
// answers while draining; everything else needs the token and is refused
// once the server drains.
constexpr InferenceService::CallPolicy kProbe{/*authorize=*/false,
                                              /*refuse_when_draining=*/false};
constexpr InferenceService::CallPolicy kModelProbe{/*authorize=*/true,
                                                   /*refuse_when_draining=*/false};
constexpr InferenceService::CallPolicy kWork{/*authorize=*/true,
                                             /*refuse_when_draining=*/true};

}  // namespace

InferenceService::InferenceService(const EncoderService* encoder, BlockingPool* memory_wait_pool,
                                   SharedMemoryRegistry* shared_memory)
    : encoder_(encoder), memory_wait_pool_(memory_wait_pool), shared_memory_(shared_memory) {}

template <typename Request, typename Response, typename Handler>
grpc::ServerUnaryReactor* InferenceService::Unary(
    grpc::CallbackServerContext* context, absl::string_view method, CallPolicy policy,
    absl::string_view size_field, const grpc::ByteBuffer* request_bytes,
    grpc::ByteBuffer* response_bytes, Handler handler) {
  auto* call = new UnaryCall<Request, Response, Handler>(
      this, context, method, policy, size_field, request_bytes, response_bytes,
      std::move(handler));
  call->Start();
  return call;
}

grpc::ServerUnaryReactor* InferenceService::ServerLive(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return Unary<inference::ServerLiveRequest, inference::ServerLiveResponse>(
      context, "ServerLive", kProbe, "", request, response,
      [](const HandlerContext&, inference::ServerLiveRequest*,
         inference::ServerLiveResponse* live) {
        live->set_live(true);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ServerReady(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return Unary<inference::ServerReadyRequest, inference::ServerReadyResponse>(
      context, "ServerReady", kProbe, "", request, response,
      [this](const HandlerContext&, inference::ServerReadyRequest*,
             inference::ServerReadyResponse* ready) {
        ready->set_ready(!draining_.load(std::memory_order_relaxed));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ModelReady(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return Unary<inference::ModelReadyRequest, inference::ModelReadyResponse>(
      context, "ModelReady", kModelProbe, "", request, response,
      [this](const HandlerContext& handler_context, inference::ModelReadyRequest* model,
             inference::ModelReadyResponse* ready) {
        PHASOR_RETURN_IF_ERROR(FindModel(*handler_context.profiles, model->name(),
                                         model->version(), "name", "version")
                                   .status());
        ready->set_ready(!draining_.load(std::memory_order_relaxed));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ServerMetadata(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<inference::ServerMetadataRequest, inference::ServerMetadataResponse>(
      context, "ServerMetadata", kWork, "", request, response,
      [this](const HandlerContext&, inference::ServerMetadataRequest*,
             inference::ServerMetadataResponse* metadata) {
        metadata->set_name("phasor");
        metadata->set_version(std::string(ProjectVersion()));
        const bool shared_memory = shared_memory_ != nullptr && shared_memory_->enabled();
        for (const absl::string_view extension : InferenceExtensions(shared_memory)) {
          metadata->add_extensions(std::string(extension));
        }
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ModelMetadata(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<inference::ModelMetadataRequest, inference::ModelMetadataResponse>(
      context, "ModelMetadata", kWork, "", request, response,
      [](const HandlerContext& handler_context, inference::ModelMetadataRequest* model,
         inference::ModelMetadataResponse* metadata) {
        PHASOR_ASSIGN_OR_RETURN(const v1::Profile* profile,
                                FindModel(*handler_context.profiles, model->name(),
                                          model->version(), "name", "version"));
        FillModelMetadata(*handler_context.profiles, *profile, metadata);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ModelInfer(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return Unary<inference::ModelInferRequest, ModelInferResponse>(
      context, "ModelInfer", kWork, "inputs", request, response,
      [this](const HandlerContext& handler_context, inference::ModelInferRequest* infer,
             ModelInferResponse* result) {
        return HandleModelInfer(handler_context, infer, result, shared_memory_);
      });
}


grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryStatus(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<inference::SystemSharedMemoryStatusRequest,
               inference::SystemSharedMemoryStatusResponse>(
      context, "SystemSharedMemoryStatus", kWork, "", request, response,
      [this](const HandlerContext&, inference::SystemSharedMemoryStatusRequest* status,
             inference::SystemSharedMemoryStatusResponse* regions) -> absl::Status {
        if (shared_memory_ == nullptr) return SharedMemoryRegistry::DisabledError();
        PHASOR_ASSIGN_OR_RETURN(const std::vector<SharedMemoryRegionInfo> infos,
                                shared_memory_->Status(status->name()));
        for (const SharedMemoryRegionInfo& info : infos) {
          auto& region = (*regions->mutable_regions())[info.name];
          region.set_name(info.name);
          region.set_key(info.key);
          region.set_offset(info.offset);
          region.set_byte_size(info.byte_size);
        }
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryRegister(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<inference::SystemSharedMemoryRegisterRequest,
               inference::SystemSharedMemoryRegisterResponse>(
      context, "SystemSharedMemoryRegister", kWork, "", request, response,
      [this](const HandlerContext&, inference::SystemSharedMemoryRegisterRequest* region,
             inference::SystemSharedMemoryRegisterResponse*) -> absl::Status {
        if (shared_memory_ == nullptr) return SharedMemoryRegistry::DisabledError();
        return shared_memory_->Register(region->name(), region->key(), region->offset(),
                                        region->byte_size());
      });
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryUnregister(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<inference::SystemSharedMemoryUnregisterRequest,
               inference::SystemSharedMemoryUnregisterResponse>(
      context, "SystemSharedMemoryUnregister", kWork, "", request, response,
      [this](const HandlerContext&, inference::SystemSharedMemoryUnregisterRequest* region,
             inference::SystemSharedMemoryUnregisterResponse*) -> absl::Status {
        if (shared_memory_ == nullptr) return SharedMemoryRegistry::DisabledError();
        return shared_memory_->Unregister(region->name());
      });
}

}  // namespace phasor::server
