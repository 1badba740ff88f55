// -----------------------------------------------------------------------------
// File: core/positional/describe.h
// -----------------------------------------------------------------------------
//
// Describe: what a frequency ladder can and cannot tell apart.
//
// Every encoding here is a set of pairs (sin ω_j x, cos ω_j x), x in positions
// or seconds. For such a code (Vaswani et al. 2017; the shift-invariance is
// the property RoPE builds on, Su et al. 2021):
//   wavelength_j          = 2π / ω_j
//   similarity(k)         = PE_x · PE_{x+k} = Σ_j cos(ω_j k)   (independent of x)
//   ‖PE_x − PE_{x+k}‖²    = Σ_j (2 − 2 cos(ω_j k))
// The unambiguous range is the longest wavelength: within it the slowest pair
// alone never repeats, so no two codes coincide; the nearest-code distance is
// min over k = 1..K−1 of ‖PE_x − PE_{x+k}‖ (how close the closest other
// position's code comes).
//
// Thread-safety: pure function.
//
// Example:
//
//   const absl::StatusOr<FrequencyDescription> d =
//       DescribeFrequencies(omega, /*num_offsets=*/4096);
//   // d->unambiguous_range: positions before the code repeats.
#ifndef PHASOR_CORE_POSITIONAL_DESCRIBE_H_
#define PHASOR_CORE_POSITIONAL_DESCRIBE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace phasor {

struct FrequencyDescription {
  std::vector<double> frequencies;  // ω_j, radians per unit (as given).
  std::vector<double> wavelengths;  // 2π/ω_j, in units (positions or seconds).
  double unambiguous_range = 0;     // Longest wavelength, in units.
  double nearest_code_distance = 0; // min_{1<=k<K} ‖PE_x − PE_{x+k}‖.
  int64_t nearest_code_offset = 0;  // The k that attains it.
  std::vector<double> similarity;   // Σ_j cos(ω_j k) for k = 0..K−1.
};

// `frequencies`: ω_j > 0 (finite); `num_offsets` K in [2, 1<<20], with
// offsets in steps of `offset_step` units (1 for token positions).
absl::StatusOr<FrequencyDescription> DescribeFrequencies(
    absl::Span<const double> frequencies, int64_t num_offsets,
    double offset_step = 1.0);

}  // namespace phasor

#endif  // PHASOR_CORE_POSITIONAL_DESCRIBE_H_
