// Observations: the irregular, timestamped, multichannel input of the
// temporal encoder, and the plain-data state that lets a long series be
// encoded in chunks.
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
#ifndef PHASOR_CORE_OBSERVATIONS_H_
#define PHASOR_CORE_OBSERVATIONS_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace phasor {

// numpy.datetime64("NaT") / pandas.NaT as int64.
inline constexpr int64_t kNotATimeNs = std::numeric_limits<int64_t>::min();

// Channels accepted per series: the state and the per-channel columns are
// sized by C even when a chunk has no rows, so C is bounded on its own.
inline constexpr int64_t kMaxChannels = int64_t{1} << 20;

enum class ObservationLayout { kWide, kLong };

// float64 or float32 values: at most one of the two spans is non-empty.
struct ValuesView {
  absl::Span<const double> f64;
  absl::Span<const float> f32;

  int64_t size() const {
    return f64.empty() ? static_cast<int64_t>(f32.size())
                       : static_cast<int64_t>(f64.size());
  }
  // REQUIRES: 0 <= i < size().
  double at(int64_t i) const {
    return f64.empty() ? static_cast<double>(f32[i]) : f64[i];
  }
};

struct ObservationsView {
  ObservationLayout layout = ObservationLayout::kWide;
  // C: channels per row (wide: values is [T, C]; long: channels are in
  // [0, C)). Wide series may have C = 0 (timestamps only).
  int64_t num_channels = 0;

  // Wide layout.
  absl::Span<const int64_t> timestamps;  // [T] ns since the Unix epoch, UTC.
  ValuesView values;                     // [T, C] row-major, NaN = missing.
  absl::Span<const uint8_t> mask;        // [T, C] or empty; nonzero = observed.

  // Long layout.
  absl::Span<const int64_t> event_times;     // [N] ns since the Unix epoch.
  absl::Span<const int32_t> event_channels;  // [N] in [0, C).
  ValuesView event_values;                   // [N], NaN = no value.

  // Optional token embeddings, [rows, content_dim] row-major, float32 or
  // float64: at most one of the two spans is non-empty.
  absl::Span<const float> content;
  absl::Span<const double> content_f64;
  int64_t content_dim = 0;

  bool has_content() const { return !content.empty() || !content_f64.empty(); }
  // Both content spans as one ValuesView.
  ValuesView content_values() const { return ValuesView{content_f64, content}; }

  int64_t num_rows() const {
    return layout == ObservationLayout::kWide
               ? static_cast<int64_t>(timestamps.size())
               : static_cast<int64_t>(event_times.size());
  }
  // The timestamp of every output row.
  absl::Span<const int64_t> row_times() const {
    return layout == ObservationLayout::kWide ? timestamps : event_times;
  }
  // Whether row `row` observes channel `channel`; if so *value is set.
  // REQUIRES: validated; 0 <= row < num_rows(); 0 <= channel < num_channels.
  bool ObservedAt(int64_t row, int64_t channel, double* value) const {
    if (layout == ObservationLayout::kLong) {
      if (event_channels[row] != channel) return false;
      const double v = event_values.at(row);
      if (std::isnan(v)) return false;
      *value = v;
      return true;
    }
    const int64_t i = row * num_channels + channel;
    if (!mask.empty()) {
      if (mask[i] == 0) return false;
      *value = values.at(i);
      return true;
    }
    const double v = values.at(i);
    if (std::isnan(v)) return false;
    *value = v;
    return true;
  }
};

// Readers of the observations, one per layout and value type, for loops
// over rows and channels that should not decide the layout per value (as
// ObservedAt does). At(row, c, &v) sets v whether or not channel c is
// observed at row, so a caller can select on the result rather than branch
// on it (whether a value is observed is random). REQUIRES: as ObservedAt.
template <typename Value, bool kMask>
struct WideObservationReader {
  static constexpr bool kLong = false;
  const Value* values;
  const uint8_t* mask;  // Null without a mask.
  int64_t channels;
  bool At(int64_t row, int64_t c, double* v) const {
    const int64_t i = row * channels + c;
    *v = static_cast<double>(values[i]);
    if constexpr (kMask) {
      return mask[i] != 0;
    } else {
      return !std::isnan(*v);
    }
  }
};

template <typename Value>
struct LongObservationReader {
  static constexpr bool kLong = true;
  const Value* values;
  const int32_t* channels;
  // The one channel row `row` may observe.
  int64_t Channel(int64_t row) const { return channels[row]; }
  bool At(int64_t row, int64_t c, double* v) const {
    *v = static_cast<double>(values[row]);
    return channels[row] == c && !std::isnan(*v);
  }
};

// Calls f(reader) with the reader for these observations.
template <typename F>
void VisitObservationReader(const ObservationsView& obs, F&& f) {
  if (obs.layout == ObservationLayout::kLong) {
    if (obs.event_values.f64.empty()) {
      f(LongObservationReader<float>{obs.event_values.f32.data(),
                                     obs.event_channels.data()});
    } else {
      f(LongObservationReader<double>{obs.event_values.f64.data(),
                                      obs.event_channels.data()});
    }
    return;
  }
  const bool f64 = obs.values.f32.empty();
  if (obs.mask.empty()) {
    if (f64) {
      f(WideObservationReader<double, false>{obs.values.f64.data(), nullptr,
                                             obs.num_channels});
    } else {
      f(WideObservationReader<float, false>{obs.values.f32.data(), nullptr,
                                            obs.num_channels});
    }
  } else if (f64) {
    f(WideObservationReader<double, true>{obs.values.f64.data(), obs.mask.data(),
                                          obs.num_channels});
  } else {
    f(WideObservationReader<float, true>{obs.values.f32.data(), obs.mask.data(),
                                         obs.num_channels});
  }
}

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

#endif  // PHASOR_CORE_OBSERVATIONS_H_
