#include "core/temporal/compose.h"

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
#include "core/temporal/compose_spec.h"
#include "core/temporal/time_zone.h"
#include "core/temporal/wide_values.h"

namespace phasor {

using compose_internal::ResolvedBlocks;
using compose_internal::Resolve;

namespace {

// The output element types: float32, or float64 (computed with
// SinusoidAccuracy::kFloat64 and stored unrounded).
template <typename T>
constexpr SinusoidAccuracy AccuracyFor() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  return std::is_same_v<T, double> ? SinusoidAccuracy::kFloat64
                                   : SinusoidAccuracy::kFloat32;
}

// `out` holds exactly rows · width values.
template <typename T>
absl::Status CheckOutput(absl::Span<const T> out, int64_t rows, int64_t width) {
  const auto size = static_cast<int64_t>(out.size());
  // Compared by division: rows · width can overflow for a hostile caller.
  const bool fits = width == 0 ? size == 0
                               : size % width == 0 && size / width == rows;
  if (!fits) {
    return InvalidField("features",
                        absl::StrCat("output holds ", out.size(),
                                     std::is_same_v<T, float> ? " floats"
                                                              : " doubles",
                                     "; rows ", rows, " x width ", width,
                                     " needed"));
  }
  return absl::OkStatus();
}

// Rows encoded together: each block fills its columns for the whole tile
// before the next block runs, and the tile is then stored (converted to
// float32, or copied for float64) at once.
constexpr int64_t kTileRows = 64;

// What a call prepares once and shares among its series and threads.
struct Prepared {
  const TemporalSpec* spec = nullptr;
  const PanelView* panel = nullptr;
  absl::Span<const SeriesState* const> states_in;
  ResolvedBlocks resolved;
  bool sum = false;
  int64_t width = 0;
  int64_t channels = 0;
  int64_t content_dim = 0;
  double content_scale = 1.0;
  // The blocks' encoders: the caller's, or those of `own`.
  const TimeSinusoid* time = nullptr;
  const Time2Vec* time2vec = nullptr;
  const GapsEncoder* gaps = nullptr;
  // One calendar per time zone of the call (the spec's, or the panel's list).
  absl::Span<const CalendarEncoder> calendars;
  std::optional<TemporalEncoders> own;
  std::vector<CalendarEncoder> own_calendars;

