// File: client/shared_memory_session.h
//
// SharedMemorySession: ApplyRope and panel encodings of a profile with their
// tensors in POSIX shared memory, for a client on the server's host.
//
// What travels where: the calls are the Open Inference Protocol's
// ModelInfer (inference.GRPCInferenceService, served beside
// phasor.v1.Encoder on the same port; the model is the profile, so a call
// names a profile and takes no inline spec) with Triton's system
// shared-memory extension: every input is written into one region the
// session owns, and every output whose size is known before the call
// (rotated query and key; panel features) is written there by the server.
// The gRPC messages carry only names, shapes and offsets. Results equal
// EncoderClient::ApplyRope / EncodeObservations of the same profile and
// inputs byte for byte: the server runs the same handler.
//
// The region: one POSIX shared-memory object per session, named
// <key_prefix>_<pid>_<random>_<n> (the server opens only keys under its
// --shared_memory_key_prefix, "/phasor" by default), created O_EXCL with
// mode 0600, mapped read-write and registered with
// SystemSharedMemoryRegister under the key without its "/". It is reused
// call after call and replaced (Unregister, shm_unlink, then a new object
// and Register) by one twice as large, or as large as the call needs, when
// a call does not fit. Close() — or the destructor — unregisters and
// unlinks it. On Linux the object is the file /dev/shm/<key without "/">.
//
// Lifetime of results: a SharedTensor returned with copy = false is a view
// of the region. Its bytes are those of the call until the next call on the
// session or Close(), whichever comes first: the next call writes its own
// inputs and outputs over the same bytes. A view never dangles: it holds
// the mapping, so after the region is replaced or the session closed its
// memory stays mapped (and keeps the bytes it last had) until the last view
// of it is destroyed. copy = true returns tensors that own their bytes.
//
// Errors: absl::Status with the server's gRPC code and message, which names
// the ModelInferRequest's field ("inputs[query].shape: ..."), and its
// google.rpc.BadRequest as EncoderClient's errors carry it
// (FieldViolationsOf). A tensor the session cannot lay out (its byte count
// not matching dtype and shape) is INVALID_ARGUMENT naming the argument
// ("query: ...") before anything is sent. A server started without
// --system_shared_memory=true refuses the registration: UNIMPLEMENTED, the
// message saying how to enable it. A failed registration leaves no object
// behind.
//
// Thread-safety: a session makes one call at a time (a mutex serializes
// them, since every call reuses the one region); use one session per thread
// for concurrent calls. The session holds the channel, so it may outlive
// the EncoderClient that made it.
//
// Example:
//   auto client = EncoderClient::Create(options);
//   auto shm = (*client)->SharedMemory();
//   auto rope = (*shm)->ApplyRope("llama-rope", TensorRef::Of(query),
//                                 TensorRef::Of(key), TensorRef::Of(positions));
//   // rope->query.data: the rotated query, in the region.
#ifndef PHASOR_CLIENT_SHARED_MEMORY_SESSION_H_
#define PHASOR_CLIENT_SHARED_MEMORY_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "inference/grpc_service.grpc.pb.h"
#include "phasor/v1/encoder.pb.h"

namespace phasor {

// A tensor the caller owns, by reference: dtype, shape and its raw
// little-endian row-major bytes (as v1::Tensor's). The default (dtype
// DTYPE_UNSPECIFIED) means "absent" for an optional argument.
struct TensorRef {
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  absl::Span<const int64_t> shape;
  absl::string_view data;

  bool present() const { return dtype != v1::DTYPE_UNSPECIFIED; }
  // A view of `tensor`'s fields; valid while `tensor` is unchanged.
  static TensorRef Of(const v1::Tensor& tensor) {
    return {tensor.dtype(), tensor.shape(), tensor.data()};
  }
};

// A result tensor: a view of the session's region, or (copy = true) of
// bytes it owns; see the file comment for how long a view's bytes last.
struct SharedTensor {
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
  absl::string_view data;
  // Keeps `data` mapped or allocated; shared by the views of one region.
  std::shared_ptr<const void> owner;

