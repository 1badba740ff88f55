#include "server/describe_handler.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/positional/describe.h"
#include "core/positional/sinusoidal.h"
#include "core/rope/rope.h"
#include "core/temporal/time_sinusoid.h"
#include "server/relative_handler.h"
#include "server/rope_handler.h"
#include "server/spec_convert.h"
#include "server/temporal_handler.h"

namespace phasor::server {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

// The sequence length a profile's RoPE spec is checked at without
// positions: seq_len, else max_position_embeddings, else 1.
int64_t SpecSeqLen(const v1::RopeSpec& wire) {
  return std::max<int64_t>({wire.seq_len(), wire.max_position_embeddings(), 1});
}

// The sequence length Describe chooses a RoPE spec's frequencies for, as
// ApplyRope would: spec.rope.seq_len when the spec pins it (ApplyRope then
// ignores the positions), else the request's seq_len (standing in for
// 1 + the largest position), else the frequencies HF builds at model
// initialisation (seq_len None): for longrope the short factors, i.e. a
// length of original_max_position_embeddings when given (Phi-3: 4096 of
// 131072), otherwise max_position_embeddings (the model's own context:
// dynamic NTK is unscaled there since L = L0), else 1.
// REQUIRES: request_seq_len >= 0.
int64_t DescribeSeqLen(const v1::RopeSpec& wire, int64_t request_seq_len) {
  if (wire.seq_len() > 0) return wire.seq_len();
  if (request_seq_len > 0) return request_seq_len;
  if (wire.scaling().has_longrope() &&
      wire.scaling().longrope().original_max_position_embeddings() > 0) {
    return wire.scaling().longrope().original_max_position_embeddings();
  }
  return std::max<int64_t>(wire.max_position_embeddings(), 1);
}

// Describe's response holds frequencies and wavelengths (`num_frequencies`
// doubles each) and the similarity curve (`num_offsets` doubles): checked
// against the message limit before any of them is computed. Offsets
// outside core's range are left for core to reject (before it allocates).
absl::Status CheckDescribeSize(int64_t num_frequencies, int64_t num_offsets,
                               absl::string_view field, const RequestLimits& limits) {
  constexpr int64_t kMaxOffsets = int64_t{1} << 20;  // core/describe.cc's bound.
  const int64_t offsets = std::clamp<int64_t>(num_offsets, 0, kMaxOffsets);
  const int64_t values = 2 * num_frequencies + offsets;  // No overflow: both < 2^62.
  const int64_t shape[] = {values};
  return CheckOutputSize(shape, DType::kFloat64, field, limits);
}

}  // namespace