  const SeriesState* state_in(int64_t s) const {
    return states_in.empty() ? nullptr : states_in[s];
  }
  int32_t zone(int64_t s) const {
    return panel->zone_index.empty() ? 0 : panel->zone_index[s];
  }
};

absl::Status Prepare(const TemporalSpec& spec, const FeatureLayout& layout,
                     const PanelView& panel, absl::Span<const absl::TimeZone> zones,
                     absl::Span<const SeriesState* const> states_in,
                     SinusoidAccuracy accuracy, const TemporalEncoders* encoders,
                     Prepared* p) {
  const ObservationsView& obs = panel.rows;
  p->spec = &spec;
  p->panel = &panel;
  p->states_in = states_in;
  p->resolved = Resolve(spec);
  p->sum = spec.combine == CombineMode::kSum;
  p->width = layout.width;
  p->channels = obs.num_channels;
  p->content_dim = obs.has_content() ? obs.content_dim : 0;
  p->content_scale = spec.content.has_value() ? spec.content->scale : 1.0;
  assert(encoders == nullptr || (encoders->num_channels() == p->channels &&
                                 encoders->accuracy() == accuracy));
  if (encoders == nullptr) {
    PHASOR_ASSIGN_OR_RETURN(p->own, TemporalEncoders::Make(spec, p->channels, accuracy,
                                                           /*with_calendar=*/zones.empty()));
    encoders = &*p->own;
  }
  p->time = encoders->time();
  p->time2vec = encoders->time2vec();
  p->gaps = encoders->gaps();
  if (!spec.calendar.has_value()) return absl::OkStatus();
  if (zones.empty() && encoders->calendar() != nullptr) {
    p->calendars = absl::MakeConstSpan(encoders->calendar(), 1);
    return absl::OkStatus();
  }
  // A SUM calendar (tables within the output's rows), or per-series zones.
  const int64_t d_model = p->sum ? spec.d_model : 0;
  if (zones.empty()) {
    PHASOR_ASSIGN_OR_RETURN(
        const absl::TimeZone zone,
        LoadIanaTimeZone(spec.calendar->time_zone, "spec.temporal.calendar.time_zone"));
    p->own_calendars.emplace_back(*spec.calendar, zone, d_model,
                                  /*max_table_rows=*/obs.num_rows(), accuracy);
  } else {
    // SUM tables of all zones together stay within the output's rows.
    const int64_t table_rows = obs.num_rows() / static_cast<int64_t>(zones.size());
    p->own_calendars.reserve(zones.size());
    for (const absl::TimeZone& zone : zones) {
      p->own_calendars.emplace_back(*spec.calendar, zone, d_model, table_rows, accuracy);
    }
  }
  p->calendars = p->own_calendars;
  return absl::OkStatus();
}

// A series' origins, from its state or its first row.
struct SeriesOrigins {
  int64_t time = 0;
  int64_t time2vec = 0;
  int64_t gaps = 0;
};

SeriesOrigins OriginsOf(const Prepared& p, int64_t s) {
  const SeriesState* state = p.state_in(s);
  const int64_t begin = p.panel->series_offsets[s];
  const int64_t end = p.panel->series_offsets[s + 1];
  const int64_t first_ns = state != nullptr && state->has_rows
                               ? state->first_timestamp_ns
                               : (end > begin ? p.panel->rows.row_times()[begin] : 0);
  SeriesOrigins o;
  const ResolvedBlocks& r = p.resolved;
  if (r.time.has_value()) {
    o.time = ResolveOriginNs(r.time->origin, r.time->origin_ns, first_ns);
  }
  if (p.spec->time2vec.has_value()) {
    o.time2vec = ResolveOriginNs(p.spec->time2vec->origin,
                                 p.spec->time2vec->origin_ns, first_ns);
  }
  if (r.gaps.has_value()) {
    o.gaps = ResolveOriginNs(r.gaps->origin, r.gaps->origin_ns, first_ns);
  }
  return o;
}

// Sets `tracker` to the memory of series s before its first row.
void StartSeries(const Prepared& p, int64_t s, GapTracker* tracker) {
  const SeriesState* state = p.state_in(s);
  if (state != nullptr) {
    tracker->Reset(*state);
  } else {
    tracker->Reset(p.channels);
  }
}

// One thread's working memory, allocated once per chunk.
class ChunkScratch {
 public:
  // `tile_rows`: the most rows a tile of the chunk holds.
  ChunkScratch(const Prepared& p, int64_t tile_rows)
      : tile_(static_cast<size_t>(tile_rows * p.width)),
        term_(p.sum ? static_cast<size_t>(tile_rows * p.width) : 0),
        writers_(p.calendars.size()),
        calendars_(p.calendars) {}

  double* tile() { return tile_.data(); }
  double* term() { return term_.data(); }
  GapTracker& tracker() { return tracker_; }
  // The calendar writer of zone z, made on first use; null without a
  // calendar block.
  CalendarEncoder::Writer* writer(int32_t z) {
    if (writers_.empty()) return nullptr;
    if (!writers_[z].has_value()) writers_[z].emplace(calendars_[z]);
    return &*writers_[z];
  }

