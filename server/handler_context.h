// File: server/handler_context.h
//
// What every RPC handler (server/handlers.h) gets and shares: the call's
// HandlerContext, the memory it reserves for its output, the one way a
// float output is written, and the spec lookups the RPC families have in
// common. A handler is a plain function, request message in, response
// message out, absl::Status with a field path (core/errors.h) on failure;
// the gRPC plumbing (auth, reactors, status conversion, metrics) is
// server/encoder_service.cc's.
//
// Thread-safety: the functions are reentrant; a HandlerContext is per call.
#ifndef PHASOR_SERVER_HANDLER_CONTEXT_H_
#define PHASOR_SERVER_HANDLER_CONTEXT_H_

#include <cassert>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/adapters/dtype.h"
#include "core/adapters/parallel.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "phasor/v1/encoder.pb.h"
#include "server/convert.h"
#include "server/memory_budget.h"
#include "server/metrics.h"
#include "server/profiles.h"
#include "server/server_caches.h"

namespace phasor::server {

// Memory a caller supplied for one output tensor (the Open Inference
// Protocol's shared-memory outputs, server/shared_memory.h): the kernel
// writes `tensor`'s values straight into `bytes`, and `tensor` gets its shape
// and dtype but no data. `field` names the output on the wire for errors.
struct OutputDestination {
  const v1::Tensor* tensor = nullptr;
  absl::Span<char> bytes;
  absl::string_view field;
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
  // The server's caches (server/server_caches.h). Null: every call converts
  // its spec and builds its tables itself.
  ServerCaches* caches = nullptr;
  // The call's share of the server's memory budget (server/memory_budget.h),
  // reserved once the output is sized and before it is allocated. Null: no
  // budget (tests, tools).
  CallMemory* memory = nullptr;
  // Outputs that go to caller-supplied memory (OutputDestination); empty
  // for every native call.
  absl::Span<const OutputDestination> output_destinations = {};
};

// The float dtypes a tensor input may have, and a float output.
inline constexpr DType kFloatDTypes[] = {DType::kFloat32, DType::kFloat16,
                                         DType::kBFloat16, DType::kFloat64};

// Adds `values` to the encoded-values metric of `kind` (no metrics: nothing).
void CountEncoded(const HandlerContext& context, EncodedKind kind, int64_t values);

// Reserves `bytes` more of the call's memory (HandlerContext::memory),
// waiting for the server's budget if need be; OK without a budget.
absl::Status ReserveMemory(const HandlerContext& context, int64_t bytes);

// ReserveMemory for an output of `shape` and `dtype` as CheckOutputSize
// sizes it, before it is allocated: its bytes, unless the output tensor
// `out` is written straight into caller memory (WritesToDestination: those
// bytes are not the server's); kOtherFieldCopies times `extra_bytes`, the
// response's other fields (states, schema), which exist as core structs,
// proto messages and their serialization; and the float32 scratch
// WriteFloatOutput fills for a 16-bit output. `out` may be null (an output
// always in the response). REQUIRES: CheckOutputSize passed for the same
// arguments (no overflow).
inline constexpr int64_t kOtherFieldCopies = 4;
absl::Status ReserveOutputMemory(const HandlerContext& context, absl::Span<const int64_t> shape,
                                 DType dtype, const v1::Tensor* out, int64_t extra_bytes = 0);

// Whether DestinationOf writes an output `out` of `dtype` straight into
// the call's destination for it: there is one, and `dtype` is FLOAT32 or
// FLOAT64 or `written_as_dtype` (as DestinationOf says), aligned for it.
bool WritesToDestination(const HandlerContext& context, DType dtype, const v1::Tensor* out,
                         bool written_as_dtype = false);

// The memory of `out`'s destination when the call has one
// (HandlerContext::output_destinations) and the output can be written there
// as computed: FLOAT32 or FLOAT64 (WriteFloatOutput's kernels compute in
// those), or any dtype with `written_as_dtype` (a kernel that writes the
// output's own element type, as RoPE's does), and the destination aligned
// for it; then `out` gets `shape` and `dtype` and no data. An empty span
// otherwise (the caller then copies the tensor's bytes). An output larger
// than its destination is INVALID_ARGUMENT at the destination's field.
absl::StatusOr<absl::Span<char>> DestinationOf(const HandlerContext& context,
                                               absl::Span<const int64_t> shape, DType dtype,
                                               v1::Tensor* out, bool written_as_dtype = false);

// Runs `kernel` (absl::Status(absl::Span<float>), or a generic one that also
// takes absl::Span<double>) to produce the result of `shape` and stores it in
// `out` as `dtype`: straight into the response bytes for FLOAT32, and for
// FLOAT64 when the kernel computes in double; otherwise a float32 result
// in one scratch buffer, converted only if the call is still wanted.
// REQUIRES: dtype is FLOAT64 only for a kernel that takes doubles.
template <typename Kernel>
absl::Status WriteFloatOutput(const HandlerContext& context, absl::Span<const int64_t> shape,
                              DType dtype, v1::Tensor* out, Kernel&& kernel) {
  PHASOR_ASSIGN_OR_RETURN(const absl::Span<char> destination,
                          DestinationOf(context, shape, dtype, out));
  if (!destination.empty()) {
    if constexpr (std::is_invocable_v<Kernel&, absl::Span<double>>) {
      if (dtype == DType::kFloat64) {
        return kernel(absl::MakeSpan(reinterpret_cast<double*>(destination.data()),
                                     destination.size() / sizeof(double)));
      }
    }
    if (dtype == DType::kFloat32) {
      return kernel(absl::MakeSpan(reinterpret_cast<float*>(destination.data()),
                                   destination.size() / sizeof(float)));
    }
  }
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

// "positional", "rope", "temporal", "relative_bias", or "empty": a spec
// kind as the oneof names it.
const char* SpecKindName(v1::EncoderSpec::KindCase kind);

// The spec a request configures: inline, or the named profile's.
template <typename Request>
absl::StatusOr<const v1::EncoderSpec*> ResolveSpec(const HandlerContext& context,
                                                   const Request& request) {
  switch (request.config_case()) {
    case Request::kSpec:
      return &request.spec();
    case Request::kProfile: {
      PHASOR_ASSIGN_OR_RETURN(const v1::Profile* profile,
                              context.profiles->FindProfile(request.profile(), "profile"));
      return &profile->spec();
    }
    default:
      break;
  }
  return InvalidField("spec", "set spec or profile");
}

// OK when the spec is of `kind`, as `rpc` needs; otherwise an error at the
// field the request set (spec.<kind>, or profile).
template <typename Request>
absl::Status RequireKind(const Request& request, const v1::EncoderSpec& spec,
                         v1::EncoderSpec::KindCase kind, absl::string_view rpc) {
  if (spec.kind_case() == kind) return absl::OkStatus();
  if (request.config_case() == Request::kProfile) {
    return InvalidField("profile",
                        absl::StrCat("profile '", request.profile(), "' is a ",
                                     SpecKindName(spec.kind_case()), " encoder; ", rpc,
                                     " needs a ", SpecKindName(kind), " one"));
  }
  return InvalidField(absl::StrCat("spec.", SpecKindName(kind)),
                      absl::StrCat(rpc, " needs spec.", SpecKindName(kind), ", got ",
                                   SpecKindName(spec.kind_case())));
}

}  // namespace phasor::server

#endif  // PHASOR_SERVER_HANDLER_CONTEXT_H_
