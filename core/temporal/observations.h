// -----------------------------------------------------------------------------
// File: core/temporal/observations.h
// -----------------------------------------------------------------------------
//
// Observations: the irregular, timestamped, multichannel input of the
// temporal encoder (its views and readers: core/temporal/observations_view.h),
// their validation, panels of many series, and the plain-data state that lets
// a long series be encoded in chunks.
//
// Time is int64 nanoseconds since the Unix epoch (UTC). Differences of two
// timestamps are taken in 128-bit integers (a span from 1900 to 2200 is about
// 9.47e18 ns, past int64's 9.22e18), so no instant is rounded before a kernel
// forms its angle. INT64_MIN is numpy/pandas' NaT ("not a time") and is
// rejected as a missing timestamp.
//
// Two layouts:
//  - wide: timestamps [T], values [T, C] (NaN = not observed), optional mask
//    [T, C] (nonzero = observed; when present it is authoritative and
//    unobserved values are ignored, NaN or not). One output row per timestamp.
//  - long (SeFT, Horn et al. 2020; STraTS, Tipirneni & Reddy 2022): triplets
//    event_times [N], event_channels [N] in [0, C), event_values [N]. One output
//    row per event; row i observes channel event_channels[i] unless its value
//    is NaN. Channels may follow different schedules.
// Both may carry content [rows, content_dim] (token embeddings).
//
// Timestamps must be non-decreasing (ties allowed). Observed values must be
// finite.
//
// Ownership: views do not own their storage; the caller keeps it alive for the
// duration of a call. Thread-safety: all functions are pure.
//
// Example:
//
//   PHASOR_RETURN_IF_ERROR(ValidateObservations(obs, "observations"));
//   SeriesState state;  // A new series; EncodeObservations fills it.
#ifndef PHASOR_CORE_TEMPORAL_OBSERVATIONS_H_
#define PHASOR_CORE_TEMPORAL_OBSERVATIONS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/temporal/observations_view.h"

namespace phasor {

// What one channel has seen so far in a series.
struct ChannelState {
  bool seen = false;          // Observed at least once.
  int64_t last_seen_ns = 0;   // Time of its latest observation.
  double last_value = 0.0;    // Its value (the last row's, among equal times).
  // The latest observation strictly before SeriesState::last_timestamp_ns.
  // Read only when last_seen_ns == last_timestamp_ns: a next chunk may begin
  // at that same instant, and gaps use observations strictly earlier than the
  // row's time, so the chunk needs what came before the tie.
  bool seen_before_last = false;
  int64_t before_last_seen_ns = 0;
  double before_last_value = 0.0;
};

// The state of a series after some rows: plain data, so any replica can
// continue any series. Encoding rows [0, a) then [a, n) with the state passed
// between the calls gives the same bytes as encoding [0, n) at once.
struct SeriesState {
  bool has_rows = false;           // False for a series not yet started.
  int64_t first_timestamp_ns = 0;  // The FIRST_OBSERVATION origin.
  int64_t last_timestamp_ns = 0;   // Time of the last row encoded.
  std::vector<ChannelState> channels;  // [C]
};

// A panel: S series that share the layout, the channels and the content
// width, stacked row after row. Series s holds rows [series_offsets[s],
// series_offsets[s + 1]) of `rows` (wide: timestamps, values, mask and
// content rows; long: events and content rows). Times are non-decreasing
// within a series only. A single series is the panel {0, rows}.
struct PanelView {
  ObservationsView rows;                     // Every row of every series.
  absl::Span<const int64_t> series_offsets;  // [S + 1].
  // Per series, an index into the caller's list of time zones; empty when
  // every series uses the spec's zone.
  absl::Span<const int32_t> zone_index;

  int64_t num_series() const {
    return series_offsets.empty()
               ? 0
               : static_cast<int64_t>(series_offsets.size()) - 1;
  }
  // Series s on its own, its rows numbered from 0.
  // REQUIRES: ValidatePanel(...) passed its shape checks; 0 <= s < S.
  ObservationsView Series(int64_t s) const;
};

// Zone indices: none when num_zones is 0, else one per series, each in
// [0, num_zones). Errors name `prefix`.time_zone_index[s].
absl::Status ValidateZoneIndex(absl::Span<const int32_t> zone_index, int64_t num_series,
                               int64_t num_zones,
                               absl::string_view prefix = "observations");

// The panel's offsets ([S + 1], S >= 1, 0 first, non-decreasing, the row
// count last), its tensors' shapes, every series as ValidateObservations
// checks it, the zone indices (each in [0, num_zones); none when num_zones
// is 0) and the states: `states` is empty (every series new) or holds S
// entries, null for a new series, each checked by ValidateSeriesState.
// Errors name `prefix`.series_offsets[i], `prefix`.series[s].timestamps[i]
// (the index counts the series' own rows), `prefix`.time_zone_index[s] and
// `states_prefix`[s].channels[c]....
absl::Status ValidatePanel(const PanelView& panel,
                           absl::Span<const SeriesState* const> states,
                           int64_t num_zones,
                           absl::string_view prefix = "observations",
                           absl::string_view states_prefix = "states");

// Shapes, timestamps (no NaT, non-decreasing), channels, finite observed
// values, content size. Errors name `field_prefix`.timestamps[i] and so on,
// with the first offending index.
absl::Status ValidateObservations(const ObservationsView& observations,
                                  absl::string_view field_prefix = "observations");

// A state to continue from: one record per channel, times consistent, and the
// observations' first row not before state.last_timestamp_ns.
absl::Status ValidateSeriesState(
    const SeriesState& state, const ObservationsView& observations,
    absl::string_view state_prefix = "state",
    absl::string_view observations_prefix = "observations");

// Converts real-valued Unix seconds (e.g. float64 timestamps from a client) to
// int64 nanoseconds, rounding to the nearest nanosecond. NaN, ±Inf and values
// outside int64 nanoseconds (about years 1678–2262) are INVALID_ARGUMENT
// naming field[i]. Note float64 seconds near 2026 resolve only ~0.24 µs.
// REQUIRES: out_ns.size() == seconds.size().
absl::Status TimestampsFromSeconds(absl::Span<const double> seconds,
                                   absl::Span<int64_t> out_ns,
                                   absl::string_view field);

}  // namespace phasor

#endif  // PHASOR_CORE_TEMPORAL_OBSERVATIONS_H_
