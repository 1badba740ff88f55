#include "core/temporal/gaps.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/math/log1p.h"

#ifndef PHASOR_CORE_GAPS_CHANNEL_BLOCK_
#define PHASOR_CORE_GAPS_CHANNEL_BLOCK_
namespace phasor::gaps_internal {

// Up to kGroup channels down up to kRows rows, for ChannelBlockKernel:
// each channel's memory in a lane (rows one after another, channels side
// by side). Arrays of kGroup hold whole vectors of any x86 target.
constexpr int64_t kGroup = 16;
constexpr int64_t kRows = 64;
struct ChannelBlock {
  int64_t rows = 0;      // <= kRows.
  int64_t channels = 0;  // Live lanes, <= kGroup.
  // Per row: its time, a gap's reference without an earlier event, and
  // whether time moved on (−1) or not (0), from which time.
  const int64_t* t = nullptr;
  const int64_t* no_history = nullptr;
  const int64_t* moved = nullptr;
  const int64_t* moved_from = nullptr;
  // Row i's values at values + i·values_stride, as doubles, and observed
  // (−1) or not (0) at observed + i·kGroup; without `observed`, a value is
  // observed unless NaN (the values read in place from a wide float64
  // tensor without a mask). values_stride is kGroup when staged.
  const double* values = nullptr;
  int64_t values_stride = 0;
  const int64_t* observed = nullptr;
  // [kGroup], in and out: GapTracker::Channel's fields, booleans as 0 / −1.
  int64_t* history_seen = nullptr;
  int64_t* history_ns = nullptr;
  double* history_value = nullptr;
  int64_t* current_seen = nullptr;
  double* current_value = nullptr;
  // Out: the gap, flag, mask and last-value columns of row i at
  // row_stride·i (null when not written), `channels` values each. A gap is
  // g/divisor of g in ns, then sign(x)·log1p(|x|) when `log1p` (the vector
  // log1p, libm past 2^53: SignedLog1p's values).
  double* gaps = nullptr;
  double divisor = 1.0;
  bool log1p = false;
  double* flags = nullptr;
  double* mask = nullptr;
  double* last = nullptr;
  int64_t row_stride = 0;
};

}  // namespace phasor::gaps_internal
#endif  // PHASOR_CORE_GAPS_CHANNEL_BLOCK_

