#include "core/rope/rope.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/adapters/dtype.h"
#include "core/adapters/parallel.h"
#include "core/base/errors.h"
#include "core/base/positions.h"
#include "core/base/status_macros.h"
#include "core/rope/rope_kernels.h"

namespace phasor {
namespace {

// Shortest text that reads back as the same double ("0.9", not
// "0.90000000000000002"), so messages show what the caller sent.
std::string Fmt(double value) {
  char buffer[32];
  const std::to_chars_result result =
      std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

bool IsRopeStorage(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16 || dtype == DType::kFloat64;
}

absl::Status ValidateOperand(const RopeOperand& operand,
                             absl::string_view field) {
  if (!IsRopeStorage(operand.dtype)) {
    return InvalidField(absl::StrCat(field, ".dtype"),
                        absl::StrCat("must be float32, float16, bfloat16 or float64, got ",
                                     DTypeName(operand.dtype)));
  }
  if (operand.num_tokens < 0 || operand.num_heads < 0 || operand.head_dim <= 0) {
    return InvalidField(
        absl::StrCat(field, ".shape"),
        absl::StrCat("must be [tokens, heads, head_dim] with head_dim > 0, got [",
                     operand.num_tokens, ", ", operand.num_heads, ", ",
                     operand.head_dim, "]"));
  }
  const int64_t bytes = RopeOperandBytes(operand.dtype, operand.num_tokens,
                                         operand.num_heads, operand.head_dim);
  if (bytes < 0) {
    return InvalidField(absl::StrCat(field, ".shape"),
                        absl::StrCat("element count overflows int64: [",
                                     operand.num_tokens, ", ", operand.num_heads,
                                     ", ", operand.head_dim, "]"));
  }
  if (operand.seq_len < 0 ||
      (operand.seq_len > 0 && operand.num_tokens % operand.seq_len != 0)) {
    return InvalidField(absl::StrCat(field, ".shape"),
                        absl::StrCat("[B, H, T, D] needs tokens (", operand.num_tokens,
                                     ") to be a multiple of T (", operand.seq_len, ")"));
  }
  if (static_cast<int64_t>(operand.in.size()) != bytes) {
    return InvalidField(
        absl::StrCat(field, ".data"),
        absl::StrCat("must hold ", bytes, " bytes for shape [",
                     operand.num_tokens, ", ", operand.num_heads, ", ",
                     operand.head_dim, "] ", DTypeName(operand.dtype), ", got ",
                     operand.in.size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRopeSpec(const RopeSpec& spec, int64_t head_dim,
                              absl::string_view field_prefix) {
  const std::string rotary_field = absl::StrCat(field_prefix, ".rotary_dim");
  if (spec.rotary_dim < 0) {
    return InvalidField(rotary_field,
                        absl::StrCat("must be >= 0 (0 means head_dim), got ",
                                     spec.rotary_dim));
  }
  const int64_t rotary_dim = RopeRotaryDim(spec, head_dim);
  if (rotary_dim <= 0) {
    return InvalidField(rotary_field,
                        absl::StrCat("must be > 0 (head_dim is ", head_dim,
                                     "), got ", rotary_dim));
  }
  if (rotary_dim % 2 != 0 || rotary_dim > head_dim) {
    return InvalidField(
        rotary_field,
        absl::StrCat("must be even and <= head_dim ", head_dim, ", got ",
                     rotary_dim, spec.rotary_dim == 0 ? " (0 means head_dim)" : ""));
  }
  if (!std::isfinite(spec.base) || spec.base <= 0.0) {
    return InvalidField(absl::StrCat(field_prefix, ".base"),
                        absl::StrCat("must be finite and > 0, got ", Fmt(spec.base)));
  }
  if (!spec.mrope_section.empty()) {
    const std::string field = absl::StrCat(field_prefix, ".mrope_section");
    if (spec.mrope_section.size() != 3) {
      return InvalidField(field, absl::StrCat("must have 3 sizes (temporal, height, "
                                              "width), got ",
                                              spec.mrope_section.size()));
    }
    int64_t sum = 0;
    for (size_t k = 0; k < 3; ++k) {
      const int64_t size = spec.mrope_section[k];
      if (size < 0 || size > rotary_dim / 2) {
        return InvalidField(absl::StrCat(field, "[", k, "]"),
                            absl::StrCat("must be in [0, rotary_dim/2 = ",
                                         rotary_dim / 2, "], got ", size));
      }
      sum += size;
    }
    // HF splits cos/sin into chunks of mrope_section·2, which must cover the
    // head exactly; the interleaved assignment reads the sizes as bounds only.
    if (!spec.mrope_interleaved && sum != rotary_dim / 2) {
      return InvalidField(field, absl::StrCat("sizes must sum to rotary_dim/2 = ",
                                              rotary_dim / 2, ", got ", sum));
    }
  } else if (spec.mrope_interleaved) {
    return InvalidField(absl::StrCat(field_prefix, ".mrope_interleaved"),
                        "needs mrope_section");
  }
  return ValidateRopeScaling(spec.scaling, spec.base, rotary_dim, field_prefix);
}

int64_t DefaultRopeSeqLen(const Positions& positions) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t seq_len = 1;
  if (positions.is_real()) {
    double max_position = -std::numeric_limits<double>::infinity();
    for (double p : positions.reals()) max_position = std::max(max_position, p);
    // 2^62 keeps the cast exact and far above any context length.
    const double length = std::floor(max_position) + 1.0;
    if (length >= 0x1p62) return int64_t{1} << 62;
    if (length > 1.0) seq_len = static_cast<int64_t>(length);
  } else {
    for (int64_t p : positions.integers()) {
      const int64_t length = p == kMax ? kMax : p + 1;
      seq_len = std::max(seq_len, length);
    }
  }
  return seq_len;
}

absl::StatusOr<RopeFrequencies> ComputeRopeFrequencies(
    const RopeSpec& spec, int64_t head_dim, int64_t seq_len,
    absl::string_view field_prefix) {
  PHASOR_RETURN_IF_ERROR(ValidateRopeSpec(spec, head_dim, field_prefix));
  if (seq_len < 1) {
    return InvalidField("seq_len", absl::StrCat("must be >= 1, got ", seq_len));
  }
  const int64_t rotary_dim = RopeRotaryDim(spec, head_dim);
  RopeFrequencies frequencies =
      ScaledRopeFrequencies(spec.scaling, spec.base, rotary_dim, seq_len);
  // Valid fields can still combine into an unusable result (e.g. base 1e300
  // with a tiny longrope factor); refuse it rather than emit NaN.
  for (size_t i = 0; i < frequencies.inv_freq.size(); ++i) {
    if (!std::isfinite(frequencies.inv_freq[i]) || frequencies.inv_freq[i] < 0.0) {
      return InvalidField(
          field_prefix,
          absl::StrCat("scaled inverse frequency ", i, " is not a finite "
                       "non-negative number (", Fmt(frequencies.inv_freq[i]),
                       "); check base and scaling"));
    }
  }
  if (!std::isfinite(frequencies.attention_factor) ||
      frequencies.attention_factor <= 0.0) {
    return InvalidField(
        absl::StrCat(field_prefix, ".scaling"),
        absl::StrCat("attention factor must be finite and > 0, got ",
                     Fmt(frequencies.attention_factor)));
  }
  return frequencies;
}

absl::Status ValidateRopePositions(const Positions& positions,
                                   const RopeFrequencies& frequencies,
                                   absl::string_view field) {
  double max_abs_position = 0.0;
  if (positions.is_real()) {
    const absl::Span<const double> reals = positions.reals();
    for (size_t i = 0; i < reals.size(); ++i) {
      if (!std::isfinite(reals[i])) {
        return InvalidField(absl::StrCat(field, "[", i, "]"),
                            absl::StrCat("must be finite, got ", Fmt(reals[i])));
      }
      max_abs_position = std::max(max_abs_position, std::fabs(reals[i]));
    }
  } else {
    for (int64_t p : positions.integers()) {
      max_abs_position =
          std::max(max_abs_position, std::fabs(static_cast<double>(p)));
    }
  }
  double max_inv_freq = 0.0;
  for (double theta : frequencies.inv_freq) max_inv_freq = std::max(max_inv_freq, theta);
  if (!std::isfinite(max_abs_position * max_inv_freq)) {
    return InvalidField(
        field, absl::StrCat("angle |position|·θ overflows: max |position| ",
                            Fmt(max_abs_position), " times max θ ",
                            Fmt(max_inv_freq)));
  }
  return absl::OkStatus();
}

RopePlan MakeRopePlan(RopeFrequencies frequencies) {
  RopePlan plan;
  plan.angles.reserve(frequencies.inv_freq.size());
  for (double theta : frequencies.inv_freq) plan.angles.emplace_back(theta);
  plan.frequencies = std::move(frequencies);
  return plan;
}

void ComputeRopeTables(const RopeFrequencies& frequencies,
                       bool fold_attention_factor, const Positions& positions,
                       const ExecutionOptions& options, absl::Span<float> cos,
                       absl::Span<float> sin) {
  RopeSpec spec;
  spec.fold_attention_factor = fold_attention_factor;
  rope_internal::RopeTableRows(spec, MakeRopePlan(frequencies), positions, options, cos, sin);
}

void ComputeRopeTables(const RopeSpec& spec, const RopeFrequencies& frequencies,
                       const Positions& positions, const ExecutionOptions& options,
                       absl::Span<float> cos, absl::Span<float> sin) {
  rope_internal::RopeTableRows(spec, MakeRopePlan(frequencies), positions, options, cos, sin);
}

void ComputeRopeTables(const RopeSpec& spec, const RopeFrequencies& frequencies,
                       const Positions& positions, const ExecutionOptions& options,
                       absl::Span<double> cos, absl::Span<double> sin) {
  rope_internal::RopeTableRows(spec, MakeRopePlan(frequencies), positions, options, cos, sin);
}

void ComputeRopeTables(const RopeSpec& spec, const RopePlan& plan,
                       const Positions& positions, const ExecutionOptions& options,
                       absl::Span<float> cos, absl::Span<float> sin) {
  rope_internal::RopeTableRows(spec, plan, positions, options, cos, sin);
}

void ComputeRopeTables(const RopeSpec& spec, const RopePlan& plan,
                       const Positions& positions, const ExecutionOptions& options,
                       absl::Span<double> cos, absl::Span<double> sin) {
  rope_internal::RopeTableRows(spec, plan, positions, options, cos, sin);
}

int64_t RopeOperandBytes(DType dtype, int64_t num_tokens, int64_t num_heads,
                         int64_t head_dim) {
  if (num_tokens < 0 || num_heads < 0 || head_dim < 0) return -1;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t total = static_cast<int64_t>(DTypeSize(dtype));
  for (int64_t extent : {num_tokens, num_heads, head_dim}) {
    if (extent != 0 && total > kMax / extent) return -1;
    total *= extent;
  }
  return total;
}

absl::Status ValidateRopeOperands(const RopeOperand& query,
                                  const RopeOperand* key,
                                  int64_t num_positions) {
  PHASOR_RETURN_IF_ERROR(ValidateOperand(query, "query"));
  if (query.num_tokens != num_positions) {
    return InvalidField("positions",
                        absl::StrCat("must have one position per query token (",
                                     query.num_tokens, "), got ", num_positions));
  }
  if (key == nullptr) return absl::OkStatus();
  if (key->dtype != query.dtype) {
    return InvalidField("key.dtype",
                        absl::StrCat("must equal query.dtype ",
                                     DTypeName(query.dtype), ", got ",
                                     DTypeName(key->dtype)));
  }
  if (key->num_tokens != query.num_tokens || key->head_dim != query.head_dim ||
      key->seq_len != query.seq_len) {
    return InvalidField(
        "key.shape",
        absl::StrCat("must be [", query.num_tokens, ", heads, ", query.head_dim,
                     "] to match query, got [", key->num_tokens, ", ",
                     key->num_heads, ", ", key->head_dim, "]"));
  }
  return ValidateOperand(*key, "key");
}

void ApplyRope(const RopeSpec& spec, const RopePlan& plan,
               const Positions& positions, const ExecutionOptions& options,
               const RopeOperand& query, const RopeOperand* key) {
  // REQUIRES: see rope.h; the spans were validated against the shapes.
  assert(static_cast<int64_t>(plan.angles.size()) ==
         RopeTableWidth(spec, query.head_dim));
  assert(positions.size() == query.num_tokens * RopePositionAxes(spec));
  assert(query.out.size() == query.in.size());
  assert(key == nullptr || key->out.size() == key->in.size());
  rope_internal::ApplyRopeRows(spec, plan, positions, options, query, key);
}

void ApplyRope(const RopeSpec& spec, const RopeFrequencies& frequencies,
               const Positions& positions, const ExecutionOptions& options,
               const RopeOperand& query, const RopeOperand* key) {
  ApplyRope(spec, MakeRopePlan(frequencies), positions, options, query, key);
}

}  // namespace phasor