 private:
  std::vector<double> tile_;
  std::vector<double> term_;
  GapTracker tracker_{0};
  std::vector<std::optional<CalendarEncoder::Writer>> writers_;
  absl::Span<const CalendarEncoder> calendars_;
};

// Encodes rows [begin, begin + n) of one series (n <= kTileRows) into
// out[begin · width ...]. With `track`, scratch's tracker holds the series'
// memory before `begin` and is advanced past the tile.
template <typename T>
void EncodeTile(const Prepared& p, const SeriesOrigins& o, int64_t begin,
                int64_t n, bool track, CalendarEncoder::Writer* writer,
                ChunkScratch* scratch, T* out) {
  const ObservationsView& obs = p.panel->rows;
  const absl::Span<const int64_t> times = obs.row_times();
  const TemporalSpec& s = *p.spec;
  const int64_t width = p.width;
  const int64_t channels = p.channels;
  double* const tile = scratch->tile();
  double* const term = scratch->term();
  // CONCAT: each block writes its columns of row i at tile + i·width +
  // column. SUM: each block writes row i at term + i·width (all d_model
  // columns), which is then added to the tile, in block order.
  int64_t column = 0;
  const auto target = [&](int64_t i) {
    return p.sum ? term + i * width : tile + i * width + column;
  };
  const auto done = [&](int64_t block_width) {
    if (p.sum) {
      for (int64_t k = 0; k < n * width; ++k) tile[k] += term[k];
    } else {
      column += block_width;
    }
  };
  if (p.sum) std::fill(tile, tile + n * width, 0.0);

  if (s.content.has_value()) {
    if (p.content_dim > 0) {
      const auto scale_rows = [&](const auto* content) {
        for (int64_t i = 0; i < n; ++i) {
          const auto* src = content + (begin + i) * p.content_dim;
          double* dst = target(i);
          for (int64_t j = 0; j < p.content_dim; ++j) {
            dst[j] = static_cast<double>(src[j]) * p.content_scale;
          }
        }
      };
      if (obs.content_f64.empty()) {
        scale_rows(obs.content.data());
      } else {
        scale_rows(obs.content_f64.data());
      }
      done(p.content_dim);
    } else if (obs.layout == ObservationLayout::kWide) {
      // Selects on lane masks, not branches (a value is observed at
      // random). target(i) = target(0) + i·width, for SUM and CONCAT.
      WriteValuesAndFlags(obs, begin, n, target(0), width);
      done(2 * channels);
    } else {
      VisitObservationReader(obs, [&](const auto& reader) {
        using Reader = std::decay_t<decltype(reader)>;
        if constexpr (Reader::kLong) {
          for (int64_t i = 0; i < n; ++i) {
            // One channel per event: zeros, then that channel's value.
            double* dst = target(i);
            std::fill(dst, dst + 2 * channels, 0.0);
            double value = 0.0;
            const int64_t c = reader.Channel(begin + i);
            const bool observed = reader.At(begin + i, c, &value);
            dst[c] = observed ? value : 0.0;
            dst[channels + c] = observed ? 1.0 : 0.0;
          }
        }
      });
      done(2 * channels);
    }
  }
  if (p.time != nullptr) {
    // All the tile's angles go through the vector kernel together.
    p.time->EncodeRows(times.subspan(begin, n), o.time, target(0), width);
    done(p.time->dim());
  }
  if (p.time2vec != nullptr) {
    p.time2vec->EncodeRows(times.subspan(begin, n), o.time2vec, target(0), width);
    done(p.time2vec->width());
  }
  GapTracker& tracker = scratch->tracker();
  if (p.gaps != nullptr) {
    p.gaps->EncodeRows(&tracker, obs, begin, n, o.gaps, target(0), width);
    done(p.gaps->width());
  } else if (track) {
    tracker.AdvanceRows(obs, begin, n);
  }
  if (writer != nullptr) {
    // target(i) = target(0) + i·width, for SUM and CONCAT.
    writer->EncodeRows(times.subspan(begin, n), target(0), width);
    done(p.calendars.front().width());
  }
  T* dst = out + begin * width;
  if constexpr (std::is_same_v<T, double>) {
    std::copy(tile, tile + n * width, dst);
  } else {
    DoublesToFloats(absl::MakeConstSpan(tile, static_cast<size_t>(n * width)), dst);
  }
}

// Where the chunks of a call begin: ParallelFor's plan over the rows, each
// boundary moved to the nearest series start within a quarter chunk of it,
// so that chunks hold whole series and replay nothing (a boundary inside a
// long series stays where it is). {0, rows} for one chunk.
std::vector<int64_t> ChunkBounds(const ExecutionOptions& options,
                                 absl::Span<const int64_t> offsets, int64_t width) {
  const int64_t rows = offsets.back();
  const ChunkPlan plan = PlanChunks(options, rows, width);
  std::vector<int64_t> bounds = {0};
  for (int64_t c = 1; c < plan.chunks; ++c) {
    const int64_t target = plan.begin(c);
    // Series starts on either side of the target, the nearer one winning.
    const auto after = std::lower_bound(offsets.begin(), offsets.end(), target);
    int64_t best = target;
    int64_t best_distance = plan.step / 4 + 1;
    if (after != offsets.end() && *after - target < best_distance) {
      best = *after;
      best_distance = *after - target;
    }
    if (after != offsets.begin() && target - *(after - 1) < best_distance) {
      best = *(after - 1);
    }
    if (best > bounds.back() && best < rows) bounds.push_back(best);
  }
  bounds.push_back(rows);
  return bounds;
}

}  // namespace

