// The Encoder RPCs as plain functions: request message in, response message
// out, absl::Status with a field path on failure. Each one resolves the spec
// (inline or profile), converts and checks the request (server/convert.h),
// lets core/ validate, runs the core kernel and writes the response,
// checking between those steps that the call is still wanted. The gRPC
// plumbing (auth, reactors, status conversion, metrics) is in
// server/encoder_service.cc.
//
// Thread-safety: the functions are reentrant; a HandlerContext is per call.
#ifndef PHASOR_SERVER_HANDLERS_H_
#define PHASOR_SERVER_HANDLERS_H_

#include <cassert>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/compose.h"
#include "core/observations.h"
#include "core/parallel.h"
#include "phasor/v1/encoder.pb.h"
#include "server/convert.h"
#include "server/memory_budget.h"
#include "server/metrics.h"
#include "server/profiles.h"
#include "server/spec_cache.h"

namespace phasor::server {

// What EncodeObservations keeps across calls (server/spec_cache.h): the
// converted, validated spec under its request's config (an inline spec's
// bytes, or a profile's name), the feature layout under the config plus
// the channel count and content width it was built for, and the blocks'
// encoders (core/compose.h TemporalEncoders: ladder phases, Time2Vec, gaps,
// the spec zone's calendar) under the config plus the channel count and the
// output's precision. One per server.
struct ObservationsCaches {
  ObservationsCaches() = default;
  // Encoder cache limits of their own (bench/handler_bench.cc turns it off
  // with max_entries 0 to measure what it saves).
  explicit ObservationsCaches(SpecCacheLimits encoder_limits) : encoders(encoder_limits) {}

