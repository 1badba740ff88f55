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
#include "core/compose.h"
#include "core/continuous_time.h"
#include "core/rope.h"
#include "core/sinusoidal.h"
#include "phasor/v1/encoder.pb.h"
#include "server/profiles.h"

namespace phasor::server {

// Field prefixes of the specs inside a request.
inline constexpr absl::string_view kSinusoidalPrefix = "spec.positional.sinusoidal";
inline constexpr absl::string_view kRopePrefix = "spec.rope";
inline constexpr absl::string_view kTemporalPrefix = "spec.temporal";

SinusoidalSpec SinusoidalFromProto(const v1::SinusoidalSpec& spec);

// RopeSpec.max_position_embeddings is copied into the scaling variants that
// use it (dynamic, yarn, longrope). Unknown enum values are INVALID_ARGUMENT.
absl::StatusOr<RopeSpec> RopeFromProto(const v1::RopeSpec& spec);

// A time block; zero fields take core's defaults (dim 16, periods 1 s to 10
// years). `sum_model` keeps dim 0 for combine SUM, where core reads it as
// d_model. Not validated here.
absl::StatusOr<TimeBlock> TimeBlockFromProto(const v1::TimeBlock& block,
                                             absl::string_view field_prefix,
                                             bool sum_model = false);

// A temporal spec. Named Time2Vec parameters and holiday calendars are
// looked up in `profiles` (NOT_FOUND naming the field); the result is not
// yet validated (core's ValidateTemporalSpec does that).
absl::StatusOr<TemporalSpec> TemporalFromProto(const v1::TemporalSpec& spec,
                                               const ProfileRegistry& profiles);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_SPEC_CONVERT_H_
