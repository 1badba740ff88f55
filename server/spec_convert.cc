#include "server/spec_convert.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/errors.h"

namespace phasor::server {

SinusoidalSpec SinusoidalFromProto(const v1::SinusoidalSpec& spec) {
  SinusoidalSpec out;
  out.dim = spec.dim();
  if (spec.has_base()) out.base = spec.base();
  switch (spec.layout()) {
    case v1::SinusoidalSpec::SPLIT_SIN_COS:
      out.layout = SinusoidalLayout::kSplitSinCos;
      break;
    case v1::SinusoidalSpec::SPLIT_COS_SIN:
      out.layout = SinusoidalLayout::kSplitCosSin;
      break;
    default:  // LAYOUT_UNSPECIFIED, INTERLEAVED
      out.layout = SinusoidalLayout::kInterleaved;
      break;
  }
  out.frequencies = spec.frequencies() == v1::SinusoidalSpec::TENSOR2TENSOR
                        ? FrequencyScheme::kTensor2Tensor
                        : FrequencyScheme::kVaswani;
  return out;
}

namespace {

absl::StatusOr<RopeScaling> ScalingFromProto(const v1::RopeScaling& scaling,
                                             int64_t max_position_embeddings) {
  const std::optional<int64_t> max_positions =
      max_position_embeddings > 0 ? std::optional<int64_t>(max_position_embeddings)
                                  : std::nullopt;
  switch (scaling.kind_case()) {
    case v1::RopeScaling::kLinear:
      return LinearRopeScaling{scaling.linear().factor()};
    case v1::RopeScaling::kNtk:
      return NtkRopeScaling{scaling.ntk().factor()};
    case v1::RopeScaling::kDynamic:
      return DynamicNtkRopeScaling{scaling.dynamic().factor(),
                                   max_position_embeddings};
    case v1::RopeScaling::kYarn: {
      const v1::RopeScaling::Yarn& in = scaling.yarn();
      YarnRopeScaling out;
      if (in.has_factor()) out.factor = in.factor();
      if (in.has_original_max_position_embeddings()) {
        out.original_max_position_embeddings = in.original_max_position_embeddings();
      }
      out.max_position_embeddings = max_positions;
      if (in.has_beta_fast()) out.beta_fast = in.beta_fast();
      if (in.has_beta_slow()) out.beta_slow = in.beta_slow();
      if (in.has_mscale()) out.mscale = in.mscale();
      if (in.has_mscale_all_dim()) out.mscale_all_dim = in.mscale_all_dim();
      if (in.has_attention_factor()) out.attention_factor = in.attention_factor();
      if (in.has_truncate()) out.truncate = in.truncate();
      return out;
    }
    case v1::RopeScaling::kLongrope: {
      const v1::RopeScaling::LongRope& in = scaling.longrope();
      LongRopeScaling out;
      out.short_factor.assign(in.short_factor().begin(), in.short_factor().end());
      out.long_factor.assign(in.long_factor().begin(), in.long_factor().end());
      if (in.has_original_max_position_embeddings()) {
        out.original_max_position_embeddings = in.original_max_position_embeddings();
      }
      out.max_position_embeddings = max_positions;
      if (in.has_factor()) out.factor = in.factor();
      if (in.has_attention_factor()) out.attention_factor = in.attention_factor();
      return out;
    }
    case v1::RopeScaling::kLlama3: {
      const v1::RopeScaling::Llama3& in = scaling.llama3();
      Llama3RopeScaling out;
      out.factor = in.factor();
      if (in.has_low_freq_factor()) out.low_freq_factor = in.low_freq_factor();
      if (in.has_high_freq_factor()) out.high_freq_factor = in.high_freq_factor();
      if (in.has_original_max_position_embeddings()) {
        out.original_max_position_embeddings = in.original_max_position_embeddings();
      }
      return out;
    }
    case v1::RopeScaling::KIND_NOT_SET:
      break;
  }
  return NoRopeScaling{};
}

}  // namespace

absl::StatusOr<RopeSpec> RopeFromProto(const v1::RopeSpec& spec) {
  RopeSpec out;
  if (spec.rotary_dim() < 0) {
    return InvalidField(absl::StrCat(kRopePrefix, ".rotary_dim"),
                        absl::StrCat("must be >= 0 (0 = head dimension), got ",
                                     spec.rotary_dim()));
  }
  if (spec.max_position_embeddings() < 0) {
    return InvalidField(absl::StrCat(kRopePrefix, ".max_position_embeddings"),
                        absl::StrCat("must be >= 0, got ",
                                     spec.max_position_embeddings()));
  }
  if (spec.seq_len() < 0) {
    return InvalidField(absl::StrCat(kRopePrefix, ".seq_len"),
                        absl::StrCat("must be >= 0 (0 = from the positions), got ",
                                     spec.seq_len()));
  }
  out.rotary_dim = spec.rotary_dim();
  if (spec.has_base()) out.base = spec.base();
  switch (spec.layout()) {
    case v1::RopeSpec::LAYOUT_UNSPECIFIED:
    case v1::RopeSpec::HALF:
      out.layout = RopeLayout::kHalf;
      break;
    case v1::RopeSpec::INTERLEAVED:
      out.layout = RopeLayout::kInterleaved;
      break;
    default:
      return InvalidField(absl::StrCat(kRopePrefix, ".layout"),
                          absl::StrCat("unknown layout ", spec.layout()));
  }
  absl::StatusOr<RopeScaling> scaling =
      ScalingFromProto(spec.scaling(), spec.max_position_embeddings());
  if (!scaling.ok()) return scaling.status();
  out.scaling = *std::move(scaling);
  out.fold_attention_factor =
      spec.has_fold_attention_factor() ? spec.fold_attention_factor() : true;
  return out;
}

absl::Status RopeStatusToWirePaths(const absl::Status& status) {
  const std::optional<std::string> path = FieldPathOf(status);
  if (!path) return status;
  const std::string scaling_prefix = absl::StrCat(kRopePrefix, ".scaling.");
  constexpr absl::string_view kMaxField = ".max_position_embeddings";
  if (!absl::StartsWith(*path, scaling_prefix) || !absl::EndsWith(*path, kMaxField)) {
    return status;
  }
  // "spec.rope.scaling.dynamic.max_position_embeddings" names a field that
  // only exists in core; only "original_max_position_embeddings" inside the
  // variant is a wire field.
  const std::string variant_field = path->substr(scaling_prefix.size());
  if (variant_field.find('.') == std::string::npos ||
      absl::EndsWith(*path, ".original_max_position_embeddings")) {
    return status;
  }
  const std::string wire = absl::StrCat(kRopePrefix, kMaxField);
  absl::string_view description = status.message();
  if (absl::StartsWith(description, *path)) description.remove_prefix(path->size());
  if (absl::StartsWith(description, ": ")) description.remove_prefix(2);
  return FieldError(status.code(), wire, description);
}

}  // namespace phasor::server