  SpecCache<TemporalSpec> specs{SpecCacheLimits{}};
  SpecCache<FeatureLayout> layouts{SpecCacheLimits{/*max_entries=*/1024}};
  SpecCache<TemporalEncoders> encoders{SpecCacheLimits{/*max_entries=*/256}};
};

struct HandlerContext {
  const ProfileRegistry* profiles = nullptr;
  // execution.stop_requested watches the call too, so long kernels stop
  // inside core/ when it ends (they then report CANCELLED; check_alive says
  // which way the call ended).
  ExecutionOptions execution;
  RequestLimits limits;
  ServerMetrics* metrics = nullptr;  // May be null (no metrics).
  // OK while the client still wants the result; CANCELLED or
  // DEADLINE_EXCEEDED otherwise. Called between the heavy steps of a handler:
  // conversion, validation, the kernel, response conversion.
  absl::FunctionRef<absl::Status()> check_alive;
  // Null: every call converts its spec and builds its layout itself.
  ObservationsCaches* observations_caches = nullptr;
  // The call's share of the server's memory budget (server/memory_budget.h),
  // reserved once the output is sized and before it is allocated. Null: no
  // budget (tests, tools).
  CallMemory* memory = nullptr;
};

// Reserves `bytes` more of the call's memory (HandlerContext::memory),
// waiting for the server's budget if need be; OK without a budget.
absl::Status ReserveMemory(const HandlerContext& context, int64_t bytes);

// ReserveMemory for an output of `shape` and `dtype` as CheckOutputSize
// sizes it, before it is allocated: its bytes; kOtherFieldCopies times
// `extra_bytes`, the response's other fields (states, schema), which exist
// as core structs, proto messages and their serialization; and the float32
// scratch WriteFloatOutput fills for a 16-bit output. REQUIRES:
// CheckOutputSize passed for the same arguments (no overflow).
inline constexpr int64_t kOtherFieldCopies = 4;
absl::Status ReserveOutputMemory(const HandlerContext& context,
                                 absl::Span<const int64_t> shape, DType dtype,
                                 int64_t extra_bytes = 0);

// Runs `kernel` (absl::Status(absl::Span<float>), or a generic one that also
// takes absl::Span<double>) to produce the result of `shape` and stores it in
// `out` as `dtype`: straight into the response bytes for FLOAT32, and for
// FLOAT64 when the kernel computes in double; otherwise a float32 result
// in one scratch buffer, converted only if the call is still wanted.
// REQUIRES: dtype is FLOAT64 only for a kernel that takes doubles.
template <typename Kernel>
absl::Status WriteFloatOutput(const HandlerContext& context,
                              absl::Span<const int64_t> shape, DType dtype,
                              v1::Tensor* out, Kernel&& kernel) {
  if constexpr (std::is_invocable_v<Kernel&, absl::Span<double>>) {
    if (dtype == DType::kFloat64) {
      AllocateTensor(shape, dtype, out);
      return kernel(DoubleData(out));
    }
  }
  assert(dtype != DType::kFloat64 || !"a float32 kernel cannot fill FLOAT64");
  if (dtype == DType::kFloat32) {
    AllocateTensor(shape, dtype, out);
    return kernel(FloatData(out));
  }
  int64_t elements = 1;
  for (int64_t extent : shape) elements *= extent;
  // Not zero-filled: the kernel writes every element.
  const std::unique_ptr<float[]> scratch(new float[static_cast<size_t>(elements)]);
  const absl::Span<float> values(scratch.get(), static_cast<size_t>(elements));
  absl::Status status = kernel(values);
  if (status.ok()) status = context.check_alive();
  if (status.ok()) StoreFloats(values, shape, dtype, out);
  return status;
}

absl::Status HandleEncodePositions(const HandlerContext& context,
                                   const v1::EncodePositionsRequest& request,
                                   v1::EncodePositionsResponse* response);
absl::Status HandleApplyRope(const HandlerContext& context,
                             const v1::ApplyRopeRequest& request,
                             v1::ApplyRopeResponse* response);
absl::Status HandleRopeTables(const HandlerContext& context,
                              const v1::RopeTablesRequest& request,
                              v1::RopeTablesResponse* response);
absl::Status HandleAlibiBias(const HandlerContext& context,
                             const v1::AlibiBiasRequest& request,
                             v1::AlibiBiasResponse* response);
// RelativeBias (server/relative_bias_handler.cc).
absl::Status HandleRelativeBias(const HandlerContext& context,
                                const v1::RelativeBiasRequest& request,
                                v1::RelativeBiasResponse* response);
// Describe for a relative_bias spec: the distances each bucket covers.
absl::Status DescribeRelativeBias(const HandlerContext& context,
                                  const v1::RelativeBiasSpec& spec,
                                  v1::DescribeResponse* response);
// Checks a relative_bias spec from a profile (and the table it names).
absl::Status ValidateRelativeBiasProfile(const ProfileRegistry& profiles,
                                         const v1::RelativeBiasSpec& spec);
absl::Status HandleDescribe(const HandlerContext& context,
                            const v1::DescribeRequest& request,
                            v1::DescribeResponse* response);
// What one EncodeObservationsStream remembers between chunks: the spec its
// first message fixed, and the series states after the last chunk.
struct ObservationStream {
  bool started = false;
  // The first message's spec or profile (other fields cleared), that spec
  // converted for core, and its key in ObservationsCaches.
  v1::EncodeObservationsRequest config;
  std::shared_ptr<const TemporalSpec> spec;
  std::string config_key;
  // Whether the stream carries a panel; every message then has as many
  // series as `states`.
  bool panel = false;
  // One state per series (one for a single-series stream).
  std::vector<SeriesState> states;
};

// `stream` is null for the unary RPC (the state then comes from
// request.state) and the stream's memory otherwise.
absl::Status HandleEncodeObservations(const HandlerContext& context,
                                      const v1::EncodeObservationsRequest& request,
                                      ObservationStream* stream,
                                      v1::EncodeObservationsResponse* response);

absl::Status HandleListProfiles(const HandlerContext& context,
                                const v1::ListProfilesRequest& request,
                                v1::ListProfilesResponse* response);

// A request that names a profile sent no spec, so errors core/ reports on
// the profile's spec ("spec.rope.rotary_dim: ...") are re-addressed to the
// field it did send, "profile", with the spec path kept in the description.
// Other statuses are returned unchanged.
absl::Status SpecErrorsToProfile(const absl::Status& status,
                                 absl::string_view profile);

// Checks a temporal spec from a profile (blocks, zone, named parameters).
absl::Status ValidateTemporalProfile(const ProfileRegistry& profiles,
                                     const v1::TemporalSpec& spec);

// Checks that every profile's spec is valid, as if a request had named it.
// Called once at startup; the error names the profile.
absl::Status ValidateProfiles(const ProfileRegistry& profiles);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_HANDLERS_H_
