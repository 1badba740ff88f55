// EncoderService: the gRPC callback-API implementation of phasor.v1.Encoder.
//
// Every method does the same few things and nothing else: check the bearer
// token (when the server has one), check the call is still wanted, run the
// handler from server/handlers.h with the call watched (its deadline and
// cancellation end the work between steps and inside long kernels) and with
// its share of the server's memory budget (server/memory_budget.h: the
// handler reserves it once the output is sized; it is given back once the
// response has been sent), convert its absl::Status once
// (server/grpc_status.h, with the retry pushback trailer of
// RetryPushback), record payload bytes and memory refusals, and finish.
// Work runs inline on gRPC's callback thread; kernels parallelise large
// requests themselves (core/parallel.h). A call whose memory does not fit
// at once moves to a BlockingPool, waits there at most memory_wait for the
// budget, and runs there.
//
// Bearer tokens are checked here rather than in a grpc::AuthMetadataProcessor
// because gRPC 1.51 only runs processors on secure credentials (insecure
// ones abort when given one), and a server interceptor cannot fail a call.
// Health and reflection are other services and stay open for probes.
//
// Thread-safety: the service is shared by all calls; besides immutable
// settings it holds only the set of open streams, under a mutex.
#ifndef PHASOR_SERVER_ENCODER_SERVICE_H_
#define PHASOR_SERVER_ENCODER_SERVICE_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/adapters/parallel.h"
#include "phasor/v1/encoder.grpc.pb.h"
#include "server/convert.h"
#include "server/blocking_pool.h"
#include "server/handlers.h"
#include "server/memory_budget.h"
#include "server/metrics.h"
#include "server/options.h"
#include "server/profiles.h"

namespace phasor::server {

// The Encoder service with every method registered raw (bytes in, bytes
// out): the service parses requests and serializes responses itself, so
//  - a request that does not parse (or holds invalid UTF-8 in a string
//    field) is INVALID_ARGUMENT naming the message type (gRPC's typed path
//    answers UNIMPLEMENTED with no message, or ends a stream with OK);
//  - the bearer token is checked before the bytes are parsed;
//  - the response's exact serialized size is checked against the message
//    limit before it is sent, and an oversized one is RESOURCE_EXHAUSTED
//    naming the request field that drives the size.
using RawEncoderService = v1::Encoder::WithRawCallbackMethod_EncodePositions<
    v1::Encoder::WithRawCallbackMethod_ApplyRope<
        v1::Encoder::WithRawCallbackMethod_RopeTables<
            v1::Encoder::WithRawCallbackMethod_AlibiBias<
                v1::Encoder::WithRawCallbackMethod_RelativeBias<
                    v1::Encoder::WithRawCallbackMethod_EncodeObservations<
                        v1::Encoder::WithRawCallbackMethod_EncodeObservationsStream<
                            v1::Encoder::WithRawCallbackMethod_Describe<
                                v1::Encoder::WithRawCallbackMethod_ListProfiles<
                                    v1::Encoder::WithRawCallbackMethod_Echo<
                                        v1::Encoder::Service>>>>>>>>>>;

class EncoderService final : public RawEncoderService {
 public:
  // `profiles`, `metrics`, `memory_budget` and `memory_wait_pool` must
  // outlive the service (the pool: until the server has stopped, since it
  // runs calls); `metrics` and `memory_budget` may be null (no budget: calls
  // are not counted), and `memory_wait_pool` too (calls that must wait for
  // memory then wait on gRPC's thread: for tests). `auth_token` empty = no
  // authentication.
  EncoderService(const ServerOptions& options, const ProfileRegistry* profiles,
                 ServerMetrics* metrics, std::string auth_token,
                 MemoryBudget* memory_budget = nullptr,
                 BlockingPool* memory_wait_pool = nullptr);
  ~EncoderService() override;

