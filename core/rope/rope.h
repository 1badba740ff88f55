// -----------------------------------------------------------------------------
// File: core/rope/rope.h
// -----------------------------------------------------------------------------
//
// Rotary position embeddings (RoPE; Su et al., "RoFormer: Enhanced
// Transformer with Rotary Position Embedding", 2021), applied to query/key
// tensors or tabulated as cos/sin for clients with their own kernels.
//
// For a token at position p, pair i of the first rd channels of every head is
// rotated by the angle p·θ_i (θ_i from core/rope/rope_scaling.h), with
// c_i = cos(p·θ_i)·a and s_i = sin(p·θ_i)·a, a = attention factor when folded
// (HF multiplies cos/sin by `attention_scaling`), else 1:
//   HALF (GPT-NeoX, LLaMA in HF transformers, `rotate_half`): pairs (i, i+rd/2)
//     out[i]      = x[i]·c_i − x[i+rd/2]·s_i
//     out[i+rd/2] = x[i+rd/2]·c_i + x[i]·s_i
//   INTERLEAVED (GPT-J, Meta's LLaMA reference, complex multiply): pairs (2i, 2i+1)
//     out[2i]     = x[2i]·c_i − x[2i+1]·s_i
//     out[2i+1]   = x[2i+1]·c_i + x[2i]·s_i
// Channels rd .. D−1 pass through unchanged. With a = 1, q_m·k_n depends on
// m − n only (RoFormer §3.4.2).
//
// Units: positions are token indices (int64) or real-valued positions
// (double; continuous-time RoPE), angles in radians.
//
// Accuracy: each θ_i is the correctly rounded double of its formula
// (core/math/frequency_ladder.h). For an int64 position p, p·θ_i is reduced modulo
// 2π exactly, for every int64 (core/math/exact_angle.h), and cos/sin are formed in
// double within 1.7e-16 of exact, then rounded once to float; the rotation
// runs in float32 (fp16/bf16 are widened first and narrowed once at the end).
// Runs of evenly spaced integer positions are tabulated by angle addition in
// double, re-anchored exactly every 256 rows (core/math/angle_ladder.h gives
// the bound, ~1e-9).
// Float32 tables at any int64 position are within 3e-8 of a __float128
// reference (tests/rope_test.cc). A real (double) position is split exactly
// into integer and fraction (ExactAngle::CosSinReal): within θ_i·2^-52 +
// 1.7e-16 of exact for |p| < 2^63 (docs/API.md, "Precision"). Float32 angle
// arithmetic would be off by up to 0.89 at p = 2^24 + 1. Float64 operands
// and tables skip the angle-addition runs (every row exact) and rotate in
// double (tests/rope_test.cc: within 4 ulp of the larger input of each
// pair).
//
// Layers (rope_kernels.h): one dtype switch → ParallelFor over tokens (one
// writer per token row, so any thread count gives identical bytes) → per token, cos/sin
// computed once and reused for every query and key head → an inner rotate
// loop in SIMD vectors (Highway, dispatched at run time to the widest unit
// the CPU has; float16/bfloat16 are widened and narrowed in registers).
//
// Thread-safety: pure functions; concurrent calls are safe. Spans are not
// owned; the caller keeps them alive for the call.
//
// Example:
//
//   RopeSpec spec;  // rotate_half, base 10000, no scaling.
//   const absl::StatusOr<RopeFrequencies> frequencies =
//       ComputeRopeFrequencies(spec, /*head_dim=*/128, /*seq_len=*/4096);
//   const RopePlan plan = MakeRopePlan(*frequencies);
//   ApplyRope(spec, plan, Positions::Integers(positions), ExecutionOptions(), query,
//             &key);
#ifndef PHASOR_CORE_ROPE_ROPE_H_
#define PHASOR_CORE_ROPE_ROPE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>


#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/adapters/dtype.h"
#include "core/adapters/parallel.h"
#include "core/base/positions.h"
#include "core/rope/rope_scaling.h"
#include "core/rope/rope_spec.h"

