#include "core/temporal/time_sinusoid.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/base/errors.h"
#include "core/math/exact_phase.h"
#include "core/math/sincos.h"
#include "core/temporal/elapsed_time.h"

// The float32 ladder's row kernel is compiled once per SIMD target Highway
// finds (hwy/examples/skeleton.cc), with the phase products of
// core/math/exact_phase-inl.h and the sin/cos of core/math/sincos-inl.h;
// the scalar code below is in HWY_ONCE.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/temporal/time_sinusoid.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "core/math/exact_phase-inl.h"
#include "core/math/sincos-inl.h"

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Periods k.. k + Lanes(d) of one row of the float32-path ladder:
// row[2k] = sin, row[2k + 1] = cos of the phase ExactPhase::Turns(e)
// (ProductTop), through the scalar path's SinCosOfPhaseFloat32: the same
// bits.
template <class D>
HWY_INLINE void LadderVector(D d, int64_t e, const uint64_t* HWY_RESTRICT step_lo,
                             const uint64_t* HWY_RESTRICT step_hi, size_t k,
                             double* HWY_RESTRICT row) {
  hn::Vec<D> s, c;
  SinCosOfPhaseFloat32(d, ProductTop(d, e, step_lo, step_hi, k), &s, &c);
  hn::StoreInterleaved2(s, c, d, row + 2 * k);
}

// Whether LadderRowsFloat32 takes a ladder of `periods`: a whole vector of
// them per row, or a vector of whole rows (periods dividing the lanes).
bool LadderTakes(size_t periods) {
  const size_t lanes = hn::Lanes(hn::ScalableTag<double>());
  return periods >= lanes || (periods > 0 && lanes % periods == 0);
}

// Rows [0, rows − rows mod (Lanes(d) / periods)) of LadderRowsFloat32 for
// a ladder narrower than a vector (dim 8 is 4 periods, half an AVX-512
// vector): Lanes(d) / periods rows per vector, lane j holding period
// j mod periods of row j / periods. Returns the first row left.
// REQUIRES: periods < Lanes(d), Lanes(d) divisible by periods.
template <class D>
HWY_INLINE size_t NarrowLadderRows(D d, const int64_t* HWY_RESTRICT elapsed, size_t rows,
                                   const uint64_t* HWY_RESTRICT step_lo,
                                   const uint64_t* HWY_RESTRICT step_hi, size_t periods,
                                   double* HWY_RESTRICT out, int64_t stride) {
  const hn::RebindToUnsigned<D> du;
  constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(double);
  const size_t lanes = hn::Lanes(d);
  const size_t rows_per_vector = lanes / periods;
  HWY_ALIGN uint64_t lo[kMaxLanes];
  HWY_ALIGN uint64_t hi[kMaxLanes];
  HWY_ALIGN double pairs[2 * kMaxLanes];
  for (size_t j = 0; j < lanes; ++j) {
    lo[j] = step_lo[j % periods];
    hi[j] = step_hi[j % periods];
  }
  const auto lo_v = hn::Load(du, lo);
  const auto hi_v = hn::Load(du, hi);
  size_t r = 0;
  for (; r + rows_per_vector <= rows; r += rows_per_vector) {
    // Lanes [i·periods, (i + 1)·periods) hold row r + i's elapsed time
    // (built in registers: lanes stored one by one and loaded as a vector
    // would stall the load behind the stores).
    auto e = hn::Set(du, static_cast<uint64_t>(elapsed[r + rows_per_vector - 1]));
    for (size_t i = rows_per_vector - 1; i-- > 0;) {
      e = hn::IfThenElse(hn::FirstN(du, (i + 1) * periods),
                         hn::Set(du, static_cast<uint64_t>(elapsed[r + i])), e);
    }
    hn::Vec<D> s, c;
    SinCosOfPhaseFloat32(d, ProductTopOfLanes(e, lo_v, hi_v), &s, &c);
    // Interleaved, row i's pairs are pairs[2·periods·i, 2·periods·(i + 1)).
    hn::StoreInterleaved2(s, c, d, pairs);
    for (size_t i = 0; i < rows_per_vector; ++i) {
      double* row = out + static_cast<int64_t>(r + i) * stride;
      const double* from = pairs + 2 * periods * i;
      if (2 * periods == lanes) {  // Two rows per vector: a vector per row.
        hn::StoreU(hn::Load(d, from), d, row);
      } else {
        for (size_t j = 0; j < 2 * periods; ++j) row[j] = from[j];
      }
    }
  }
  return r;
}