  grpc::ServerUnaryReactor* EncodePositions(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ApplyRope(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RopeTables(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* AlibiBias(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RelativeBias(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* EncodeObservations(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
  EncodeObservationsStream(grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Describe(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListProfiles(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;

  // UNAUTHENTICATED unless the call carries the server's bearer token (or
  // the server has none).
  absl::Status Authorize(const grpc::CallbackServerContext& context) const;

  // Draining (SIGTERM): every EncodeObservationsStream waiting for its next
  // chunk ends now with UNAVAILABLE, one encoding a chunk ends so once that
  // chunk's response is written, and a stream started later ends at once.
  // Nothing a stream has read is dropped; the client resumes on another
  // replica from the last state it received. A unary call that reaches the
  // service from now on is answered UNAVAILABLE without being run: it was
  // queued behind running calls for one of gRPC's threads, and another
  // replica answers it sooner than this one could (the retry policy in
  // docs/DEPLOY.md retries UNAVAILABLE). Refused calls and refused streams
  // are counted in phasor_calls_refused_total{reason="shutdown"}.
  // Idempotent.
  void Drain();

  const ProfileRegistry* profiles() const { return profiles_; }
  ServerMetrics* metrics() const { return metrics_; }
  const ExecutionOptions& execution() const { return execution_; }
  const RequestLimits& limits() const { return limits_; }
  // The server's caches, shared by every call (server/server_caches.h).
  ServerCaches* caches() const { return caches_.get(); }
  // A call's (or a stream chunk's) share of the memory budget, waiting at
  // most memory_wait and never past the call's deadline.
  CallMemory NewCallMemory(const grpc::CallbackServerContext& context,
                           int64_t request_bytes) const;

 private:
  class StreamReactor;
  template <typename Request, typename Response, typename Handler>
  class UnaryCall;

  template <typename Request, typename Response, typename Handler>
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context,
                                  absl::string_view method,
                                  absl::string_view size_field,
                                  const grpc::ByteBuffer* request_bytes,
                                  grpc::ByteBuffer* response_bytes,
                                  Handler handler);
  // Registers a new stream; false when draining (the stream must end).
  bool AddStream(StreamReactor* stream) ABSL_LOCKS_EXCLUDED(streams_mu_);
  void RemoveStream(StreamReactor* stream) ABSL_LOCKS_EXCLUDED(streams_mu_);

  const ProfileRegistry* profiles_;
  ServerMetrics* metrics_;
  // Starts every call's parallel regions (core/adapters/parallel.h) when
  // free; null with one thread a call. Outlives the calls: the service is
  // destroyed after the server has stopped.
  std::unique_ptr<RegionThread> region_thread_;
  ExecutionOptions execution_;
  RequestLimits limits_;
  bool enable_echo_;
  MemoryBudget* memory_budget_;
  absl::Duration memory_wait_;
  BlockingPool* memory_wait_pool_;
  const std::unique_ptr<ServerCaches> caches_ =
      std::make_unique<ServerCaches>();
  std::string expected_authorization_;  // "Bearer <token>", or empty.

  absl::Mutex streams_mu_;
  absl::flat_hash_set<StreamReactor*> streams_ ABSL_GUARDED_BY(streams_mu_);
  bool draining_ ABSL_GUARDED_BY(streams_mu_) = false;
  // Set by Drain; read by every unary call, hence not under streams_mu_.
  std::atomic<bool> refusing_calls_{false};
};

// `message` serialized into `buffer` when it fits `max_message_bytes`;
// otherwise RESOURCE_EXHAUSTED at `size_field` saying whose limit it is and
// the flag that raises it. gRPC compares the serialized message (without its
// 5-byte frame header) with the limit, so the same comparison here means a
// response that passes is never refused by the transport.
//
// Tensor bytes are not copied: every phasor.v1.Tensor field of `message`
// itself (not nested deeper) whose data is at least kZeroCopyTensorBytes is
// taken out of `message` (which is left without it), the rest serialized,
// and the tensor appended as a field of its own whose data is a slice over
// the tensor's own buffer. Fields may come in any order on the wire
// (protobuf encoding: "fields can appear in any order"), so the bytes parse
// to the same message in every language; only the field order differs from
// protobuf's own serializer.
inline constexpr size_t kZeroCopyTensorBytes = size_t{64} << 10;
absl::Status SerializeWithinLimit(google::protobuf::Message* message,
                                  int64_t max_message_bytes,
                                  absl::string_view size_field,
                                  grpc::ByteBuffer* buffer);

// Parses `buffer` as `message`; INVALID_ARGUMENT naming `what` (e.g.
// "the request", "chunk 3 of the stream") and the message type otherwise.
absl::Status ParseMessage(const grpc::ByteBuffer& buffer, absl::string_view what,
                          google::protobuf::Message* message);

// OK while `context`'s client still wants the result: CANCELLED after a
// cancellation, DEADLINE_EXCEEDED once the deadline passed.
absl::Status CheckAlive(const grpc::CallbackServerContext& context);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_ENCODER_SERVICE_H_
