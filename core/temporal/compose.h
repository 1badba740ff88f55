// -----------------------------------------------------------------------------
// File: core/temporal/compose.h
// -----------------------------------------------------------------------------
//
// The temporal encoder: a TemporalSpec of optional blocks applied to
// irregular observations, giving features [rows, F], a schema of what each
// column means, and the series state for the next chunk. The spec, its
// validation, its layout and its prepared encoders are
// core/temporal/compose_spec.h; this header encodes.
//
// Blocks, in output order (each optional; see the block's header for its
// formula and source):
//   content   the given embeddings · scale, or, without embeddings, the
//             values (0 where unobserved) then the observed mask (C + C)
//   time      time_sinusoid.h time sinusoid (dim)
//   time2vec  time2vec.h Time2Vec (k+1)
//   gaps      gaps.h Δt, δ, flags, mask, last value
//   calendar  calendar.h fields, UTC offset, DST, holidays.h kernel
// combine CONCAT lays them side by side. combine SUM adds them at width
// d_model (Transformer-style input = content + encodings): content must be
// d_model wide; time uses dim = d_model; time2vec needs d_model terms; gaps
// may only give the global Δt as a d_model sinusoid; calendar fields become
// Informer's fixed sinusoid tables (no fractional, offset, DST or holidays).
// A block dim of 0 means d_model under SUM.
//
// Chunks: EncodeObservations returns a SeriesState (observations.h); passing
// it back with the next chunk gives the same bytes as one call on the whole
// series, for any split. The FIRST_OBSERVATION origin travels in the state.
//
// Panels: EncodePanel encodes S series of the same channels in one call
// (observations.h PanelView), each with its own state in and out and,
// optionally, its own time zone. Each series' features are the bytes a call
// with that series alone gives.
//
// Determinism: rows of all series are split into contiguous chunks, one
// writer per row: ParallelFor's plan, each boundary moved to a series start
// when one is within a quarter chunk, so chunks mostly hold whole series. A
// chunk that begins inside a series first replays that series' earlier rows
// through the gaps memory (no features), then encodes; each series' state
// comes from the chunk holding its last row. Every row is a pure function of
// its inputs and the memory before it, so output bytes are identical for
// any thread count, chunking or grouping of series into panels.
//
// Early stop: EncodeObservations polls options.stop_requested
// (core/adapters/parallel.h) between blocks of about grain_elements outputs
// and, once it returns true, returns CANCELLED with the output unspecified.
//
// Memory: besides the output (features and states), a call holds per thread
// a tile of 64 rows, O(C) gaps memory and a calendar writer per time zone
// used, and per-request tables sized by the spec's widths; SUM calendar tables are built only while they hold no more
// values than the output (calendar.h). Nothing is allocated per series.
//
// Output types: every entry point writes float32 or float64. The blocks
// compute in double either way; float32 rounds each value once at the end.
// Float64 takes the exactly reduced sinusoid path (core/math/sincos.h
// SinusoidAccuracy::kFloat64): time and gap sinusoids and CYCLIC calendar
// columns within 1.7e-16 of exact for any int64 instant; Time2Vec, RAW/LOG1P
// gaps, LINEAR calendar columns, holiday kernels and content within a few
// ulp of their formulas (docs/TEMPORAL.md, "Precision"). A float64 result
// narrowed to float32 equals the float32 result except in sinusoid and
// CYCLIC columns, whose doubles differ by up to ~7e-16 between the paths:
// one float32 ulp where the exact value lies that close to a float32
// rounding boundary, and up to 7e-16 absolute for values within ~1e-8 of
// zero, where a float32 ulp is finer than that (12 of 981,000 values in
// tests/compose_test.cc).
//
// Thread-safety: all functions are reentrant; concurrent calls are safe.
//
// Example:
//
//   TemporalSpec spec;
//   spec.time = TimeBlock{};
//   spec.calendar = CalendarBlock{};
//   spec.calendar->fields = {CalendarField::kHourOfDay};
//   absl::StatusOr<FeatureLayout> layout = TemporalFeatureLayout(spec, obs.num_channels, 0);
//   std::vector<float> out(obs.num_rows() * layout->width);
//   SeriesState state;
//   absl::Status s = EncodeObservations(spec, obs, /*state_in=*/nullptr,
//                                       ExecutionOptions(), absl::MakeSpan(out), &state);
#ifndef PHASOR_CORE_TEMPORAL_COMPOSE_H_
#define PHASOR_CORE_TEMPORAL_COMPOSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/adapters/parallel.h"
#include "core/temporal/compose_spec.h"
#include "core/temporal/observations.h"

