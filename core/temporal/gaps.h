// -----------------------------------------------------------------------------
// File: core/temporal/gaps.h
// -----------------------------------------------------------------------------
//
// Gap features of irregular multichannel series ("gaps" block).
//
// Global Δt_r = t_r − t_{r−1}, the time since the previous row (0 between
// rows with equal timestamps).
//
// Per-channel δ as GRU-D defines it (Che et al. 2018, "Recurrent Neural
// Networks for Multivariate Time Series with Missing Values", eq. 2): the time
// since channel c's last observation strictly before the row's time,
//   δ_{r,c} = t_r − max{ t_s : t_s < t_r, channel c observed at row s }.
// "Strictly before" is taken in time, not in row order, so rows sharing a
// timestamp (a lab panel sent as long-layout events) get identical δ whatever
// their order; with strictly increasing timestamps this is GRU-D's recursion.
// A channel never observed before t_r has no δ; the first-observation policy
// decides: ZERO (δ = 0), SINCE_ORIGIN (δ = t_r − origin), FLAG (δ = 0 plus an
// indicator column that is 1 exactly then). The first row's Δt follows the
// same policy.
//
// Transforms of a gap g (seconds): RAW g/unit_seconds; LOG1P
// sign(x)·log1p(|x|) of x = g/unit_seconds (sign-preserving so an EXPLICIT
// origin after the data stays finite); SINUSOIDAL the time-sinusoid ladder of
// time_sinusoid.h (sin, cos of 2π·g/P_k) with its own dim and periods.
//
// Optional columns: the observed mask m_{r,c}, and the last-observed value
// (GRU-D's forward imputation x̂ = m·x + (1−m)·x_last, where x_last is the value
// at the observation δ refers to; 0 before any observation).
//
// Column order: [Δt (w) | first-row flag (FLAG)] [δ_0..δ_{C−1} (C·w) | C flags
// (FLAG)] [mask (C)] [last value (C)], w = 1, or the sinusoid dim.
//
// Thread-safety: GapsEncoder is immutable and safe to share; a GapTracker is a
// value type owned by one thread at a time.
//
// Example:
//
//   GapsBlock block;
//   block.per_channel_delta = true;
//   const GapsEncoder encoder(block, /*num_channels=*/3, SinusoidAccuracy::kFloat32);
//   GapTracker tracker(/*num_channels=*/3);
//   encoder.EncodeRows(&tracker, obs, /*begin=*/0, /*n=*/obs.num_rows(),
//                      /*origin_ns=*/obs.timestamps[0], out, /*stride=*/encoder.width());
#ifndef PHASOR_CORE_TEMPORAL_GAPS_H_
#define PHASOR_CORE_TEMPORAL_GAPS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/math/sincos.h"
#include "core/temporal/observations.h"
#include "core/temporal/time_sinusoid.h"

namespace phasor {

enum class FirstObservationPolicy { kZero, kSinceOrigin, kFlag };
enum class GapTransform { kRaw, kLog1p, kSinusoidal };

struct GapsBlock {
  bool global_delta = true;       // Δt column(s).
  bool per_channel_delta = true;  // δ columns, one group per channel.
  FirstObservationPolicy first_observation = FirstObservationPolicy::kZero;
  GapTransform transform = GapTransform::kRaw;
  double unit_seconds = 1.0;       // RAW / LOG1P unit: 3600 = hours.
  bool include_mask = false;       // C columns m_{r,c} in {0, 1}.
  bool include_last_value = false; // C columns of forward-filled values.
  // The origin of SINCE_ORIGIN.
  OriginKind origin = OriginKind::kFirstObservation;
  int64_t origin_ns = 0;
  // SINUSOIDAL only: width per gap and the period ladder.
  int64_t sinusoidal_dim = 8;
  double sinusoidal_min_period_seconds = 1.0;
  double sinusoidal_max_period_seconds = 365.2425 * 86400.0;
};

// Errors name `field_prefix`.unit_seconds, .sinusoidal_dim, ...; a block that
// selects no column is INVALID_ARGUMENT on `field_prefix`.
absl::Status ValidateGapsBlock(const GapsBlock& block,
                               absl::string_view field_prefix);

// Width of one transformed gap: 1, or sinusoidal_dim.
int64_t GapValueWidth(const GapsBlock& block);
// Columns the block writes for C channels.
int64_t GapsWidth(const GapsBlock& block, int64_t num_channels);

// The serial memory of a series: per channel, the latest observation strictly
// before the current row's time (the "history" δ refers to) and the ones made
// at the current time (folded into the history once time moves on).
class GapTracker final {
 public:
  explicit GapTracker(int64_t num_channels);
  // REQUIRES: ValidateSeriesState(state, ...).ok().
  explicit GapTracker(const SeriesState& state);

