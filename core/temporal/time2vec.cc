#include "core/temporal/time2vec.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/base/errors.h"
#include "core/math/exact_angle.h"
#include "core/math/sincos.h"
#include "core/math/turns.h"
#include "core/temporal/elapsed_time.h"

// The float32 sines' row kernel is compiled once per SIMD target Highway
// finds (hwy/examples/skeleton.cc), with the phase products of
// core/math/exact_phase-inl.h and the sin/cos of core/math/sincos-inl.h;
// the scalar code below is in HWY_ONCE.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/temporal/time2vec.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "core/math/exact_phase-inl.h"
#include "core/math/sincos-inl.h"

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sines k.. k + Lanes(d) of one row of Time2Vec's float32 path: sin[k] =
// sin of the phase top64(e·step_k) + offset_k in 2^-64 turns
// (Time2Vec::PhasesFloat32's integer), through SinCosOfPhaseFloat32.
template <class D>
HWY_INLINE void Time2VecVector(D d, int64_t e, const uint64_t* HWY_RESTRICT step_lo,
                               const uint64_t* HWY_RESTRICT step_hi,
                               const uint64_t* HWY_RESTRICT offsets, size_t k,
                               double* HWY_RESTRICT sines) {
  const hn::RebindToUnsigned<D> du;
  const auto turns = hn::Add(ProductTop(d, e, step_lo, step_hi, k), hn::LoadU(du, offsets + k));
  hn::Vec<D> s, c;
  SinCosOfPhaseFloat32(d, turns, &s, &c);
  hn::StoreU(s, d, sines + k);
}

