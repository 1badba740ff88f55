#include "core/temporal/compose_spec.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/adapters/dtype.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/temporal/time_zone.h"

namespace phasor {

using compose_internal::ResolvedBlocks;
using compose_internal::Resolve;

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

absl::Status SumError(absl::string_view prefix, absl::string_view field,
                      absl::string_view why) {
  return InvalidField(absl::StrCat(prefix, ".", field),
                      absl::StrCat(why, " under combine SUM"));
}

// The calendar additions Informer's tables have no row for.
absl::Status CalendarSumError(const CalendarBlock& c, absl::string_view prefix) {
  for (size_t i = 0; i < c.fields.size(); ++i) {
    if (c.fields[i] >= CalendarField::kYear) {
      return SumError(prefix, absl::StrCat("calendar.fields[", i, "]"),
                      absl::StrCat(CalendarFieldName(c.fields[i]),
                                   " has no Informer table"));
    }
  }
  for (size_t i = 0; i < c.fourier_orders.size(); ++i) {
    if (c.fourier_orders[i] > 1) {
      return SumError(prefix, absl::StrCat("calendar.fourier_orders[", i, "]"),
                      "must be 0 or 1");
    }
  }
  if (c.zero_based_index) {
    return SumError(prefix, "calendar.zero_based_index", "must be false");
  }
  return absl::OkStatus();
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
    PHASOR_RETURN_IF_ERROR(CalendarSumError(c, prefix));
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

std::string CalendarFieldMeaning(const CalendarBlock& c, size_t i) {
  const CalendarField field = c.fields[i];
  const absl::string_view name = CalendarFieldName(field);
  const char* frac = c.fractional ? " + elapsed fraction" : "";
  const int64_t width = CalendarEncoder::FieldWidth(c, i);
  if (field >= CalendarField::kIsWeekend) {
    return absl::StrCat(name, ": 1 or 0 on the local date (pandas dt.", name, ")");
  }
  if (field == CalendarField::kYear || field == CalendarField::kIsoYear) {
    if (c.encoding == CalendarEncoding::kIndex) {
      return c.zero_based_index
                 ? absl::StrCat(name, ": ", name, " - ", c.min_year.value_or(0))
                 : absl::StrCat(name, ": civil integer value");
    }
    return absl::StrCat(name, ": (", name, frac, " - ", c.min_year.value_or(0),
                        ")/", c.max_year.value_or(0) - c.min_year.value_or(0),
                        " - 0.5 (linear on [min_year, max_year])");
  }
  switch (c.encoding) {
    case CalendarEncoding::kCyclic:
      if (width > 2) {
        return absl::StrCat(name, ": sin, cos of 2*pi*k*x/P for k = 1..",
                            width / 2, " (x zero-based", frac, ", P calendar-true)");
      }
      return absl::StrCat(name, ": sin, cos of 2*pi*x/P (x zero-based", frac,
                          ", P calendar-true)");
    case CalendarEncoding::kLinear:
      return absl::StrCat(name, ": x/(n-1) - 0.5 (GluonTS; x zero-based", frac,
                          ")");
    case CalendarEncoding::kIndex:
      return c.zero_based_index ? absl::StrCat(name, ": zero-based integer x (GluonTS index)")
                                : absl::StrCat(name, ": civil integer value");
  }
  return std::string(name);
}

void Add(std::vector<SchemaEntry>* schema, int64_t* offset, std::string block,
         int64_t width, std::string meaning, bool per_channel = false,
         bool names_zone = false) {
  schema->push_back({std::move(block), *offset, width, std::move(meaning),
                     per_channel, names_zone});
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
  // calendar fields, utc offset, DST and holiday columns (at most 3 a set).
  // Reserved so growing the vector never moves the entries' strings.
  schema.reserve(10 + (s.calendar.has_value()
                            ? s.calendar->fields.size() + 3 +
                                  (s.calendar->holidays.has_value()
                                       ? 3 * (1 + s.calendar->holidays->sets.size())
                                       : 0)
                            : 0));
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
  if (r.time.has_value() && !r.time->periods.empty()) {
    std::string periods;
    for (const TimePeriod& period : r.time->periods) {
      absl::StrAppend(&periods, periods.empty() ? "" : ", ",
                      absl::StrFormat("P = %g s k = 1..%d", period.period_seconds,
                                      period.order));
    }
    Add(&schema, &offset, "time", r.time->dim,
        absl::StrCat("sin, cos of 2*pi*k*(t - origin)/P interleaved per k: ",
                     periods, ", origin ", OriginName(r.time->origin)));
  } else if (r.time.has_value()) {
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
    for (size_t i = 0; i < cal.fields.size(); ++i) {
      const absl::string_view name = CalendarFieldName(cal.fields[i]);
      Add(&schema, &offset, absl::StrCat("calendar.", name),
          sum ? s.d_model : CalendarEncoder::FieldWidth(cal, i),
          sum ? absl::StrCat(name, ": Informer fixed sinusoid row PE(civil value)")
              : CalendarFieldMeaning(cal, i));
    }
    const std::string zone = cal.time_zone.empty() ? "UTC" : cal.time_zone;
    if (cal.include_utc_offset) {
      Add(&schema, &offset, "calendar.utc_offset", 1,
          absl::StrCat("hours east of UTC in ", zone), false, /*names_zone=*/true);
    }
    if (cal.include_dst) {
      Add(&schema, &offset, "calendar.dst", 1,
          absl::StrCat("1 while DST is in effect in ", zone), false,
          /*names_zone=*/true);
    }
    if (cal.holidays.has_value()) {
      for (const HolidayColumn& column : HolidayColumns(*cal.holidays)) {
        Add(&schema, &offset, absl::StrCat("calendar.", column.name), 1,
            column.meaning);
      }
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

absl::StatusOr<TemporalEncoders> TemporalEncoders::Make(const TemporalSpec& spec,
                                                         int64_t num_channels,
                                                         SinusoidAccuracy accuracy,
                                                         bool with_calendar) {
  TemporalEncoders e(num_channels, accuracy);
  const ResolvedBlocks r = Resolve(spec);
  if (r.time.has_value() && !r.time->periods.empty()) {
    e.time_.emplace(absl::MakeConstSpan(r.time->periods), accuracy);
  } else if (r.time.has_value()) {
    e.time_.emplace(r.time->dim, r.time->min_period_seconds, r.time->max_period_seconds,
                    accuracy);
  }
  if (spec.time2vec.has_value()) e.time2vec_.emplace(*spec.time2vec, accuracy);
  if (r.gaps.has_value()) e.gaps_.emplace(*r.gaps, num_channels, accuracy);
  if (with_calendar && spec.calendar.has_value() && spec.combine != CombineMode::kSum) {
    PHASOR_ASSIGN_OR_RETURN(
        const absl::TimeZone zone,
        LoadIanaTimeZone(spec.calendar->time_zone, "spec.temporal.calendar.time_zone"));
    e.calendar_.emplace(*spec.calendar, zone, /*sum_d_model=*/0,
                        std::numeric_limits<int64_t>::max(), accuracy);
  }
  // The containers' elements (phase steps, Time2Vec's terms in several
  // forms, holiday days); the encoders' fixed parts are within kFixedBytes.
  constexpr size_t kFixedBytes = 4096;
  e.approximate_bytes_ = sizeof(TemporalEncoders) + kFixedBytes;
  // A period is an ExactPhase and two 64-bit steps, ~32 bytes.
  if (e.time_.has_value()) e.approximate_bytes_ += static_cast<size_t>(e.time_->dim()) * 32;
  if (e.gaps_.has_value() && r.gaps->transform == GapTransform::kSinusoidal) {
    // The gaps' own ladder, sinusoidal_dim / 2 periods.
    e.approximate_bytes_ += static_cast<size_t>(r.gaps->sinusoidal_dim) * 32;
  }
  if (e.time2vec_.has_value()) {
    e.approximate_bytes_ += static_cast<size_t>(e.time2vec_->width()) * 96;
  }
  if (e.calendar_.has_value()) {
    e.approximate_bytes_ += static_cast<size_t>(e.calendar_->width()) * 64;
    if (spec.calendar->holidays.has_value()) {
      // Own dates as day numbers (shared calendar lists are not copied).
      const HolidaysBlock& h = *spec.calendar->holidays;
      size_t days = h.dates.size();
      for (const HolidaySet& set : h.sets) days += set.dates.size() + 4;
      e.approximate_bytes_ += days * sizeof(int64_t);
    }
  }
  return e;
}

}  // namespace phasor
