// phasor.v1 encoder specs -> core/ spec structs.
//
// Only the mapping lives here: absent optional fields become the documented
// defaults, enums map 1:1. Range checks are core's (its validators name the
// same field paths the proto uses), except for the few fields that exist only
// on the wire (noted below).
//
// Thread-safety: pure functions.
#ifndef PHASOR_SERVER_SPEC_CONVERT_H_
#define PHASOR_SERVER_SPEC_CONVERT_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/rope.h"
#include "core/sinusoidal.h"
#include "phasor/v1/encoder.pb.h"

namespace phasor::server {

// Field prefixes of the specs inside a request.
inline constexpr absl::string_view kSinusoidalPrefix = "spec.positional.sinusoidal";
inline constexpr absl::string_view kRopePrefix = "spec.rope";

SinusoidalSpec SinusoidalFromProto(const v1::SinusoidalSpec& spec);

// RopeSpec.max_position_embeddings is copied into the scaling variants that
// use it (dynamic, yarn, longrope). Unknown enum values are INVALID_ARGUMENT.
absl::StatusOr<RopeSpec> RopeFromProto(const v1::RopeSpec& spec);

// core/rope_scaling.h keeps max_position_embeddings inside each scaling
// variant and names it spec.rope.scaling.<type>.max_position_embeddings; on
// the wire it is spec.rope.max_position_embeddings. Rewrites such a status
// to the wire path; any other status is returned unchanged.
absl::Status RopeStatusToWirePaths(const absl::Status& status);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_SPEC_CONVERT_H_
