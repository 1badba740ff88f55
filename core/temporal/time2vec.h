// -----------------------------------------------------------------------------
// File: core/temporal/time2vec.h
// -----------------------------------------------------------------------------
//
// Time2Vec (Kazemi et al. 2019, "Time2Vec: Learning a Vector Representation
// of Time", eq. 1) with served parameters ω, φ of k+1 terms:
//
//   out[0] = ω_0·τ + φ_0,  out[i] = sin(ω_i·τ + φ_i), i = 1..k,
//   τ = (t − origin) / unit_seconds.
//
// τ is exact elapsed time (core/temporal/elapsed_time.h). The rates are
// arbitrary reals: each becomes a fixed-point step of turns per nanosecond
// from its fraction (Payne–Hanek, core/math/exact_angle.h), so the phase is
// within |ω·τ|/2π·2^-104 turns of exact (see Time2Vec below), and the sines
// come from the vector kernels of core/math/sincos.h.
//
// Units: times in nanoseconds since the Unix epoch, ω in radians per
// unit_seconds, φ in radians.
//
// Thread-safety: a Time2Vec is immutable after construction; concurrent
// calls on one object are safe.
//
// Example:
//
//   Time2VecBlock block;
//   block.omega = {1e-3, 2.0 * M_PI / 86400.0};
//   block.phi = {0.0, 0.5};
//   const Time2Vec encoder(block);
//   std::vector<double> row(encoder.width());
//   encoder.Encode(ElapsedNs(t_ns, origin_ns), row.data());
#ifndef PHASOR_CORE_TEMPORAL_TIME2VEC_H_
#define PHASOR_CORE_TEMPORAL_TIME2VEC_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/math/sincos.h"
#include "core/temporal/elapsed_time.h"

namespace phasor {

struct Time2VecBlock {
  std::vector<double> omega;  // ω_0..ω_k, radians per unit; k+1 >= 1 values.
  std::vector<double> phi;    // φ_0..φ_k, radians; same length as omega.
  double unit_seconds = 1.0;  // τ's unit: 1 = seconds, 86400 = days.
  OriginKind origin = OriginKind::kFirstObservation;
  int64_t origin_ns = 0;
};

// Errors name `field_prefix`.omega[i], .phi, .unit_seconds.
absl::Status ValidateTime2VecBlock(const Time2VecBlock& block,
                                   absl::string_view field_prefix);

// Time2Vec, prepared once per request.
//
// SinusoidAccuracy::kFloat32: the elapsed nanoseconds are an integer, so
// (ω_i·τ/2π) mod 1 = (e·(ω_i/(2π·U) mod 1)) mod 1: the rate ω_i/U rad per
// ns, as a binary128 double-double (2^-106 relative), becomes a 128-bit
// fixed-point step of turns per ns as the time sinusoid's periods do (each
// part's turn fraction exact, Payne–Hanek: core/math/exact_angle.h), and a
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

#endif  // PHASOR_CORE_TEMPORAL_TIME2VEC_H_