  // Start over, as the constructors do, keeping the storage (a panel reuses
  // one tracker for all its series).
  void Reset(int64_t num_channels);
  void Reset(const SeriesState& state);

  SeriesState ToState() const;
  // Writes the state into *out, reusing its storage.
  void ToState(SeriesState* out) const;

  bool has_rows() const { return has_rows_; }
  int64_t first_timestamp_ns() const { return first_ns_; }

  // Starts the next row at t_ns. REQUIRES: t_ns >= the previous row's time.
  void BeginRow(int64_t t_ns);
  // After BeginRow: whether a row preceded this one, and its time.
  bool has_previous_row() const { return has_previous_row_; }
  int64_t previous_row_ns() const { return previous_row_ns_; }
  // After BeginRow: channel c's latest observation strictly before this
  // row's time.
  bool seen_before(int64_t c) const { return channels_[c].history_seen; }
  int64_t last_seen_before_ns(int64_t c) const {
    return channels_[c].history_ns;
  }
  double last_value_before(int64_t c) const {
    return channels_[c].history_value;
  }
  // Records the row's observations. REQUIRES: BeginRow called for `row`.
  void ObserveRow(const ObservationsView& observations, int64_t row);
  // Records one observation of channel c at the current row's time (what
  // ObserveRow does per observed channel). Leaves everything the getters
  // above read unchanged until the next BeginRow.
  void Observe(int64_t c, double value);
  // Observe(c, value) when `observed`, else nothing; without a branch on
  // `observed` (whether a channel is observed in a row is random).
  void ObserveIf(int64_t c, bool observed, double value) {
    Channel& ch = channels_[c];
    current_[num_current_] = c;
    num_current_ += (observed && !ch.current_seen) ? 1 : 0;
    ch.current_seen = ch.current_seen || observed;
    ch.current_value = observed ? value : ch.current_value;
  }
  // BeginRow and ObserveRow for rows [begin, begin + n).
  void AdvanceRows(const ObservationsView& observations, int64_t begin, int64_t n);

 private:
  // Its column-wise tile path reads and writes the channels' memory
  // directly.
  friend class GapsEncoder;
  // BeginRow's row-level part (the previous row, the first and the current
  // time); returns whether time moved on, when what was observed at
  // previous_row_ns() becomes history.
  bool AdvanceTime(int64_t t_ns);
  struct Channel {
    bool history_seen = false;
    int64_t history_ns = 0;
    double history_value = 0.0;
    bool current_seen = false;  // Observed at the current time last_ns_.
    double current_value = 0.0;
  };

  bool has_rows_ = false;
  int64_t first_ns_ = 0;
  int64_t last_ns_ = 0;
  bool has_previous_row_ = false;
  int64_t previous_row_ns_ = 0;
  std::vector<Channel> channels_;
  // Channels with current_seen set: the first num_current_ of C + 1 slots.
  std::vector<int64_t> current_;
  int64_t num_current_ = 0;
};

// The gaps block, prepared once per request and shared by its series.
class GapsEncoder final {
 public:
  // REQUIRES: ValidateGapsBlock(block, ...).ok(). `accuracy` is the
  // SINUSOIDAL transform's (time_sinusoid.h); RAW and LOG1P are one
  // division (and log1p) in double either way, LOG1P's log1p from the
  // vector kernel for kFloat32 and from libm for kFloat64 (both < 1 ulp; the
  // float32 outputs are the same).
  GapsEncoder(const GapsBlock& block, int64_t num_channels,
              SinusoidAccuracy accuracy = SinusoidAccuracy::kFloat32);

