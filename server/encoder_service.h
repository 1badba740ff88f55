// EncoderService: the gRPC callback-API implementation of phasor.v1.Encoder.
//
// Every method does the same few things and nothing else: check the bearer
// token (when the server has one), check the call is still wanted, run the
// handler from server/handlers.h with the call watched (its deadline and
// cancellation end the work between steps and inside long kernels), convert
// its absl::Status once (server/grpc_status.h), record payload bytes, and
// finish. Work runs inline on gRPC's callback thread; kernels parallelise
// large requests themselves (core/parallel.h).
//
// Bearer tokens are checked here rather than in a grpc::AuthMetadataProcessor
// because gRPC 1.51 only runs processors on secure credentials (insecure
// ones abort when given one), and a server interceptor cannot fail a call.
// Health and reflection are other services and stay open for probes.
//
// Thread-safety: the service is shared by all calls and holds only immutable
// state after construction.
#ifndef PHASOR_SERVER_ENCODER_SERVICE_H_
#define PHASOR_SERVER_ENCODER_SERVICE_H_

#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "core/parallel.h"
#include "phasor/v1/encoder.grpc.pb.h"
#include "server/convert.h"
#include "server/metrics.h"
#include "server/options.h"
#include "server/profiles.h"

namespace phasor::server {

class EncoderService final : public v1::Encoder::CallbackService {
 public:
  // `profiles` and `metrics` must outlive the service; `metrics` may be null.
  // `auth_token` empty = no authentication.
  EncoderService(const ServerOptions& options, const ProfileRegistry* profiles,
                 ServerMetrics* metrics, std::string auth_token);

  grpc::ServerUnaryReactor* EncodePositions(
      grpc::CallbackServerContext* context,
      const v1::EncodePositionsRequest* request,
      v1::EncodePositionsResponse* response) override;
  grpc::ServerUnaryReactor* ApplyRope(grpc::CallbackServerContext* context,
                                      const v1::ApplyRopeRequest* request,
                                      v1::ApplyRopeResponse* response) override;
  grpc::ServerUnaryReactor* RopeTables(grpc::CallbackServerContext* context,
                                       const v1::RopeTablesRequest* request,
                                       v1::RopeTablesResponse* response) override;
  grpc::ServerUnaryReactor* AlibiBias(grpc::CallbackServerContext* context,
                                      const v1::AlibiBiasRequest* request,
                                      v1::AlibiBiasResponse* response) override;
  grpc::ServerUnaryReactor* EncodeObservations(
      grpc::CallbackServerContext* context,
      const v1::EncodeObservationsRequest* request,
      v1::EncodeObservationsResponse* response) override;
  grpc::ServerBidiReactor<v1::EncodeObservationsRequest,
                          v1::EncodeObservationsResponse>*
  EncodeObservationsStream(grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Describe(grpc::CallbackServerContext* context,
                                     const v1::DescribeRequest* request,
                                     v1::DescribeResponse* response) override;
  grpc::ServerUnaryReactor* ListProfiles(
      grpc::CallbackServerContext* context,
      const v1::ListProfilesRequest* request,
      v1::ListProfilesResponse* response) override;
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const v1::EchoRequest* request,
                                 v1::EchoResponse* response) override;

  // UNAUTHENTICATED unless the call carries the server's bearer token (or
  // the server has none).
  absl::Status Authorize(const grpc::CallbackServerContext& context) const;

  const ProfileRegistry* profiles() const { return profiles_; }
  ServerMetrics* metrics() const { return metrics_; }
  const ExecutionOptions& execution() const { return execution_; }
  const RequestLimits& limits() const { return limits_; }

 private:
  template <typename Request, typename Response, typename Handler>
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context,
                                  absl::string_view method,
                                  const Request* request, Response* response,
                                  Handler handler);

  const ProfileRegistry* profiles_;
  ServerMetrics* metrics_;
  ExecutionOptions execution_;
  RequestLimits limits_;
  bool enable_echo_;
  std::string expected_authorization_;  // "Bearer <token>", or empty.
};

// OK while `context`'s client still wants the result: CANCELLED after a
// cancellation, DEADLINE_EXCEEDED once the deadline passed.
absl::Status CheckAlive(const grpc::CallbackServerContext& context);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_ENCODER_SERVICE_H_
