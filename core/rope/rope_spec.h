// -----------------------------------------------------------------------------
// File: core/rope/rope_spec.h
// -----------------------------------------------------------------------------
//
// RoPE's types: the spec (rotary width, base, pair layout, scaling, M-RoPE
// sections), the plan of one set of frequencies, and an operand tensor. The
// functions over them are core/rope/rope.h; the kernels
// (core/rope/rope_kernels.h, core/rope/rope_trig.h) see these types only.
//
// Units: positions are token indices (or real positions); θ in radians per
// position; operand extents in elements, data in bytes.
//
// Thread-safety: plain data; a RopePlan is immutable once made and may serve
// any number of calls on any threads.
//
// Example:
//
//   RopeSpec spec;
//   spec.rotary_dim = 64;              // Partial rotary: 64 of 128 channels.
//   spec.layout = RopeLayout::kInterleaved;
//   const int64_t pairs = RopeTableWidth(spec, /*head_dim=*/128);  // 32
#ifndef PHASOR_CORE_ROPE_ROPE_SPEC_H_
#define PHASOR_CORE_ROPE_ROPE_SPEC_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "core/adapters/dtype.h"
#include "core/math/exact_angle.h"
#include "core/rope/rope_scaling.h"

namespace phasor {

enum class RopeLayout {
  kHalf,         // NeoX / LLaMA-HF rotate_half: pairs (i, i + rd/2).
  kInterleaved,  // GPT-J / Meta: pairs (2i, 2i + 1).
};

struct RopeSpec {
  // Channels rotated per head; 0 means head_dim. Even and <= head_dim
  // (partial rotary, e.g. GPT-NeoX's rotary_pct, uses rd < head_dim).
  int64_t rotary_dim = 0;
  // Frequency base (HF rope_theta); the slowest pair's wavelength is about
  // 2π·base positions.
  double base = 10000.0;
  RopeLayout layout = RopeLayout::kHalf;
  RopeScaling scaling = NoRopeScaling{};
  // Multiply cos/sin by the attention factor (as HF does). false leaves the
  // factor to the caller (it is still returned).
  bool fold_attention_factor = true;
  // M-RoPE (Qwen2-VL): empty, or the sizes [temporal, height, width] of the
  // pair sections, summing to rd/2; pair i of section k turns by p_k·θ_i.
  // Positions then hold 3 rows of N: axis k of token n at k·N + n.
  std::vector<int64_t> mrope_section;
  // Qwen3-VL's interleaved assignment of pairs to axes (rope_trig.h, MropeRuns).
  bool mrope_interleaved = false;
};

// Position rows per token: 3 with M-RoPE, else 1.
inline int64_t RopePositionAxes(const RopeSpec& spec) {
  return spec.mrope_section.empty() ? 1 : 3;
}

// rd for a head of `head_dim` channels: spec.rotary_dim, or head_dim if 0.
inline int64_t RopeRotaryDim(const RopeSpec& spec, int64_t head_dim) {
  return spec.rotary_dim == 0 ? head_dim : spec.rotary_dim;
}

// Number of cos (and of sin) values per position: rd/2.
inline int64_t RopeTableWidth(const RopeSpec& spec, int64_t head_dim) {
  return RopeRotaryDim(spec, head_dim) / 2;
}

// θ_i and the attention factor with each θ_i's exact-reduction constants
// (core/math/exact_angle.h): what every call with these frequencies derives
// from them, built once (MakeRopePlan, core/rope/rope.h). Immutable, so one plan may serve any number of
// calls on any threads.
struct RopePlan {
  RopeFrequencies frequencies;
  std::vector<ExactAngle> angles;  // One per θ_i.
};

// One operand of ApplyRope: a row-major [num_tokens, num_heads, head_dim]
// tensor of `dtype` (float32, float16, bfloat16 or float64) stored
// little-endian in `in`; the rotated tensor goes to `out`, in the same
// dtype. out.data() == in.data() rotates in place; otherwise the two must
// not overlap. [B, T, H, D] is [B·T, H, D]; [B, H, T, D] sets seq_len = T
// (num_tokens = B·T, token b·T + t). float64 rotates in double with double
// cos/sin, every row exact: a rotated pair within a few ulp of the larger
// of its inputs.
struct RopeOperand {
  DType dtype = DType::kFloat32;
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  int64_t head_dim = 0;
  // T of a [B, H, T, D] tensor; 0 for token-major [tokens, H, D].
  int64_t seq_len = 0;
  absl::Span<const uint8_t> in;
  absl::Span<uint8_t> out;
};

}  // namespace phasor

#endif  // PHASOR_CORE_ROPE_ROPE_SPEC_H_
