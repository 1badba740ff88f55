// Field-path errors: how core/ tells a caller which input was wrong.
//
// Every validation failure is an absl::Status whose message starts with the
// dot-separated field path of the offending input ("spec.rope.rotary_dim: must
// be even, got 7") and which carries the path as a payload, so the server can
// attach a google.rpc.BadRequest field violation without parsing messages.
// Field paths use the proto field names of phasor.v1 so a client sees the
// name it sent.
#ifndef PHASOR_CORE_ERRORS_H_
#define PHASOR_CORE_ERRORS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace phasor {

// Payload type URL under which the field path travels.
inline constexpr absl::string_view kFieldPathPayload = "phasor.dev/field-path";

inline absl::Status FieldError(absl::StatusCode code, absl::string_view field,
                               absl::string_view description) {
  absl::Status status(code, absl::StrCat(field, ": ", description));
  status.SetPayload(kFieldPathPayload, absl::Cord(field));
  return status;
}

inline absl::Status InvalidField(absl::string_view field,
                                 absl::string_view description) {
  return FieldError(absl::StatusCode::kInvalidArgument, field, description);
}

// The field path carried by `status`, if any.
inline std::optional<std::string> FieldPathOf(const absl::Status& status) {
  auto payload = status.GetPayload(kFieldPathPayload);  // absl::optional here
  if (!payload) return std::nullopt;
  return std::string(*payload);
}

}  // namespace phasor

#endif  // PHASOR_CORE_ERRORS_H_
