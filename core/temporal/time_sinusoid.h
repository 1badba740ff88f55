// -----------------------------------------------------------------------------
// File: core/temporal/time_sinusoid.h
// -----------------------------------------------------------------------------
//
// The time sinusoid ("time" block): sinusoids of real elapsed time
// τ = t − origin (not of the row index; core/temporal/elapsed_time.h).
//
// A geometric ladder of K = dim/2 periods
//   P_k = min_period_seconds · (max_period_seconds / min_period_seconds)^(k/(K−1))
//   out[2k] = sin(2π·τ/P_k),  out[2k+1] = cos(2π·τ/P_k),   τ in seconds
// (K = 1 uses min_period_seconds), or explicit periods with harmonics
// (TimeBlock.periods), Prophet's seasonalities (Taylor & Letham 2018 §3.2;
// prophet/forecaster.py fourier_series, there with τ in days since the epoch):
//   for each period P with order K, for k = 1..K:
//   sin(2π·k·τ/P), cos(2π·k·τ/P)
// whose phase k·τ/P is reduced exactly like the ladder's (ExactPhase with
// harmonic k: the step k/P_ns itself, not k times a rounded 1/P_ns).
// This is the Transformer sinusoid of Vaswani et al. 2017 §3.5 with
// positions replaced by real time, as in the continuous-time encodings of
// mTAN (Shukla & Marlin 2021) and STraTS.
//
// Accuracy: t − origin is formed in 128-bit integer nanoseconds. Each period
// becomes an exact fixed-point step of 2^-128 turns per nanosecond
// (core/math/exact_phase.h), so the phase of any int64 instant is reduced to
// within 2^-64 turns (plain double loses ~1e-5 rad for a 1 s period over
// 300 years); the phase's integer bits give the nearest quarter turn and a
// residual angle in [−π/4, π/4], and sin/cos of that angle are taken in
// double by fdlibm's kernels vectorised with Highway (< 1 ulp, the same bits
// on every SIMD target; core/math/sincos.h). Float32 outputs are within 2e-6
// of a long-double reference for timestamps 1900–2200
// (tests/time_sinusoid_test.cc proves it).
//
// Float64 outputs (SinusoidAccuracy::kFloat64): the phase is split into the
// nearest quarter turn and a residual angle in [−π/4, π/4] within 2^-54 rad
// (core/math/turns.h QuarterTurnSplit), as ExactAngle::CosSinOfTurns does;
// the kernel then takes sin/cos of that small angle (< 1 ulp) and the
// quadrant swaps and negates them exactly: within 1.7e-16 of the exact
// values for any int64 instant (tests/time_sinusoid_test.cc checks ≤ 4e-16
// against a __float128 reference, 1900–2200). The float32 path splits at
// the same quarter turn but rounds the residual's integer to one double and
// scales it once (relative error < 2^-51, ≤ 3.5e-16 rad before the sine),
// which a float32 rounding never sees; it is faster (no two-part
// conversion, no second reduction) and, relative to a value next to zero,
// about as accurate.
//
// Units: times and origins in nanoseconds since the Unix epoch (UTC),
// periods in seconds.
//
// Thread-safety: a TimeSinusoid is immutable after construction; concurrent
// calls on one object are safe.
//
// Example:
//
//   const TimeSinusoid ladder(/*dim=*/8, /*min_period_seconds=*/3600.0,
//                             /*max_period_seconds=*/86400.0 * 365.2425);
//   std::vector<double> row(ladder.dim());
//   ladder.Encode(ElapsedNs(t_ns, origin_ns), row.data());
#ifndef PHASOR_CORE_TEMPORAL_TIME_SINUSOID_H_
#define PHASOR_CORE_TEMPORAL_TIME_SINUSOID_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/math/exact_phase.h"
#include "core/math/sincos.h"
#include "core/temporal/elapsed_time.h"

