// -----------------------------------------------------------------------------
// File: core/rope/rope_scaling.h
// -----------------------------------------------------------------------------
//
// RoPE frequency scaling: the context-extension variants of rotary position
// embeddings, as inverse frequencies θ_i (radians per position) and an
// attention factor that multiplies cos/sin.
//
// Unscaled (Su et al., "RoFormer", 2021, eq. 15):
//   θ_i = base^(−2i/rd),  i = 0 .. rd/2 − 1,  rd = rotary dimension.
//
// Variants follow the semantics and defaults of HF transformers
// `src/transformers/modeling_rope_utils.py` (main, the `rope_parameters`
// era): `_compute_linear_scaling_rope_parameters`,
// `_compute_dynamic_ntk_parameters`, `_compute_yarn_parameters` (with its
// inner `get_mscale`, `find_correction_range` and `linear_ramp_factor`),
// `_compute_longrope_parameters` and `_compute_llama3_parameters`. Parameter
// names are HF's; HF's `config.max_position_embeddings`, where a variant
// needs it, is a field of that variant here.
//
//   linear    θ_i / factor                               (kaiokendev, 2023)
//   ntk       base' = base · factor^(rd/(rd−2))          ("NTK-aware", bloc97)
//             (vLLM's `ntk` rope type is a different formula and is not this.)
//   dynamic   base' = base · (factor·L/L0 − (factor−1))^(rd/(rd−2)),
//             L = max(seq_len, L0), L0 = max_position_embeddings (emozilla)
//   yarn      Peng et al., "YaRN", 2023 (arXiv 2309.00071): ramp between
//             θ_i/factor and θ_i over the correction range of dimensions;
//             attention factor 0.1·ln(factor) + 1 (or DeepSeek's mscale ratio)
//   longrope  θ_i / ext_i with ext = long_factor when seq_len > original
//             context, else short_factor; attention factor
//             sqrt(1 + ln f / ln L0)   (Ding et al., "LongRoPE", 2024; Phi-3)
//   llama3    Llama 3.1 wavelength bands: keep θ_i when 2π/θ_i < L0/high,
//             θ_i/factor when 2π/θ_i > L0/low, smooth blend in between.
//
// Every quantity is computed in double (HF computes in float32; the two agree
// to float32 rounding).
//
// What is accepted. HF main's `RotaryEmbeddingConfigMixin._validate_*_rope_parameters`
// raise only for a missing required key (`_check_received_keys`); every range
// rule (factor >= 1, beta_fast > beta_slow, high_freq_factor >
// low_freq_factor, list lengths, ...) is a `logger.warning`, after which the
// `_compute_*_parameters` functions compute anyway. Phasor accepts those
// configurations and computes what HF computes. It refuses, deliberately
// stricter than HF:
//   - NaN or infinite values (HF propagates them or raises deep in math.floor);
//   - factor, low/high_freq_factor and LongRoPE's per-pair factors <= 0 (HF
//     warns only about factor < 1; at 0 its θ or band edges are infinite or a
//     ZeroDivisionError, below 0 θ changes sign: no context ratio means that);
//   - attention_factor <= 0, given or derived from mscale (HF warns below 0 and
//     accepts 0, which zeroes every rotated value);
// and refuses what makes HF raise: a negative beta (math.log domain error), base
// 1 with yarn and rotary_dim 2 with dynamic/ntk (division by zero), a LongRoPE
// list that is neither rd/2 long nor length 1 (torch cannot broadcast it).
//
// "Absent" is std::optional: HF distinguishes a missing key from any value.
//
// Thread-safety: plain data and pure functions; concurrent calls are safe.
//
// Example:
//
//   YarnRopeScaling yarn;
//   yarn.factor = 4.0;
//   yarn.original_max_position_embeddings = 4096;
//   const RopeFrequencies f = ScaledRopeFrequencies(yarn, /*base=*/10000.0,
//                                                   /*rotary_dim=*/128, /*seq_len=*/16384);
#ifndef PHASOR_CORE_ROPE_ROPE_SCALING_H_
#define PHASOR_CORE_ROPE_ROPE_SCALING_H_

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace phasor {

// Plain RoPE: θ_i = base^(−2i/rd), attention factor 1.
struct NoRopeScaling {};

// Position interpolation: θ_i / factor. factor > 0; HF warns below 1 but
// computes θ_i / factor all the same.
struct LinearRopeScaling {
  double factor = 1.0;
};

// NTK-aware base change without the dynamic part: base·factor^(rd/(rd−2)).
// Needs rd > 2. factor > 0.
struct NtkRopeScaling {
  double factor = 1.0;
};

// HF "dynamic": NTK base change that grows with the sequence length; below
// max_position_embeddings it equals plain RoPE. Needs rd > 2.
struct DynamicNtkRopeScaling {
  double factor = 1.0;                  // > 0 (HF warns below 1).
  int64_t max_position_embeddings = 0;  // L0, tokens; > 0.
};

// YaRN. HF defaults: beta_fast 32, beta_slow 1, truncate true.
struct YarnRopeScaling {
  // Context extension ratio, > 0 (HF warns below 1). Absent:
  // max_position_embeddings / original_max_position_embeddings, whatever its
  // size (HF main; older HF always overrode it).
  std::optional<double> factor;
  // Pre-extension context length in tokens; the correction range is computed
  // from it. Absent: max_position_embeddings (HF's standardisation).
  std::optional<int64_t> original_max_position_embeddings;
  // The model's extended context length in tokens; only used to fill in the
  // two fields above when they are absent.
  std::optional<int64_t> max_position_embeddings;
  // Rotations per context marking the high- and low-frequency ends of the
  // ramp; >= 0, where 0 means the default (HF reads `get("beta_fast") or 32`).
  // Any order: HF only warns when beta_fast < beta_slow (the ramp then runs
  // downwards) and guards beta_fast == beta_slow with `high += 0.001`.
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  // DeepSeek-V2/V3: attention factor = get_mscale(f, mscale) /
  // get_mscale(f, mscale_all_dim) when both are present and non-zero, with
  // get_mscale(f, m) = 1 for f <= 1, else 0.1·m·ln f + 1. Any finite value
  // whose ratio is finite and > 0.
  std::optional<double> mscale;
  std::optional<double> mscale_all_dim;
  // Given explicitly (> 0), it wins over both formulas.
  std::optional<double> attention_factor;
  // floor/ceil the correction range to whole dimensions (HF default); false
  // keeps it fractional (gpt-oss).
  bool truncate = true;
};

// LongRoPE (Phi-3 "longrope", formerly "su"): per-pair rescale factors.
struct LongRopeScaling {
  // rd/2 values, each > 0; or a single value for every pair (HF warns about
  // the length and torch broadcasts a one-element list).
  std::vector<double> short_factor;
  std::vector<double> long_factor;
  // Pre-extension context length in tokens, > 0. Absent:
  // max_position_embeddings.
  std::optional<int64_t> original_max_position_embeddings;
  std::optional<int64_t> max_position_embeddings;
  // Used only for the default attention factor, > 0. Absent:
  // max_position_embeddings / original_max_position_embeddings.
  std::optional<double> factor;
  std::optional<double> attention_factor;  // > 0.
};

// Llama 3.1 ("llama3"). HF requires factor, low_freq_factor and
// high_freq_factor; Phasor requires factor (8 for Llama 3.1, 32 for Llama 3.2:
// there is no default) and defaults the band edges to Meta's reference values.
struct Llama3RopeScaling {
  std::optional<double> factor;   // Required; > 0 (HF warns below 1).
  double low_freq_factor = 1.0;   // > 0.
  // > 0. HF warns when it is not above low_freq_factor; the bands then
  // degenerate to a step at wavelength L0/low_freq_factor (see
  // ScaledRopeFrequencies).
  double high_freq_factor = 4.0;
  // L0 in tokens, > 0. Absent: max_position_embeddings when present (HF's
  // standardisation), else 8192 (Meta's reference value).
  std::optional<int64_t> original_max_position_embeddings;
  std::optional<int64_t> max_position_embeddings;
};

// Proportional RoPE (HF "proportional", Gemma 4's global-attention layers):
// the first k = floor(partial_rotary_factor·rd/2) pairs turn at
// θ_i = base^(−2i/rd)/factor, the remaining rd/2 − k pairs have θ_i = 0
// (cos 1, sin 0: they pass through). Unlike a partial rotary_dim, the
// exponent's denominator is the whole rotary width and the HALF pairs
// (i, i + rd/2) span it, so rd is the head dimension.
struct ProportionalRopeScaling {
  double factor = 1.0;                 // > 0; HF's default 1.
  double partial_rotary_factor = 1.0;  // In [0, 1]; HF's default 1.
};

using RopeScaling =
    std::variant<NoRopeScaling, LinearRopeScaling, NtkRopeScaling,
                 DynamicNtkRopeScaling, YarnRopeScaling, LongRopeScaling,
                 Llama3RopeScaling, ProportionalRopeScaling>;

// The scaling's name: HF's rope_type spelling ("default", "linear",
// "dynamic", "yarn", "longrope", "llama3", "proportional"), and "ntk",
// Phasor's static NTK (not an HF type). Also the field name under
// `<prefix>.scaling.` in error paths.
absl::string_view RopeScalingName(const RopeScaling& scaling);

// What every RoPE kernel consumes.
struct RopeFrequencies {
  std::vector<double> inv_freq;   // θ_i, radians per position, rd/2 values.
  double attention_factor = 1.0;  // Multiplies cos and sin (HF: attention_scaling).
};

// Checks `scaling` for a rotary dimension `rotary_dim` (even, >= 2) and
// `base` (finite, > 0; checked by the caller). Errors name
// `spec_field_prefix`.scaling.<type>.<field>, or `spec_field_prefix`.rotary_dim /
// .base when the variant restricts those. INVALID_ARGUMENT throughout.
absl::Status ValidateRopeScaling(const RopeScaling& scaling, double base,
                                 int64_t rotary_dim,
                                 absl::string_view spec_field_prefix);

// θ_i and the attention factor for `scaling`. `seq_len` (tokens, >= 1) is the
// current sequence length; only dynamic and longrope read it.
// REQUIRES: ValidateRopeScaling(scaling, base, rotary_dim, ...).ok(), seq_len >= 1.
RopeFrequencies ScaledRopeFrequencies(const RopeScaling& scaling, double base,
                                      int64_t rotary_dim, int64_t seq_len);

// The part of `seq_len` that ScaledRopeFrequencies reads: two lengths with
// the same bucket give the same θ_i and attention factor (for the same
// scaling, base and rotary dimension), so a cache of frequencies keys on the
// bucket, not the length. 0 for scalings that ignore the length; dynamic:
// L = max(seq_len, L0); longrope: 1 past the original context, else 0 (a
// longrope scaling that knows no context, which validation refuses, keeps
// seq_len).
int64_t RopeSeqLenBucket(const RopeScaling& scaling, int64_t seq_len);

}  // namespace phasor

#endif  // PHASOR_CORE_ROPE_ROPE_SCALING_H_
