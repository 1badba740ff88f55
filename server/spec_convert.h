// phasor.v1 encoder specs -> core/ spec structs.
//
// Only the mapping lives here: absent optional fields become the documented
// defaults, enums map 1:1. Range checks are core's (its validators name the
// same field paths the proto uses), except for the few fields that exist only
// on the wire (noted below); RelativeFromProto runs core's validators as it
// converts, since the handlers need the checked spec's bucket count first.
//
// Thread-safety: pure functions.
#ifndef PHASOR_SERVER_SPEC_CONVERT_H_
#define PHASOR_SERVER_SPEC_CONVERT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/positional/sinusoidal.h"
#include "core/relative/relative_bias.h"
#include "core/rope/rope.h"
#include "core/temporal/compose.h"
#include "core/temporal/time2vec.h"
#include "core/temporal/time_sinusoid.h"
#include "phasor/v1/encoder.pb.h"
#include "server/convert.h"
#include "server/profiles.h"

namespace phasor::server {

// Field prefixes of the specs inside a request.
inline constexpr absl::string_view kSinusoidalPrefix = "spec.positional.sinusoidal";
inline constexpr absl::string_view kRopePrefix = "spec.rope";
inline constexpr absl::string_view kTemporalPrefix = "spec.temporal";
inline constexpr absl::string_view kRelativeBiasPrefix = "spec.relative_bias";

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

// A relative_bias spec in core's terms: a bucketing, or time ALiBi.
struct RelativeSpec {
  bool time_alibi = false;
  RelativeBucketing bucketing;
  TimeAlibiSpec alibi;
  std::vector<double> slopes;  // time ALiBi; filled by the handler
  int64_t alibi_heads = 0;     // time ALiBi's H
};

// A relative_bias spec, converted and checked: the bucketing's ranges
// (core's ValidateBucketing, ValidateTimeAlibi) and the fields that exist
// only on the wire (a direction enum, time_alibi's slopes and num_heads,
// bounded like any width by `limits`). Errors name
// spec.relative_bias.<kind>.<field>.
absl::StatusOr<RelativeSpec> RelativeFromProto(const v1::RelativeBiasSpec& wire,
                                               const RequestLimits& limits);

// A temporal spec. Named Time2Vec parameters and holiday calendars are
// looked up in `profiles` (NOT_FOUND naming the field); the result is not
// yet validated (core's ValidateTemporalSpec does that).
absl::StatusOr<TemporalSpec> TemporalFromProto(const v1::TemporalSpec& spec,
                                               const ProfileRegistry& profiles);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_SPEC_CONVERT_H_
