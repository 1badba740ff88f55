// -----------------------------------------------------------------------------
// File: core/rope/rope_trig.h
// -----------------------------------------------------------------------------
//
// RoPE's per-request cos/sin rows, the second of the kernel layers rope.h
// lists: for token t, cos(p_t·θ_i) and sin(p_t·θ_i) of every rotary pair i,
// computed once per token and shared by all its query and key heads.
//
// Layer 1, the scalar formula, is core/math/exact_angle.h CosSinRow: one
// position's row in double, exact for every int64 position. A row from its
// position alone is PositionTrig. When integer positions run in arithmetic
// progression (a prefill, a range) the rows are instead stepped by angle
// addition (core/math/angle_ladder.h), re-anchored exactly every
// kLadderAnchorRows tokens; RoPE's steps fuse the first product where the
// target has FMA (AngleStepRounding::kFirstProductFused). float64 tables and
// operands, real positions and M-RoPE take no step: every row exact.
//
// M-RoPE (Qwen2-VL, Qwen3-VL) assigns pairs to position axes (temporal,
// height, width); MropeRuns lists the runs of pairs that share an axis, and
// a row takes each run's angles from that axis' position.
//
// Units: positions are token indices (int64) or real positions (double);
// angles in radians.
//
// Thread-safety: a TrigPlan is immutable once made and may be read by any
// number of threads; it does not own the positions or the angles.
//
// Example:
//
//   const TrigPlan trig = MakeTrigPlan(plan, /*scale=*/1.0, positions,
//                                      MropeRuns(spec, half), /*axes=*/1,
//                                      /*exact_rows=*/false);
//   PositionTrig(trig, /*t=*/0, cos_row, sin_row);
#ifndef PHASOR_CORE_ROPE_ROPE_TRIG_H_
#define PHASOR_CORE_ROPE_ROPE_TRIG_H_

#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "core/base/positions.h"
#include "core/math/angle_ladder.h"
#include "core/math/exact_angle.h"
#include "core/rope/rope_spec.h"

namespace phasor::rope_internal {

// M-RoPE: pairs [begin, begin + count) take their angles from position
// axis `axis` (0 temporal, 1 height, 2 width).
struct AxisRun {
  int64_t begin;
  int64_t count;
  int64_t axis;
};
using AxisRuns = absl::InlinedVector<AxisRun, 3>;

// The runs of equal axis over the rd/2 pairs (RopeSpec.mrope_section); one
// run of axis 0 without M-RoPE.
// Consecutive sections (Qwen2-VL; HF's apply_multimodal_rotary_pos_emb
// splits cos/sin by mrope_section·2, chunk k from axis k % 3), or
// interleaved (Qwen3-VL; HF's apply_interleaved_mrope: pair i from axis 1
// when i % 3 == 1 and i < 3·s_1, axis 2 when i % 3 == 2 and i < 3·s_2,
// else axis 0).
AxisRuns MropeRuns(const RopeSpec& spec, int64_t half);

// The rows of one call, built once per call.
struct TrigPlan {
  const ExactAngle* angles = nullptr;  // Per θ_i (a RopePlan's).
  int64_t half = 0;
  double scale = 1.0;  // Attention factor when folded, else 1.
  Positions positions = Positions::Integers({});
  int64_t num_tokens = 0;  // Rows; positions hold one row per axis.
  AxisRuns runs;       // Pairs by position axis (MropeRuns).
  int64_t step = 0;    // δ, or 0: every row exact (real or irregular positions).
  std::vector<double> step_cos;  // cos(δ·θ_i), sin(δ·θ_i).
  std::vector<double> step_sin;
};

// `exact_rows` turns the angle-addition ladder off (double outputs: its
// ~1e-9 drift would be their largest error); M-RoPE rows are always exact.
// `axes` is RopePositionAxes(spec): with M-RoPE, positions hold 3 rows even
// when every pair takes axis 0.
TrigPlan MakeTrigPlan(const RopePlan& rope, double scale, const Positions& positions,
                      AxisRuns runs, int64_t axes, bool exact_rows);

// The plan's angle-addition ladder (step 0: every row exact). Points into
// `plan`, which must outlive it.
inline AngleLadder LadderOf(const TrigPlan& plan) {
  return AngleLadder{plan.step != 0 ? plan.positions.integers() : absl::Span<const int64_t>(),
                     plan.step, plan.step_cos.data(), plan.step_sin.data(), plan.half};
}

// Row t's cos and sin in double, from its position alone.
void PositionTrig(const TrigPlan& plan, int64_t t, double* cos_row, double* sin_row);

}  // namespace phasor::rope_internal

#endif  // PHASOR_CORE_ROPE_ROPE_TRIG_H_
