#include "core/sinusoidal.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/errors.h"

namespace phasor {

absl::Status ValidateSinusoidalSpec(const SinusoidalSpec& spec,
                                    absl::string_view field_prefix) {
  if (spec.dim <= 0 || spec.dim % 2 != 0) {
    return InvalidField(absl::StrCat(field_prefix, ".dim"),
                        absl::StrCat("must be even and > 0, got ", spec.dim));
  }
  if (!std::isfinite(spec.base) || spec.base <= 0.0) {
    return InvalidField(absl::StrCat(field_prefix, ".base"),
                        absl::StrCat("must be finite and > 0, got ", spec.base));
  }
  return absl::OkStatus();
}

std::vector<double> SinusoidalFrequencies(const SinusoidalSpec& spec) {
  const int64_t half = spec.dim / 2;
  std::vector<double> omega(half);
  const double log_base = std::log(spec.base);
  for (int64_t k = 0; k < half; ++k) {
    switch (spec.frequencies) {
      case FrequencyScheme::kVaswani:
        // base^(−2k/d), via pow for a correctly rounded power of the base.
        omega[k] = std::pow(spec.base, -2.0 * static_cast<double>(k) /
                                           static_cast<double>(spec.dim));
        break;
      case FrequencyScheme::kTensor2Tensor:
        // tensor2tensor common_attention.get_timing_signal_1d: the log
        // increment is ln(max/min timescale) / max(num_timescales − 1, 1).
        omega[k] = std::exp(-static_cast<double>(k) * log_base /
                            static_cast<double>(std::max<int64_t>(half - 1, 1)));
        break;
    }
  }
  return omega;
}

absl::Status ValidateSinusoidalInputs(const SinusoidalSpec& spec,
                                      const Positions& positions,
                                      absl::Span<const float> content,
                                      float content_scale) {
  if (positions.is_real()) {
    const absl::Span<const double> reals = positions.reals();
    for (size_t i = 0; i < reals.size(); ++i) {
      if (!std::isfinite(reals[i])) {
        return InvalidField(absl::StrCat("positions[", i, "]"),
                            absl::StrCat("must be finite, got ", reals[i]));
      }
    }
  }
  if (!content.empty()) {
    const int64_t expected = positions.size() * spec.dim;
    if (static_cast<int64_t>(content.size()) != expected) {
      return InvalidField(
          "content", absl::StrCat("must have ", positions.size(), " x ",
                                  spec.dim, " = ", expected, " values, got ",
                                  content.size()));
    }
    if (!std::isfinite(content_scale)) {
      return InvalidField("content_scale", "must be finite");
    }
  }
  return absl::OkStatus();
}

namespace {

// One row: the angle is formed in double from the exact position.
inline void EncodeRow(const SinusoidalSpec& spec, const double* omega,
                      double position, const float* content,
                      float content_scale, float* out) {
  const int64_t half = spec.dim / 2;
  // Column of sin and cos for pair k, per layout.
  int64_t sin_col0 = 0, cos_col0 = 0, stride = 1;
  switch (spec.layout) {
    case SinusoidalLayout::kInterleaved:
      sin_col0 = 0, cos_col0 = 1, stride = 2;
      break;
    case SinusoidalLayout::kSplitSinCos:
      sin_col0 = 0, cos_col0 = half, stride = 1;
      break;
    case SinusoidalLayout::kSplitCosSin:
      sin_col0 = half, cos_col0 = 0, stride = 1;
      break;
  }
  for (int64_t k = 0; k < half; ++k) {
    const double angle = position * omega[k];
    out[sin_col0 + k * stride] = static_cast<float>(std::sin(angle));
    out[cos_col0 + k * stride] = static_cast<float>(std::cos(angle));
  }
  if (content != nullptr) {
    for (int64_t c = 0; c < spec.dim; ++c) {
      out[c] = content[c] * content_scale + out[c];
    }
  }
}

}  // namespace

void EncodeSinusoidal(const SinusoidalSpec& spec, const Positions& positions,
                      absl::Span<const float> content, float content_scale,
                      const ExecutionOptions& options, absl::Span<float> out) {
  assert(static_cast<int64_t>(out.size()) ==
         SinusoidalOutputSize(spec, positions.size()));
  const std::vector<double> omega = SinusoidalFrequencies(spec);
  const int64_t dim = spec.dim;
  ParallelFor(options, positions.size(), dim, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      EncodeRow(spec, omega.data(), positions.at(t),
                content.empty() ? nullptr : content.data() + t * dim,
                content_scale, out.data() + t * dim);
    }
  });
}

}  // namespace phasor
