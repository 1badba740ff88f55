// Continuous-time encodings: sinusoids of real elapsed time τ = t − origin
// (not of the row index), and Time2Vec.
//
// Time sinusoid ("time" block), a geometric ladder of K = dim/2 periods
//   P_k = min_period_seconds · (max_period_seconds / min_period_seconds)^(k/(K−1))
//   out[2k] = sin(2π·τ/P_k),  out[2k+1] = cos(2π·τ/P_k),   τ in seconds
// (K = 1 uses min_period_seconds), or explicit periods with harmonics
// (TimeBlock.periods), Prophet's seasonalities (Taylor & Letham 2018 §3.2;
// prophet/forecaster.py fourier_series, there with τ in days since the epoch):
//   for each period P with order K, for k = 1..K:
//   sin(2π·k·τ/P), cos(2π·k·τ/P)
// whose phase k·τ/P is reduced exactly like the ladder's (ExactPhase with
// harmonic k: the step k/P_ns itself, not k times a rounded 1/P_ns).
// This is the Transformer sinusoid of Vaswani
// et al. 2017 §3.5 with positions replaced by real time, as in the
// continuous-time encodings of mTAN (Shukla & Marlin 2021) and STraTS.
//
// Time2Vec (Kazemi et al. 2019, "Time2Vec: Learning a Vector Representation
// of Time", eq. 1) with served parameters ω, φ of k+1 terms:
//   out[0] = ω_0·τ + φ_0,  out[i] = sin(ω_i·τ + φ_i), i = 1..k,
//   τ = (t − origin) / unit_seconds.
//
// Accuracy (DESIGN §4): t − origin is formed in 128-bit integer nanoseconds
// (1900→2200 is ~9.47e18 ns, past int64). For the ladder each period becomes
// an exact fixed-point step of 2^-128 turns per nanosecond, so the phase of
// any int64 instant is reduced to within 2^-64 turns (plain double loses
// ~1e-5 rad for a 1 s period over 300 years); the phase's integer bits give
// the nearest quarter turn and a residual angle in [−π/4, π/4], and sin/cos
// of that angle are taken in double by fdlibm's kernels vectorised with
// Highway (< 1 ulp, the same bits on every SIMD target; continuous_time.cc).
// Time2Vec's rates are arbitrary reals: each becomes the same kind of
// fixed-point step from its fraction in turns per nanosecond (see Time2Vec
// below), within |ω·τ|/2π·2^-104 turns. Float32 outputs are within 2e-6 of
// a long-double reference for timestamps 1900–2200
// (tests/continuous_time_test.cc proves it).
//
// Float64 outputs (SinusoidAccuracy::kFloat64): the ladder's phase is split
// into the nearest quarter turn and a residual angle in [−π/4, π/4] within
// 2^-54 rad (ExactAngle::QuarterTurnSplit), as ExactAngle::CosSinOfTurns does
// (core/exact_angle.h); the kernel then takes sin/cos of that small angle
// (< 1 ulp) and the quadrant swaps and negates them exactly: within 1.7e-16
// of the exact values for any int64 instant (tests/temporal_f64_test.cc
// checks ≤ 4e-16 against a __float128 reference, 1900–2200). The float32
// path splits at the same quarter turn but rounds the residual's integer to
// one double and scales it once (relative error < 2^-51, ≤ 3.5e-16 rad
// before the sine), which a float32 rounding never sees; it is faster (no
// two-part conversion, no second reduction) and, relative to a value next
// to zero, about as accurate.
//
// Thread-safety: the classes are immutable after construction; concurrent
// calls on one object are safe.
#ifndef PHASOR_CORE_CONTINUOUS_TIME_H_
#define PHASOR_CORE_CONTINUOUS_TIME_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace phasor {

// τ is measured from this instant.
enum class OriginKind {
  kFirstObservation,  // The series' first row (carried across chunks in SeriesState).
  kUnixEpoch,         // 1970-01-01T00:00:00Z.
  kExplicit,          // origin_ns.
};

// REQUIRES: origin_ns is used only for kExplicit.
inline int64_t ResolveOriginNs(OriginKind kind, int64_t explicit_origin_ns,
                               int64_t first_observation_ns) {
  switch (kind) {
    case OriginKind::kFirstObservation:
      return first_observation_ns;
    case OriginKind::kUnixEpoch:
      return 0;
    case OriginKind::kExplicit:
      return explicit_origin_ns;
  }
  return 0;
}

// Exact t − origin: both fit int64, the difference needs 65 bits.
inline __int128 ElapsedNs(int64_t t_ns, int64_t origin_ns) {
  return static_cast<__int128>(t_ns) - static_cast<__int128>(origin_ns);
}

