#include "core/continuous_time.h"

#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/errors.h"

namespace phasor {
namespace {

// The Time2Vec phase reduction needs more than double's 53 bits.
static_assert(std::numeric_limits<long double>::digits >= 64,
              "Time2Vec phase reduction needs an extended long double");

constexpr double kTwoPi = 6.283185307179586476925286766559;
constexpr long double kInverseTwoPiLong =
    0.159154943091895335768883763372514362034459645740456448747667L;

using u128 = unsigned __int128;

constexpr long double PowerOfTwo(int exponent) {
  long double value = 1.0L;
  for (int i = 0; i < exponent; ++i) value *= 2.0L;
  return value;
}

// std::nearbyint(x) in the default rounding mode (to nearest, ties to even),
// without the libm call (nearbyintl saves and restores the floating-point
// environment, ~20% of a Time2Vec row). Adding 1.5·2^(p−1) (p = significand
// bits) leaves no fraction bits, so the sum is x rounded to an integer by
// the hardware, ties to even (the constant is even); subtracting it back is
// exact. |x| >= 2^(p−2) is rare and goes to the library.
inline long double RoundToNearestEven(long double x) {
  constexpr int kDigits = std::numeric_limits<long double>::digits;
  constexpr long double kShifter = 3.0L * PowerOfTwo(kDigits - 2);
  constexpr long double kLimit = PowerOfTwo(kDigits - 2);
  if (!(std::fabs(x) < kLimit)) return std::nearbyint(x);
  return (x + kShifter) - kShifter;
}

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
  return CheckPeriodLadder(block.dim, block.min_period_seconds,
                           block.max_period_seconds, {field_prefix, ".dim"},
                           {field_prefix, ".min_period_seconds"},
                           {field_prefix, ".max_period_seconds"});
}

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

ExactPhase::ExactPhase(double period_seconds) {
  assert(period_seconds >= kMinLadderPeriodSeconds &&
         period_seconds <= kMaxLadderPeriodSeconds);
  // period = m·2^e exactly, with m odd, so P_ns = m·10^9·2^e and the turns
  // per nanosecond are 2^−e / (m·10^9): a ratio of integers, divided out
  // below bit by bit with no rounding except the final floor.
  int exponent = 0;
  const double fraction = std::frexp(period_seconds, &exponent);
  auto mantissa = static_cast<uint64_t>(std::ldexp(fraction, 53));
  int e = exponent - 53;
  while ((mantissa & 1) == 0) {
    mantissa >>= 1;
    ++e;
  }
  u128 divisor = static_cast<u128>(mantissa) * 1000000000u;
  int doublings = -e;
  if (doublings < 0) {
    // P_ns = m·10^9·2^e <= 1e24 < 2^80 for the validated periods.
    divisor <<= -doublings;
    doublings = 0;
  }
  // remainder = 2^doublings mod divisor; divisor < 2^83, so 2·remainder
  // never overflows.
  // Long division in base 2^kChunkBits: divisor < 2^83, so a remainder
  // shifted by kChunkBits stays below 2^128 and each step is one exact
  // 128-bit division (the same bits as a bit-by-bit division, ~40x fewer
  // operations; a request builds one of these per ladder period).
  constexpr int kChunkBits = 44;
  assert(divisor < (static_cast<u128>(1) << (128 - kChunkBits)));
  // remainder = 2^doublings mod divisor.
  u128 remainder = 1;
  for (int left = doublings; left > 0;) {
    const int bits = left < kChunkBits ? left : kChunkBits;
    remainder = (remainder << bits) % divisor;
    left -= bits;
  }
  // The 128 fractional bits of remainder / divisor.
  u128 step = 0;
  for (int left = 128; left > 0;) {
    const int bits = left < kChunkBits ? left : kChunkBits;
    remainder <<= bits;
    step = (step << bits) | (remainder / divisor);
    remainder %= divisor;
    left -= bits;
  }
  step_ = step;
}

TimeSinusoid::TimeSinusoid(int64_t dim, double min_period_seconds,
                           double max_period_seconds)
    : min_period_seconds_(min_period_seconds),
      max_period_seconds_(max_period_seconds) {
  const int64_t num_periods = dim / 2;
  phases_.reserve(static_cast<size_t>(num_periods));
  for (int64_t k = 0; k < num_periods; ++k) {
    phases_.emplace_back(LadderPeriodSeconds(k, num_periods, min_period_seconds,
                                             max_period_seconds));
  }
}

std::vector<double> TimeSinusoid::periods_seconds() const {
  return LadderPeriodsSeconds(static_cast<int64_t>(phases_.size()),
                              min_period_seconds_, max_period_seconds_);
}

void TimeSinusoid::Encode(__int128 elapsed_ns, double* out) const {
  for (size_t k = 0; k < phases_.size(); ++k) {
    const double angle = kTwoPi * phases_[k].SignedTurns(elapsed_ns);
    out[2 * k] = std::sin(angle);
    out[2 * k + 1] = std::cos(angle);
  }
}

Time2Vec::Time2Vec(const Time2VecBlock& block)
    : omega_(block.omega.begin(), block.omega.end()),
      phi_long_(block.phi.begin(), block.phi.end()),
      phi_(block.phi),
      unit_ns_(static_cast<long double>(block.unit_seconds) * 1e9L) {}

void Time2Vec::Encode(__int128 elapsed_ns, double* out) const {
  // |elapsed_ns| < 2^64 converts to long double exactly.
  const long double tau = static_cast<long double>(elapsed_ns) / unit_ns_;
  out[0] = static_cast<double>(omega_[0] * tau + phi_long_[0]);
  for (size_t i = 1; i < omega_.size(); ++i) {
    long double turns = omega_[i] * tau * kInverseTwoPiLong;
    turns -= RoundToNearestEven(turns);
    out[i] = std::sin(kTwoPi * static_cast<double>(turns) + phi_[i]);
  }
}

}  // namespace phasor
