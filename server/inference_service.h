// File: server/inference_service.h
//
// InferenceService: the gRPC callback-API implementation of the Open
// Inference Protocol's inference.GRPCInferenceService
// (proto/inference/grpc_service.proto), served on phasor-server's port next
// to phasor.v1.Encoder unless --enable_inference_protocol=false.
//
// It is a second door to the Encoder's work, not a second implementation:
// ModelInfer runs server/inference_models.h HandleModelInfer, which calls
// the native handlers, with the EncoderService's settings (limits, threads,
// the spec caches, the memory budget, the bearer token) and the same call
// plumbing as its unary methods: the token checked before the bytes are
// parsed, the call watched for deadline and cancellation, one
// absl::Status -> grpc::Status conversion (server/grpc_status.h, so errors
// carry google.rpc.BadRequest violations such as "inputs[query].shape"),
// payload bytes and memory refusals recorded under the method's name, the
// response checked against the message limit before it is sent and its
// large raw_output_contents sent as slices of their own buffers, not
// copied.
//
// Triton's system shared-memory extension (server/shared_memory.h): the
// SystemSharedMemoryStatus/Register/Unregister methods manage the regions
// ModelInfer's tensors may name; they need the token and are refused while
// draining, as ModelInfer is.
//
// Authentication: ServerLive and ServerReady stay open, as health checks
// do (a probe learns nothing but liveness); every other method needs the
// bearer token when the server has one.
//
// Thread-safety: shared by all calls; its only mutable state is the
// draining flag, an atomic.
#ifndef PHASOR_SERVER_INFERENCE_SERVICE_H_
#define PHASOR_SERVER_INFERENCE_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/blocking_pool.h"
#include "server/encoder_service.h"
#include "server/shared_memory.h"

namespace phasor::server {

// Every method raw (bytes in, bytes out), for the reasons EncoderService
// gives: a request that does not parse is INVALID_ARGUMENT naming the
// message type, the token is checked before parsing, and the response's
// size is checked (and its tensors sent without a copy) here.
using RawInferenceService = inference::GRPCInferenceService::WithRawCallbackMethod_ServerLive<
    inference::GRPCInferenceService::WithRawCallbackMethod_ServerReady<
        inference::GRPCInferenceService::WithRawCallbackMethod_ModelReady<
            inference::GRPCInferenceService::WithRawCallbackMethod_ServerMetadata<
                inference::GRPCInferenceService::WithRawCallbackMethod_ModelMetadata<
                    inference::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
                        inference::GRPCInferenceService::
                            WithRawCallbackMethod_SystemSharedMemoryStatus<
                                inference::GRPCInferenceService::
                                    WithRawCallbackMethod_SystemSharedMemoryRegister<
                                        inference::GRPCInferenceService::
                                            WithRawCallbackMethod_SystemSharedMemoryUnregister<
                                                inference::GRPCInferenceService::Service>>>>>>>>>;

class InferenceService final : public RawInferenceService {
 public:
  // `encoder` (its settings, profiles, metrics, memory budget and token)
  // must outlive the service, and `memory_wait_pool` (the pool the
  // EncoderService runs calls that wait for memory on) must until the
  // server has stopped; null: calls wait on gRPC's thread (tests).
  // `shared_memory` (Triton's system shared-memory extension's regions,
  // server/shared_memory.h) must outlive the service; null or disabled: the
  // SystemSharedMemory* methods answer UNIMPLEMENTED and ModelInfer
  // rejects shared-memory parameters.
  InferenceService(const EncoderService* encoder, BlockingPool* memory_wait_pool,
                   SharedMemoryRegistry* shared_memory = nullptr);

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryStatus(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryRegister(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryUnregister(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) override;

  // Draining (SIGTERM): ServerReady and ModelReady answer false from now
  // on, so load balancers that probe them stop sending calls, and a
  // ModelInfer, ModelMetadata or ServerMetadata call that reaches the
  // service from now on is answered UNAVAILABLE without being run, as the
  // Encoder's unary calls are (EncoderService::Drain). Idempotent.
  void Drain() { draining_.store(true, std::memory_order_relaxed); }

  // Who may call a method and whether draining refuses it.
  struct CallPolicy {
    bool authorize;
    bool refuse_when_draining;
  };

 private:
  template <typename Request, typename Response, typename Handler>
  class UnaryCall;

  template <typename Request, typename Response, typename Handler>
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context,
                                  absl::string_view method, CallPolicy policy,
                                  absl::string_view size_field,
                                  const grpc::ByteBuffer* request_bytes,
                                  grpc::ByteBuffer* response_bytes, Handler handler);

  const EncoderService* encoder_;
  BlockingPool* memory_wait_pool_;
  SharedMemoryRegistry* shared_memory_;
  std::atomic<bool> draining_{false};
};

// `response` serialized into `buffer` when it fits `max_message_bytes`;
// otherwise RESOURCE_EXHAUSTED at `size_field` naming whose limit it is and
// the flag that raises it (as SerializeWithinLimit). When any raw output is
// at least kZeroCopyTensorBytes, every raw_output_contents entry is taken
// out of `response` and appended after the rest, in order, as a field of
// its own whose bytes are a slice over the entry's buffer: protobuf parses
// fields in any order and keeps a repeated field's entries in the order
// they arrive, so the bytes parse to the same message.
absl::Status SerializeInferResponse(inference::ModelInferResponse* response,
                                    int64_t max_message_bytes,
                                    absl::string_view size_field,
                                    grpc::ByteBuffer* buffer);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_INFERENCE_SERVICE_H_