// The float32-path ladder of whole rows: row r at out + r·stride gets
// 2·periods values (LadderVector), for elapsed times that fit int64.
// Each lane is computed alone: any vector width, and any grouping of rows
// into vectors, gives the same bits.
// REQUIRES: LadderTakes(periods).
void LadderRowsFloat32(const int64_t* HWY_RESTRICT elapsed, size_t rows,
                       const uint64_t* HWY_RESTRICT step_lo,
                       const uint64_t* HWY_RESTRICT step_hi, size_t periods,
                       double* HWY_RESTRICT out, int64_t stride) {
  const hn::CappedTag<double, 1> one;
  size_t r = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<double> full;
  if (periods < hn::Lanes(full)) {
    r = NarrowLadderRows(full, elapsed, rows, step_lo, step_hi, periods, out, stride);
  }
#endif
  for (; r < rows; ++r) {
    double* row = out + static_cast<int64_t>(r) * stride;
    size_t k = ForVectors(periods, [&](auto d, size_t k0) {
      LadderVector(d, elapsed[r], step_lo, step_hi, k0, row);
    });
#if HWY_TARGET != HWY_SCALAR
    for (; k < periods; ++k) LadderVector(one, elapsed[r], step_lo, step_hi, k, row);
#endif
    // HWY_SCALAR: one lane at a time, the product in 128 bits.
    for (; k < periods; ++k) {
      const uint64_t top = ScalarProductTop(elapsed[r], step_lo[k], step_hi[k]);
      hn::Vec<decltype(one)> s, c;
      SinCosOfPhaseFloat32(one, hn::Set(hn::RebindToUnsigned<decltype(one)>(), top), &s, &c);
      row[2 * k] = hn::GetLane(s);
      row[2 * k + 1] = hn::GetLane(c);
    }
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace phasor
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace phasor {
HWY_EXPORT(LadderRowsFloat32);
HWY_EXPORT(LadderTakes);
namespace {

// A field path kept as prefix + suffix and joined only for an error message,
// so validating a valid ladder builds no string (it runs once per request).
struct LadderField {
  absl::string_view prefix;
  absl::string_view suffix;
  std::string Path() const { return absl::StrCat(prefix, suffix); }
};

absl::Status CheckPeriodLadder(int64_t dim, double min_period_seconds,
                               double max_period_seconds,
                               const LadderField& dim_field,
                               const LadderField& min_field,
                               const LadderField& max_field) {
  if (dim < 2 || dim % 2 != 0 || dim > kMaxEncodingWidth) {
    return InvalidField(dim_field.Path(),
                        absl::StrCat("must be even and in [2, ",
                                     kMaxEncodingWidth, "], got ", dim));
  }
  auto check_period = [](double p, const LadderField& field) -> absl::Status {
    if (!std::isfinite(p) || p < kMinLadderPeriodSeconds ||
        p > kMaxLadderPeriodSeconds) {
      return InvalidField(field.Path(),
                          absl::StrCat("must be a finite period in [",
                                       kMinLadderPeriodSeconds, ", ",
                                       kMaxLadderPeriodSeconds,
                                       "] seconds, got ", p));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = check_period(min_period_seconds, min_field); !s.ok()) {
    return s;
  }
  if (absl::Status s = check_period(max_period_seconds, max_field); !s.ok()) {
    return s;
  }
  if (max_period_seconds < min_period_seconds) {
    return InvalidField(max_field.Path(),
                        absl::StrCat("must be >= ", min_field.Path(), " (",
                                     min_period_seconds, "), got ",
                                     max_period_seconds));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePeriodLadder(int64_t dim, double min_period_seconds,
                                  double max_period_seconds,
                                  absl::string_view dim_field,
                                  absl::string_view min_field,
                                  absl::string_view max_field) {
  return CheckPeriodLadder(dim, min_period_seconds, max_period_seconds,
                           {dim_field, ""}, {min_field, ""}, {max_field, ""});
}

absl::Status ValidateTimeBlock(const TimeBlock& block,
                               absl::string_view field_prefix) {
  if (!block.periods.empty()) {
    int64_t orders = 0;
    for (size_t i = 0; i < block.periods.size(); ++i) {
      const TimePeriod& period = block.periods[i];
      const std::string path = absl::StrCat(field_prefix, ".periods[", i, "]");
      const double p = period.period_seconds;
      if (!std::isfinite(p) || p < kMinLadderPeriodSeconds ||
          p > kMaxLadderPeriodSeconds) {
        return InvalidField(absl::StrCat(path, ".period_seconds"),
                            absl::StrCat("must be a finite period in [",
                                         kMinLadderPeriodSeconds, ", ",
                                         kMaxLadderPeriodSeconds, "] seconds, got ", p));
      }
      if (period.order < 1 || period.order > kMaxFourierOrder) {
        return InvalidField(absl::StrCat(path, ".order"),
                            absl::StrCat("must be in [1, ", kMaxFourierOrder,
                                         "], got ", period.order));
      }
      orders += period.order;
    }
    if (2 * orders > kMaxEncodingWidth || block.dim != 2 * orders) {
      return InvalidField(absl::StrCat(field_prefix, ".dim"),
                          absl::StrCat("must be 2 x the periods' orders (",
                                       2 * orders, ", at most ", kMaxEncodingWidth,
                                       "), got ", block.dim));
    }
    return absl::OkStatus();
  }
  return CheckPeriodLadder(block.dim, block.min_period_seconds,
                           block.max_period_seconds, {field_prefix, ".dim"},
                           {field_prefix, ".min_period_seconds"},
                           {field_prefix, ".max_period_seconds"});
}

double LadderPeriodSeconds(int64_t k, int64_t num_periods,
                           double min_period_seconds,
                           double max_period_seconds) {
  assert(num_periods >= 1 && k >= 0 && k < num_periods);
  if (num_periods == 1) return min_period_seconds;
  if (k == num_periods - 1) return max_period_seconds;
  const double ratio = max_period_seconds / min_period_seconds;
  return min_period_seconds *
         std::pow(ratio, static_cast<double>(k) /
                             static_cast<double>(num_periods - 1));
}

std::vector<double> LadderPeriodsSeconds(int64_t num_periods,
                                         double min_period_seconds,
                                         double max_period_seconds) {
  assert(num_periods >= 1);
  std::vector<double> periods(num_periods);
  for (int64_t k = 0; k < num_periods; ++k) {
    periods[k] = LadderPeriodSeconds(k, num_periods, min_period_seconds,
                                     max_period_seconds);
  }
  return periods;
}

std::vector<double> TimeBlockPeriodsSeconds(const TimeBlock& block) {
  if (block.periods.empty()) {
    return LadderPeriodsSeconds(block.dim / 2, block.min_period_seconds,
                                block.max_period_seconds);
  }
  std::vector<double> periods;
  periods.reserve(static_cast<size_t>(block.dim / 2));
  for (const TimePeriod& period : block.periods) {
    for (int64_t k = 1; k <= period.order; ++k) {
      periods.push_back(period.period_seconds / static_cast<double>(k));
    }
  }
  return periods;
}

TimeSinusoid::TimeSinusoid(int64_t dim, double min_period_seconds,
                           double max_period_seconds,
                           SinusoidAccuracy accuracy)
    : min_period_seconds_(min_period_seconds),
      max_period_seconds_(max_period_seconds),
      accuracy_(accuracy) {
  const int64_t num_periods = dim / 2;
  phases_.reserve(static_cast<size_t>(num_periods));
  step_lo_.reserve(static_cast<size_t>(num_periods));
  step_hi_.reserve(static_cast<size_t>(num_periods));
  for (int64_t k = 0; k < num_periods; ++k) {
    AddPhase(ExactPhase(LadderPeriodSeconds(k, num_periods, min_period_seconds,
                                            max_period_seconds)));
  }
}

TimeSinusoid::TimeSinusoid(absl::Span<const TimePeriod> periods,
                           SinusoidAccuracy accuracy)
    : min_period_seconds_(0),
      max_period_seconds_(0),
      accuracy_(accuracy),
      explicit_periods_(periods.begin(), periods.end()) {
  for (const TimePeriod& period : periods) {
    for (int64_t k = 1; k <= period.order; ++k) {
      AddPhase(ExactPhase(period.period_seconds, k));
    }
  }
}

void TimeSinusoid::AddPhase(const ExactPhase& phase) {
  phases_.push_back(phase);
  step_lo_.push_back(static_cast<uint64_t>(phase.step()));
  step_hi_.push_back(static_cast<uint64_t>(phase.step() >> 64));
}

std::vector<double> TimeSinusoid::periods_seconds() const {
  if (!explicit_periods_.empty()) {
    TimeBlock block;
    block.dim = dim();
    block.periods = explicit_periods_;
    return TimeBlockPeriodsSeconds(block);
  }
  return LadderPeriodsSeconds(static_cast<int64_t>(phases_.size()),
                              min_period_seconds_, max_period_seconds_);
}

void TimeSinusoid::Encode(__int128 elapsed_ns, double* out) const {
  if (accuracy_ == SinusoidAccuracy::kFloat64) {
    EncodeImpl<SinusoidAccuracy::kFloat64>(elapsed_ns, out);
    return;
  }
  const auto narrow = static_cast<int64_t>(elapsed_ns);
  if (narrow != elapsed_ns) {
    EncodeImpl<SinusoidAccuracy::kFloat32>(elapsed_ns, out);
    return;
  }
  HWY_DYNAMIC_DISPATCH(LadderRowsFloat32)(&narrow, 1, step_lo_.data(), step_hi_.data(),
                                          phases_.size(), out, dim());
}

void TimeSinusoid::EncodeRows(absl::Span<const int64_t> times_ns,
                              int64_t origin_ns, double* out,
                              int64_t row_stride) const {
  if (accuracy_ == SinusoidAccuracy::kFloat64) {
    EncodeRowsImpl<SinusoidAccuracy::kFloat64>(times_ns, origin_ns, out,
                                               row_stride);
  } else {
    EncodeRowsImpl<SinusoidAccuracy::kFloat32>(times_ns, origin_ns, out,
                                               row_stride);
  }
}

namespace {

// sin_out[i], cos_out[i] of the phases turns[0..count) (2^-64 turn), as
// kAccuracy's outputs take them: kFloat32 through SinCosOfTurnsFloat32
// (the vector ladder's own kernel, so every kFloat32 path gives the same
// bits); kFloat64 through SinCosOfTurns (QuarterTurnSplit, within 1.7e-16).
template <SinusoidAccuracy kAccuracy>
void SinCosOfPhases(const uint64_t* turns, size_t count, double* sin_out,
                    double* cos_out) {
  if constexpr (kAccuracy == SinusoidAccuracy::kFloat32) {
    SinCosOfTurnsFloat32(absl::MakeConstSpan(turns, count), sin_out, cos_out);
  } else {
    SinCosOfTurns(absl::MakeConstSpan(turns, count), sin_out, cos_out);
  }
}

}  // namespace

template <SinusoidAccuracy kAccuracy>
void TimeSinusoid::EncodeImpl(__int128 elapsed_ns, double* out) const {
  // Periods in chunks of kChunk: the exact phases first (integer work), then
  // one vector sin/cos pass.
  constexpr int64_t kChunk = 64;
  uint64_t turns[kChunk];
  double sin_angle[kChunk];
  double cos_angle[kChunk];
  const auto num_periods = static_cast<int64_t>(phases_.size());
  for (int64_t k0 = 0; k0 < num_periods; k0 += kChunk) {
    const int64_t n = std::min(kChunk, num_periods - k0);
    for (int64_t i = 0; i < n; ++i) turns[i] = phases_[k0 + i].Turns(elapsed_ns);
    SinCosOfPhases<kAccuracy>(turns, static_cast<size_t>(n), sin_angle, cos_angle);
    for (int64_t i = 0; i < n; ++i) {
      out[2 * (k0 + i)] = sin_angle[i];
      out[2 * (k0 + i) + 1] = cos_angle[i];
    }
  }
}

template <SinusoidAccuracy kAccuracy>
void TimeSinusoid::EncodeRowsImpl(absl::Span<const int64_t> times_ns,
                                  int64_t origin_ns, double* out,
                                  int64_t row_stride) const {
  // kFloat32 ladders of a vector of periods or more, or of a divisor of a
  // vector's lanes (dim 8 is 4 periods, half an AVX-512 vector: two rows per
  // vector): whole rows through the vector ladder, kRows at a time; a row
  // whose elapsed time does not fit int64 (t and the origin ~292 years
  // apart) is redone by the scalar path. Other ladders (dim 6 on AVX-512)
  // fill whole vectors with the angles of several rows below instead. Both
  // give the same bits.
  if (kAccuracy == SinusoidAccuracy::kFloat32 &&
      HWY_DYNAMIC_DISPATCH(LadderTakes)(phases_.size())) {
    constexpr int64_t kRows = 64;
    int64_t elapsed[kRows];
    const auto ladder = HWY_DYNAMIC_DISPATCH(LadderRowsFloat32);
    const auto rows = static_cast<int64_t>(times_ns.size());
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      const int64_t n = std::min(kRows, rows - r0);
      bool overflow = false;
      for (int64_t r = 0; r < n; ++r) {
        overflow |= __builtin_sub_overflow(times_ns[r0 + r], origin_ns, &elapsed[r]);
      }
      ladder(elapsed, static_cast<size_t>(n), step_lo_.data(), step_hi_.data(),
             phases_.size(), out + r0 * row_stride, row_stride);
      if (overflow) {
        for (int64_t r = 0; r < n; ++r) {
          int64_t unused = 0;
          if (__builtin_sub_overflow(times_ns[r0 + r], origin_ns, &unused)) {
            EncodeImpl<kAccuracy>(ElapsedNs(times_ns[r0 + r], origin_ns),
                                  out + (r0 + r) * row_stride);
          }
        }
      }
    }
    return;
  }
  const auto num_periods = static_cast<int64_t>(phases_.size());
  const auto rows = static_cast<int64_t>(times_ns.size());
  // Phases of whole rows, kPhases at most per kernel call.
  constexpr int64_t kPhases = 64;
  const int64_t rows_per_call = kPhases / num_periods;
  if (rows_per_call == 0) {  // dim > 2·kPhases: rows one by one.
    for (int64_t r = 0; r < rows; ++r) {
      EncodeImpl<kAccuracy>(ElapsedNs(times_ns[r], origin_ns),
                            out + r * row_stride);
    }
    return;
  }
  uint64_t turns[kPhases];
  double sin_angle[kPhases];
  double cos_angle[kPhases];
  for (int64_t r0 = 0; r0 < rows; r0 += rows_per_call) {
    const int64_t call_rows = std::min(rows_per_call, rows - r0);
    for (int64_t r = 0; r < call_rows; ++r) {
      const __int128 elapsed = ElapsedNs(times_ns[r0 + r], origin_ns);
      for (int64_t k = 0; k < num_periods; ++k) {
        turns[r * num_periods + k] = phases_[k].Turns(elapsed);
      }
    }
    SinCosOfPhases<kAccuracy>(turns, static_cast<size_t>(call_rows * num_periods),
                              sin_angle, cos_angle);
    for (int64_t r = 0; r < call_rows; ++r) {
      double* row = out + (r0 + r) * row_stride;
      for (int64_t k = 0; k < num_periods; ++k) {
        row[2 * k] = sin_angle[r * num_periods + k];
        row[2 * k + 1] = cos_angle[r * num_periods + k];
      }
    }
  }
}

}  // namespace phasor
#endif  // HWY_ONCE
