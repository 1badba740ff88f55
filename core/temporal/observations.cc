#include "core/temporal/observations.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/temporal/wide_values.h"

namespace phasor {
namespace {

std::string Indexed(absl::string_view prefix, absl::string_view field,
                    int64_t index) {
  return absl::StrCat(prefix, ".", field, "[", index, "]");
}

std::string Field(absl::string_view prefix, absl::string_view field) {
  return absl::StrCat(prefix, ".", field);
}

absl::Status CheckTimes(absl::Span<const int64_t> times,
                        absl::string_view prefix, absl::string_view name) {
  for (size_t i = 0; i < times.size(); ++i) {
    if (times[i] == kNotATimeNs) {
      return InvalidField(
          Indexed(prefix, name, static_cast<int64_t>(i)),
          "NaT (INT64_MIN, a missing timestamp); timestamps must be int64 "
          "nanoseconds since the Unix epoch");
    }
    if (i > 0 && times[i] < times[i - 1]) {
      return InvalidField(
          Indexed(prefix, name, static_cast<int64_t>(i)),
          absl::StrCat("decreasing (", times[i], " ns < ", times[i - 1],
                       " ns, the timestamp before it); timestamps must be "
                       "non-decreasing"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOneDtype(const ValuesView& values, absl::string_view prefix,
                           absl::string_view name) {
  if (!values.f64.empty() && !values.f32.empty()) {
    return InvalidField(Field(prefix, name),
                        "given as both float64 and float32; send one");
  }
  return absl::OkStatus();
}

absl::Status CheckContent(const ObservationsView& obs, absl::string_view prefix) {
  const int64_t rows = obs.num_rows();
  PHASOR_RETURN_IF_ERROR(CheckOneDtype(obs.content_values(), prefix, "content"));
  const ValuesView content = obs.content_values();
  if (!obs.has_content()) {
    if (obs.content_dim != 0 && rows > 0) {
      return InvalidField(Field(prefix, "content"),
                          absl::StrCat("content_dim is ", obs.content_dim,
                                       " but no content was given"));
    }
    return absl::OkStatus();
  }
  if (obs.content_dim <= 0) {
    return InvalidField(Field(prefix, "content"),
                        absl::StrCat("content_dim must be > 0, got ",
                                     obs.content_dim));
  }
  // Compared by division: rows · content_dim could overflow.
  const int64_t size = content.size();
  if (rows == 0 || size % rows != 0 || size / rows != obs.content_dim) {
    return InvalidField(
        Field(prefix, "content"),
        absl::StrCat("has ", size, " values; expected rows ",
                     rows, " x content_dim ", obs.content_dim));
  }
  for (int64_t i = 0; i < size; ++i) {
    if (!std::isfinite(content.at(i))) {
      return InvalidField(Indexed(prefix, "content", i),
                          absl::StrCat("not finite (", content.at(i), ")"));
    }
  }
  return absl::OkStatus();
}

// The wide layout's shapes: one values dtype, C in range, values and mask
// [T, C].
absl::Status CheckWideShapes(const ObservationsView& obs, absl::string_view prefix) {
  if (!obs.event_times.empty() || !obs.event_channels.empty() ||
      obs.event_values.size() != 0) {
    return InvalidField(Field(prefix, "event_times"),
                        "long-layout events given with the wide layout; send "
                        "timestamps/values or events, not both");
  }
  PHASOR_RETURN_IF_ERROR(CheckOneDtype(obs.values, prefix, "values"));
  const int64_t t = static_cast<int64_t>(obs.timestamps.size());
  const int64_t c = obs.num_channels;
  if (c < 0 || c > kMaxChannels) {
    return InvalidField(Field(prefix, "num_channels"),
                        absl::StrCat("must be in [0, ", kMaxChannels, "], got ",
                                     c));
  }
  if (obs.values.size() != t * c) {
    return InvalidField(
        Field(prefix, "values"),
        absl::StrCat("has ", obs.values.size(), " values; expected timestamps ",
                     t, " x channels ", c, " = ", t * c));
  }
  if (!obs.mask.empty() && static_cast<int64_t>(obs.mask.size()) != t * c) {
    return InvalidField(
        Field(prefix, "mask"),
        absl::StrCat("has ", obs.mask.size(), " entries; expected timestamps ",
                     t, " x channels ", c, " = ", t * c));
  }
  return absl::OkStatus();
}

absl::Status ValidateWide(const ObservationsView& obs, absl::string_view prefix) {
  PHASOR_RETURN_IF_ERROR(CheckWideShapes(obs, prefix));
  PHASOR_RETURN_IF_ERROR(CheckTimes(obs.timestamps, prefix, "timestamps"));
  const int64_t t = static_cast<int64_t>(obs.timestamps.size());
  const int64_t c = obs.num_channels;
  // A branch-free pass over every value first (whether a value is observed
  // is random); the first offending value is looked for only when there is
  // one.
  if (!AnyObservedNonFinite(obs)) return absl::OkStatus();
  for (int64_t i = 0; i < t * c; ++i) {
    const double v = obs.values.at(i);
    const bool observed = obs.mask.empty() ? !std::isnan(v) : obs.mask[i] != 0;
    if (observed && !std::isfinite(v)) {
      return InvalidField(
          Indexed(prefix, "values", i),
          absl::StrCat(v, " in channel ", i % c,
                       obs.mask.empty()
                           ? " (observed values must be finite; NaN means "
                             "not observed)"
                           : " where the mask marks it observed (observed "
                             "values must be finite)"));
    }
  }
  return absl::OkStatus();
}

// The long layout's shapes: one values dtype, C in range, channels and
// values [N].
absl::Status CheckLongShapes(const ObservationsView& obs, absl::string_view prefix) {
  if (!obs.timestamps.empty() || obs.values.size() != 0 || !obs.mask.empty()) {
    return InvalidField(Field(prefix, "timestamps"),
                        "wide-layout timestamps/values/mask given with the "
                        "long layout; send one layout");
  }
  PHASOR_RETURN_IF_ERROR(CheckOneDtype(obs.event_values, prefix, "event_values"));
  const int64_t n = static_cast<int64_t>(obs.event_times.size());
  if (obs.num_channels < 1 || obs.num_channels > kMaxChannels) {
    return InvalidField(Field(prefix, "num_channels"),
                        absl::StrCat("must be in [1, ", kMaxChannels,
                                     "] for events, got ", obs.num_channels));
  }
  if (static_cast<int64_t>(obs.event_channels.size()) != n) {
    return InvalidField(Field(prefix, "event_channels"),
                        absl::StrCat("has ", obs.event_channels.size(),
                                     " entries; expected one per event (", n,
                                     ")"));
  }
  if (obs.event_values.size() != n) {
    return InvalidField(Field(prefix, "event_values"),
                        absl::StrCat("has ", obs.event_values.size(),
                                     " entries; expected one per event (", n,
                                     ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLong(const ObservationsView& obs, absl::string_view prefix) {
  PHASOR_RETURN_IF_ERROR(CheckLongShapes(obs, prefix));
  PHASOR_RETURN_IF_ERROR(CheckTimes(obs.event_times, prefix, "event_times"));
  const int64_t n = static_cast<int64_t>(obs.event_times.size());
  for (int64_t i = 0; i < n; ++i) {
    const int32_t channel = obs.event_channels[i];
    if (channel < 0 || channel >= obs.num_channels) {
      return InvalidField(Indexed(prefix, "event_channels", i),
                          absl::StrCat("channel ", channel, " out of range [0, ",
                                       obs.num_channels, ")"));
    }
    const double v = obs.event_values.at(i);
    if (std::isinf(v)) {
      return InvalidField(Indexed(prefix, "event_values", i),
                          absl::StrCat(v, " (values must be finite; NaN means "
                                          "no value)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateObservations(const ObservationsView& observations,
                                  absl::string_view field_prefix) {
  if (observations.layout == ObservationLayout::kWide) {
    PHASOR_RETURN_IF_ERROR(ValidateWide(observations, field_prefix));
  } else {
    PHASOR_RETURN_IF_ERROR(ValidateLong(observations, field_prefix));
  }
  return CheckContent(observations, field_prefix);
}

ObservationsView PanelView::Series(int64_t s) const {
  const int64_t begin = series_offsets[s];
  const int64_t n = series_offsets[s + 1] - begin;
  const int64_t c = rows.num_channels;
  ObservationsView out = rows;
  if (rows.layout == ObservationLayout::kWide) {
    out.timestamps = rows.timestamps.subspan(begin, n);
    if (!rows.values.f64.empty()) out.values.f64 = rows.values.f64.subspan(begin * c, n * c);
    if (!rows.values.f32.empty()) out.values.f32 = rows.values.f32.subspan(begin * c, n * c);
    if (!rows.mask.empty()) out.mask = rows.mask.subspan(begin * c, n * c);
  } else {
    out.event_times = rows.event_times.subspan(begin, n);
    out.event_channels = rows.event_channels.subspan(begin, n);
    const ValuesView& v = rows.event_values;
    if (!v.f64.empty()) out.event_values.f64 = v.f64.subspan(begin, n);
    if (!v.f32.empty()) out.event_values.f32 = v.f32.subspan(begin, n);
  }
  if (!rows.content_f64.empty()) {
    out.content_f64 =
        rows.content_f64.subspan(begin * rows.content_dim, n * rows.content_dim);
  }
  if (!rows.content.empty()) {
    out.content = rows.content.subspan(begin * rows.content_dim, n * rows.content_dim);
  }
  return out;
}

absl::Status ValidateZoneIndex(absl::Span<const int32_t> zone_index, int64_t num_series,
                               int64_t num_zones, absl::string_view prefix) {
  if (zone_index.empty() && num_zones == 0) return absl::OkStatus();
  if (static_cast<int64_t>(zone_index.size()) != num_series) {
    return InvalidField(Field(prefix, "time_zone_index"),
                        absl::StrCat("has ", zone_index.size(),
                                     " entries; expected one per series (", num_series,
                                     ")"));
  }
  for (int64_t s = 0; s < num_series; ++s) {
    const int32_t z = zone_index[s];
    if (z < 0 || z >= num_zones) {
      return InvalidField(Indexed(prefix, "time_zone_index", s),
                          absl::StrCat(z, " is not an index into the ", num_zones,
                                       " time zones"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidatePanel(const PanelView& panel,
                           absl::Span<const SeriesState* const> states,
                           int64_t num_zones, absl::string_view prefix,
                           absl::string_view states_prefix) {
  const ObservationsView& all = panel.rows;
  const int64_t rows = all.num_rows();
  const absl::Span<const int64_t> offsets = panel.series_offsets;
  if (offsets.size() < 2) {
    return InvalidField(Field(prefix, "series_offsets"),
                        absl::StrCat("needs S + 1 >= 2 entries, got ", offsets.size()));
  }
  for (size_t i = 0; i < offsets.size(); ++i) {
    const int64_t o = offsets[i];
    const bool ok = i == 0                    ? o == 0
                    : i + 1 == offsets.size() ? o == rows && o >= offsets[i - 1]
                                              : o >= offsets[i - 1] && o <= rows;
    if (!ok) {
      return InvalidField(
          Indexed(prefix, "series_offsets", static_cast<int64_t>(i)),
          absl::StrCat("is ", o, "; offsets start at 0, never decrease and end "
                       "at the row count ", rows));
    }
  }
  // The shapes the slices rely on; each series' own checks follow.
  PHASOR_RETURN_IF_ERROR(all.layout == ObservationLayout::kWide
                             ? CheckWideShapes(all, prefix)
                             : CheckLongShapes(all, prefix));
  PHASOR_RETURN_IF_ERROR(CheckContent(all, prefix));
  const int64_t num_series = panel.num_series();
  PHASOR_RETURN_IF_ERROR(ValidateZoneIndex(panel.zone_index, num_series, num_zones, prefix));
  if (!states.empty() && static_cast<int64_t>(states.size()) != num_series) {
    return InvalidField(states_prefix,
                        absl::StrCat("has ", states.size(),
                                     " entries; expected none or one per series (",
                                     num_series, ")"));
  }
  // Each series is checked under the plain prefix, and checked again under
  // its own name only to report an error: no string is built per series.
  for (int64_t s = 0; s < num_series; ++s) {
    const ObservationsView series = panel.Series(s);
    const SeriesState* state = states.empty() ? nullptr : states[s];
    if (ValidateObservations(series, prefix).ok() &&
        (state == nullptr || ValidateSeriesState(*state, series).ok())) {
      continue;
    }
    const std::string series_prefix = absl::StrCat(prefix, ".series[", s, "]");
    PHASOR_RETURN_IF_ERROR(ValidateObservations(series, series_prefix));
    return ValidateSeriesState(*state, series, absl::StrCat(states_prefix, "[", s, "]"),
                               series_prefix);
  }
  return absl::OkStatus();
}

absl::Status ValidateSeriesState(const SeriesState& state,
                                 const ObservationsView& observations,
                                 absl::string_view state_prefix,
                                 absl::string_view observations_prefix) {
  const int64_t c = observations.num_channels;
  if (static_cast<int64_t>(state.channels.size()) != c) {
    return InvalidField(Field(state_prefix, "channels"),
                        absl::StrCat("has ", state.channels.size(),
                                     " channels; the observations have ", c));
  }
  for (int64_t i = 0; i < c; ++i) {
    const ChannelState& ch = state.channels[i];
    // Built only for an error: a panel validates S·C channel records.
    const auto path = [&] { return Indexed(state_prefix, "channels", i); };
    if (!state.has_rows) {
      // `seen` is the presence of last_seen_ns on the wire.
      if (ch.seen || ch.seen_before_last) {
        return InvalidField(
            absl::StrCat(path(), ch.seen ? ".last_seen_ns" : ".before_last_seen_ns"),
            "set in a state without last_timestamp_ns (a series not yet "
            "started)");
      }
      continue;
    }
    if (ch.seen && (ch.last_seen_ns < state.first_timestamp_ns ||
                    ch.last_seen_ns > state.last_timestamp_ns)) {
      return InvalidField(
          absl::StrCat(path(), ".last_seen_ns"),
          absl::StrCat(ch.last_seen_ns, " outside the series' [",
                       state.first_timestamp_ns, ", ", state.last_timestamp_ns,
                       "]"));
    }
    if (ch.seen && ch.last_seen_ns == state.last_timestamp_ns &&
        ch.seen_before_last &&
        (ch.before_last_seen_ns >= state.last_timestamp_ns ||
         ch.before_last_seen_ns < state.first_timestamp_ns)) {
      return InvalidField(
          absl::StrCat(path(), ".before_last_seen_ns"),
          absl::StrCat(ch.before_last_seen_ns,
                       " must be in [first_timestamp_ns, last_timestamp_ns)"));
    }
    if (!std::isfinite(ch.last_value)) {
      return InvalidField(absl::StrCat(path(), ".last_value"),
                          absl::StrCat("not finite (", ch.last_value, ")"));
    }
    if (!std::isfinite(ch.before_last_value)) {
      return InvalidField(absl::StrCat(path(), ".before_last_value"),
                          absl::StrCat("not finite (", ch.before_last_value, ")"));
    }
  }
  if (!state.has_rows) return absl::OkStatus();
  if (state.first_timestamp_ns == kNotATimeNs ||
      state.last_timestamp_ns < state.first_timestamp_ns) {
    return InvalidField(
        Field(state_prefix, "last_timestamp_ns"),
        absl::StrCat(state.last_timestamp_ns, " is before first_timestamp_ns ",
                     state.first_timestamp_ns, " or NaT"));
  }
  const absl::Span<const int64_t> times = observations.row_times();
  if (!times.empty() && times[0] < state.last_timestamp_ns) {
    return InvalidField(
        Indexed(observations_prefix,
                observations.layout == ObservationLayout::kWide ? "timestamps"
                                                                : "event_times",
                0),
        absl::StrCat("decreasing (", times[0],
                     " ns < the previous chunk's last timestamp ",
                     state.last_timestamp_ns, " ns, the state's last_timestamp_ns)"));
  }
  return absl::OkStatus();
}

absl::Status TimestampsFromSeconds(absl::Span<const double> seconds,
                                   absl::Span<int64_t> out_ns,
                                   absl::string_view field) {
  // int64 nanoseconds span ±9.223372036854775807e9 s; 2^63 ns is exactly
  // 9223372036.854775808 s, so the bound below keeps llround in range.
  constexpr double kLimitSeconds = 9223372036.854775;
  for (size_t i = 0; i < seconds.size(); ++i) {
    const double s = seconds[i];
    // NaN fails the comparison too; the path is built only on error.
    if (!(std::fabs(s) < kLimitSeconds)) {
      const std::string path = absl::StrCat(field, "[", i, "]");
      if (std::isnan(s)) return InvalidField(path, "NaN timestamp");
      if (std::isinf(s)) return InvalidField(path, absl::StrCat(s, " timestamp"));
      return InvalidField(
          path, absl::StrFormat("%.17g s is outside int64 nanoseconds "
                                "(about years 1678 to 2262)",
                                s));
    }
    // Split into whole seconds and the fraction (truncating toward zero, so
    // neither part can overflow) so the nanosecond rounding keeps the low
    // digits of a large timestamp.
    const double whole = std::trunc(s);
    // |s| < 2^63 ns, so the sum stays above INT64_MIN (NaT).
    out_ns[i] = static_cast<int64_t>(whole) * 1000000000 +
                std::llround((s - whole) * 1e9);
  }
  return absl::OkStatus();
}

}  // namespace phasor