  // A v1::Tensor with a copy of the bytes.
  v1::Tensor ToTensor() const;
};

struct SharedMemorySessionOptions {
  // The start of every region's key: "/" then no further "/". Must match
  // the server's --shared_memory_key_prefix.
  std::string key_prefix = "/phasor";
  // Default of every call's copy: false returns views of the region.
  bool copy = false;
  // The smallest region created, bytes: small calls then never regrow it.
  int64_t min_region_bytes = int64_t{1} << 20;
};

struct SharedRopeResult {
  SharedTensor query;
  SharedTensor key;  // dtype DTYPE_UNSPECIFIED when no key was sent.
  double attention_factor = 1.0;
};

// The inputs of a temporal profile's panel, as
// v1::EncodeObservationsRequest's observations name them. Absent tensors
// (the default TensorRef) are not sent; series_offsets is required.
struct PanelInputs {
  // Wide: timestamps [T] int64 ns, values [T, C], optional mask [T, C].
  TensorRef timestamps;
  TensorRef values;
  TensorRef mask;
  // Long (triplets): event_times [N], event_channels [N] int32,
  // event_values [N].
  TensorRef event_times;
  TensorRef event_channels;
  TensorRef event_values;
  TensorRef content;
  // [S + 1] int64, rows of series s in [offsets[s], offsets[s+1]).
  TensorRef series_offsets;
  // Per-series zones: time_zones names, time_zone_index [S] int32.
  std::vector<std::string> time_zones;
  TensorRef time_zone_index;
  std::vector<std::string> channel_names;
  // States to continue the series from (one per series), or none.
  std::vector<v1::SeriesState> states;
  int64_t num_channels = 0;
};

// Whether a call's results are views of the region or owned copies.
enum class ResultCopy {
  kSessionDefault,  // SharedMemorySessionOptions::copy.
  kView,
  kCopy,
};

struct PanelCallOptions {
  // FLOAT32 (DTYPE_UNSPECIFIED means the same), FLOAT16, BFLOAT16 or
  // FLOAT64.
  v1::DType output_dtype = v1::DTYPE_UNSPECIFIED;
  // Also return each series' state (they come back in the reply message,
  // their size being unknown in advance).
  bool return_states = false;
  ResultCopy copy = ResultCopy::kSessionDefault;
};

struct SharedPanelResult {
  SharedTensor features;  // [rows, F]
  std::vector<v1::SchemaEntry> schema;
  std::vector<v1::SeriesState> states;  // Empty unless return_states.
};

// One registered region as SystemSharedMemoryStatus reports it.
struct SharedMemoryRegionStatus {
  std::string name;
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

// How a session reaches the server: EncoderClient::SharedMemory() fills it
// with its channel, deadline, bearer token and status conversion.
struct SharedMemoryTransport {
  std::shared_ptr<grpc::Channel> channel;
  // Sets the deadline and credentials of one call.
  std::function<void(grpc::ClientContext*)> prepare_context;
  // A failed call's status as EncoderClient returns it.
  std::function<absl::Status(const grpc::Status&)> from_grpc_status;
};

class SharedMemorySession final {
 public:
  // INVALID_ARGUMENT at "key_prefix" when it is not a POSIX shm name, at
  // "min_region_bytes" when it is not positive. No region exists until the
  // first call.
  static absl::StatusOr<std::unique_ptr<SharedMemorySession>> Create(
      SharedMemoryTransport transport, SharedMemorySessionOptions options);

  SharedMemorySession(const SharedMemorySession&) = delete;
  SharedMemorySession& operator=(const SharedMemorySession&) = delete;
  // Close(), its error dropped.
  ~SharedMemorySession();

  // ApplyRope of rope profile `profile` on query [T, H, D] (or the 4-axis
  // layouts of v1::ApplyRopeRequest::TensorLayout), optional key (absent:
  // the default TensorRef) and positions [T] int64 or float64: the rotated
  // query and key in the input dtype, equal bytewise to
  // EncoderClient::ApplyRope with the same profile and tensors.
  // `layout` UNSPECIFIED sends none (the server's TOKENS_HEADS_DIM).
  absl::StatusOr<SharedRopeResult> ApplyRope(
      absl::string_view profile, const TensorRef& query, const TensorRef& key,
      const TensorRef& positions,
      v1::ApplyRopeRequest::TensorLayout layout =
          v1::ApplyRopeRequest::TENSOR_LAYOUT_UNSPECIFIED,
      ResultCopy copy = ResultCopy::kSessionDefault);

  // EncodeObservations of temporal profile `profile` on a panel, in one
  // ModelInfer (shared memory has no message limit; the server's
  // --max_elements_per_request still applies): features equal bytewise to
  // EncoderClient::EncodeObservations with the same profile and
  // observations. The feature width F is learnt from one zero-row call per
  // configuration (profile, input dtypes and trailing shapes, output
  // dtype, channel count), remembered by the session; for the long layout
  // without num_channels that call is told the C the server derives
  // (channel_names' size, else the states', else 1 + the largest event
  // channel). The features are the reply's only output in the region;
  // schema and states come in the reply message.
  absl::StatusOr<SharedPanelResult> EncodePanel(
      absl::string_view profile, const PanelInputs& inputs,
      const PanelCallOptions& options = PanelCallOptions());

  // Unregisters the region from the server, unmaps it (once no view holds
  // it) and unlinks the object; later calls are FAILED_PRECONDITION. The
  // object is unlinked even when the Unregister call fails, whose error is
  // returned. Idempotent.
  absl::Status Close();

  // The server's SystemSharedMemoryStatus: every region registered there
  // (every client's).
  absl::StatusOr<std::vector<SharedMemoryRegionStatus>> ServerRegions() const;

  // The key of the region now registered ("/phasor_..."), or "" before the
  // first call and after Close().
  std::string region_key() const;
  // The size of the region now registered, bytes (0 when there is none).
  int64_t region_bytes() const;

 private:
  class Region;
  struct Input;
  struct Output;
  struct Reply;

  SharedMemorySession(SharedMemoryTransport transport,
                      SharedMemorySessionOptions options);

  // The region, replaced by a larger one when `byte_size` does not fit.
  absl::StatusOr<std::shared_ptr<Region>> Reserve(int64_t byte_size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unregisters, unlinks and forgets the region (if any).
  absl::Status DropRegion() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One ModelInfer with every input and the outputs given a size in the
  // region (see the .cc).
  absl::StatusOr<Reply> Infer(
      absl::string_view model, const std::vector<Input>& inputs,
      const std::vector<Output>& outputs,
      const google::protobuf::Map<std::string, inference::InferParameter>&
          parameters,
      bool copy) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int64_t> PanelWidth(
      absl::string_view profile, const std::vector<Input>& inputs,
      const google::protobuf::Map<std::string, inference::InferParameter>&
          parameters) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Call(
      const std::function<grpc::Status(grpc::ClientContext*)>& call) const;

  const SharedMemoryTransport transport_;
  const SharedMemorySessionOptions options_;
  const std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  const std::string key_stem_;

  mutable absl::Mutex mu_;
  std::shared_ptr<Region> region_ ABSL_GUARDED_BY(mu_);
  int generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, int64_t> widths_ ABSL_GUARDED_BY(mu_);
};

}  // namespace phasor

#endif  // PHASOR_CLIENT_SHARED_MEMORY_SESSION_H_
