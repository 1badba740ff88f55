// -----------------------------------------------------------------------------
// File: core/temporal/compose_spec.h
// -----------------------------------------------------------------------------
//
// The temporal encoder's spec (core/temporal/compose.h encodes with it): which
// blocks, how they combine (CONCAT side by side, or SUM at width d_model), its
// validation with field paths, the feature layout and schema it gives for C
// channels, and the blocks' encoders prepared once (TemporalEncoders).
//
// Thread-safety: the functions are pure; TemporalEncoders is immutable once
// made and may be shared by any number of calls and threads.
//
// Example:
//
//   TemporalSpec spec;
//   spec.time = TimeBlock{};
//   PHASOR_RETURN_IF_ERROR(ValidateTemporalSpec(spec));
//   PHASOR_ASSIGN_OR_RETURN(const FeatureLayout layout,
//                           TemporalFeatureLayout(spec, /*num_channels=*/2,
//                                                 /*content_dim=*/0));
#ifndef PHASOR_CORE_TEMPORAL_COMPOSE_SPEC_H_
#define PHASOR_CORE_TEMPORAL_COMPOSE_SPEC_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/math/sincos.h"
#include "core/temporal/calendar.h"
#include "core/temporal/gaps.h"
#include "core/temporal/holidays.h"
#include "core/temporal/time2vec.h"
#include "core/temporal/time_sinusoid.h"

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

namespace compose_internal {

// The two blocks SUM's "dim 0 = d_model" changes, resolved; every other
// block is read from the spec itself. Both are small plain structs, so this
// copies no heap data (a whole TemporalSpec would copy Time2Vec's
// parameters and the holiday dates on every call).
struct ResolvedBlocks {
  std::optional<TimeBlock> time;
  std::optional<GapsBlock> gaps;
};

inline ResolvedBlocks Resolve(const TemporalSpec& spec) {
  ResolvedBlocks out{spec.time, spec.gaps};
  if (spec.combine != CombineMode::kSum) return out;
  if (out.time.has_value() && out.time->dim == 0) out.time->dim = spec.d_model;
  if (out.gaps.has_value() && out.gaps->sinusoidal_dim == 0) {
    out.gaps->sinusoidal_dim = spec.d_model;
  }
  return out;
}

}  // namespace compose_internal
}  // namespace phasor

#endif  // PHASOR_CORE_TEMPORAL_COMPOSE_SPEC_H_
