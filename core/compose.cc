#include "core/compose.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/errors.h"
#include "core/status_macros.h"

namespace phasor {
namespace {

absl::string_view OriginName(OriginKind kind) {
  switch (kind) {
    case OriginKind::kFirstObservation:
      return "FIRST_OBSERVATION";
    case OriginKind::kUnixEpoch:
      return "UNIX_EPOCH";
    case OriginKind::kExplicit:
      return "EXPLICIT";
  }
  return "?";
}

absl::Status CheckOrigin(OriginKind kind, int64_t origin_ns,
                         absl::string_view block_prefix) {
  if (kind == OriginKind::kExplicit && origin_ns == kNotATimeNs) {
    return InvalidField(absl::StrCat(block_prefix, ".origin_ns"),
                        "NaT (INT64_MIN) is not an origin");
  }
  return absl::OkStatus();
}

// The two blocks SUM's "dim 0 = d_model" changes, resolved; every other
// block is read from the spec itself. Both are small plain structs, so this
// copies no heap data (a whole TemporalSpec would copy Time2Vec's
// parameters and the holiday dates on every call).
struct ResolvedBlocks {
  std::optional<TimeBlock> time;
  std::optional<GapsBlock> gaps;
};

ResolvedBlocks Resolve(const TemporalSpec& spec) {
  ResolvedBlocks out{spec.time, spec.gaps};
  if (spec.combine != CombineMode::kSum) return out;
  if (out.time.has_value() && out.time->dim == 0) out.time->dim = spec.d_model;
  if (out.gaps.has_value() && out.gaps->sinusoidal_dim == 0) {
    out.gaps->sinusoidal_dim = spec.d_model;
  }
  return out;
}

absl::Status SumError(absl::string_view prefix, absl::string_view field,
                      absl::string_view why) {
  return InvalidField(absl::StrCat(prefix, ".", field),
                      absl::StrCat(why, " under combine SUM"));
}

absl::Status ValidateSumConstraints(const TemporalSpec& spec,
                                    const ResolvedBlocks& resolved,
                                    absl::string_view prefix) {
  const int64_t d = spec.d_model;
  if (d <= 0 || d % 2 != 0 || d > kMaxEncodingWidth) {
    return InvalidField(absl::StrCat(prefix, ".d_model"),
                        absl::StrCat("must be even and in [2, ",
                                     kMaxEncodingWidth,
                                     "] under combine SUM, got ", d));
  }
  if (resolved.time.has_value() && resolved.time->dim != d) {
    return SumError(prefix, "time.dim",
                    absl::StrCat("must be 0 or d_model (", d, "), got ",
                                 resolved.time->dim));
  }
  if (spec.time2vec.has_value() &&
      static_cast<int64_t>(spec.time2vec->omega.size()) != d) {
    return SumError(prefix, "time2vec.omega",
                    absl::StrCat("must hold d_model (", d, ") terms, got ",
                                 spec.time2vec->omega.size()));
  }
  if (resolved.gaps.has_value()) {
    const GapsBlock& g = *resolved.gaps;
    if (!g.global_delta) {
      return SumError(prefix, "gaps.global_delta",
                      "must be true (only the global gap has a d_model-wide "
                      "form)");
    }
    if (g.per_channel_delta) {
      return SumError(prefix, "gaps.per_channel_delta",
                      "must be false (per-channel gaps are C-wide)");
    }
    if (g.include_mask) {
      return SumError(prefix, "gaps.include_mask", "must be false");
    }
    if (g.include_last_value) {
      return SumError(prefix, "gaps.include_last_value", "must be false");
    }
    if (g.first_observation == FirstObservationPolicy::kFlag) {
      return SumError(prefix, "gaps.first_observation",
                      "FLAG adds a column; use ZERO or SINCE_ORIGIN");
    }
    if (g.transform != GapTransform::kSinusoidal) {
      return SumError(prefix, "gaps.transform", "must be SINUSOIDAL");
    }
    if (g.sinusoidal_dim != d) {
      return SumError(prefix, "gaps.sinusoidal_dim",
                      absl::StrCat("must be 0 or d_model (", d, "), got ",
                                   g.sinusoidal_dim));
    }
  }
  if (spec.calendar.has_value()) {
    const CalendarBlock& c = *spec.calendar;
    if (c.fields.empty()) {
      return SumError(prefix, "calendar.fields", "must not be empty");
    }
    if (c.fractional) {
      return SumError(prefix, "calendar.fractional",
                      "must be false (Informer's tables are indexed by "
                      "integers)");
    }
    if (c.include_utc_offset) {
      return SumError(prefix, "calendar.include_utc_offset", "must be false");
    }
    if (c.include_dst) {
      return SumError(prefix, "calendar.include_dst", "must be false");
    }
    if (c.holidays.has_value()) {
      return SumError(prefix, "calendar.holidays", "must be absent");
    }
  }
  return absl::OkStatus();
}

absl::string_view TransformName(GapTransform transform) {
  switch (transform) {
    case GapTransform::kRaw:
      return "RAW";
    case GapTransform::kLog1p:
      return "LOG1P";
    case GapTransform::kSinusoidal:
      return "SINUSOIDAL";
  }
  return "?";
}

absl::string_view PolicyName(FirstObservationPolicy policy) {
  switch (policy) {
    case FirstObservationPolicy::kZero:
      return "ZERO";
    case FirstObservationPolicy::kSinceOrigin:
      return "SINCE_ORIGIN";
    case FirstObservationPolicy::kFlag:
      return "FLAG";
  }
  return "?";
}

std::string GapValueMeaning(const GapsBlock& g) {
  switch (g.transform) {
    case GapTransform::kRaw:
      return absl::StrFormat("gap / %g s", g.unit_seconds);
    case GapTransform::kLog1p:
      return absl::StrFormat("sign(x)*log1p(|x|), x = gap / %g s",
                             g.unit_seconds);
    case GapTransform::kSinusoidal:
      return absl::StrFormat(
          "%d values: sin, cos of 2*pi*gap/P_k interleaved, P_k geometric "
          "from %g s to %g s",
          g.sinusoidal_dim, g.sinusoidal_min_period_seconds,
          g.sinusoidal_max_period_seconds);
  }
  return "";
}

std::string CalendarFieldMeaning(CalendarField field, const CalendarBlock& c) {
  const absl::string_view name = CalendarFieldName(field);
  const char* frac = c.fractional ? " + elapsed fraction" : "";
  switch (c.encoding) {
    case CalendarEncoding::kCyclic:
      return absl::StrCat(name, ": sin, cos of 2*pi*x/P (x zero-based", frac,
                          ", P calendar-true)");
    case CalendarEncoding::kLinear:
      return absl::StrCat(name, ": x/(n-1) - 0.5 (GluonTS; x zero-based", frac,
                          ")");
    case CalendarEncoding::kIndex:
      return absl::StrCat(name, ": civil integer value");
  }
  return std::string(name);
}

void Add(std::vector<SchemaEntry>* schema, int64_t* offset, std::string block,
         int64_t width, std::string meaning, bool per_channel = false) {
  schema->push_back(
      {std::move(block), *offset, width, std::move(meaning), per_channel});
  *offset += width;
}

}  // namespace

absl::Status ValidateTemporalSpec(const TemporalSpec& spec,
                                  absl::string_view field_prefix) {
  if (!spec.content && !spec.time && !spec.time2vec && !spec.gaps &&
      !spec.calendar) {
    return InvalidField(field_prefix,
                        "selects no block: set content, time, time2vec, gaps "
                        "or calendar");
  }
  if (spec.combine != CombineMode::kConcat &&
      spec.combine != CombineMode::kSum) {
    return InvalidField(absl::StrCat(field_prefix, ".combine"),
                        "unknown combine mode");
  }
  const ResolvedBlocks resolved = Resolve(spec);
  if (spec.combine == CombineMode::kSum) {
    PHASOR_RETURN_IF_ERROR(ValidateSumConstraints(spec, resolved, field_prefix));
  }
  if (spec.content.has_value() && !std::isfinite(spec.content->scale)) {
    return InvalidField(absl::StrCat(field_prefix, ".content.scale"),
                        absl::StrCat("not finite (", spec.content->scale, ")"));
  }
  if (resolved.time.has_value()) {
    const std::string prefix = absl::StrCat(field_prefix, ".time");
    PHASOR_RETURN_IF_ERROR(ValidateTimeBlock(*resolved.time, prefix));
    PHASOR_RETURN_IF_ERROR(
        CheckOrigin(resolved.time->origin, resolved.time->origin_ns, prefix));
  }
  if (spec.time2vec.has_value()) {
    const std::string prefix = absl::StrCat(field_prefix, ".time2vec");
    PHASOR_RETURN_IF_ERROR(ValidateTime2VecBlock(*spec.time2vec, prefix));
    PHASOR_RETURN_IF_ERROR(CheckOrigin(spec.time2vec->origin,
                                       spec.time2vec->origin_ns, prefix));
  }
  if (resolved.gaps.has_value()) {
    const std::string prefix = absl::StrCat(field_prefix, ".gaps");
    PHASOR_RETURN_IF_ERROR(ValidateGapsBlock(*resolved.gaps, prefix));
    PHASOR_RETURN_IF_ERROR(
        CheckOrigin(resolved.gaps->origin, resolved.gaps->origin_ns, prefix));
  }
  if (spec.calendar.has_value()) {
    PHASOR_RETURN_IF_ERROR(ValidateCalendarBlock(
        *spec.calendar, absl::StrCat(field_prefix, ".calendar")));
  }
  return absl::OkStatus();
}

absl::StatusOr<FeatureLayout> TemporalFeatureLayout(
    const TemporalSpec& spec, int64_t num_channels, int64_t content_dim,
    absl::string_view observations_prefix) {
  const TemporalSpec& s = spec;
  const ResolvedBlocks r = Resolve(spec);
  const bool sum = s.combine == CombineMode::kSum;
  const int64_t c = num_channels;
  FeatureLayout layout;
  std::vector<SchemaEntry>& schema = layout.schema;
  // At most: content values + mask, time, time2vec, six gaps entries, the
  // calendar fields, utc offset, DST and holidays. Reserved so growing the
  // vector never moves the entries' strings.
  schema.reserve(10 + (s.calendar.has_value() ? s.calendar->fields.size() + 3 : 0));
  int64_t offset = 0;

  if (s.content.has_value()) {
    const int64_t width = content_dim > 0 ? content_dim : 2 * c;
    const std::string field = absl::StrCat(observations_prefix, ".content");
    if (width == 0) {
      return InvalidField(field,
                          "the content block needs content embeddings or at "
                          "least one channel");
    }
    if (sum && width != s.d_model) {
      return InvalidField(
          field, absl::StrCat(content_dim > 0 ? "content_dim " : "2 x channels ",
                              width, " must equal d_model ", s.d_model,
                              " under combine SUM"));
    }
    if (content_dim > 0) {
      Add(&schema, &offset, "content", content_dim,
          absl::StrFormat("content embeddings x %g", s.content->scale));
    } else {
      Add(&schema, &offset, "content.values", c,
          "channel values, 0 where not observed", /*per_channel=*/true);
      Add(&schema, &offset, "content.mask", c, "1 if observed, else 0",
          /*per_channel=*/true);
    }
  }
  if (r.time.has_value()) {
    Add(&schema, &offset, "time", r.time->dim,
        absl::StrFormat("sin, cos of 2*pi*(t - origin)/P_k interleaved, P_k "
                        "geometric from %g s to %g s, origin %s",
                        r.time->min_period_seconds, r.time->max_period_seconds,
                        OriginName(r.time->origin)));
  }
  if (s.time2vec.has_value()) {
    Add(&schema, &offset, "time2vec",
        static_cast<int64_t>(s.time2vec->omega.size()),
        absl::StrFormat("[w0*tau + p0, sin(wi*tau + pi)...], tau = (t - "
                        "origin) / %g s, origin %s",
                        s.time2vec->unit_seconds,
                        OriginName(s.time2vec->origin)));
  }
  if (r.gaps.has_value()) {
    const GapsBlock& g = *r.gaps;
    const int64_t w = GapValueWidth(g);
    const bool flag = g.first_observation == FirstObservationPolicy::kFlag;
    const std::string policy =
        absl::StrCat("; first row / no earlier observation: ",
                     PolicyName(g.first_observation), ", transform ",
                     TransformName(g.transform));
    if (g.global_delta) {
      Add(&schema, &offset, "gaps.global_delta", w,
          absl::StrCat("t_r - t_(r-1): ", GapValueMeaning(g), policy));
      if (flag) {
        Add(&schema, &offset, "gaps.global_first_flag", 1,
            "1 on the series' first row");
      }
    }
    if (g.per_channel_delta) {
      Add(&schema, &offset, "gaps.delta", c * w,
          absl::StrCat("per channel (channel-major, ", w,
                       " each): time since the channel's last observation "
                       "strictly before t, ",
                       GapValueMeaning(g), policy),
          /*per_channel=*/true);
      if (flag) {
        Add(&schema, &offset, "gaps.first_flag", c,
            "per channel: 1 if never observed before t", /*per_channel=*/true);
      }
    }
    if (g.include_mask) {
      Add(&schema, &offset, "gaps.mask", c, "1 if observed at this row",
          /*per_channel=*/true);
    }
    if (g.include_last_value) {
      Add(&schema, &offset, "gaps.last_value", c,
          "value if observed, else the last observed value, else 0",
          /*per_channel=*/true);
    }
  }
  if (s.calendar.has_value()) {
    const CalendarBlock& cal = *s.calendar;
    const int64_t fw = sum ? s.d_model
                           : (cal.encoding == CalendarEncoding::kCyclic ? 2 : 1);
    for (CalendarField field : cal.fields) {
      Add(&schema, &offset, absl::StrCat("calendar.", CalendarFieldName(field)),
          fw,
          sum ? absl::StrCat(CalendarFieldName(field),
                             ": Informer fixed sinusoid row PE(civil value)")
              : CalendarFieldMeaning(field, cal));
    }
    const std::string zone = cal.time_zone.empty() ? "UTC" : cal.time_zone;
    if (cal.include_utc_offset) {
      Add(&schema, &offset, "calendar.utc_offset", 1,
          absl::StrCat("hours east of UTC in ", zone));
    }
    if (cal.include_dst) {
      Add(&schema, &offset, "calendar.dst", 1,
          absl::StrCat("1 while DST is in effect in ", zone));
    }
    if (cal.holidays.has_value()) {
      const HolidaysBlock& h = *cal.holidays;
      const char* kernel =
          h.kernel == HolidayKernel::kIndicator ? "1 if d = 0"
          : h.kernel == HolidayKernel::kExponential
              ? "exp(-alpha*|d|)"
              : "exp(-alpha*d^2)";
      Add(&schema, &offset, "calendar.holidays", 1,
          absl::StrFormat("%s, d = local date - nearest holiday in days "
                          "(ties to the past), alpha = %g",
                          kernel, h.alpha));
    }
  }
  if (sum) {
    // Every block spans all d_model columns; they are added.
    for (SchemaEntry& entry : schema) {
      entry.offset = 0;
      entry.width = s.d_model;
      entry.meaning = absl::StrCat("summed: ", entry.meaning);
    }
    layout.width = s.d_model;
  } else {
    layout.width = offset;
  }
  return layout;
}

absl::Status EncodeObservations(const TemporalSpec& spec,
                                const ObservationsView& observations,
                                const SeriesState* state_in,
                                const ExecutionOptions& options,
                                absl::Span<float> out, SeriesState* state_out) {
  PHASOR_RETURN_IF_ERROR(ValidateTemporalSpec(spec));
  PHASOR_RETURN_IF_ERROR(ValidateObservations(observations));
  if (state_in != nullptr) {
    PHASOR_RETURN_IF_ERROR(ValidateSeriesState(*state_in, observations));
  }
  PHASOR_ASSIGN_OR_RETURN(
      const FeatureLayout layout,
      TemporalFeatureLayout(spec, observations.num_channels,
                            observations.content.empty()
                                ? 0
                                : observations.content_dim));
  const int64_t rows = observations.num_rows();
  const int64_t width = layout.width;
  const auto size = static_cast<int64_t>(out.size());
  // Compared by division: rows · width can overflow for a hostile caller.
  const bool fits = width == 0 ? size == 0
                               : size % width == 0 && size / width == rows;
  if (!fits) {
    return InvalidField("features",
                        absl::StrCat("output holds ", out.size(),
                                     " floats; rows ", rows, " x width ", width,
                                     " needed"));
  }
  return EncodeValidatedObservations(spec, layout, observations, state_in,
                                     options, out, state_out);
}

absl::Status EncodeValidatedObservations(const TemporalSpec& spec,
                                         const FeatureLayout& layout,
                                         const ObservationsView& observations,
                                         const SeriesState* state_in,
                                         const ExecutionOptions& options,
                                         absl::Span<float> out,
                                         SeriesState* state_out) {
  const int64_t channels = observations.num_channels;
  const int64_t content_dim =
      observations.content.empty() ? 0 : observations.content_dim;
  const int64_t rows = observations.num_rows();
  const int64_t width = layout.width;
  assert(static_cast<int64_t>(out.size()) == rows * width);

  const TemporalSpec& s = spec;
  const ResolvedBlocks r = Resolve(spec);
  const bool sum = s.combine == CombineMode::kSum;
  const absl::Span<const int64_t> times = observations.row_times();
  const GapTracker start =
      state_in != nullptr ? GapTracker(*state_in) : GapTracker(channels);
  const int64_t first_ns =
      start.has_rows() ? start.first_timestamp_ns() : (rows > 0 ? times[0] : 0);

  // Per-request tables.
  std::optional<TimeSinusoid> time;
  int64_t time_origin_ns = 0;
  if (r.time.has_value()) {
    time.emplace(r.time->dim, r.time->min_period_seconds,
                 r.time->max_period_seconds);
    time_origin_ns =
        ResolveOriginNs(r.time->origin, r.time->origin_ns, first_ns);
  }
  std::optional<Time2Vec> time2vec;
  int64_t time2vec_origin_ns = 0;
  if (s.time2vec.has_value()) {
    time2vec.emplace(*s.time2vec);
    time2vec_origin_ns =
        ResolveOriginNs(s.time2vec->origin, s.time2vec->origin_ns, first_ns);
  }
  std::optional<GapsEncoder> gaps;
  if (r.gaps.has_value()) {
    gaps.emplace(*r.gaps, channels,
                 ResolveOriginNs(r.gaps->origin, r.gaps->origin_ns, first_ns));
  }
  std::optional<CalendarEncoder> calendar;
  if (s.calendar.has_value()) {
    PHASOR_ASSIGN_OR_RETURN(
        const absl::TimeZone zone,
        LoadIanaTimeZone(s.calendar->time_zone, "spec.temporal.calendar.time_zone"));
    calendar.emplace(*s.calendar, zone, sum ? s.d_model : 0,
                     /*max_table_rows=*/rows);
  }

  // Early stop is polled about once per grain of work: per output row the
  // work is `width` values, per serial-pass row it is the channels visited.
  const int64_t grain = std::max<int64_t>(options.grain_elements, 1);
  const int64_t rows_per_poll = std::max<int64_t>(1, grain / std::max<int64_t>(width, 1));
  const int64_t observe_cost =
      observations.layout == ObservationLayout::kWide ? std::max<int64_t>(channels, 1) : 1;
  const int64_t serial_rows_per_poll = std::max<int64_t>(1, grain / observe_cost);
  const auto cancelled = [] {
    return absl::CancelledError(
        "stopped early: the caller no longer wants the result");
  };

  // Serial pass: the gaps memory, checkpointed every `stride` rows so each
  // parallel chunk can start from the nearest checkpoint at or before it.
  // A checkpoint holds C channel records, so with many channels there are
  // fewer of them (chunks then replay more rows, O(1) each for events).
  const int64_t max_checkpoints = std::clamp<int64_t>(
      kMaxCheckpointChannels / std::max<int64_t>(channels, 1), 1, 256);
  const int64_t stride =
      std::max<int64_t>(256, (rows + max_checkpoints - 1) / max_checkpoints);
  std::vector<GapTracker> checkpoints;
  GapTracker walker = start;
  for (int64_t r = 0; r < rows; ++r) {
    if (r % serial_rows_per_poll == 0 && StopRequested(options)) return cancelled();
    if (gaps.has_value() && r % stride == 0) checkpoints.push_back(walker);
    walker.BeginRow(times[r]);
    walker.ObserveRow(observations, r);
  }

  const double content_scale = s.content.has_value() ? s.content->scale : 1.0;
  std::atomic<bool> stopped{false};
  ParallelFor(options, rows, width, [&](int64_t begin, int64_t end) {
    std::vector<double> row(static_cast<size_t>(width));
    std::vector<double> term(sum ? static_cast<size_t>(width) : 0);
    std::optional<GapTracker> tracker;
    if (gaps.has_value()) {
      const int64_t checkpoint = begin / stride;
      tracker.emplace(checkpoints[checkpoint]);
      for (int64_t r = checkpoint * stride; r < begin; ++r) {
        tracker->BeginRow(times[r]);
        tracker->ObserveRow(observations, r);
      }
    }
    std::optional<CalendarEncoder::Writer> calendar_writer;
    if (calendar.has_value()) calendar_writer.emplace(*calendar);

    for (int64_t r = begin; r < end; ++r) {
      if ((r - begin) % rows_per_poll == 0 &&
          (stopped.load(std::memory_order_relaxed) || StopRequested(options))) {
        stopped.store(true, std::memory_order_relaxed);
        return;
      }
      const int64_t t = times[r];
      if (tracker.has_value()) tracker->BeginRow(t);
      double* p = row.data();
      // CONCAT: each block writes its own columns and advances p.
      // SUM: each block writes `term`, which is added to the row.
      auto emit = [&](int64_t block_width) {
        if (sum) {
          for (int64_t j = 0; j < width; ++j) row[j] += term[j];
        } else {
          p += block_width;
        }
      };
      double* target = sum ? term.data() : p;
      if (sum) std::fill(row.begin(), row.end(), 0.0);

      if (s.content.has_value()) {
        target = sum ? term.data() : p;
        if (content_dim > 0) {
          const float* src = observations.content.data() + r * content_dim;
          for (int64_t j = 0; j < content_dim; ++j) {
            target[j] = static_cast<double>(src[j]) * content_scale;
          }
          emit(content_dim);
        } else {
          for (int64_t c = 0; c < channels; ++c) {
            double value = 0.0;
            const bool observed = observations.ObservedAt(r, c, &value);
            target[c] = observed ? value : 0.0;
            target[channels + c] = observed ? 1.0 : 0.0;
          }
          emit(2 * channels);
        }
      }
      if (time.has_value()) {
        target = sum ? term.data() : p;
        time->Encode(ElapsedNs(t, time_origin_ns), target);
        emit(time->dim());
      }
      if (time2vec.has_value()) {
        target = sum ? term.data() : p;
        time2vec->Encode(ElapsedNs(t, time2vec_origin_ns), target);
        emit(time2vec->width());
      }
      if (gaps.has_value()) {
        target = sum ? term.data() : p;
        gaps->EncodeRow(*tracker, observations, r, t, target);
        emit(gaps->width());
      }
      if (calendar_writer.has_value()) {
        target = sum ? term.data() : p;
        calendar_writer->Encode(t, target);
        emit(calendar->width());
      }

      float* dst = out.data() + r * width;
      for (int64_t j = 0; j < width; ++j) dst[j] = static_cast<float>(row[j]);
      if (tracker.has_value()) tracker->ObserveRow(observations, r);
    }
  });

  if (stopped.load()) return cancelled();
  if (state_out != nullptr) *state_out = walker.ToState();
  return absl::OkStatus();
}

}  // namespace phasor
