// File: server/positions_handler.h
//
// EncodePositions: absolute position encodings (a sinusoid with optional
// fused content, or a profile's learned table) for integer or real
// positions, as core/sinusoidal.h and core/learned.h compute them.
//
// Thread-safety: reentrant; a HandlerContext is per call.
#ifndef PHASOR_SERVER_POSITIONS_HANDLER_H_
#define PHASOR_SERVER_POSITIONS_HANDLER_H_

#include "absl/status/status.h"
#include "phasor/v1/encoder.pb.h"
#include "server/handler_context.h"

namespace phasor::server {

absl::Status HandleEncodePositions(const HandlerContext& context,
                                   const v1::EncodePositionsRequest& request,
                                   v1::EncodePositionsResponse* response);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_POSITIONS_HANDLER_H_
