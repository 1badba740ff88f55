// The one conversion from absl::Status (what core/ and the server's own
// checks return) to grpc::Status (what goes on the wire).
//
// Codes map 1:1 (absl's codes are gRPC's). A status that carries a field path
// (core/errors.h) also gets a google.rpc.BadRequest detail with one field
// violation, serialized into a google.rpc.Status in grpc::Status's
// error_details, which gRPC sends as the "grpc-status-details-bin" trailer.
//
// Thread-safety: pure functions.
#ifndef PHASOR_SERVER_GRPC_STATUS_H_
#define PHASOR_SERVER_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace phasor::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_GRPC_STATUS_H_
