// -----------------------------------------------------------------------------
// File: core/positional/sinusoidal.h
// -----------------------------------------------------------------------------
//
// Sinusoidal absolute position encoding (Vaswani et al., "Attention Is All You
// Need", 2017, §3.5), evaluated at integer or real-valued positions.
//
//   ω_k = base^(−2k/d),  k = 0 .. d/2−1          (FrequencyScheme::kVaswani)
//   ω_k = base^(−k / max(d/2 − 1, 1))            (kTensor2Tensor: tensor2tensor's
//        get_timing_signal_1d, exp(−k·ln(base)/max(d/2 − 1, 1)), and fairseq's
//        SinusoidalPositionalEmbedding). The max is tensor2tensor's own guard:
//        d = 2 has the single frequency ω_0 = 1.
//
//   INTERLEAVED:   PE[t, 2k] = sin(t·ω_k), PE[t, 2k+1] = cos(t·ω_k)
//   SPLIT_SIN_COS: PE[t, k]  = sin(t·ω_k), PE[t, d/2 + k] = cos(t·ω_k)
//   SPLIT_COS_SIN: PE[t, k]  = cos(t·ω_k), PE[t, d/2 + k] = sin(t·ω_k)
//
// Optional content is fused in the same pass: out = content·content_scale + PE
// (the Transformer scales embeddings by sqrt(d) before the sum).
//
// Accuracy: each ω_k is the correctly rounded double of its formula
// (core/math/frequency_ladder.h). For an int64 position t, t·ω_k is reduced
// modulo 2π exactly, for every int64 (core/math/exact_angle.h): sin/cos in double
// within 1.7e-16 of exact, then rounded once to float. Runs of evenly spaced
// integer positions (the common 0..N−1) are filled by angle addition in
// double, re-anchored exactly every 256 rows (core/math/angle_ladder.h explains the
// error bound, ~1e-9 before the float rounding). Float outputs at any int64
// position are within 3e-8 of a __float128 reference (tests prove it for both
// paths). A real position t is split exactly into integer and fraction:
// within ω_k·2^-52 + 1.7e-16 of exact for |t| < 2^63 (docs/API.md,
// "Precision").
//
// Thread-safety: all functions are pure; concurrent calls are safe.
//
// Example:
//
//   const SinusoidalSpec spec{.dim = 512};
//   std::vector<float> out(SinusoidalOutputSize(spec, positions.size()));
//   EncodeSinusoidal(spec, Positions::Integers(positions), {}, 1.0f,
//                    ExecutionOptions(), absl::MakeSpan(out));
#ifndef PHASOR_CORE_POSITIONAL_SINUSOIDAL_H_
#define PHASOR_CORE_POSITIONAL_SINUSOIDAL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/adapters/parallel.h"
#include "core/base/positions.h"

namespace phasor {

enum class SinusoidalLayout { kInterleaved, kSplitSinCos, kSplitCosSin };
enum class FrequencyScheme { kVaswani, kTensor2Tensor };

struct SinusoidalSpec {
  int64_t dim = 0;        // Output width; even and > 0.
  double base = 10000.0;  // Longest wavelength is about 2π·base positions.
  SinusoidalLayout layout = SinusoidalLayout::kInterleaved;
  FrequencyScheme frequencies = FrequencyScheme::kVaswani;
};

// Checks the spec; errors name `field_prefix`.dim / .base.
absl::Status ValidateSinusoidalSpec(
    const SinusoidalSpec& spec,
    absl::string_view field_prefix = "spec.positional.sinusoidal");

// Angular frequencies ω_k in radians per position, k = 0 .. dim/2 − 1.
// REQUIRES: ValidateSinusoidalSpec(spec).ok().
std::vector<double> SinusoidalFrequencies(const SinusoidalSpec& spec);

// Checks positions (finite when real) and the optional content: empty, or
// exactly positions.size()·dim values.
absl::Status ValidateSinusoidalInputs(const SinusoidalSpec& spec,
                                      const Positions& positions,
                                      absl::Span<const float> content,
                                      float content_scale);
absl::Status ValidateSinusoidalInputs(const SinusoidalSpec& spec,
                                      const Positions& positions,
                                      absl::Span<const double> content,
                                      double content_scale);

// Number of floats EncodeSinusoidal writes: positions·dim.
inline int64_t SinusoidalOutputSize(const SinusoidalSpec& spec,
                                    int64_t num_positions) {
  return num_positions * spec.dim;
}

// Writes [positions.size(), dim] row-major into `out`.
// REQUIRES: spec and inputs validated; out.size() == SinusoidalOutputSize().
void EncodeSinusoidal(const SinusoidalSpec& spec, const Positions& positions,
                      absl::Span<const float> content, float content_scale,
                      const ExecutionOptions& options, absl::Span<float> out);
// The same in double: every row evaluated exactly (no angle-addition
// steps), sin/cos within 1.7e-16 of exact for integer positions, content
// added in double.
void EncodeSinusoidal(const SinusoidalSpec& spec, const Positions& positions,
                      absl::Span<const double> content, double content_scale,
                      const ExecutionOptions& options, absl::Span<double> out);

}  // namespace phasor

#endif  // PHASOR_CORE_POSITIONAL_SINUSOIDAL_H_
