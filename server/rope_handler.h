// File: server/rope_handler.h
//
// ApplyRope and RopeTables: rotary position embeddings (core/rope.h) for a
// RoPE spec, inline or a profile's, with HF's scalings
// (core/rope_scaling.h). A spec's plan -- θ_i and their exact-reduction
// constants -- is built once per spec, head dimension and the part of the
// sequence length its scaling reads, and kept in the server's caches
// (ServerCaches::rope_plans), so a stream of calls with one spec does not
// recompute rd/2 powers per call.
//
// Thread-safety: reentrant; a HandlerContext is per call.
#ifndef PHASOR_SERVER_ROPE_HANDLER_H_
#define PHASOR_SERVER_ROPE_HANDLER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/rope/rope.h"
#include "phasor/v1/encoder.pb.h"
#include "server/handler_context.h"

namespace phasor::server {

absl::Status HandleApplyRope(const HandlerContext& context,
                             const v1::ApplyRopeRequest& request,
                             v1::ApplyRopeResponse* response);
absl::Status HandleRopeTables(const HandlerContext& context,
                              const v1::RopeTablesRequest& request,
                              v1::RopeTablesResponse* response);

// θ_i and the attention factor of `rope` for heads of `head_dim` channels at
// `seq_len` tokens (core's ComputeRopeFrequencies), its errors at their wire
// paths under spec.rope.
absl::StatusOr<RopeFrequencies> RopeFrequenciesFor(const RopeSpec& rope,
                                                   int64_t head_dim, int64_t seq_len);

// For `rpc`s with no head to default rotary_dim to (RopeTables, Describe):
// rotary_dim must be set, and is bounded like any width.
absl::Status RequireRotaryDim(const RopeSpec& rope, absl::string_view rpc,
                              const RequestLimits& limits);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_ROPE_HANDLER_H_
