// -----------------------------------------------------------------------------
// File: core/temporal/observations_view.h
// -----------------------------------------------------------------------------
//
// Views of the temporal encoder's input, the irregular, timestamped,
// multichannel observations, and readers over them (the validation and the
// state of a series are core/temporal/observations.h).
//
// Time is int64 nanoseconds since the Unix epoch (UTC); INT64_MIN is
// numpy/pandas' NaT ("not a time"). Two layouts:
//  - wide: timestamps [T], values [T, C] (NaN = not observed), optional mask
//    [T, C] (nonzero = observed; when present it is authoritative and
//    unobserved values are ignored, NaN or not). One output row per timestamp.
//  - long (SeFT, Horn et al. 2020; STraTS, Tipirneni & Reddy 2022): triplets
//    event_times [N], event_channels [N] in [0, C), event_values [N]. One output
//    row per event; row i observes channel event_channels[i] unless its value
//    is NaN. Channels may follow different schedules.
// Both may carry content [rows, content_dim] (token embeddings).
//
// Ownership: views do not own their storage; the caller keeps it alive for
// the duration of a call. Thread-safety: views and readers are read-only.
//
// Example:
//
//   ObservationsView obs;
//   obs.layout = ObservationLayout::kWide;
//   obs.num_channels = 2;
//   obs.timestamps = times_ns;            // [T]
//   obs.values.f64 = values;              // [T, 2], NaN = not observed
//   double v;
//   if (obs.ObservedAt(/*row=*/0, /*channel=*/1, &v)) { ... }
#ifndef PHASOR_CORE_TEMPORAL_OBSERVATIONS_VIEW_H_
#define PHASOR_CORE_TEMPORAL_OBSERVATIONS_VIEW_H_

#include <cmath>
#include <cstdint>
#include <limits>

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

}  // namespace phasor

#endif  // PHASOR_CORE_TEMPORAL_OBSERVATIONS_VIEW_H_