// Periods accepted by the ladders: 1 ns to 1e15 s (~3e7 years). The upper
// bound keeps the exact step computation inside 128 bits.
inline constexpr double kMinLadderPeriodSeconds = 1e-9;
inline constexpr double kMaxLadderPeriodSeconds = 1e15;
// Largest dim, Time2Vec width and d_model accepted: far above any model
// width, low enough that a request cannot make a table allocation explode.
inline constexpr int64_t kMaxEncodingWidth = 65536;
// Largest Fourier order of a time-block period or a calendar field.
inline constexpr int64_t kMaxFourierOrder = 1024;

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

struct Time2VecBlock {
  std::vector<double> omega;  // ω_0..ω_k, radians per unit; k+1 >= 1 values.
  std::vector<double> phi;    // φ_0..φ_k, radians; same length as omega.
  double unit_seconds = 1.0;  // τ's unit: 1 = seconds, 86400 = days.
  OriginKind origin = OriginKind::kFirstObservation;
  int64_t origin_ns = 0;
};

// dim even, in [2, kMaxEncodingWidth]; periods finite, in [kMinLadderPeriodSeconds,
// kMaxLadderPeriodSeconds], min <= max. Errors name the given field paths.
absl::Status ValidatePeriodLadder(int64_t dim, double min_period_seconds,
                                  double max_period_seconds,
                                  absl::string_view dim_field,
                                  absl::string_view min_field,
                                  absl::string_view max_field);

// Errors name `field_prefix`.dim, .min_period_seconds, .max_period_seconds,
// .periods[i].period_seconds, .periods[i].order.
absl::Status ValidateTimeBlock(const TimeBlock& block,
                               absl::string_view field_prefix);
// Errors name `field_prefix`.omega[i], .phi, .unit_seconds.
absl::Status ValidateTime2VecBlock(const Time2VecBlock& block,
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

// One period as an exact phase step: floor(frac(h / P_ns) · 2^128), the turns
// of harmonic h advanced per nanosecond in units of 2^-128 (the period taken
// as exactly the double given). The phase of an elapsed time is then one
// wrapping 128-bit multiply, exact to 2^-64 turns for any |elapsed| < 2^64 ns.
class ExactPhase final {
 public:
  // REQUIRES: kMinLadderPeriodSeconds <= period_seconds <=
  // kMaxLadderPeriodSeconds; 1 <= harmonic <= kMaxFourierOrder.
  explicit ExactPhase(double period_seconds, int64_t harmonic = 1);

  // (elapsed_ns / P_ns) mod 1 turn as a fraction of 2^64 (the top of the
  // 128-bit product), for a quarter-turn split.
  uint64_t Turns(__int128 elapsed_ns) const {
    const unsigned __int128 turns =
        static_cast<unsigned __int128>(elapsed_ns) * step_;
    return static_cast<uint64_t>(turns >> 64);
  }
  // The step, in 2^-128 turns per nanosecond.
  unsigned __int128 step() const { return step_; }

 private:
  unsigned __int128 step_;
};

// Which output a sinusoid's doubles are for: kFloat32 (also fp16, bf16)
// rounds the quarter-turn residual to one double angle (see the file
// comment), fast and far inside a float32 ulp; kFloat64 converts it in two
// parts, within 1.7e-16 of exact. The two differ by a few 1e-16 relative,
// so a float64 result narrowed to float32 may differ from the float32
// result by one float32 ulp where the exact value lies that close to a
// float32 rounding boundary.
enum class SinusoidAccuracy { kFloat32, kFloat64 };

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
  // kFloat32 path (continuous_time.cc LadderRowsFloat32).
  std::vector<uint64_t> step_lo_;
  std::vector<uint64_t> step_hi_;
};

// sin_out[i] = sin(angles[i]), cos_out[i] = cos(angles[i]): the vector
// fdlibm kernel (< 1 ulp, the same bits on every SIMD target; it and glibc
// may differ in the last bit), libm's sin and cos for |angles[i]| > 2^20.
// Each value depends on its angle alone, not on the call's other angles.
// sin_out and cos_out hold angles.size() values; either may be
// angles.data().
void SinCosOfAngles(absl::Span<const double> angles, double* sin_out,
                    double* cos_out);
// SinCosOfAngles (the same bits) of angles known to be small, without its
// pass over the angles for ones past the kernel's range.
// REQUIRES: |angles[i]| <= 2^20 (the calendar's lie in [0, 2π]); sin_out
// and cos_out apart from angles.
void SinCosOfSmallAngles(absl::Span<const double> angles, double* sin_out,
                         double* cos_out);

// sin_out[i], cos_out[i] of 2π·turns[i]·2^-64 (a phase in 2^-64 turns):
// ExactAngle::QuarterTurnSplit, the kernel on the residual and the
// quadrant's swap and signs, in vectors, with the bits of the scalar split
// followed by the kernel on one angle. Within 1.7e-16 of exact.
void SinCosOfTurns(absl::Span<const uint64_t> turns, double* sin_out,
                   double* cos_out);