// Time2Vec's float32 sines of whole rows: row r's `count` sines at
// out + r·stride (Time2VecVector), for elapsed times that fit int64. Each
// lane is computed alone: any vector width gives the same bits.
void Time2VecRowsFloat32(const int64_t* HWY_RESTRICT elapsed, size_t rows,
                         const uint64_t* HWY_RESTRICT step_lo,
                         const uint64_t* HWY_RESTRICT step_hi,
                         const uint64_t* HWY_RESTRICT offsets, size_t count,
                         double* HWY_RESTRICT out, int64_t stride) {
  const hn::CappedTag<double, 1> one;
  for (size_t r = 0; r < rows; ++r) {
    double* row = out + static_cast<int64_t>(r) * stride;
    size_t k = ForVectors(count, [&](auto d, size_t k0) {
      Time2VecVector(d, elapsed[r], step_lo, step_hi, offsets, k0, row);
    });
    for (; k < count; ++k) {
      const uint64_t top = ScalarProductTop(elapsed[r], step_lo[k], step_hi[k]);
      hn::Vec<decltype(one)> s, c;
      SinCosOfPhaseFloat32(one, hn::Set(hn::RebindToUnsigned<decltype(one)>(), top + offsets[k]),
                           &s, &c);
      row[k] = hn::GetLane(s);
    }
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace phasor
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace phasor {
HWY_EXPORT(Time2VecRowsFloat32);

absl::Status ValidateTime2VecBlock(const Time2VecBlock& block,
                                   absl::string_view field_prefix) {
  if (block.omega.empty()) {
    return InvalidField(absl::StrCat(field_prefix, ".omega"),
                        "must hold k+1 >= 1 frequencies, got none");
  }
  if (static_cast<int64_t>(block.omega.size()) > kMaxEncodingWidth) {
    return InvalidField(absl::StrCat(field_prefix, ".omega"),
                        absl::StrCat("holds ", block.omega.size(),
                                     " terms; at most ", kMaxEncodingWidth));
  }
  if (block.phi.size() != block.omega.size()) {
    return InvalidField(absl::StrCat(field_prefix, ".phi"),
                        absl::StrCat("has ", block.phi.size(),
                                     " values; omega has ", block.omega.size()));
  }
  for (size_t i = 0; i < block.omega.size(); ++i) {
    if (!std::isfinite(block.omega[i])) {
      return InvalidField(absl::StrCat(field_prefix, ".omega[", i, "]"),
                          absl::StrCat("not finite (", block.omega[i], ")"));
    }
    if (!std::isfinite(block.phi[i])) {
      return InvalidField(absl::StrCat(field_prefix, ".phi[", i, "]"),
                          absl::StrCat("not finite (", block.phi[i], ")"));
    }
  }
  if (!std::isfinite(block.unit_seconds) || block.unit_seconds <= 0) {
    return InvalidField(absl::StrCat(field_prefix, ".unit_seconds"),
                        absl::StrCat("must be finite and > 0, got ",
                                     block.unit_seconds));
  }
  return absl::OkStatus();
}

namespace {

using u128 = unsigned __int128;

// binary128: gcc's __float128 on x86-64 (arithmetic from libgcc), long
// double where that is binary128 (aarch64).
#if defined(__x86_64__) || defined(__i386__)
using Binary128 = __float128;
#else
using Binary128 = long double;
static_assert(std::numeric_limits<long double>::digits == 113,
              "Time2Vec's float64 path needs binary128");
#endif

// 2π as three doubles, summed to ~2^-150 (the 48-bit pieces of
// tests/quad_reference.h's kTwoPiPieces, from mpmath).
Binary128 TwoPi128() {
  return Binary128(0x1.921fb54442d00p+2) + Binary128(0x1.8469898cc5160p-46) +
         Binary128(0x1.01b839a252040p-94);
}

// The double-double hi + lo nearest a binary128 value (2^-106 relative).
void SplitBinary128(Binary128 value, double* hi, double* lo) {
  *hi = static_cast<double>(value);
  *lo = static_cast<double>(value - Binary128(*hi));
}

// (θ/2π) mod 1 in 2^-128 turn, mod 2^128, for any finite double θ of either
// sign: ExactAngle's exact step of |θ|, negated for a negative θ.
u128 SignedTurnStep(double theta) {
  const u128 step = ExactAngle(std::fabs(theta)).step();
  return theta < 0 ? u128{0} - step : step;
}

// x mod 1 turn as a 2^-64-turn integer, within 2^-64 turn (truncated).
// x − round(x) is exact for every double (an |x| >= 2^52 is an integer).
// Rounded by adding 1.5·2^52 (no fraction bits left; the hardware rounds to
// nearest even; this file has no contraction), not std::nearbyint, a libm
// call that saves and restores the floating-point environment.
inline uint64_t TurnsOf(double x) {
  constexpr double kShift = 6755399441055744.0;  // 1.5·2^52
  const double whole =
      std::fabs(x) < 0x1p51 ? (x + kShift) - kShift : std::nearbyint(x);
  const double scaled = (x - whole) * 0x1p64;  // In [−2^63, 2^63], or NaN.
  if (scaled < 0x1p63) return static_cast<uint64_t>(static_cast<int64_t>(scaled));
  // +2^63 (x = n + 1/2) is −2^63 modulo 2^64. A NaN (x infinite: the caller
  // marks that term) gives 0 rather than an undefined conversion.
  return scaled == 0x1p63 ? uint64_t{1} << 63 : 0;
}

// The exact integer e as hi + lo doubles: lo = e − hi has |lo| <= ulp(hi)/2
// <= 2^12 for |e| < 2^66, exact.
inline void SplitElapsed(__int128 e, double* hi, double* lo) {
  // Elapsed times almost always fit int64, whose conversions are single
  // instructions; the 128-bit ones are library calls.
  const auto narrow = static_cast<int64_t>(e);
  if (narrow == e) {
    *hi = static_cast<double>(narrow);
    if (std::fabs(*hi) < 0x1p63) {
      *lo = static_cast<double>(narrow - static_cast<int64_t>(*hi));
      return;
    }
  }
  *hi = static_cast<double>(e);
  *lo = static_cast<double>(e - static_cast<__int128>(*hi));
}

}  // namespace

Time2Vec::Time2Vec(const Time2VecBlock& block, SinusoidAccuracy accuracy)
    : width_(static_cast<int64_t>(block.omega.size())), accuracy_(accuracy) {
  const size_t n = block.omega.size();
  // U = unit_seconds·1e9: a 53-bit by 30-bit product, exact in binary128.
  const Binary128 unit_ns = Binary128(block.unit_seconds) * Binary128(1e9);
  if (accuracy_ == SinusoidAccuracy::kFloat32) {
    // The linear term as kFloat64 forms it; the sines in fixed point.
    rate_hi_.resize(1);
    rate_lo_.resize(1);
    offset_hi_.resize(1);
    offset_lo_.resize(1);
    SplitBinary128(Binary128(block.omega[0]) / unit_ns, &rate_hi_[0], &rate_lo_[0]);
    SplitBinary128(Binary128(block.phi[0]), &offset_hi_[0], &offset_lo_[0]);
    turn_steps_.reserve(n);
    phase_offsets_.reserve(n);
    for (size_t i = 1; i < n; ++i) {
      // ω_i/U rad per ns as a double-double; each part's turn fraction is
      // exact (ExactAngle), so the sum is within 2^-127 turn per ns of
      // the fraction of their sum.
      double rate_hi = 0;
      double rate_lo = 0;
      SplitBinary128(Binary128(block.omega[i]) / unit_ns, &rate_hi, &rate_lo);
      turn_steps_.push_back(SignedTurnStep(rate_hi) + SignedTurnStep(rate_lo));
      phase_offsets_.push_back(static_cast<uint64_t>(SignedTurnStep(block.phi[i]) >> 64));
      step_lo_.push_back(static_cast<uint64_t>(turn_steps_.back()));
      step_hi_.push_back(static_cast<uint64_t>(turn_steps_.back() >> 64));
    }
    return;
  }
  const Binary128 two_pi = TwoPi128();
  rate_hi_.resize(n);
  rate_lo_.resize(n);
  offset_hi_.resize(n);
  offset_lo_.resize(n);
  offset_turns_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Binary128 per_turn = i == 0 ? Binary128(1) : two_pi;
    SplitBinary128(Binary128(block.omega[i]) / (unit_ns * per_turn), &rate_hi_[i],
                   &rate_lo_[i]);
    SplitBinary128(Binary128(block.phi[i]) / per_turn, &offset_hi_[i],
                   &offset_lo_[i]);
    if (i > 0) offset_turns_[i] = TurnsOf(offset_hi_[i]) + TurnsOf(offset_lo_[i]);
  }
}

double Time2Vec::Linear(double e_hi, double e_lo) const {
  // ω_0·τ + φ_0 = e·rate + φ_0: the exact product e_hi·rate_hi (fma), the
  // small cross terms, then φ_0 by TwoSum (Knuth), rounded once at the end.
  const double p = e_hi * rate_hi_[0];
  const double p_error = std::fma(e_hi, rate_hi_[0], -p);
  const double cross = e_hi * rate_lo_[0] + e_lo * rate_hi_[0];
  const double s = p + offset_hi_[0];
  const double bp = s - p;
  const double s_error = (p - (s - bp)) + (offset_hi_[0] - bp);
  return s + (s_error + (p_error + (cross + offset_lo_[0])));
}

void Time2Vec::EncodeFloat64(__int128 elapsed_ns, double* out) const {
  double e_hi = 0;
  double e_lo = 0;
  SplitElapsed(elapsed_ns, &e_hi, &e_lo);
  out[0] = Linear(e_hi, e_lo);
  // The sines in chunks of kAngles through the vector kernel, each turns
  // e·rate_i + offset_i with every part reduced mod 1 on its own and summed
  // as 2^-64-turn integers (wrapping is the mod), then split at the nearest
  // quarter turn.
  constexpr int64_t kAngles = 64;
  HWY_ALIGN double angle[kAngles];
  HWY_ALIGN double sin_angle[kAngles];
  HWY_ALIGN double cos_angle[kAngles];
  uint32_t quadrant[kAngles];
  const auto terms = static_cast<int64_t>(rate_hi_.size());
  for (int64_t i0 = 1; i0 < terms; i0 += kAngles) {
    const int64_t used = std::min(kAngles, terms - i0);
    for (int64_t j = 0; j < used; ++j) {
      const int64_t i = i0 + j;
      const double p = e_hi * rate_hi_[i];
      const double p_error = std::fma(e_hi, rate_hi_[i], -p);
      const uint64_t turns = TurnsOf(p) + TurnsOf(p_error) +
                             TurnsOf(e_hi * rate_lo_[i]) +
                             TurnsOf(e_lo * rate_hi_[i]) + offset_turns_[i];
      angle[j] = QuarterTurnSplit(turns, &quadrant[j]);
      // ω_i·τ/2π beyond double's range (ω near its maximum): no phase is
      // left to reduce, so NaN rather than a sine of nothing.
      if (!std::isfinite(p)) angle[j] = std::numeric_limits<double>::quiet_NaN();
    }
    SinCosOfSmallAngles(absl::MakeConstSpan(angle, static_cast<size_t>(used)), sin_angle,
                        cos_angle);
    for (int64_t j = 0; j < used; ++j) {
      // sin(r + q·π/2): sin r, cos r, −sin r, −cos r.
      const uint32_t q = quadrant[j];
      const double value = (q & 1) != 0 ? cos_angle[j] : sin_angle[j];
      out[i0 + j] = (q & 2) != 0 ? -value : value;
    }
  }
}

double Time2Vec::LinearOf(__int128 elapsed_ns) const {
  double e_hi = 0;
  double e_lo = 0;
  SplitElapsed(elapsed_ns, &e_hi, &e_lo);
  return Linear(e_hi, e_lo);
}

void Time2Vec::PhasesFloat32(__int128 elapsed_ns, size_t first, size_t count,
                             uint64_t* turns) const {
  // e·step mod 2^128 (the whole turns wrap away), its top 64 bits the phase.
  const auto e = static_cast<u128>(elapsed_ns);
  for (size_t j = 0; j < count; ++j) {
    turns[j] = static_cast<uint64_t>((e * turn_steps_[first + j]) >> 64) +
               phase_offsets_[first + j];
  }
}

void Time2Vec::Encode(__int128 elapsed_ns, double* out) const {
  if (accuracy_ == SinusoidAccuracy::kFloat64) {
    EncodeFloat64(elapsed_ns, out);
    return;
  }
  EncodeRowsFloat32(absl::MakeConstSpan(&elapsed_ns, 1), /*origin_ns=*/0, out,
                    /*row_stride=*/width());
}

void Time2Vec::EncodeRows(absl::Span<const int64_t> times_ns, int64_t origin_ns,
                          double* out, int64_t row_stride) const {
  if (accuracy_ == SinusoidAccuracy::kFloat64) {
    for (size_t r = 0; r < times_ns.size(); ++r) {
      EncodeFloat64(ElapsedNs(times_ns[r], origin_ns),
                    out + static_cast<int64_t>(r) * row_stride);
    }
    return;
  }
  EncodeRowsFloat32(times_ns, origin_ns, out, row_stride);
}

template <typename Time>
void Time2Vec::EncodeRowsFloat32(absl::Span<const Time> times, int64_t origin_ns,
                                 double* out, int64_t row_stride) const {
  // The phases row by row (integer), then the sines of the phases of up to
  // kPhases / k rows through the float32 ladder's kernel together.
  constexpr int64_t kPhases = 64;
  uint64_t turns[kPhases];
  double sin_turns[kPhases];
  double cos_turns[kPhases];  // Not used: the kernel gives both.
  const auto sines = static_cast<int64_t>(turn_steps_.size());
  const auto rows = static_cast<int64_t>(times.size());
  if constexpr (std::is_same_v<Time, int64_t>) {
    // Rows whose elapsed time fits int64 (all but t and the origin ~292
    // years apart): the sines through the vector kernel row by row; the
    // rest by the 128-bit path below. Both give the same bits.
    constexpr int64_t kRows = 64;
    int64_t narrow[kRows];
    const auto kernel = HWY_DYNAMIC_DISPATCH(Time2VecRowsFloat32);
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      const int64_t n = std::min(kRows, rows - r0);
      bool overflow = false;
      for (int64_t r = 0; r < n; ++r) {
        overflow |= __builtin_sub_overflow(times[r0 + r], origin_ns, &narrow[r]);
        out[(r0 + r) * row_stride] = LinearOf(narrow[r]);
      }
      kernel(narrow, static_cast<size_t>(n), step_lo_.data(), step_hi_.data(),
             phase_offsets_.data(), static_cast<size_t>(sines), out + r0 * row_stride + 1,
             row_stride);
      if (!overflow) continue;
      for (int64_t r = 0; r < n; ++r) {
        int64_t unused = 0;
        if (__builtin_sub_overflow(times[r0 + r], origin_ns, &unused)) {
          const __int128 e = ElapsedNs(times[r0 + r], origin_ns);
          EncodeRowsFloat32(absl::MakeConstSpan(&e, 1), 0, out + (r0 + r) * row_stride,
                            row_stride);
        }
      }
    }
    return;
  }
  const auto elapsed = [&](int64_t r) -> __int128 {
    if constexpr (std::is_same_v<Time, __int128>) {
      return times[r];
    } else {
      return ElapsedNs(times[r], origin_ns);
    }
  };
  if (sines > kPhases) {  // A row at a time, kPhases sines at a time.
    for (int64_t r = 0; r < rows; ++r) {
      double* row = out + r * row_stride;
      const __int128 e = elapsed(r);
      row[0] = LinearOf(e);
      for (int64_t k0 = 0; k0 < sines; k0 += kPhases) {
        const auto n = static_cast<size_t>(std::min(kPhases, sines - k0));
        PhasesFloat32(e, static_cast<size_t>(k0), n, turns);
        SinCosOfTurnsFloat32(absl::MakeConstSpan(turns, n), row + 1 + k0, cos_turns);
      }
    }
    return;
  }
  const int64_t rows_per_call = sines == 0 ? rows : kPhases / sines;
  for (int64_t r0 = 0; r0 < rows; r0 += rows_per_call) {
    const int64_t call_rows = std::min(rows_per_call, rows - r0);
    for (int64_t r = 0; r < call_rows; ++r) {
      const __int128 e = elapsed(r0 + r);
      out[(r0 + r) * row_stride] = LinearOf(e);
      PhasesFloat32(e, 0, static_cast<size_t>(sines), turns + r * sines);
    }
    SinCosOfTurnsFloat32(absl::MakeConstSpan(turns, static_cast<size_t>(call_rows * sines)),
                         sin_turns, cos_turns);
    for (int64_t r = 0; r < call_rows; ++r) {
      std::copy(sin_turns + r * sines, sin_turns + (r + 1) * sines,
                out + (r0 + r) * row_stride + 1);
    }
  }
}

}  // namespace phasor
#endif  // HWY_ONCE
