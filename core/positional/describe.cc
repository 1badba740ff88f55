#include "core/positional/describe.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace phasor {

absl::StatusOr<FrequencyDescription> DescribeFrequencies(
    absl::Span<const double> frequencies, int64_t num_offsets,
    double offset_step) {
  if (frequencies.empty()) return InvalidField("spec", "describes no frequencies");
  for (size_t j = 0; j < frequencies.size(); ++j) {
    if (!std::isfinite(frequencies[j]) || frequencies[j] <= 0) {
      return InvalidField("spec", absl::StrCat("frequency ", j, " is ",
                                               frequencies[j], "; must be finite and > 0"));
    }
  }
  constexpr int64_t kMaxOffsets = int64_t{1} << 20;
  if (num_offsets < 2 || num_offsets > kMaxOffsets) {
    return InvalidField("num_offsets", absl::StrCat("must be in [2, ", kMaxOffsets,
                                                    "], got ", num_offsets));
  }
  if (!std::isfinite(offset_step) || offset_step <= 0) {
    return InvalidField("offset_step", "must be finite and > 0");
  }
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  FrequencyDescription d;
  d.frequencies.assign(frequencies.begin(), frequencies.end());
  for (double w : frequencies) {
    d.wavelengths.push_back(kTwoPi / w);
    d.unambiguous_range = std::max(d.unambiguous_range, kTwoPi / w);
  }
  d.similarity.resize(num_offsets);
  double best = std::numeric_limits<double>::infinity();
  for (int64_t k = 0; k < num_offsets; ++k) {
    const double x = static_cast<double>(k) * offset_step;
    double sum = 0, squared = 0;
    for (double w : frequencies) {
      sum += std::cos(w * x);
      // 2 − 2cos(a) = 4 sin²(a/2), without the cancellation near a = 0.
      const double s = std::sin(0.5 * w * x);
      squared += 4.0 * s * s;
    }
    d.similarity[k] = sum;
    if (k > 0 && squared < best) {
      best = squared;
      d.nearest_code_offset = k;
    }
  }
  d.nearest_code_distance = std::sqrt(std::max(best, 0.0));
  return d;
}

}  // namespace phasor