namespace phasor {

// Writes features [observations.num_rows(), F] row-major into `out` and, when
// `state_out` is non-null, the state after the last row (`state_out` may be
// `state_in`). `state_in` is null for a new series. Validates spec,
// observations and state first (INVALID_ARGUMENT with the field path);
// `out` must hold exactly rows·F values ("features" otherwise).
// T is float or double (compose.cc instantiates both; float64 computes with
// SinusoidAccuracy::kFloat64), as for every entry point below.
template <typename T>
absl::Status EncodeObservations(const TemporalSpec& spec,
                                const ObservationsView& observations,
                                const SeriesState* state_in,
                                const ExecutionOptions& options,
                                absl::Span<T> out, SeriesState* state_out);

// EncodeObservations for a caller that ran the validation steps itself (the
// server does, so that it can check its limits and the call's deadline
// between them): nothing is validated again. Returns OK, or CANCELLED when
// options.stop_requested stopped it.
// REQUIRES: ValidateTemporalSpec(spec), ValidateObservations(observations)
// and, with a state, ValidateSeriesState(*state_in, observations) are OK;
// `layout` is TemporalFeatureLayout(spec, C, content_dim) for these
// observations; out.size() == rows · layout.width.
template <typename T>
absl::Status EncodeValidatedObservations(const TemporalSpec& spec,
                                         const FeatureLayout& layout,
                                         const ObservationsView& observations,
                                         const SeriesState* state_in,
                                         const ExecutionOptions& options,
                                         absl::Span<T> out,
                                         SeriesState* state_out);

// Writes the features of every series of `panel`, stacked in row order,
// into `out` ([rows, F]) and, when `states_out` is non-empty (S entries,
// none of them one of `states_in`), each series' state after its last row.
// `states_in` is empty (all series new) or holds S entries, null for a new
// series. `zones` lists the time zones `panel.zone_index` points into; when
// it is empty every series uses the spec's calendar zone. Validates like
// EncodeObservations (ValidatePanel for the panel; errors name
// observations.series[s]...).
template <typename T>
absl::Status EncodePanel(const TemporalSpec& spec, const PanelView& panel,
                         absl::Span<const absl::TimeZone> zones,
                         absl::Span<const SeriesState* const> states_in,
                         const ExecutionOptions& options, absl::Span<T> out,
                         absl::Span<SeriesState> states_out);

// EncodePanel for a caller that validated everything itself (the server):
// spec, ValidatePanel(panel, states_in, zones.size()), layout and sizes.
// `encoders`, when given, are TemporalEncoders::Make(spec, C, accuracy) for
// this spec, the panel's channel count and the output type's accuracy; null:
// the call builds its own. Returns OK, or CANCELLED when
// options.stop_requested stopped it.
template <typename T>
absl::Status EncodeValidatedPanel(const TemporalSpec& spec,
                                  const FeatureLayout& layout,
                                  const PanelView& panel,
                                  absl::Span<const absl::TimeZone> zones,
                                  absl::Span<const SeriesState* const> states_in,
                                  const ExecutionOptions& options,
                                  absl::Span<T> out,
                                  absl::Span<SeriesState> states_out,
                                  const TemporalEncoders* encoders = nullptr);

}  // namespace phasor

#endif  // PHASOR_CORE_TEMPORAL_COMPOSE_H_