absl::Status HandleDescribe(const HandlerContext& context,
                            const v1::DescribeRequest& request,
                            v1::DescribeResponse* response) {
  PHASOR_ASSIGN_OR_RETURN(const v1::EncoderSpec* spec, ResolveSpec(context, request));
  const int64_t num_offsets = request.num_offsets() == 0 ? 64 : request.num_offsets();
  if (request.seq_len() < 0) {
    return InvalidField("seq_len", absl::StrCat("must be >= 0, got ", request.seq_len()));
  }
  // Only RoPE scaling depends on the sequence length; accepting seq_len for
  // another spec would answer as if it had been applied.
  if (request.seq_len() > 0 && spec->kind_case() != v1::EncoderSpec::kRope) {
    return InvalidField("seq_len", "applies only to a rope spec (sinusoidal and "
                                   "time-ladder frequencies do not depend on it)");
  }
  if (spec->kind_case() == v1::EncoderSpec::kRelativeBias) {
    return DescribeRelativeBias(context, spec->relative_bias(), response);
  }
  std::vector<double> frequencies;
  int64_t seq_len = 0;  // Reported for rope specs only.
  const char* unit = "positions";
  switch (spec->kind_case()) {
    case v1::EncoderSpec::kPositional: {
      if (!spec->positional().has_sinusoidal()) {
        return InvalidField("spec.positional",
                            "Describe needs a sinusoidal encoder; a learned "
                            "table has no frequency ladder");
      }
      const SinusoidalSpec sinusoidal = SinusoidalFromProto(spec->positional().sinusoidal());
      PHASOR_RETURN_IF_ERROR(ValidateSinusoidalSpec(sinusoidal, kSinusoidalPrefix));
      PHASOR_RETURN_IF_ERROR(CheckWidth(sinusoidal.dim, "spec.positional.sinusoidal.dim",
                                        context.limits));
      PHASOR_RETURN_IF_ERROR(CheckDescribeSize(sinusoidal.dim / 2, num_offsets,
                                               "spec.positional.sinusoidal.dim",
                                               context.limits));
      frequencies = SinusoidalFrequencies(sinusoidal);
      break;
    }
    case v1::EncoderSpec::kRope: {
      PHASOR_ASSIGN_OR_RETURN(const RopeSpec rope, RopeFromProto(spec->rope()));
      PHASOR_RETURN_IF_ERROR(RequireRotaryDim(rope, "Describe", context.limits));
      PHASOR_RETURN_IF_ERROR(CheckDescribeSize(rope.rotary_dim / 2, num_offsets,
                                               absl::StrCat(kRopePrefix, ".rotary_dim"),
                                               context.limits));
      seq_len = DescribeSeqLen(spec->rope(), request.seq_len());
      PHASOR_ASSIGN_OR_RETURN(RopeFrequencies rope_frequencies,
                              RopeFrequenciesFor(rope, rope.rotary_dim, seq_len));
      frequencies = std::move(rope_frequencies.inv_freq);
      break;
    }
    case v1::EncoderSpec::kTemporal: {
      if (!spec->temporal().has_time()) {
        return InvalidField("spec.temporal.time",
                            "Describe needs a time block (the time ladder)");
      }
      const std::string prefix = absl::StrCat(kTemporalPrefix, ".time");
      PHASOR_ASSIGN_OR_RETURN(const TimeBlock block,
                              TimeBlockFromProto(spec->temporal().time(), prefix));
      PHASOR_RETURN_IF_ERROR(ValidateTimeBlock(block, prefix));
      PHASOR_RETURN_IF_ERROR(
          CheckWidth(block.dim, absl::StrCat(prefix, ".dim"), context.limits));
      PHASOR_RETURN_IF_ERROR(CheckDescribeSize(block.dim / 2, num_offsets,
                                               absl::StrCat(prefix, ".dim"),
                                               context.limits));
      for (double period : TimeBlockPeriodsSeconds(block)) {
        frequencies.push_back(kTwoPi / period);
      }
      unit = "seconds";
      break;
    }
    case v1::EncoderSpec::kRelativeBias:  // Answered above.
    case v1::EncoderSpec::KIND_NOT_SET:
      return InvalidField("spec", "set positional, rope, temporal or relative_bias");
  }
  // The curve costs num_offsets × frequencies cosines.
  int64_t work = 0;
  if (CheckedMultiply(num_offsets, static_cast<int64_t>(frequencies.size()), &work) &&
      work > context.limits.max_elements) {
    return FieldError(absl::StatusCode::kResourceExhausted, "num_offsets",
                      absl::StrCat(num_offsets, " offsets x ", frequencies.size(),
                                   " frequencies is over the server's limit of ",
                                   context.limits.max_elements, " per request"));
  }
  PHASOR_RETURN_IF_ERROR(context.check_alive());
  PHASOR_ASSIGN_OR_RETURN(
      const FrequencyDescription description,
      DescribeFrequencies(frequencies, num_offsets,
                          request.has_offset_step() ? request.offset_step() : 1.0));
  response->mutable_frequencies()->Add(description.frequencies.begin(),
                                       description.frequencies.end());
  response->mutable_wavelengths()->Add(description.wavelengths.begin(),
                                       description.wavelengths.end());
  response->set_unit(unit);
  response->set_seq_len(seq_len);
  response->set_unambiguous_range(description.unambiguous_range);
  response->set_nearest_code_distance(description.nearest_code_distance);
  response->set_nearest_code_offset(description.nearest_code_offset);
  response->mutable_similarity()->Add(description.similarity.begin(),
                                      description.similarity.end());
  CountEncoded(context, EncodedKind::kDescribe, num_offsets);
  return absl::OkStatus();
}

absl::Status HandleListProfiles(const HandlerContext& context,
                                const v1::ListProfilesRequest& /*request*/,
                                v1::ListProfilesResponse* response) {
  context.profiles->ListInto(response);
  return absl::OkStatus();
}

absl::Status SpecErrorsToProfile(const absl::Status& status,
                                 absl::string_view profile) {
  const std::optional<FieldPath> path = FieldPathSegmentsOf(status);
  if (!path || path->empty() || path->front() != FieldPathSegment{"spec", std::nullopt}) {
    return status;
  }
  return ReplaceFieldPath(status, "profile",
                          absl::StrCat("profile '", profile, "' ", FormatFieldPath(*path)));
}

absl::Status ValidateProfiles(const ProfileRegistry& profiles) {
  for (const v1::Profile* profile : profiles.profiles()) {
    const v1::EncoderSpec& spec = profile->spec();
    absl::Status status;
    switch (spec.kind_case()) {
      case v1::EncoderSpec::kPositional:
        if (spec.positional().has_sinusoidal()) {
          status = ValidateSinusoidalSpec(SinusoidalFromProto(spec.positional().sinusoidal()),
                                          kSinusoidalPrefix);
        } else if (spec.positional().has_learned()) {
          status = profiles
                       .FindLearnedTable(spec.positional().learned().table(),
                                         "spec.positional.learned.table")
                       .status();
        } else {
          status = InvalidField("spec.positional", "set sinusoidal or learned");
        }
        break;
      case v1::EncoderSpec::kRope: {
        absl::StatusOr<RopeSpec> rope = RopeFromProto(spec.rope());
        status = rope.status();
        // Without a tensor the head dimension is known only when rotary_dim
        // is set; a spec that leaves it to the head is checked per request.
        if (status.ok() && rope->rotary_dim > 0) {
          status =
              RopeFrequenciesFor(*rope, rope->rotary_dim, SpecSeqLen(spec.rope())).status();
        }
        break;
      }
      case v1::EncoderSpec::kTemporal:
        status = ValidateTemporalProfile(profiles, spec.temporal());
        break;
      case v1::EncoderSpec::kRelativeBias:
        status = ValidateRelativeBiasProfile(profiles, spec.relative_bias());
        break;
      case v1::EncoderSpec::KIND_NOT_SET:
        status = InvalidField("spec", "set positional, rope, temporal or relative_bias");
        break;
    }
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("profile '", profile->name(),
                                                      "': ", status.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace phasor::server
