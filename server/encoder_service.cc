#include "server/encoder_service.h"

#include <chrono>
#include <functional>
#include <thread>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
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
// stop_requested inside long kernels (core/parallel.h).
template <typename Handler>
absl::Status RunHandler(const EncoderService& service,
                        const grpc::CallbackServerContext& context,
                        Handler&& handler) {
  const auto alive = [&context] { return CheckAlive(context); };
  const std::function<bool()> stop = [&context] { return !CheckAlive(context).ok(); };
  HandlerContext handler_context{service.profiles(), service.execution(),
                                 service.limits(), service.metrics(), alive};
  handler_context.execution.stop_requested = &stop;
  return handler(handler_context);
}

// Whether Request has the `profile` member of the config oneof.
template <typename Request, typename = void>
struct NamesProfile : std::false_type {};
template <typename Request>
struct NamesProfile<Request,
                    std::void_t<decltype(std::declval<const Request&>().profile())>>
    : std::true_type {};

// Every call's request bytes; response bytes only when a response is sent.
void RecordBytes(ServerMetrics* metrics, absl::string_view method,
                 const google::protobuf::MessageLite& request,
                 const google::protobuf::MessageLite* response) {
  if (metrics == nullptr) return;
  metrics->RecordPayloadBytes(
      method, static_cast<int64_t>(request.ByteSizeLong()),
      response != nullptr ? static_cast<int64_t>(response->ByteSizeLong()) : 0);
}

// One EncodeObservationsStream call: read a chunk, encode it with the state
// the previous chunk left, write the response, repeat until the client
// half-closes. Reads and writes strictly alternate, so the reactor never has
// two operations in flight and needs no lock.
class ObservationStreamReactor final
    : public grpc::ServerBidiReactor<v1::EncodeObservationsRequest,
                                     v1::EncodeObservationsResponse> {
 public:
  ObservationStreamReactor(const EncoderService* service,
                           grpc::CallbackServerContext* context)
      : service_(service), context_(context) {
    const absl::Status status = service_->Authorize(*context_);
    if (!status.ok()) {
      Finish(ToGrpcStatus(status));
      return;
    }
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The client half-closed (or the call is gone): the stream is done.
      Finish(grpc::Status::OK);
      return;
    }
    response_.Clear();
    absl::Status status = CheckAlive(*context_);
    if (status.ok()) {
      status = RunHandler(*service_, *context_, [this](const HandlerContext& handler_context) {
        return HandleEncodeObservations(handler_context, request_, &stream_, &response_);
      });
    }
    const std::string& profile =
        stream_.started ? stream_.config.profile() : request_.profile();
    if (!status.ok() && !profile.empty()) status = SpecErrorsToProfile(status, profile);
    RecordBytes(service_->metrics(), "EncodeObservationsStream", request_,
                status.ok() ? &response_ : nullptr);
    if (!status.ok()) {
      Finish(ToGrpcStatus(status));
      return;
    }
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                          "the stream closed before the response was sent"));
      return;
    }
    request_.Clear();
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  const EncoderService* service_;
  grpc::CallbackServerContext* context_;
  v1::EncodeObservationsRequest request_;
  v1::EncodeObservationsResponse response_;
  ObservationStream stream_;
};

}  // namespace

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
                               ServerMetrics* metrics, std::string auth_token)
    : profiles_(profiles), metrics_(metrics), enable_echo_(options.enable_echo) {
  execution_.max_threads =
      options.threads > 0
          ? options.threads
          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
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

template <typename Request, typename Response, typename Handler>
grpc::ServerUnaryReactor* EncoderService::Unary(
    grpc::CallbackServerContext* context, absl::string_view method,
    const Request* request, Response* response, Handler handler) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status status = Authorize(*context);
  if (status.ok()) status = CheckAlive(*context);
  if (status.ok()) {
    status = RunHandler(*this, *context, [&](const HandlerContext& handler_context) {
      return handler(handler_context, *request, response);
    });
  }
  if constexpr (NamesProfile<Request>::value) {
    if (!status.ok() && request->has_profile()) {
      status = SpecErrorsToProfile(status, request->profile());
    }
  }
  RecordBytes(metrics_, method, *request, status.ok() ? response : nullptr);
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* EncoderService::EncodePositions(
    grpc::CallbackServerContext* context,
    const v1::EncodePositionsRequest* request,
    v1::EncodePositionsResponse* response) {
  return Unary(context, "EncodePositions", request, response,
               HandleEncodePositions);
}

grpc::ServerUnaryReactor* EncoderService::ApplyRope(
    grpc::CallbackServerContext* context, const v1::ApplyRopeRequest* request,
    v1::ApplyRopeResponse* response) {
  return Unary(context, "ApplyRope", request, response, HandleApplyRope);
}

grpc::ServerUnaryReactor* EncoderService::RopeTables(
    grpc::CallbackServerContext* context, const v1::RopeTablesRequest* request,
    v1::RopeTablesResponse* response) {
  return Unary(context, "RopeTables", request, response, HandleRopeTables);
}

grpc::ServerUnaryReactor* EncoderService::AlibiBias(
    grpc::CallbackServerContext* context, const v1::AlibiBiasRequest* request,
    v1::AlibiBiasResponse* response) {
  return Unary(context, "AlibiBias", request, response, HandleAlibiBias);
}

grpc::ServerUnaryReactor* EncoderService::EncodeObservations(
    grpc::CallbackServerContext* context,
    const v1::EncodeObservationsRequest* request,
    v1::EncodeObservationsResponse* response) {
  return Unary(context, "EncodeObservations", request, response,
               [](const HandlerContext& handler_context,
                  const v1::EncodeObservationsRequest& unary_request,
                  v1::EncodeObservationsResponse* unary_response) {
                 return HandleEncodeObservations(handler_context, unary_request,
                                                 /*stream=*/nullptr,
                                                 unary_response);
               });
}

grpc::ServerBidiReactor<v1::EncodeObservationsRequest,
                        v1::EncodeObservationsResponse>*
EncoderService::EncodeObservationsStream(grpc::CallbackServerContext* context) {
  return new ObservationStreamReactor(this, context);
}

grpc::ServerUnaryReactor* EncoderService::Describe(
    grpc::CallbackServerContext* context, const v1::DescribeRequest* request,
    v1::DescribeResponse* response) {
  return Unary(context, "Describe", request, response, HandleDescribe);
}

grpc::ServerUnaryReactor* EncoderService::ListProfiles(
    grpc::CallbackServerContext* context,
    const v1::ListProfilesRequest* request,
    v1::ListProfilesResponse* response) {
  return Unary(context, "ListProfiles", request, response, HandleListProfiles);
}

grpc::ServerUnaryReactor* EncoderService::Echo(grpc::CallbackServerContext* context,
                                               const v1::EchoRequest* request,
                                               v1::EchoResponse* response) {
  const bool enabled = enable_echo_;
  return Unary(context, "Echo", request, response,
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
