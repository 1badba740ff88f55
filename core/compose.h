// The temporal encoder: a TemporalSpec of optional blocks applied to
// irregular observations, giving features [rows, F], a schema of what each
// column means, and the series state for the next chunk.
//
// Blocks, in output order (each optional; see the block's header for its
// formula and source):
//   content   the given embeddings · scale, or, without embeddings, the
//             values (0 where unobserved) then the observed mask (C + C)
//   time      continuous_time.h time sinusoid (dim)
//   time2vec  continuous_time.h Time2Vec (k+1)
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
// (core/parallel.h) between blocks of about grain_elements outputs and, once
// it returns true, returns CANCELLED with the output unspecified.
//
// Memory: besides the output (features and states), a call holds per thread
// a tile of 64 rows, O(C) gaps memory and a calendar writer per time zone
// used, and per-request tables sized by the spec's widths; SUM calendar tables are built only while they hold no more
// values than the output (calendar.h). Nothing is allocated per series.
//
// Output types: every entry point writes float32 or float64. The blocks
// compute in double either way; float32 rounds each value once at the end.
// Float64 takes the exactly reduced sinusoid path (continuous_time.h
// SinusoidAccuracy::kFloat64): time and gap sinusoids and CYCLIC calendar
// columns within 1.7e-16 of exact for any int64 instant; Time2Vec, RAW/LOG1P
// gaps, LINEAR calendar columns, holiday kernels and content within a few
// ulp of their formulas (docs/TEMPORAL.md, "Precision"). A float64 result
// narrowed to float32 equals the float32 result except in sinusoid and
// CYCLIC columns, whose doubles differ by up to ~7e-16 between the paths:
// one float32 ulp where the exact value lies that close to a float32
// rounding boundary, and up to 7e-16 absolute for values within ~1e-8 of
// zero, where a float32 ulp is finer than that (12 of 981,000 values in
// tests/temporal_f64_test.cc).
//
// Thread-safety: all functions are reentrant; concurrent calls are safe.
#ifndef PHASOR_CORE_COMPOSE_H_
#define PHASOR_CORE_COMPOSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/calendar.h"
#include "core/continuous_time.h"
#include "core/gaps.h"
#include "core/holidays.h"
#include "core/observations.h"
#include "core/parallel.h"

namespace phasor {

enum class CombineMode { kConcat, kSum };

struct ContentBlock {
  // Multiplies content embeddings (e.g. sqrt(d_model) as in Vaswani et al.
  // §3.4); values + mask are not scaled.
  double scale = 1.0;
};

struct TemporalSpec {
  std::optional<ContentBlock> content;
  std::optional<TimeBlock> time;
  std::optional<Time2VecBlock> time2vec;
  std::optional<GapsBlock> gaps;
  std::optional<CalendarBlock> calendar;
  CombineMode combine = CombineMode::kConcat;
  int64_t d_model = 0;  // SUM only: the common width; even, > 0.
};

// One contiguous run of output columns.
struct SchemaEntry {
  std::string block;    // "time", "gaps.delta", "calendar.hour_of_day", ...
  int64_t offset = 0;   // First column.
  int64_t width = 0;    // Number of columns.
  std::string meaning;  // Formula, order and unit of the columns.
  // The columns run over the C channels in order (values, mask, per-channel
  // gaps), so a caller may append its channel names to the meaning.
  bool per_channel = false;
  // The meaning names the spec's calendar time zone (UTC offset, DST).
  bool names_zone = false;
};

struct FeatureLayout {
  int64_t width = 0;  // F, columns per row.
  std::vector<SchemaEntry> schema;
};

// Every block's parameters and the SUM constraints, including that the time
// zone loads. Errors name `field_prefix`.<block>.<field>.
absl::Status ValidateTemporalSpec(
    const TemporalSpec& spec, absl::string_view field_prefix = "spec.temporal");

// F and the schema for C channels and content_dim-wide embeddings (0 when
// absent). Errors (content missing or the wrong width under SUM) name
// `observations_prefix`.content.
// REQUIRES: ValidateTemporalSpec(spec).ok().
absl::StatusOr<FeatureLayout> TemporalFeatureLayout(
    const TemporalSpec& spec, int64_t num_channels, int64_t content_dim,
    absl::string_view observations_prefix = "observations");

// Writes features [observations.num_rows(), F] row-major into `out` and, when
// `state_out` is non-null, the state after the last row (`state_out` may be
// `state_in`). `state_in` is null for a new series. Validates spec,
// observations and state first (INVALID_ARGUMENT with the field path);
// `out` must hold exactly rows·F values ("features" otherwise).
absl::Status EncodeObservations(const TemporalSpec& spec,
                                const ObservationsView& observations,
                                const SeriesState* state_in,
                                const ExecutionOptions& options,
                                absl::Span<float> out, SeriesState* state_out);
absl::Status EncodeObservations(const TemporalSpec& spec,
                                const ObservationsView& observations,
                                const SeriesState* state_in,
                                const ExecutionOptions& options,
                                absl::Span<double> out, SeriesState* state_out);

// EncodeObservations for a caller that ran the validation steps itself (the
// server does, so that it can check its limits and the call's deadline
// between them): nothing is validated again. Returns OK, or CANCELLED when
// options.stop_requested stopped it.
// REQUIRES: ValidateTemporalSpec(spec), ValidateObservations(observations)
// and, with a state, ValidateSeriesState(*state_in, observations) are OK;
// `layout` is TemporalFeatureLayout(spec, C, content_dim) for these
// observations; out.size() == rows · layout.width.
absl::Status EncodeValidatedObservations(const TemporalSpec& spec,
                                         const FeatureLayout& layout,
                                         const ObservationsView& observations,
                                         const SeriesState* state_in,
                                         const ExecutionOptions& options,
                                         absl::Span<float> out,
                                         SeriesState* state_out);
absl::Status EncodeValidatedObservations(const TemporalSpec& spec,
                                         const FeatureLayout& layout,
                                         const ObservationsView& observations,
                                         const SeriesState* state_in,
                                         const ExecutionOptions& options,
                                         absl::Span<double> out,
                                         SeriesState* state_out);

// Writes the features of every series of `panel`, stacked in row order,
// into `out` ([rows, F]) and, when `states_out` is non-empty (S entries,
// none of them one of `states_in`), each series' state after its last row.
// `states_in` is empty (all series new) or holds S entries, null for a new
// series. `zones` lists the time zones `panel.zone_index` points into; when
// it is empty every series uses the spec's calendar zone. Validates like
// EncodeObservations (ValidatePanel for the panel; errors name
// observations.series[s]...).
absl::Status EncodePanel(const TemporalSpec& spec, const PanelView& panel,
                         absl::Span<const absl::TimeZone> zones,
                         absl::Span<const SeriesState* const> states_in,
                         const ExecutionOptions& options, absl::Span<float> out,
                         absl::Span<SeriesState> states_out);
absl::Status EncodePanel(const TemporalSpec& spec, const PanelView& panel,
                         absl::Span<const absl::TimeZone> zones,
                         absl::Span<const SeriesState* const> states_in,
                         const ExecutionOptions& options, absl::Span<double> out,
                         absl::Span<SeriesState> states_out);

// The blocks' encoders of one spec for C channels and one output precision:
// the time ladder's exact phase steps, Time2Vec's parameters, the gaps
// block, and the calendar of the spec's own zone with its holiday sets. A
// call builds them before its first row; a caller that encodes with the same
// spec again and again (the server, for every request repeating a spec)
// builds them once and passes them in. Immutable once built, so any number
// of calls and threads may share one. A SUM calendar is left out (its tables
// are sized by each call's rows) and is then built per call, as are the
// calendars of a panel's per-series zones.
class TemporalEncoders final {
 public:
  // REQUIRES: ValidateTemporalSpec(spec).ok(). `accuracy` is kFloat64 for
  // float64 outputs, kFloat32 for the others. `with_calendar` false leaves
  // the calendar out (for a call with per-series zones, which builds its
  // own). Fails only when the spec's time zone does not load
  // (INVALID_ARGUMENT naming the field).
  static absl::StatusOr<TemporalEncoders> Make(const TemporalSpec& spec,
                                               int64_t num_channels,
                                               SinusoidAccuracy accuracy,
                                               bool with_calendar = true);