// The gap kernels are compiled once per SIMD target Highway finds
// (hwy/examples/skeleton.cc), with the vector log1p of
// core/math/log1p-inl.h; the scalar code below is in HWY_ONCE.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/temporal/gaps.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "core/math/log1p-inl.h"

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The memory of a group of channels down a block of rows (GapTracker's
// BeginRow, Observe and the getters RowPass reads, for every channel at
// once): selects on lane masks, no branch on whether a value is observed.
void ChannelBlockKernel(const gaps_internal::ChannelBlock& k) {
  const hn::ScalableTag<double> d;
  const hn::RebindToSigned<decltype(d)> di;
  using gaps_internal::kGroup;
  static_assert(kGroup % (HWY_MAX_BYTES / sizeof(double)) == 0 &&
                    HWY_MAX_BYTES / sizeof(double) <= 8,
                "a group holds whole vectors, and 8 lanes past it are staged");
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto one = hn::Set(d, 1.0);
  const auto divisor = hn::Set(d, k.divisor);
  for (int64_t j = 0; j < k.channels; j += lanes) {
    const auto live = hn::FirstN(d, static_cast<size_t>(std::min(lanes, k.channels - j)));
    auto history_seen = hn::LoadU(di, k.history_seen + j);
    auto history_ns = hn::LoadU(di, k.history_ns + j);
    auto history_value = hn::LoadU(d, k.history_value + j);
    auto current_seen = hn::LoadU(di, k.current_seen + j);
    auto current_value = hn::LoadU(d, k.current_value + j);
    for (int64_t i = 0; i < k.rows; ++i) {
      // Time moved on: what was observed at the old time becomes history.
      const auto moved = hn::Set(di, k.moved[i]);
      const auto promote = hn::MaskFromVec(hn::And(moved, current_seen));
      history_seen = hn::Or(history_seen, hn::VecFromMask(di, promote));
      history_ns = hn::IfThenElse(promote, hn::Set(di, k.moved_from[i]), history_ns);
      history_value =
          hn::IfThenElse(hn::RebindMask(d, promote), current_value, history_value);
      current_seen = hn::AndNot(moved, current_seen);
      const auto seen = hn::MaskFromVec(history_seen);
      const auto reference = hn::IfThenElse(seen, history_ns, hn::Set(di, k.no_history[i]));
      const int64_t row = i * k.row_stride + j;
      if (k.gaps != nullptr) {
        // The log1p after the rows (below): rows' polynomials overlap there,
        // where here each waited on its own chain of dependent operations.
        const auto x = hn::Div(hn::ConvertTo(d, hn::Sub(hn::Set(di, k.t[i]), reference)),
                               divisor);
        hn::BlendedStore(x, live, d, k.gaps + row);
      }
      if (k.flags != nullptr) {
        hn::BlendedStore(hn::IfThenZeroElse(hn::RebindMask(d, seen), one), live, d,
                         k.flags + row);
      }
      const auto value = hn::LoadU(d, k.values + i * k.values_stride + j);
      const auto observed_bits =
          k.observed != nullptr
              ? hn::LoadU(di, k.observed + i * kGroup + j)
              : hn::VecFromMask(di, hn::RebindMask(di, hn::Not(hn::IsNaN(value))));
      const auto observed = hn::RebindMask(d, hn::MaskFromVec(observed_bits));
      if (k.mask != nullptr) {
        hn::BlendedStore(hn::IfThenElseZero(observed, one), live, d, k.mask + row);
      }
      if (k.last != nullptr) {
        hn::BlendedStore(hn::IfThenElse(observed, value, history_value), live, d,
                         k.last + row);
      }
      current_seen = hn::Or(current_seen, observed_bits);
      current_value = hn::IfThenElse(observed, value, current_value);  // Last wins.
    }
    if (k.gaps != nullptr && k.log1p) {
      const int64_t live_lanes = std::min(lanes, k.channels - j);
      const hn::CappedTag<double, 1> d1;
      for (int64_t i = 0; i < k.rows; ++i) {
        double* x = k.gaps + i * k.row_stride + j;
        if (live_lanes == lanes) {
          hn::StoreU(SignedLog1pWithLibm(d, hn::LoadU(d, x)), d, x);
        } else {
          for (int64_t l = 0; l < live_lanes; ++l) {
            hn::StoreU(SignedLog1pWithLibm(d1, hn::LoadU(d1, x + l)), d1, x + l);
          }
        }
      }
    }
    hn::StoreU(history_seen, di, k.history_seen + j);
    hn::StoreU(history_ns, di, k.history_ns + j);
    hn::StoreU(history_value, d, k.history_value + j);
    hn::StoreU(current_seen, di, k.current_seen + j);
    hn::StoreU(current_value, d, k.current_value + j);
  }
}

// x[i] = x[i] / divisor for `count` values: IEEE division lane by lane, the
// bits of the scalar `/` on every target.
void DivideKernel(double* HWY_RESTRICT x, size_t count, double divisor) {
  const hn::ScalableTag<double> full;
  const auto d = hn::Set(full, divisor);
  size_t i = 0;
  for (; i + hn::Lanes(full) <= count; i += hn::Lanes(full)) {
    hn::StoreU(hn::Div(hn::LoadU(full, x + i), d), full, x + i);
  }
  for (; i < count; ++i) x[i] /= divisor;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace phasor
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace phasor {
HWY_EXPORT(DivideKernel);
HWY_EXPORT(ChannelBlockKernel);

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
  // One more entry than channels: ObserveIf writes a slot before it knows
  // whether it counts.
  current_.resize(static_cast<size_t>(num_channels) + 1);
  num_current_ = 0;
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
      current_[num_current_++] = static_cast<int64_t>(c);
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

bool GapTracker::AdvanceTime(int64_t t_ns) {
  assert(!has_rows_ || t_ns >= last_ns_);
  has_previous_row_ = has_rows_;
  previous_row_ns_ = last_ns_;
  const bool moved = has_rows_ && t_ns != last_ns_;
  if (!has_rows_) {
    has_rows_ = true;
    first_ns_ = t_ns;
  }
  last_ns_ = t_ns;
  return moved;
}

void GapTracker::BeginRow(int64_t t_ns) {
  if (!AdvanceTime(t_ns)) return;
  // Time moved on: what was observed at the old time is now history.
  for (int64_t i = 0; i < num_current_; ++i) {
    Channel& ch = channels_[current_[i]];
    ch.history_seen = true;
    ch.history_ns = previous_row_ns_;
    ch.history_value = ch.current_value;
    ch.current_seen = false;
  }
  num_current_ = 0;
}

void GapTracker::Observe(int64_t c, double value) {
  Channel& ch = channels_[c];
  if (!ch.current_seen) {
    ch.current_seen = true;
    current_[num_current_++] = c;
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
      unit_ns_(block.unit_seconds * 1e9),
      accuracy_(accuracy) {
  const int64_t flag = block.first_observation == FirstObservationPolicy::kFlag ? 1 : 0;
  columns_.delta = block.global_delta ? 1 + flag : 0;
  columns_.mask =
      columns_.delta + (block.per_channel_delta ? num_channels * (1 + flag) : 0);
  columns_.last = columns_.mask + (block.include_mask ? num_channels : 0);
  if (block.transform == GapTransform::kSinusoidal) {
    sinusoid_.emplace(block.sinusoidal_dim, block.sinusoidal_min_period_seconds,
                      block.sinusoidal_max_period_seconds, accuracy);
  }
}

template <typename Tracker, typename Reader>
[[gnu::always_inline]] inline void GapsEncoder::RowPass(
    Tracker& tracker, const Reader& reader, int64_t row, int64_t t_ns,
    int64_t origin_ns, double* out) const {
  constexpr bool kObserve = !std::is_const_v<Tracker>;
  const bool flag_policy =
      block_.first_observation == FirstObservationPolicy::kFlag;
  const bool since_origin =
      block_.first_observation == FirstObservationPolicy::kSinceOrigin;
  // A gap is t_ns − reference: the earlier event, or with no earlier event
  // the origin (SINCE_ORIGIN) or t_ns itself (a gap of 0).
  const int64_t no_history_ns = since_origin ? origin_ns : t_ns;
  // RAW / LOG1P: the gap in ns as a double, rounded once (ScaleGaps then
  // divides by unit_ns_ and takes LOG1P's log1p, a tile at a time in
  // vectors); computed in int64 with the overflow noted, and the row's gaps
  // redone in 128 bits in the rare case one overflows. SINUSOIDAL: the
  // transform, from the exact 128-bit gap.
  bool overflow = false;
  const auto gap = [&](bool seen, int64_t reference_ns, double* p) {
    const int64_t reference = seen ? reference_ns : no_history_ns;
    if (sinusoid_.has_value()) {
      sinusoid_->Encode(ElapsedNs(t_ns, reference), p);
    } else {
      int64_t g = 0;
      overflow |= __builtin_sub_overflow(t_ns, reference, &g);
      *p = static_cast<double>(g);
    }
  };
  double* p = out;
  if (block_.global_delta) {
    const bool seen = tracker.has_previous_row();
    gap(seen, tracker.previous_row_ns(), p);
    p += value_width_;
    if (flag_policy) *p++ = seen ? 0.0 : 1.0;
  }
  if (block_.per_channel_delta) {
    for (int64_t c = 0; c < num_channels_; ++c) {
      gap(tracker.seen_before(c), tracker.last_seen_before_ns(c), p);
      p += value_width_;
    }
    if (flag_policy) {
      for (int64_t c = 0; c < num_channels_; ++c) {
        *p++ = tracker.seen_before(c) ? 0.0 : 1.0;
      }
    }
  }
  if (overflow) {
    // 128-bit differences, rounded once (a library conversion).
    double* q = out;
    const auto wide_gap = [&](bool seen, int64_t reference_ns) {
      *q = static_cast<double>(ElapsedNs(t_ns, seen ? reference_ns : no_history_ns));
      q += 1;
    };
    if (block_.global_delta) {
      wide_gap(tracker.has_previous_row(), tracker.previous_row_ns());
      q += flag_policy ? 1 : 0;
    }
    if (block_.per_channel_delta) {
      for (int64_t c = 0; c < num_channels_; ++c) {
        wide_gap(tracker.seen_before(c), tracker.last_seen_before_ns(c));
      }
    }
  }
  if (block_.include_mask || block_.include_last_value) {
    double* mask = p;
    double* last = p + (block_.include_mask ? num_channels_ : 0);
    // Selects, not branches: whether a channel is observed is random. A
    // channel never seen has history value 0.
    for (int64_t c = 0; c < num_channels_; ++c) {
      double value = 0.0;
      const bool observed = reader.At(row, c, &value);
      if (block_.include_mask) mask[c] = observed ? 1.0 : 0.0;
      if (block_.include_last_value) {
        last[c] = observed ? value : tracker.last_value_before(c);
      }
      if constexpr (kObserve && !Reader::kLong) tracker.ObserveIf(c, observed, value);
    }
  }
  if constexpr (kObserve) {
    if constexpr (Reader::kLong) {
      double value = 0.0;
      const int64_t c = reader.Channel(row);
      if (reader.At(row, c, &value)) tracker.Observe(c, value);
    } else if (!block_.include_mask && !block_.include_last_value) {
      for (int64_t c = 0; c < num_channels_; ++c) {
        double value = 0.0;
        const bool observed = reader.At(row, c, &value);
        tracker.ObserveIf(c, observed, value);
      }
    }
  }
}

void GapsEncoder::TransformGaps(double* x, int64_t count) const {
  // g / unit, rounded once: the division of one call, in vectors (a scalar
  // division per gap was a third of the gaps block).
  HWY_DYNAMIC_DISPATCH(DivideKernel)(x, static_cast<size_t>(count), unit_ns_);
  if (block_.transform != GapTransform::kLog1p) return;
  if (accuracy_ == SinusoidAccuracy::kFloat32) {
    SignedLog1p(absl::MakeSpan(x, static_cast<size_t>(count)));
  } else {
    // float64 outputs keep libm's log1p, bit for bit as before.
    for (int64_t i = 0; i < count; ++i) {
      x[i] = std::copysign(std::log1p(std::fabs(x[i])), x[i]);
    }
  }
}

void GapsEncoder::ScaleGaps(double* out, int64_t rows, int64_t stride) const {
  if (block_.transform == GapTransform::kSinusoidal) return;
  // The gap columns of a row: Δt at 0, δ_0..δ_{C−1} after Δt and its flag;
  // one run when there is no flag between them.
  const int64_t flag =
      block_.first_observation == FirstObservationPolicy::kFlag ? 1 : 0;
  int64_t run_offset[2] = {0, 0};
  int64_t run_count[2] = {0, 0};
  int runs = 0;
  if (block_.global_delta) run_count[runs++] = 1;
  if (block_.per_channel_delta) {
    if (block_.global_delta && flag == 0) {
      run_count[0] += num_channels_;
    } else {
      run_offset[runs] = columns_.delta;
      run_count[runs++] = num_channels_;
    }
  }
  // Staged through a contiguous buffer, so that the vector kernel sees
  // whole vectors whatever C and the stride; the same walk writes back.
  constexpr int64_t kStage = 256;
  double stage[kStage];
  const auto transform = [&](int64_t count) { TransformGaps(stage, count); };
  // Walks `count` gap values from (walk_row, walk_run, walk_index), the
  // first not yet transformed, in row-major order: gather copies them into
  // the stage, !gather copies the stage back; returns where it stopped.
  int64_t staged = 0;
  int64_t walk_row = 0, walk_run = 0, walk_index = 0;
  const auto walk = [&](bool gather, int64_t count) {
    int64_t row = walk_row, run = walk_run, index = walk_index;
    for (int64_t i = 0; i < count;) {
      double* base = out + row * stride + run_offset[run];
      const int64_t take = std::min(run_count[run] - index, count - i);
      if (gather) {
        std::copy(base + index, base + index + take, stage + i);
      } else {
        std::copy(stage + i, stage + i + take, base + index);
      }
      i += take;
      index += take;
      if (index == run_count[run]) {
        index = 0;
        if (++run == runs) {
          run = 0;
          ++row;
        }
      }
    }
    return std::array<int64_t, 3>{row, run, index};
  };
  int64_t total = 0;
  for (int r = 0; r < runs; ++r) total += run_count[r];
  total *= rows;
  while (staged < total) {
    const int64_t count = std::min(kStage, total - staged);
    walk(/*gather=*/true, count);
    transform(count);
    const std::array<int64_t, 3> next = walk(/*gather=*/false, count);
    walk_row = next[0];
    walk_run = next[1];
    walk_index = next[2];
    staged += count;
  }
}

void GapsEncoder::EncodeRow(const GapTracker& tracker,
                            const ObservationsView& observations, int64_t row,
                            int64_t t_ns, int64_t origin_ns,
                            double* out) const {
  VisitObservationReader(observations, [&](const auto& reader) {
    RowPass(tracker, reader, row, t_ns, origin_ns, out);
  });
  ScaleGaps(out, /*rows=*/1, width_);
}

void GapTracker::AdvanceRows(const ObservationsView& observations, int64_t begin,
                             int64_t n) {
  const absl::Span<const int64_t> times = observations.row_times();
  for (int64_t r = begin; r < begin + n; ++r) {
    BeginRow(times[r]);
    ObserveRow(observations, r);
  }
}

bool GapsEncoder::GapsFitInt64(const GapTracker& tracker,
                               absl::Span<const int64_t> times, int64_t begin,
                               int64_t n, int64_t origin_ns) const {
  // A gap is t − reference with both in [lo, hi]: the rows' times lie
  // between the first and the last (non-decreasing), the references are
  // earlier rows, the tracker's remembered times or the origin. Every gap
  // fits when hi − lo does.
  int64_t lo = times[begin];
  int64_t hi = times[begin + n - 1];
  if (tracker.has_rows_) lo = std::min(lo, tracker.last_ns_);
  for (const GapTracker::Channel& ch : tracker.channels_) {
    if (ch.history_seen) lo = std::min(lo, ch.history_ns);
  }
  if (block_.first_observation == FirstObservationPolicy::kSinceOrigin) {
    lo = std::min(lo, origin_ns);
    hi = std::max(hi, origin_ns);
  }
  int64_t span = 0;
  return !__builtin_sub_overflow(hi, lo, &span);
}

template <typename Reader>
void GapsEncoder::EncodeColumns(GapTracker& tracker, const Reader& reader,
                                absl::Span<const int64_t> times, int64_t value_count,
                                int64_t begin, int64_t n, int64_t origin_ns, double* out,
                                int64_t stride) const {
  const bool flag_policy =
      block_.first_observation == FirstObservationPolicy::kFlag;
  const bool since_origin =
      block_.first_observation == FirstObservationPolicy::kSinceOrigin;
  const int64_t channels = num_channels_;
  const int64_t delta_base = columns_.delta;

  // Rows a block at a time: the block's row-level memory first (BeginRow's
  // part shared by all channels), then each channel down the block.
  using gaps_internal::kGroup;
  constexpr int64_t kBlock = gaps_internal::kRows;
  int64_t t[kBlock];
  int64_t no_history[kBlock];  // A gap's reference with no earlier event.
  int64_t moved_from[kBlock];  // The previous row's time when time moved on.
  int64_t moved[kBlock];       // Time moved on (−1): history takes the current.
  double column[kBlock];
  // The kernel's staging: one group's values and observed (row i at
  // i·kGroup), and its channels' memory. The 8 lanes after a group's are
  // zeroed as it is staged (the kernel computes on them and stores none;
  // a vector has at most 8): +8 for the last row's. Nothing else is
  // cleared, which per tile would cost more than the tile's gaps.
  double values[kBlock * kGroup + 8];
  int64_t observed[kBlock * kGroup + 8];
  int64_t history_seen[kGroup], history_ns[kGroup], current_seen[kGroup];
  double history_value[kGroup], current_value[kGroup];
  // The vector log1p for float32 outputs, libm's afterwards for float64.
  const bool log1p = block_.transform == GapTransform::kLog1p;
  const bool vector_log1p = log1p && accuracy_ == SinusoidAccuracy::kFloat32;
  const auto kernel = HWY_DYNAMIC_DISPATCH(ChannelBlockKernel);
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    double* rows = out + b * stride;
    for (int64_t i = 0; i < m; ++i) {
      const int64_t ti = times[begin + b + i];
      t[i] = ti;
      no_history[i] = since_origin ? origin_ns : ti;
      moved[i] = -static_cast<int64_t>(tracker.AdvanceTime(ti));
      moved_from[i] = tracker.previous_row_ns_;
      const bool has_previous = tracker.has_previous_row_;
      column[i] = static_cast<double>(
          ti - (has_previous ? tracker.previous_row_ns_ : no_history[i]));
      if (block_.global_delta && flag_policy) {
        rows[i * stride + 1] = has_previous ? 0.0 : 1.0;
      }
    }
    if (block_.global_delta) {
      TransformGaps(column, m);
      for (int64_t i = 0; i < m; ++i) rows[i * stride] = column[i];
    }
    // Channels a group at a time through the vector kernel, each channel's
    // memory in a lane.
    for (int64_t c0 = 0; c0 < channels; c0 += kGroup) {
      const int64_t g = std::min(kGroup, channels - c0);
      for (int64_t j = 0; j < kGroup; ++j) {
        // Lanes past the group compute on zeros and are not stored.
        const GapTracker::Channel ch =
            j < g ? tracker.channels_[c0 + j] : GapTracker::Channel{};
        history_seen[j] = -static_cast<int64_t>(ch.history_seen);
        history_ns[j] = ch.history_ns;
        history_value[j] = ch.history_value;
        current_seen[j] = -static_cast<int64_t>(ch.current_seen);
        current_value[j] = ch.current_value;
      }
      gaps_internal::ChannelBlock k;
      // float64 values without a mask are read in place (a NaN is a missing
      // value), unless a vector past the group would read past the tensor's
      // end (the panel's last rows); others are staged.
      const int64_t first = (begin + b) * channels + c0;
      bool in_place = false;
      if constexpr (std::is_same_v<Reader, WideObservationReader<double, false>>) {
        in_place = (begin + b + m) * channels + 8 <= value_count;
        if (in_place) {
          k.values = reader.values + first;
          k.values_stride = channels;
        }
      }
      if (!in_place) {
        for (int64_t i = 0; i < m; ++i) {
          double* v = values + i * kGroup;
          int64_t* o = observed + i * kGroup;
          for (int64_t j = 0; j < g; ++j) {
            o[j] = -static_cast<int64_t>(reader.At(begin + b + i, c0 + j, &v[j]));
          }
          for (int64_t j = g; j < g + 8; ++j) {  // Past the row at g > 8: the
            v[j] = 0.0;                          // next row's, staged after.
            o[j] = 0;
          }
        }
        k.values = values;
        k.values_stride = kGroup;
        k.observed = observed;
      }
      k.rows = m;
      k.channels = g;
      k.t = t;
      k.no_history = no_history;
      k.moved = moved;
      k.moved_from = moved_from;
      k.history_seen = history_seen;
      k.history_ns = history_ns;
      k.history_value = history_value;
      k.current_seen = current_seen;
      k.current_value = current_value;
      k.row_stride = stride;
      if (block_.per_channel_delta) {
        k.gaps = rows + delta_base + c0;
        k.divisor = unit_ns_;
        k.log1p = vector_log1p;
      }
      if (block_.per_channel_delta && flag_policy) {
        k.flags = rows + delta_base + channels + c0;
      }
      if (block_.include_mask) k.mask = rows + columns_.mask + c0;
      if (block_.include_last_value) k.last = rows + columns_.last + c0;
      kernel(k);
      for (int64_t j = 0; j < g; ++j) {
        GapTracker::Channel& ch = tracker.channels_[c0 + j];
        ch.history_seen = history_seen[j] != 0;
        ch.history_ns = history_ns[j];
        ch.history_value = history_value[j];
        ch.current_seen = current_seen[j] != 0;
        ch.current_value = current_value[j];
      }
      if (block_.per_channel_delta && log1p && !vector_log1p) {
        // float64 outputs keep libm's log1p, bit for bit as before.
        for (int64_t i = 0; i < m; ++i) {
          double* x = rows + i * stride + delta_base + c0;
          for (int64_t j = 0; j < g; ++j) {
            x[j] = std::copysign(std::log1p(std::fabs(x[j])), x[j]);
          }
        }
      }
    }
  }
  // The channels observed at the last row's time, for the next BeginRow.
  tracker.num_current_ = 0;
  for (int64_t c = 0; c < channels; ++c) {
    tracker.current_[tracker.num_current_] = c;
    tracker.num_current_ += tracker.channels_[c].current_seen ? 1 : 0;
  }
}

void GapsEncoder::EncodeRows(GapTracker* tracker, const ObservationsView& observations,
                             int64_t begin, int64_t n, int64_t origin_ns, double* out,
                             int64_t stride) const {
  const absl::Span<const int64_t> times = observations.row_times();
  if (n <= 0) return;
  if (observations.layout == ObservationLayout::kWide && !sinusoid_.has_value() &&
      GapsFitInt64(*tracker, times, begin, n, origin_ns)) {
    VisitObservationReader(observations, [&](const auto& reader) {
      if constexpr (!std::decay_t<decltype(reader)>::kLong) {
        EncodeColumns(*tracker, reader, times,
                      static_cast<int64_t>(observations.values.f64.size()), begin, n,
                      origin_ns, out, stride);
      }
    });
    return;
  }
  // Rows one after another (the tracker's memory is serial), then the
  // tile's gaps scaled and transformed together.
  VisitObservationReader(observations, [&](const auto& reader) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = begin + i;
      tracker->BeginRow(times[r]);
      // Encodes the row and records its observations.
      RowPass(*tracker, reader, r, times[r], origin_ns, out + i * stride);
    }
  });
  ScaleGaps(out, n, stride);
}

}  // namespace phasor
#endif  // HWY_ONCE