namespace phasor {

// Checks the spec for heads of `head_dim` channels. A caller with no head
// tensor (RopeTables) passes head_dim = spec.rotary_dim. Errors are
// INVALID_ARGUMENT naming `field_prefix`.rotary_dim, .base or
// .scaling.<type>.<field>.
absl::Status ValidateRopeSpec(const RopeSpec& spec, int64_t head_dim,
                              absl::string_view field_prefix = "spec.rope");

// The sequence length dynamic and longrope scaling see when the request does
// not give one: max over positions of floor(p) + 1, at least 1 (HF's
// dynamic_rope_update uses max(position_ids) + 1).
// REQUIRES: real positions are finite.
int64_t DefaultRopeSeqLen(const Positions& positions);

// Validates `spec` (as ValidateRopeSpec) and `seq_len` (>= 1; field
// "seq_len"), then returns θ_i (rd/2 values) and the attention factor.
absl::StatusOr<RopeFrequencies> ComputeRopeFrequencies(
    const RopeSpec& spec, int64_t head_dim, int64_t seq_len,
    absl::string_view field_prefix = "spec.rope");

// The plan of these frequencies (RopePlan, core/rope/rope_spec.h).
RopePlan MakeRopePlan(RopeFrequencies frequencies);

// Checks that real positions are finite and that |p|·max θ is finite (so
// every angle is a number). Errors name `field` (e.g. "positions[3]").
absl::Status ValidateRopePositions(const Positions& positions,
                                   const RopeFrequencies& frequencies,
                                   absl::string_view field = "positions");

// Writes cos(p·θ_i)·a and sin(p·θ_i)·a as [positions.size(), rd/2] row-major
// float32 (a = attention factor if `fold_attention_factor`, else 1).
// REQUIRES: ValidateRopePositions(positions, frequencies).ok();
//           cos.size() == sin.size() == positions.size() · inv_freq.size().
void ComputeRopeTables(const RopeFrequencies& frequencies,
                       bool fold_attention_factor, const Positions& positions,
                       const ExecutionOptions& options, absl::Span<float> cos,
                       absl::Span<float> sin);
// The same for `spec` (its fold_attention_factor and M-RoPE sections;
// positions hold RopePositionAxes(spec) rows of N), as [N, rd/2]. The double
// overload evaluates every row exactly: within 1.7e-16 of exact before the
// attention factor.
void ComputeRopeTables(const RopeSpec& spec, const RopeFrequencies& frequencies,
                       const Positions& positions, const ExecutionOptions& options,
                       absl::Span<float> cos, absl::Span<float> sin);
void ComputeRopeTables(const RopeSpec& spec, const RopeFrequencies& frequencies,
                       const Positions& positions, const ExecutionOptions& options,
                       absl::Span<double> cos, absl::Span<double> sin);
// The same from a plan (MakeRopePlan).
void ComputeRopeTables(const RopeSpec& spec, const RopePlan& plan,
                       const Positions& positions, const ExecutionOptions& options,
                       absl::Span<float> cos, absl::Span<float> sin);
void ComputeRopeTables(const RopeSpec& spec, const RopePlan& plan,
                       const Positions& positions, const ExecutionOptions& options,
                       absl::Span<double> cos, absl::Span<double> sin);

// Bytes an operand of this shape occupies; -1 if an extent is negative or
// the product overflows int64.
int64_t RopeOperandBytes(DType dtype, int64_t num_tokens, int64_t num_heads,
                         int64_t head_dim);

// Checks dtypes (float32/float16/bfloat16/float64, key's equal to query's),
// shapes (key: same tokens, seq_len and head_dim as query; tokens ==
// num_positions, the positions per axis) and byte
// counts. Errors are INVALID_ARGUMENT naming "query.dtype", "query.shape",
// "query.data", "key...." or "positions". `key` may be null.
absl::Status ValidateRopeOperands(const RopeOperand& query,
                                  const RopeOperand* key,
                                  int64_t num_positions);

// Rotates query (and key, if non-null) in one pass over tokens.
// REQUIRES: ValidateRopeSpec(spec, query.head_dim).ok(); `frequencies` from
//           ComputeRopeFrequencies(spec, query.head_dim, ...);
//           ValidateRopePositions(positions, frequencies).ok();
//           ValidateRopeOperands(query, key,
//               positions.size() / RopePositionAxes(spec)).ok();
//           out.size() == in.size() for each operand.
void ApplyRope(const RopeSpec& spec, const RopeFrequencies& frequencies,
               const Positions& positions, const ExecutionOptions& options,
               const RopeOperand& query, const RopeOperand* key);
// The same from a plan of those frequencies (no per-call setup beyond the
// positions' angle-addition steps; a single token allocates nothing when
// rd <= 512).
void ApplyRope(const RopeSpec& spec, const RopePlan& plan,
               const Positions& positions, const ExecutionOptions& options,
               const RopeOperand& query, const RopeOperand* key);

}  // namespace phasor

#endif  // PHASOR_CORE_ROPE_ROPE_H_
