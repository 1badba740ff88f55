// -----------------------------------------------------------------------------
// File: core/rope/rope_kernels.h
// -----------------------------------------------------------------------------
//
// RoPE's kernels behind the public API of core/rope/rope.h, which validates
// and then calls these. The layers (rope.h): one dtype switch → ParallelFor
// over tokens, one writer per token row → per token, one cos/sin row
// (core/rope/rope_trig.h) shared by every query and key head → the rotation
// of each head's rotary pairs in SIMD vectors (Highway, dispatched at run
// time; the 16-bit formats widened and narrowed in registers by
// core/rope/storage_codecs-inl.h).
//
// Thread-safety: pure functions; each writes only its output spans.
//
// Example (after rope.h's validation):
//
//   rope_internal::ApplyRopeRows(spec, plan, positions, options, query, &key);
#ifndef PHASOR_CORE_ROPE_ROPE_KERNELS_H_
#define PHASOR_CORE_ROPE_ROPE_KERNELS_H_

#include "absl/types/span.h"
#include "core/adapters/parallel.h"
#include "core/base/positions.h"
#include "core/rope/rope_spec.h"

namespace phasor::rope_internal {

// ApplyRope: rotates query (and key, if non-null) in one pass over tokens.
// REQUIRES: as ApplyRope (core/rope/rope.h).
void ApplyRopeRows(const RopeSpec& spec, const RopePlan& rope,
                   const Positions& positions, const ExecutionOptions& options,
                   const RopeOperand& query, const RopeOperand* key);

// ComputeRopeTables for T = float or double: the rows ApplyRope rotates
// with, bit for bit, as [tokens, rd/2] (double: every row exact).
// REQUIRES: as ComputeRopeTables (core/rope/rope.h).
template <typename T>
void RopeTableRows(const RopeSpec& spec, const RopePlan& rope,
                   const Positions& positions, const ExecutionOptions& options,
                   absl::Span<T> cos, absl::Span<T> sin);
extern template void RopeTableRows<float>(const RopeSpec&, const RopePlan&,
                                          const Positions&, const ExecutionOptions&,
                                          absl::Span<float>, absl::Span<float>);
extern template void RopeTableRows<double>(const RopeSpec&, const RopePlan&,
                                           const Positions&, const ExecutionOptions&,
                                           absl::Span<double>, absl::Span<double>);

}  // namespace phasor::rope_internal

#endif  // PHASOR_CORE_ROPE_ROPE_KERNELS_H_