template <typename T>
absl::Status EncodeValidatedPanel(const TemporalSpec& spec,
                                    const FeatureLayout& layout,
                                    const PanelView& panel,
                                    absl::Span<const absl::TimeZone> zones,
                                    absl::Span<const SeriesState* const> states_in,
                                    const ExecutionOptions& options,
                                    absl::Span<T> out,
                                    absl::Span<SeriesState> states_out,
                                    const TemporalEncoders* encoders) {
  Prepared p;
  PHASOR_RETURN_IF_ERROR(Prepare(spec, layout, panel, zones, states_in, AccuracyFor<T>(),
                                 encoders, &p));
  const ObservationsView& obs = panel.rows;
  const absl::Span<const int64_t> offsets = panel.series_offsets;
  const int64_t num_series = panel.num_series();
  const int64_t rows = obs.num_rows();
  const int64_t width = p.width;
  const bool write_states = !states_out.empty();
  assert(static_cast<int64_t>(out.size()) == rows * width);
  assert(!write_states || static_cast<int64_t>(states_out.size()) == num_series);

  // Early stop is polled about once per grain of work: per output row the
  // work is `width` values, per serial-pass row it is the channels visited.
  const int64_t grain = std::max<int64_t>(options.grain_elements, 1);
  const int64_t rows_per_poll =
      std::max<int64_t>(1, grain / std::max<int64_t>(width, 1));
  const int64_t observe_cost = obs.layout == ObservationLayout::kWide
                                   ? std::max<int64_t>(p.channels, 1)
                                   : 1;
  const int64_t serial_rows_per_poll = std::max<int64_t>(1, grain / observe_cost);
  const auto cancelled = [] {
    return absl::CancelledError(
        "stopped early: the caller no longer wants the result");
  };

  // Polls fall between tiles, so a tile is at most a poll's worth of rows.
  const int64_t tile_rows = std::min(kTileRows, rows_per_poll);
  const std::vector<int64_t> bounds = ChunkBounds(options, offsets, width);
  // The gaps memory is needed for the gaps block and for the states.
  const bool track = p.gaps != nullptr || write_states;
  std::atomic<bool> stopped{false};
  // Rows [begin, end): the rest of the series holding `begin` (its memory
  // rebuilt by replaying its earlier rows), then every series starting in
  // [begin, end) (the last chunk also takes empty series at the end). A
  // series' state is written by the chunk holding its last row; an empty
  // series', by the chunk its offset falls in.
  const auto encode_chunk = [&](int64_t begin, int64_t end) {
    // A tile holds rows of [begin, end) only: a small call's scratch is small.
    ChunkScratch scratch(p, std::max<int64_t>(1, std::min(tile_rows, end - begin)));
    GapTracker& tracker = scratch.tracker();
    const auto stop = [&] {
      if (stopped.load(std::memory_order_relaxed) || StopRequested(options)) {
        stopped.store(true, std::memory_order_relaxed);
        return true;
      }
      return false;
    };
    const int64_t first_starting =
        std::lower_bound(offsets.begin(), offsets.end() - 1, begin) - offsets.begin();
    const bool straddles =
        first_starting == num_series ? begin < rows : offsets[first_starting] > begin;
    int64_t since_poll = rows_per_poll;  // Poll before the first tile.
    for (int64_t s = straddles ? first_starting - 1 : first_starting; s < num_series;
         ++s) {
      const int64_t series_begin = offsets[s];
      const int64_t series_end = offsets[s + 1];
      if (series_begin > end || (series_begin == end && end < rows)) break;
      const int64_t lo = std::max(begin, series_begin);
      const int64_t hi = std::min(end, series_end);
      if (track) {
        StartSeries(p, s, &tracker);
        // The part of the series before this chunk, replayed.
        for (int64_t r = series_begin; r < lo; r += serial_rows_per_poll) {
          if (stop()) return;
          tracker.AdvanceRows(obs, r, std::min(serial_rows_per_poll, lo - r));
        }
      }
      const SeriesOrigins origins = OriginsOf(p, s);
      CalendarEncoder::Writer* writer = scratch.writer(p.zone(s));
      for (int64_t r = lo; r < hi; r += tile_rows) {
        if (since_poll >= rows_per_poll) {
          since_poll = 0;
          if (stop()) return;
        }
        const int64_t n = std::min(tile_rows, hi - r);
        EncodeTile<T>(p, origins, r, n, track, writer, &scratch, out.data());
        since_poll += n;
      }
      if (write_states && series_end <= end) tracker.ToState(&states_out[s]);
    }
  };
  if (bounds.size() > 2) {
    RunRanges(options, bounds, encode_chunk);
  } else {
    encode_chunk(0, rows);
  }
  if (stopped.load()) return cancelled();
  return absl::OkStatus();
}