// Time2Vec, prepared once per request.
//
// SinusoidAccuracy::kFloat32: the elapsed nanoseconds are an integer, so
// (ω_i·τ/2π) mod 1 = (e·(ω_i/(2π·U) mod 1)) mod 1: the rate ω_i/U rad per
// ns, as a binary128 double-double (2^-106 relative), becomes a 128-bit
// fixed-point step of turns per ns as the time sinusoid's periods do (each
// part's turn fraction exact, Payne–Hanek: core/exact_angle.h), and a
// row's phase is the top 64 bits of e·step plus φ_i/2π mod 1 (reduced
// exactly the same way), all integer arithmetic; sin comes from the float32
// ladder's kernel (quarter turn from the bits, < 1 ulp on the residual).
// The phase is within |ω_i·τ|/2π·2^-104 + 2^-62 turns of exact: ≤ 2e-16
// rad off while |ω_i·τ| < 2^40 turns, for any φ_i. The linear term
// ω_0·τ + φ_0 is formed as kFloat64 forms it (below).
//
// SinusoidAccuracy::kFloat64 evaluates the exact τ = elapsed_ns / U,
// U = unit_seconds·1e9, without long double: per term the rate ω_i/U (in
// turns per ns, ω_i/(2π·U), for i >= 1) and the offset (φ_i/(2π) turns) are
// formed in binary128 and kept as double-doubles (2^-106 relative); a row
// multiplies the elapsed nanoseconds (split exactly into two doubles) by the
// rate with fma's exact products, reduces every partial sum modulo one turn
// and adds them as 2^-64-turn integers; sin comes from the time sinusoid's
// quarter-turn split and vector kernel. The phase is then within
// |ω_i·τ|/2π·2^-104 + 2^-61 turns of exact, and each sin within 1.7e-16 + 2π
// times that (≤ 2e-16 while |ω_i·τ| < 2^40 turns, e.g. ω = 2π rad/s over 300
// years). The linear
// term ω_0·τ + φ_0 is within 1 ulp plus 2^-100 of the larger of |ω_0·τ| and
// |φ_0|.
class Time2Vec final {
 public:
  // REQUIRES: ValidateTime2VecBlock(block, ...).ok().
  explicit Time2Vec(const Time2VecBlock& block,
                    SinusoidAccuracy accuracy = SinusoidAccuracy::kFloat32);

  int64_t width() const { return width_; }

  // Writes width() values for τ = elapsed_ns / (unit_seconds·1e9).
  void Encode(__int128 elapsed_ns, double* out) const;

  // Row r of many: Encode(ElapsedNs(times_ns[r], origin_ns),
  // out + r·row_stride), the same bits. kFloat32 reduces each row's phases
  // and then takes the sines of up to 64/k rows in one vector kernel call.
  // REQUIRES: row_stride >= width(); out holds (rows − 1)·row_stride +
  // width() values.
  void EncodeRows(absl::Span<const int64_t> times_ns, int64_t origin_ns,
                  double* out, int64_t row_stride) const;

 private:
  void EncodeFloat64(__int128 elapsed_ns, double* out) const;
  // The linear term ω_0·τ + φ_0 of e = e_hi + e_lo ns (SplitElapsed), for
  // both accuracies.
  double Linear(double e_hi, double e_lo) const;
  double LinearOf(__int128 elapsed_ns) const;
  // kFloat32: turns[j] = the phase (ω_i·τ + φ_i) mod 2π in 2^-64 turns of
  // sine i = first + j + 1, for j < count.
  void PhasesFloat32(__int128 elapsed_ns, size_t first, size_t count,
                     uint64_t* turns) const;
  // Time is int64_t (times minus origin_ns) or __int128 (elapsed times).
  template <typename Time>
  void EncodeRowsFloat32(absl::Span<const Time> times, int64_t origin_ns,
                         double* out, int64_t row_stride) const;

  int64_t width_;
  SinusoidAccuracy accuracy_;
  // Rate and offset of each term as hi + lo (see above); term 0's are ω_0/U
  // and φ_0 (not in turns). kFloat32 keeps term 0's only.
  std::vector<double> rate_hi_;
  std::vector<double> rate_lo_;
  std::vector<double> offset_hi_;
  std::vector<double> offset_lo_;
  std::vector<uint64_t> offset_turns_;  // Terms >= 1: the offset mod 1 turn.
  // kFloat32, terms >= 1 (index i − 1): ω_i/(2π·U) mod 1 as a step of
  // 2^-128 turns per ns (the ladder's fixed point), and φ_i mod 2π in 2^-64
  // turns, both reduced by ExactAngle.
  std::vector<unsigned __int128> turn_steps_;
  std::vector<uint64_t> phase_offsets_;
  // turn_steps_' low and high 64 bits, for the vector kernel.
  std::vector<uint64_t> step_lo_;
  std::vector<uint64_t> step_hi_;
};

}  // namespace phasor

#endif  // PHASOR_CORE_CONTINUOUS_TIME_H_