namespace phasor {

// One explicit period of the time sinusoid and its harmonics k = 1..order.
struct TimePeriod {
  double period_seconds = 0;
  int64_t order = 1;
};

struct TimeBlock {
  int64_t dim = 16;                 // Even; dim/2 (sin, cos) pairs.
  double min_period_seconds = 1.0;  // Shortest period, first pair.
  // Longest period, last pair; default 10 Gregorian years.
  double max_period_seconds = 10 * 365.2425 * 86400.0;
  OriginKind origin = OriginKind::kFirstObservation;
  int64_t origin_ns = 0;  // With kExplicit: ns since the Unix epoch.
  // Non-empty: these periods and harmonics replace the ladder (min/max
  // are then unused), and dim must be 2 × the sum of their orders.
  std::vector<TimePeriod> periods;
};

// dim even, in [2, kMaxEncodingWidth]; periods finite, in
// [kMinLadderPeriodSeconds, kMaxLadderPeriodSeconds] (core/math/exact_phase.h), min <= max. Errors name
// the given field paths.
absl::Status ValidatePeriodLadder(int64_t dim, double min_period_seconds,
                                  double max_period_seconds,
                                  absl::string_view dim_field,
                                  absl::string_view min_field,
                                  absl::string_view max_field);

// Errors name `field_prefix`.dim, .min_period_seconds, .max_period_seconds,
// .periods[i].period_seconds, .periods[i].order.
absl::Status ValidateTimeBlock(const TimeBlock& block,
                               absl::string_view field_prefix);
// P_k of the geometric ladder above, k = 0..num_periods−1; the last is
// exactly max_period_seconds.
// REQUIRES: num_periods >= 1; 0 < min_period_seconds <= max_period_seconds.
std::vector<double> LadderPeriodsSeconds(int64_t num_periods,
                                         double min_period_seconds,
                                         double max_period_seconds);
// One P_k alone: the same bits as LadderPeriodsSeconds(...)[k], no vector.
// REQUIRES: as LadderPeriodsSeconds, and 0 <= k < num_periods.
double LadderPeriodSeconds(int64_t k, int64_t num_periods,
                           double min_period_seconds,
                           double max_period_seconds);

// The period of every (sin, cos) pair of the block in column order: the
// ladder's P_k, or P/k for each explicit period's harmonics.
// REQUIRES: ValidateTimeBlock(block, ...).ok().
std::vector<double> TimeBlockPeriodsSeconds(const TimeBlock& block);

// The time-sinusoid ladder, prepared once per request.
class TimeSinusoid final {
 public:
  // REQUIRES: ValidatePeriodLadder(dim, min, max, ...).ok().
  TimeSinusoid(int64_t dim, double min_period_seconds,
               double max_period_seconds,
               SinusoidAccuracy accuracy = SinusoidAccuracy::kFloat32);
  // Explicit periods: dim = 2 × Σ order, pairs in period then harmonic order.
  // REQUIRES: a valid TimeBlock's non-empty `periods`.
  explicit TimeSinusoid(absl::Span<const TimePeriod> periods,
                        SinusoidAccuracy accuracy = SinusoidAccuracy::kFloat32);

  int64_t dim() const { return static_cast<int64_t>(phases_.size()) * 2; }
  // LadderPeriodsSeconds(dim/2, min, max), recomputed (not kept: a request
  // builds one ladder and never reads them); with explicit periods, P/k.
  std::vector<double> periods_seconds() const;

  // Writes dim() values: out[2k] = sin(2π·elapsed/P_k), out[2k+1] = cos(...).
  void Encode(__int128 elapsed_ns, double* out) const;

  // Row r of many: Encode(ElapsedNs(times_ns[r], origin_ns),
  // out + r·row_stride), the same bits. kFloat32 (and Encode's kFloat32)
  // takes a row's whole ladder in vectors: the exact 128-bit phases of
  // Lanes periods at once from 32-bit multiplies, the sin/cos kernel in
  // registers, sin and cos stored interleaved. kFloat64 sends the phases
  // of up to 64/(dim/2) rows through the vector kernel together.
  // REQUIRES: row_stride >= dim(); out holds (rows − 1)·row_stride + dim()
  // values.
  void EncodeRows(absl::Span<const int64_t> times_ns, int64_t origin_ns,
                  double* out, int64_t row_stride) const;

  SinusoidAccuracy accuracy() const { return accuracy_; }

 private:
  // Appends a phase and its step's 64-bit halves (every phase has both).
  void AddPhase(const ExactPhase& phase);
  template <SinusoidAccuracy kAccuracy>
  void EncodeImpl(__int128 elapsed_ns, double* out) const;
  template <SinusoidAccuracy kAccuracy>
  void EncodeRowsImpl(absl::Span<const int64_t> times_ns, int64_t origin_ns,
                      double* out, int64_t row_stride) const;

  double min_period_seconds_;
  double max_period_seconds_;
  SinusoidAccuracy accuracy_;
  std::vector<TimePeriod> explicit_periods_;  // Empty for the ladder.
  std::vector<ExactPhase> phases_;
  // The phases' steps split in 64-bit halves, for the vector ladder of the
  // kFloat32 path (time_sinusoid.cc LadderRowsFloat32).
  std::vector<uint64_t> step_lo_;
  std::vector<uint64_t> step_hi_;
};

}  // namespace phasor

#endif  // PHASOR_CORE_TEMPORAL_TIME_SINUSOID_H_
