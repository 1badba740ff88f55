// File: client/status_details.h
//
// Where a failed call's google.rpc.Status (its code, message and details,
// e.g. a google.rpc.BadRequest's field violations) travels once the call's
// grpc::Status has become an absl::Status: as the payload under
// kGrpcStatusDetailsPayload, serialized. The client sets it
// (client/encoder_client.cc), FieldViolationsOf reads it and the panel
// splitter renumbers it (client/panel_errors.h).
//
// Thread-safety: constants only.
#ifndef PHASOR_CLIENT_STATUS_DETAILS_H_
#define PHASOR_CLIENT_STATUS_DETAILS_H_

#include "absl/strings/string_view.h"

namespace phasor {

// Payload type URL under which a call's serialized google.rpc.Status travels.
inline constexpr absl::string_view kGrpcStatusDetailsPayload =
    "type.googleapis.com/google.rpc.Status";

}  // namespace phasor

#endif  // PHASOR_CLIENT_STATUS_DETAILS_H_