  int64_t width() const { return width_; }

  // Writes width() values for row `row` at time t_ns. `origin_ns` is the
  // series' resolved SINCE_ORIGIN origin.
  // REQUIRES: tracker.BeginRow(t_ns) called for this row and ObserveRow not
  // yet.
  void EncodeRow(const GapTracker& tracker, const ObservationsView& observations,
                 int64_t row, int64_t t_ns, int64_t origin_ns,
                 double* out) const;

  // BeginRow, EncodeRow and ObserveRow for rows [begin, begin + n), row i's
  // values at out + i·stride: one call per tile. The rows' memory is
  // serial; their LOG1P gaps then take their log1p together (vectorised),
  // the same float32 values as row by row.
  void EncodeRows(GapTracker* tracker, const ObservationsView& observations,
                  int64_t begin, int64_t n, int64_t origin_ns, double* out,
                  int64_t stride) const;

 private:
  // One row's columns, with RAW and LOG1P gaps left in nanoseconds (as
  // doubles) for ScaleGaps (SINUSOIDAL gaps are final). Reader reads the row's
  // observations (gaps.cc); with a non-const tracker the row's observations
  // are also recorded (ObserveRow), which the getters it reads do not see.
  template <typename Tracker, typename Reader>
  void RowPass(Tracker& tracker, const Reader& reader, int64_t row,
               int64_t t_ns, int64_t origin_ns, double* out) const;
  // RAW and LOG1P: x = g/unit of the gaps g of `rows` rows written by
  // RowPass (row i at out + i·stride), then LOG1P's sign(x)·log1p(|x|),
  // all in one pass.
  void ScaleGaps(double* out, int64_t rows, int64_t stride) const;
  // x = g/unit for `count` contiguous gaps g (ns, as doubles), then
  // LOG1P's sign(x)·log1p(|x|): the last step of RAW and LOG1P.
  void TransformGaps(double* x, int64_t count) const;
  // EncodeRows for wide rows with RAW or LOG1P gaps when no gap can leave
  // int64 (GapsFitInt64): the tile a column at a time, each channel's memory
  // in a vector lane down the rows (ChannelBlockKernel), gaps transformed
  // in the same vectors. The same values and tracker state as RowPass row by row.
  // `value_count`: the float64 values' elements (0 for others).
  template <typename Reader>
  void EncodeColumns(GapTracker& tracker, const Reader& reader,
                     absl::Span<const int64_t> times, int64_t value_count,
                     int64_t begin, int64_t n, int64_t origin_ns, double* out,
                     int64_t stride) const;
  // Whether every gap of rows [begin, begin + n) fits in int64: the rows'
  // times, the tracker's remembered times and a SINCE_ORIGIN origin span
  // less than 2^63 ns (292 years).
  bool GapsFitInt64(const GapTracker& tracker, absl::Span<const int64_t> times,
                    int64_t begin, int64_t n, int64_t origin_ns) const;

  // Where a row's column groups start (the order above): Δt at 0 and its
  // flag at 1, δ_0 at `delta` and the δ flags at delta + C, the mask, the
  // last values.
  struct Columns {
    int64_t delta = 0;
    int64_t mask = 0;
    int64_t last = 0;
  };

  GapsBlock block_;
  int64_t num_channels_;
  Columns columns_;
  int64_t value_width_;
  int64_t width_;
  double unit_ns_;
  // kFloat32 takes LOG1P from the vector kernel (SignedLog1p), kFloat64
  // from libm.
  SinusoidAccuracy accuracy_;
  std::optional<TimeSinusoid> sinusoid_;
};

}  // namespace phasor

#endif  // PHASOR_CORE_TEMPORAL_GAPS_H_