  int64_t num_channels() const { return num_channels_; }
  SinusoidAccuracy accuracy() const { return accuracy_; }
  // Each block's encoder; null for a block the spec does not have (and for
  // a SUM calendar).
  const TimeSinusoid* time() const { return time_ ? &*time_ : nullptr; }
  const Time2Vec* time2vec() const { return time2vec_ ? &*time2vec_ : nullptr; }
  const GapsEncoder* gaps() const { return gaps_ ? &*gaps_ : nullptr; }
  const CalendarEncoder* calendar() const { return calendar_ ? &*calendar_ : nullptr; }
  // About the memory the encoders hold, for a cache's charge.
  size_t approximate_bytes() const { return approximate_bytes_; }

 private:
  TemporalEncoders(int64_t num_channels, SinusoidAccuracy accuracy)
      : num_channels_(num_channels), accuracy_(accuracy) {}

  int64_t num_channels_;
  SinusoidAccuracy accuracy_;
  std::optional<TimeSinusoid> time_;
  std::optional<Time2Vec> time2vec_;
  std::optional<GapsEncoder> gaps_;
  std::optional<CalendarEncoder> calendar_;  // CONCAT, the spec's zone.
  size_t approximate_bytes_ = 0;
};

// EncodePanel for a caller that validated everything itself (the server):
// spec, ValidatePanel(panel, states_in, zones.size()), layout and sizes.
// `encoders`, when given, are TemporalEncoders::Make(spec, C, accuracy) for
// this spec, the panel's channel count and the output type's accuracy; null:
// the call builds its own. Returns OK, or CANCELLED when
// options.stop_requested stopped it.
absl::Status EncodeValidatedPanel(const TemporalSpec& spec,
                                  const FeatureLayout& layout,
                                  const PanelView& panel,
                                  absl::Span<const absl::TimeZone> zones,
                                  absl::Span<const SeriesState* const> states_in,
                                  const ExecutionOptions& options,
                                  absl::Span<float> out,
                                  absl::Span<SeriesState> states_out,
                                  const TemporalEncoders* encoders = nullptr);
absl::Status EncodeValidatedPanel(const TemporalSpec& spec,
                                  const FeatureLayout& layout,
                                  const PanelView& panel,
                                  absl::Span<const absl::TimeZone> zones,
                                  absl::Span<const SeriesState* const> states_in,
                                  const ExecutionOptions& options,
                                  absl::Span<double> out,
                                  absl::Span<SeriesState> states_out,
                                  const TemporalEncoders* encoders = nullptr);

}  // namespace phasor

#endif  // PHASOR_CORE_COMPOSE_H_