template <typename T>
absl::Status EncodePanel(const TemporalSpec& spec, const PanelView& panel,
                           absl::Span<const absl::TimeZone> zones,
                           absl::Span<const SeriesState* const> states_in,
                           const ExecutionOptions& options, absl::Span<T> out,
                           absl::Span<SeriesState> states_out) {
  PHASOR_RETURN_IF_ERROR(ValidateTemporalSpec(spec));
  if (!zones.empty() && !spec.calendar.has_value()) {
    return InvalidField("observations.time_zones",
                        "per-series time zones need a calendar block");
  }
  PHASOR_RETURN_IF_ERROR(ValidatePanel(panel, states_in,
                                       static_cast<int64_t>(zones.size())));
  const ObservationsView& rows = panel.rows;
  PHASOR_ASSIGN_OR_RETURN(
      const FeatureLayout layout,
      TemporalFeatureLayout(spec, rows.num_channels,
                            rows.has_content() ? rows.content_dim : 0));
  PHASOR_RETURN_IF_ERROR(
      CheckOutput(absl::Span<const T>(out), rows.num_rows(), layout.width));
  if (!states_out.empty() &&
      static_cast<int64_t>(states_out.size()) != panel.num_series()) {
    return InvalidField("states", absl::StrCat("output holds ", states_out.size(),
                                               " states for ", panel.num_series(),
                                               " series"));
  }
  return EncodeValidatedPanel(spec, layout, panel, zones, states_in, options,
                              out, states_out, /*encoders=*/nullptr);
}

template <typename T>
absl::Status EncodeValidatedObservations(const TemporalSpec& spec,
                                           const FeatureLayout& layout,
                                           const ObservationsView& observations,
                                           const SeriesState* state_in,
                                           const ExecutionOptions& options,
                                           absl::Span<T> out,
                                           SeriesState* state_out) {
  const int64_t offsets[] = {0, observations.num_rows()};
  const PanelView panel{observations, offsets, {}};
  const SeriesState* const states_in[] = {state_in};
  // state_out may be state_in, which the encoding reads until it ends.
  SeriesState result;
  PHASOR_RETURN_IF_ERROR(EncodeValidatedPanel(
      spec, layout, panel, /*zones=*/{},
      state_in != nullptr ? absl::MakeConstSpan(states_in)
                          : absl::Span<const SeriesState* const>(),
      options, out,
      state_out != nullptr ? absl::MakeSpan(&result, 1) : absl::Span<SeriesState>(),
      /*encoders=*/nullptr));
  if (state_out != nullptr) *state_out = std::move(result);
  return absl::OkStatus();
}

template <typename T>
absl::Status EncodeObservations(const TemporalSpec& spec,
                                  const ObservationsView& observations,
                                  const SeriesState* state_in,
                                  const ExecutionOptions& options,
                                  absl::Span<T> out, SeriesState* state_out) {
  PHASOR_RETURN_IF_ERROR(ValidateTemporalSpec(spec));
  PHASOR_RETURN_IF_ERROR(ValidateObservations(observations));
  if (state_in != nullptr) {
    PHASOR_RETURN_IF_ERROR(ValidateSeriesState(*state_in, observations));
  }
  PHASOR_ASSIGN_OR_RETURN(
      const FeatureLayout layout,
      TemporalFeatureLayout(spec, observations.num_channels,
                            observations.has_content()
                                ? observations.content_dim
                                : 0));
  PHASOR_RETURN_IF_ERROR(
      CheckOutput(absl::Span<const T>(out), observations.num_rows(), layout.width));
  return EncodeValidatedObservations(spec, layout, observations, state_in,
                                       options, out, state_out);
}

// The entry points' two output types (compose.h declares the templates).
#define PHASOR_COMPOSE_OUTPUT_TYPE(T)                                                \
  template absl::Status EncodeObservations<T>(                                      \
      const TemporalSpec&, const ObservationsView&, const SeriesState*,             \
      const ExecutionOptions&, absl::Span<T>, SeriesState*);                        \
  template absl::Status EncodeValidatedObservations<T>(                             \
      const TemporalSpec&, const FeatureLayout&, const ObservationsView&,           \
      const SeriesState*, const ExecutionOptions&, absl::Span<T>, SeriesState*);    \
  template absl::Status EncodePanel<T>(                                             \
      const TemporalSpec&, const PanelView&, absl::Span<const absl::TimeZone>,      \
      absl::Span<const SeriesState* const>, const ExecutionOptions&, absl::Span<T>, \
      absl::Span<SeriesState>);                                                     \
  template absl::Status EncodeValidatedPanel<T>(                                    \
      const TemporalSpec&, const FeatureLayout&, const PanelView&,                  \
      absl::Span<const absl::TimeZone>, absl::Span<const SeriesState* const>,       \
      const ExecutionOptions&, absl::Span<T>, absl::Span<SeriesState>,              \
      const TemporalEncoders*);
PHASOR_COMPOSE_OUTPUT_TYPE(float)
PHASOR_COMPOSE_OUTPUT_TYPE(double)
#undef PHASOR_COMPOSE_OUTPUT_TYPE

}  // namespace phasor
