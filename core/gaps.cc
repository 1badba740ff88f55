#include "core/gaps.h"

#include <cassert>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/errors.h"
#include "core/status_macros.h"

namespace phasor {

absl::Status ValidateGapsBlock(const GapsBlock& block,
                               absl::string_view field_prefix) {
  if (!block.global_delta && !block.per_channel_delta && !block.include_mask &&
      !block.include_last_value) {
    return InvalidField(field_prefix,
                        "selects no column: set global_delta, "
                        "per_channel_delta, include_mask or include_last_value");
  }
  if (!std::isfinite(block.unit_seconds) || block.unit_seconds <= 0) {
    return InvalidField(absl::StrCat(field_prefix, ".unit_seconds"),
                        absl::StrCat("must be finite and > 0, got ",
                                     block.unit_seconds));
  }
  if (block.transform == GapTransform::kSinusoidal) {
    PHASOR_RETURN_IF_ERROR(ValidatePeriodLadder(
        block.sinusoidal_dim, block.sinusoidal_min_period_seconds,
        block.sinusoidal_max_period_seconds,
        absl::StrCat(field_prefix, ".sinusoidal_dim"),
        absl::StrCat(field_prefix, ".sinusoidal_min_period_seconds"),
        absl::StrCat(field_prefix, ".sinusoidal_max_period_seconds")));
  }
  return absl::OkStatus();
}

int64_t GapValueWidth(const GapsBlock& block) {
  return block.transform == GapTransform::kSinusoidal ? block.sinusoidal_dim : 1;
}

int64_t GapsWidth(const GapsBlock& block, int64_t num_channels) {
  const int64_t w = GapValueWidth(block);
  const int64_t flag = block.first_observation == FirstObservationPolicy::kFlag;
  int64_t width = 0;
  if (block.global_delta) width += w + flag;
  if (block.per_channel_delta) width += num_channels * (w + flag);
  if (block.include_mask) width += num_channels;
  if (block.include_last_value) width += num_channels;
  return width;
}

GapTracker::GapTracker(int64_t num_channels) { Reset(num_channels); }

GapTracker::GapTracker(const SeriesState& state) { Reset(state); }

void GapTracker::Reset(int64_t num_channels) {
  has_rows_ = false;
  first_ns_ = 0;
  last_ns_ = 0;
  has_previous_row_ = false;
  previous_row_ns_ = 0;
  channels_.assign(static_cast<size_t>(num_channels), Channel{});
  current_.clear();
}

void GapTracker::Reset(const SeriesState& state) {
  Reset(static_cast<int64_t>(state.channels.size()));
  has_rows_ = state.has_rows;
  first_ns_ = state.first_timestamp_ns;
  last_ns_ = state.last_timestamp_ns;
  for (size_t c = 0; c < state.channels.size(); ++c) {
    const ChannelState& in = state.channels[c];
    Channel& ch = channels_[c];
    if (in.seen && in.last_seen_ns == state.last_timestamp_ns) {
      ch.current_seen = true;
      ch.current_value = in.last_value;
      if (current_.capacity() == 0) current_.reserve(channels_.size());
      current_.push_back(static_cast<int64_t>(c));
      ch.history_seen = in.seen_before_last;
      ch.history_ns = in.before_last_seen_ns;
      ch.history_value = in.before_last_value;
    } else {
      ch.history_seen = in.seen;
      ch.history_ns = in.last_seen_ns;
      ch.history_value = in.last_value;
    }
    if (!ch.history_seen) {
      ch.history_ns = 0;
      ch.history_value = 0.0;
    }
  }
}

SeriesState GapTracker::ToState() const {
  SeriesState state;
  ToState(&state);
  return state;
}

void GapTracker::ToState(SeriesState* out) const {
  out->has_rows = has_rows_;
  out->first_timestamp_ns = first_ns_;
  out->last_timestamp_ns = last_ns_;
  out->channels.resize(channels_.size());
  for (size_t c = 0; c < channels_.size(); ++c) {
    const Channel& ch = channels_[c];
    ChannelState& channel = out->channels[c];
    channel.seen_before_last = ch.history_seen;
    channel.before_last_seen_ns = ch.history_ns;
    channel.before_last_value = ch.history_value;
    if (ch.current_seen) {
      channel.seen = true;
      channel.last_seen_ns = last_ns_;
      channel.last_value = ch.current_value;
    } else {
      channel.seen = ch.history_seen;
      channel.last_seen_ns = ch.history_ns;
      channel.last_value = ch.history_value;
    }
  }
}

void GapTracker::BeginRow(int64_t t_ns) {
  has_previous_row_ = has_rows_;
  previous_row_ns_ = last_ns_;
  if (!has_rows_) {
    has_rows_ = true;
    first_ns_ = t_ns;
    last_ns_ = t_ns;
    return;
  }
  assert(t_ns >= last_ns_);
  if (t_ns == last_ns_) return;
  // Time moved on: what was observed at the old time is now history.
  for (int64_t c : current_) {
    Channel& ch = channels_[c];
    ch.history_seen = true;
    ch.history_ns = last_ns_;
    ch.history_value = ch.current_value;
    ch.current_seen = false;
  }
  current_.clear();
  last_ns_ = t_ns;
}

void GapTracker::Observe(int64_t c, double value) {
  Channel& ch = channels_[c];
  if (!ch.current_seen) {
    ch.current_seen = true;
    // At most C entries: one allocation instead of one per doubling (a copied
    // tracker keeps only the size, so this is checked here, not at
    // construction).
    if (current_.capacity() == 0) current_.reserve(channels_.size());
    current_.push_back(c);
  }
  ch.current_value = value;  // Among equal times the last row wins.
}

void GapTracker::ObserveRow(const ObservationsView& observations, int64_t row) {
  double value = 0.0;
  if (observations.layout == ObservationLayout::kLong) {
    const int64_t c = observations.event_channels[row];
    if (observations.ObservedAt(row, c, &value)) Observe(c, value);
    return;
  }
  for (int64_t c = 0; c < observations.num_channels; ++c) {
    if (observations.ObservedAt(row, c, &value)) Observe(c, value);
  }
}

GapsEncoder::GapsEncoder(const GapsBlock& block, int64_t num_channels,
                         SinusoidAccuracy accuracy)
    : block_(block),
      num_channels_(num_channels),
      value_width_(GapValueWidth(block)),
      width_(GapsWidth(block, num_channels)),
      unit_ns_(block.unit_seconds * 1e9) {
  if (block.transform == GapTransform::kSinusoidal) {
    sinusoid_.emplace(block.sinusoidal_dim, block.sinusoidal_min_period_seconds,
                      block.sinusoidal_max_period_seconds, accuracy);
  }
}

namespace {

// The gap as a double, rounded once to nearest. Gaps almost always fit
// int64, whose conversion is one instruction; the 128-bit one is a library
// call. Both round the same integer the same way.
double GapToDouble(__int128 gap_ns) {
  const auto narrow = static_cast<int64_t>(gap_ns);
  return narrow == gap_ns ? static_cast<double>(narrow) : static_cast<double>(gap_ns);
}

}  // namespace

void GapsEncoder::Transform(__int128 gap_ns, double* out) const {
  switch (block_.transform) {
    case GapTransform::kRaw:
      out[0] = GapToDouble(gap_ns) / unit_ns_;
      return;
    case GapTransform::kLog1p: {
      const double x = GapToDouble(gap_ns) / unit_ns_;
      out[0] = std::copysign(std::log1p(std::fabs(x)), x);
      return;
    }
    case GapTransform::kSinusoidal:
      sinusoid_->Encode(gap_ns, out);
      return;
  }
}

void GapsEncoder::EncodeRow(const GapTracker& tracker,
                            const ObservationsView& observations, int64_t row,
                            int64_t t_ns, int64_t origin_ns,
                            double* out) const {
  EncodeRowImpl(tracker, observations, row, t_ns, origin_ns, out);
}

template <typename Tracker>
[[gnu::always_inline]] inline void GapsEncoder::EncodeRowImpl(
    Tracker& tracker, const ObservationsView& observations, int64_t row,
    int64_t t_ns, int64_t origin_ns, double* out) const {
  constexpr bool kObserve = !std::is_const_v<Tracker>;
  const bool flag_policy =
      block_.first_observation == FirstObservationPolicy::kFlag;
  // The gap to use when there is no earlier event.
  const __int128 no_history_gap =
      block_.first_observation == FirstObservationPolicy::kSinceOrigin
          ? ElapsedNs(t_ns, origin_ns)
          : 0;
  double* p = out;
  if (block_.global_delta) {
    const bool first = !tracker.has_previous_row();
    Transform(first ? no_history_gap : ElapsedNs(t_ns, tracker.previous_row_ns()),
              p);
    p += value_width_;
    if (flag_policy) *p++ = first ? 1.0 : 0.0;
  }
  if (block_.per_channel_delta) {
    for (int64_t c = 0; c < num_channels_; ++c) {
      Transform(tracker.seen_before(c)
                    ? ElapsedNs(t_ns, tracker.last_seen_before_ns(c))
                    : no_history_gap,
                p);
      p += value_width_;
    }
    if (flag_policy) {
      for (int64_t c = 0; c < num_channels_; ++c) {
        *p++ = tracker.seen_before(c) ? 0.0 : 1.0;
      }
    }
  }
  if (block_.include_mask || block_.include_last_value) {
    double* mask = p;
    double* last = p + (block_.include_mask ? num_channels_ : 0);
    for (int64_t c = 0; c < num_channels_; ++c) {
      double value = 0.0;
      const bool observed = observations.ObservedAt(row, c, &value);
      if (block_.include_mask) mask[c] = observed ? 1.0 : 0.0;
      if (block_.include_last_value) {
        last[c] = observed                 ? value
                  : tracker.seen_before(c) ? tracker.last_value_before(c)
                                           : 0.0;
      }
      if constexpr (kObserve) {
        if (observed) tracker.Observe(c, value);
      }
    }
  } else if constexpr (kObserve) {
    tracker.ObserveRow(observations, row);
  }
}

void GapTracker::AdvanceRows(const ObservationsView& observations, int64_t begin,
                             int64_t n) {
  const absl::Span<const int64_t> times = observations.row_times();
  for (int64_t r = begin; r < begin + n; ++r) {
    BeginRow(times[r]);
    ObserveRow(observations, r);
  }
}

void GapsEncoder::EncodeRows(GapTracker* tracker, const ObservationsView& observations,
                             int64_t begin, int64_t n, int64_t origin_ns, double* out,
                             int64_t stride) const {
  const absl::Span<const int64_t> times = observations.row_times();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = begin + i;
    tracker->BeginRow(times[r]);
    // Encodes the row and records its observations.
    EncodeRowImpl(*tracker, observations, r, times[r], origin_ns, out + i * stride);
  }
}

}  // namespace phasor
