#include "core/rope/rope_scaling.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/math/frequency_ladder.h"

namespace phasor {
namespace {

// θ_i = base^(−2i/rd): the unscaled RoFormer frequencies, as the ladder of
// root = base^(−2/rd) in double-double (core/math/frequency_ladder.h). The scaled
// frequencies multiply it by per-rung weights computed in wide precision and
// round once, so every θ_i is the nearest double of its formula.
std::vector<DoubleDouble> PlainLadder(double base, int64_t rotary_dim) {
  return PowerLadder(InverseRoot(base, rotary_dim / 2), rotary_dim / 2);
}

// The same for a base that is itself a formula (NTK), given in wide precision.
std::vector<DoubleDouble> WideBaseLadder(WideReal base, int64_t rotary_dim) {
  return PowerLadder(
      ToDoubleDouble(WidePow(base, static_cast<WideReal>(-2) /
                                       static_cast<WideReal>(rotary_dim))),
      rotary_dim / 2);
}

// Rung i of the ladder of `base` in wide precision: the fallback when the
// double-double value sits too close to a rounding boundary.
WideReal WideTheta(WideReal base, int64_t i, int64_t rotary_dim) {
  return WidePow(base, -static_cast<WideReal>(2 * i) /
                           static_cast<WideReal>(rotary_dim));
}

// θ_i·weights[i] (weights empty: 1), each correctly rounded; wide_weight(i)
// gives weight i in wide precision for the rare fallback.
template <class WideWeight>
std::vector<double> RoundedFrequencies(const std::vector<DoubleDouble>& ladder,
                                       WideReal base, int64_t rotary_dim,
                                       const std::vector<DoubleDouble>& weights,
                                       const WideWeight& wide_weight) {
  return RoundLadder(ladder, weights, [&](int64_t i) {
    return WideTheta(base, i, rotary_dim) * wide_weight(i);
  });
}

std::vector<double> PlainInverseFrequencies(double base, int64_t rotary_dim) {
  return RoundedFrequencies(PlainLadder(base, rotary_dim),
                            static_cast<WideReal>(base), rotary_dim, {},
                            [](int64_t) { return static_cast<WideReal>(1); });
}

// θ_i / divisor_i, correctly rounded.
std::vector<double> DividedInverseFrequencies(double base, int64_t rotary_dim,
                                              const std::vector<double>& divisors) {
  std::vector<DoubleDouble> weights;
  weights.reserve(divisors.size());
  for (double d : divisors) weights.push_back(Reciprocal(d));
  return RoundedFrequencies(PlainLadder(base, rotary_dim),
                            static_cast<WideReal>(base), rotary_dim, weights,
                            [&](int64_t i) {
                              return 1 / static_cast<WideReal>(divisors[i]);
                            });
}

// NTK-aware exponent rd/(rd−2): the base change that keeps the highest
// frequency fixed while stretching the lowest by `factor` (bloc97). The new
// base and its ladder are formed in wide precision.
std::vector<double> NtkInverseFrequencies(double base, WideReal stretch,
                                          int64_t rotary_dim) {
  const WideReal rd = static_cast<WideReal>(rotary_dim);
  const WideReal ntk_base =
      static_cast<WideReal>(base) * WidePow(stretch, rd / (rd - 2));
  return RoundedFrequencies(WideBaseLadder(ntk_base, rotary_dim), ntk_base,
                            rotary_dim, {},
                            [](int64_t) { return static_cast<WideReal>(1); });
}

// YaRN's get_mscale (HF `_compute_yarn_parameters`, from DeepSeek-V2).
double GetMscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

// Dimension index (of rd) at which the wavelength fits `num_rotations` times
// into `context_length` tokens; YaRN eq. 17, HF find_correction_dim. In wide
// precision: the YaRN ramp weights θ_i, so its rounding would reach θ_i.
template <class Real>
Real YarnCorrectionDim(double num_rotations, int64_t rotary_dim, double base,
                       double context_length) {
  const Real pi = static_cast<Real>(WidePi());
  if constexpr (std::is_same_v<Real, long double>) {
    return static_cast<Real>(rotary_dim) *
           logl(static_cast<Real>(context_length) /
                (static_cast<Real>(num_rotations) * 2 * pi)) /
           (2 * logl(static_cast<Real>(base)));
  } else {
    return static_cast<Real>(rotary_dim) *
           WideLog(static_cast<Real>(context_length) /
                   (static_cast<Real>(num_rotations) * 2 * pi)) /
           (2 * WideLog(static_cast<Real>(base)));
  }
}

// Shortest text that reads back as the same double ("0.9", not
// "0.90000000000000002"), so messages show what the caller sent.
std::string Fmt(double value) {
  char buffer[32];
  const std::to_chars_result result =
      std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

bool FiniteAtLeast(double value, double low) {
  return std::isfinite(value) && value >= low;
}
bool FinitePositive(double value) { return std::isfinite(value) && value > 0.0; }

// Resolved YaRN inputs; fields of YarnRopeScaling with HF's defaults applied.
struct YarnResolved {
  double factor;
  int64_t original_max_position_embeddings;
};

// HF reads `get("beta_fast") or 32` and `get("beta_slow") or 1`: 0 is the
// default, not a value.
constexpr double kYarnDefaultBetaFast = 32.0;
constexpr double kYarnDefaultBetaSlow = 1.0;
double BetaOrDefault(double beta, double default_beta) {
  return beta == 0.0 ? default_beta : beta;
}

YarnResolved ResolveYarn(const YarnRopeScaling& yarn) {
  YarnResolved resolved;
  resolved.original_max_position_embeddings =
      yarn.original_max_position_embeddings.has_value()
          ? *yarn.original_max_position_embeddings
          : *yarn.max_position_embeddings;
  resolved.factor =
      yarn.factor.has_value()
          ? *yarn.factor
          : static_cast<double>(*yarn.max_position_embeddings) /
                static_cast<double>(resolved.original_max_position_embeddings);
  return resolved;
}

// HF warns about factor < 1 and computes anyway; only factors <= 0, where θ
// becomes infinite or changes sign, are refused.
absl::Status ValidateFactor(double factor, absl::string_view field) {
  if (!FinitePositive(factor)) {
    return InvalidField(field,
                        absl::StrCat("must be finite and > 0, got ", Fmt(factor)));
  }
  return absl::OkStatus();
}

absl::Status ValidateAttentionFactor(const std::optional<double>& attention_factor,
                                     absl::string_view field) {
  if (attention_factor.has_value() && !FinitePositive(*attention_factor)) {
    return InvalidField(field, absl::StrCat("must be finite and > 0, got ",
                                            Fmt(*attention_factor)));
  }
  return absl::OkStatus();
}

absl::Status ValidateBeta(double beta, double default_beta,
                          absl::string_view field) {
  // A negative beta is the log of a negative number in HF's
  // find_correction_dim (math.log raises).
  if (!FiniteAtLeast(beta, 0.0)) {
    return InvalidField(field, absl::StrCat("must be finite and >= 0 (0 means the "
                                            "default ",
                                            Fmt(default_beta), "), got ", Fmt(beta)));
  }
  return absl::OkStatus();
}

absl::Status ValidateNtkExponent(int64_t rotary_dim, absl::string_view type,
                                 absl::string_view spec_field_prefix) {
  if (rotary_dim <= 2) {
    return InvalidField(
        absl::StrCat(spec_field_prefix, ".rotary_dim"),
        absl::StrCat("must be > 2 for ", type,
                     " scaling (the base exponent is rd/(rd-2)), got ",
                     rotary_dim));
  }
  return absl::OkStatus();
}

absl::Status ValidateOptionalPositive(const std::optional<int64_t>& value,
                                      absl::string_view field) {
  if (value.has_value() && *value <= 0) {
    return InvalidField(field, absl::StrCat("must be > 0, got ", *value));
  }
  return absl::OkStatus();
}

absl::Status ValidateYarn(const YarnRopeScaling& yarn, double base,
                          absl::string_view spec_field_prefix,
                          absl::string_view prefix) {
  const std::string factor_field = absl::StrCat(prefix, ".factor");
  const std::string original_field =
      absl::StrCat(prefix, ".original_max_position_embeddings");
  const std::string max_field = absl::StrCat(prefix, ".max_position_embeddings");
  if (yarn.factor.has_value()) {
    PHASOR_RETURN_IF_ERROR(ValidateFactor(*yarn.factor, factor_field));
  }
  PHASOR_RETURN_IF_ERROR(ValidateOptionalPositive(
      yarn.original_max_position_embeddings, original_field));
  PHASOR_RETURN_IF_ERROR(
      ValidateOptionalPositive(yarn.max_position_embeddings, max_field));
  if (!yarn.original_max_position_embeddings.has_value() &&
      !yarn.max_position_embeddings.has_value()) {
    return InvalidField(original_field,
                        "required when max_position_embeddings is absent");
  }
  // Without a factor, HF takes max/original whatever its size (a ratio below
  // 1 only draws its "factor must be >= 1" warning).
  if (!yarn.factor.has_value() && !yarn.max_position_embeddings.has_value()) {
    return InvalidField(factor_field,
                        "required when max_position_embeddings is absent");
  }
  PHASOR_RETURN_IF_ERROR(ValidateBeta(yarn.beta_fast, kYarnDefaultBetaFast,
                                      absl::StrCat(prefix, ".beta_fast")));
  PHASOR_RETURN_IF_ERROR(ValidateBeta(yarn.beta_slow, kYarnDefaultBetaSlow,
                                      absl::StrCat(prefix, ".beta_slow")));
  const std::string mscale_field = absl::StrCat(prefix, ".mscale");
  const std::string mscale_all_dim_field = absl::StrCat(prefix, ".mscale_all_dim");
  if (yarn.mscale.has_value() && !std::isfinite(*yarn.mscale)) {
    return InvalidField(mscale_field,
                        absl::StrCat("must be finite, got ", Fmt(*yarn.mscale)));
  }
  if (yarn.mscale_all_dim.has_value() && !std::isfinite(*yarn.mscale_all_dim)) {
    return InvalidField(mscale_all_dim_field,
                        absl::StrCat("must be finite, got ",
                                     Fmt(*yarn.mscale_all_dim)));
  }
  PHASOR_RETURN_IF_ERROR(ValidateAttentionFactor(
      yarn.attention_factor, absl::StrCat(prefix, ".attention_factor")));
  // HF accepts any mscale pair silently; the ratio it yields must still be a
  // usable attention factor (a zero denominator is HF's ZeroDivisionError).
  if (!yarn.attention_factor.has_value() && yarn.mscale.has_value() &&
      yarn.mscale_all_dim.has_value() && *yarn.mscale != 0.0 &&
      *yarn.mscale_all_dim != 0.0) {
    const double factor = ResolveYarn(yarn).factor;
    const double denominator = GetMscale(factor, *yarn.mscale_all_dim);
    if (denominator == 0.0) {
      return InvalidField(mscale_all_dim_field,
                          absl::StrCat("makes get_mscale(factor ", Fmt(factor),
                                       ", mscale_all_dim) zero, the denominator "
                                       "of the attention factor"));
    }
    const double ratio = GetMscale(factor, *yarn.mscale) / denominator;
    if (!FinitePositive(ratio)) {
      return InvalidField(
          mscale_field,
          absl::StrCat("gives attention factor get_mscale(f, mscale) / "
                       "get_mscale(f, mscale_all_dim) = ",
                       Fmt(ratio), "; it must be finite and > 0"));
    }
  }
  // The correction dimension divides by ln(base).
  if (base == 1.0) {
    return InvalidField(absl::StrCat(spec_field_prefix, ".base"),
                        "must not be 1 with yarn scaling (the correction range "
                        "divides by ln(base))");
  }
  return absl::OkStatus();
}

absl::Status ValidateFactorList(const std::vector<double>& factors,
                                int64_t rotary_dim, absl::string_view field) {
  const int64_t half = rotary_dim / 2;
  // HF warns about any other length; a one-element list broadcasts over the
  // pairs in its `ext_factors * base**inv_freq_shape`, others raise there.
  if (static_cast<int64_t>(factors.size()) != half && factors.size() != 1) {
    return InvalidField(field,
                        absl::StrCat("must have rotary_dim/2 = ", half,
                                     " values (or 1 for every pair), got ",
                                     factors.size()));
  }
  for (size_t i = 0; i < factors.size(); ++i) {
    if (!FinitePositive(factors[i])) {
      return InvalidField(absl::StrCat(field, "[", i, "]"),
                          absl::StrCat("must be finite and > 0, got ",
                                       Fmt(factors[i])));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateLongRope(const LongRopeScaling& longrope,
                              int64_t rotary_dim, absl::string_view prefix) {
  PHASOR_RETURN_IF_ERROR(ValidateFactorList(
      longrope.short_factor, rotary_dim, absl::StrCat(prefix, ".short_factor")));
  PHASOR_RETURN_IF_ERROR(ValidateFactorList(
      longrope.long_factor, rotary_dim, absl::StrCat(prefix, ".long_factor")));
  const std::string original_field =
      absl::StrCat(prefix, ".original_max_position_embeddings");
  const std::string max_field = absl::StrCat(prefix, ".max_position_embeddings");
  const std::string factor_field = absl::StrCat(prefix, ".factor");
  PHASOR_RETURN_IF_ERROR(ValidateOptionalPositive(
      longrope.original_max_position_embeddings, original_field));
  PHASOR_RETURN_IF_ERROR(
      ValidateOptionalPositive(longrope.max_position_embeddings, max_field));
  if (!longrope.original_max_position_embeddings.has_value() &&
      !longrope.max_position_embeddings.has_value()) {
    return InvalidField(original_field,
                        "required when max_position_embeddings is absent");
  }
  if (longrope.factor.has_value()) {
    PHASOR_RETURN_IF_ERROR(ValidateFactor(*longrope.factor, factor_field));
  }
  if (longrope.attention_factor.has_value()) {
    return ValidateAttentionFactor(longrope.attention_factor,
                                   absl::StrCat(prefix, ".attention_factor"));
  }
  if (!longrope.factor.has_value() &&
      !longrope.max_position_embeddings.has_value()) {
    return InvalidField(factor_field,
                        "required when attention_factor and "
                        "max_position_embeddings are absent");
  }
  // The default attention factor sqrt(1 + ln f / ln L0) divides by ln L0 when
  // f > 1: L0 = 1 is HF's ZeroDivisionError. With f <= 1 it is 1 and L0 = 1
  // is fine.
  const bool original_given = longrope.original_max_position_embeddings.has_value();
  const int64_t original = original_given
                               ? *longrope.original_max_position_embeddings
                               : *longrope.max_position_embeddings;
  const double factor =
      longrope.factor.has_value()
          ? *longrope.factor
          : static_cast<double>(*longrope.max_position_embeddings) /
                static_cast<double>(original);
  if (original == 1 && factor > 1.0) {
    return InvalidField(
        original_given ? original_field : max_field,
        absl::StrCat("must be >= 2 when the default attention factor "
                     "sqrt(1 + ln f / ln L0) is used with f = ",
                     Fmt(factor), " > 1 (ln 1 = 0); got 1"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLlama3(const Llama3RopeScaling& llama3,
                            absl::string_view prefix) {
  const std::string factor_field = absl::StrCat(prefix, ".factor");
  if (!llama3.factor.has_value()) {
    // A required key in HF's _validate_llama3_rope_parameters (KeyError).
    return InvalidField(factor_field,
                        "required (no default: Llama 3.1 uses 8, Llama 3.2 32)");
  }
  PHASOR_RETURN_IF_ERROR(ValidateFactor(*llama3.factor, factor_field));
  // The band edges are L0/low_freq_factor and L0/high_freq_factor: 0 is HF's
  // ZeroDivisionError. Their order is free (HF warns): see Llama3Frequencies.
  PHASOR_RETURN_IF_ERROR(ValidateFactor(llama3.low_freq_factor,
                                        absl::StrCat(prefix, ".low_freq_factor")));
  PHASOR_RETURN_IF_ERROR(ValidateFactor(llama3.high_freq_factor,
                                        absl::StrCat(prefix, ".high_freq_factor")));
  PHASOR_RETURN_IF_ERROR(ValidateOptionalPositive(
      llama3.original_max_position_embeddings,
      absl::StrCat(prefix, ".original_max_position_embeddings")));
  return ValidateOptionalPositive(llama3.max_position_embeddings,
                                  absl::StrCat(prefix, ".max_position_embeddings"));
}

// Overloaded-lambda helper for std::visit.
template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

RopeFrequencies YarnFrequencies(const YarnRopeScaling& yarn, double base,
                                int64_t rotary_dim) {
  const YarnResolved resolved = ResolveYarn(yarn);
  const double factor = resolved.factor;
  RopeFrequencies result;
  if (yarn.attention_factor.has_value()) {
    result.attention_factor = *yarn.attention_factor;
  } else if (yarn.mscale.has_value() && yarn.mscale_all_dim.has_value() &&
             *yarn.mscale != 0.0 && *yarn.mscale_all_dim != 0.0) {
    // HF tests `if mscale and mscale_all_dim`: zero counts as absent.
    result.attention_factor = GetMscale(factor, *yarn.mscale) /
                              GetMscale(factor, *yarn.mscale_all_dim);
  } else {
    result.attention_factor = GetMscale(factor, 1.0);
  }

  const double context =
      static_cast<double>(resolved.original_max_position_embeddings);
  // The ramp bounds, HF's find_correction_range; with beta_fast < beta_slow,
  // low > high and the ramp runs downwards, as in HF. With truncation they are
  // integers; long double decides floor/ceil unless a bound is within 1e-9
  // of an integer. Otherwise (or without truncation) they are computed in
  // wide precision, since the ramp then weights θ_i with irrational values.
  const double beta_fast = BetaOrDefault(yarn.beta_fast, kYarnDefaultBetaFast);
  const double beta_slow = BetaOrDefault(yarn.beta_slow, kYarnDefaultBetaSlow);
  const long double low_guess =
      YarnCorrectionDim<long double>(beta_fast, rotary_dim, base, context);
  const long double high_guess =
      YarnCorrectionDim<long double>(beta_slow, rotary_dim, base, context);
  auto near_integer = [](long double x) {
    return fabsl(x - nearbyintl(x)) < 1e-9L;
  };
  WideReal low, high;
  if (yarn.truncate && !near_integer(low_guess) && !near_integer(high_guess)) {
    low = static_cast<WideReal>(floorl(low_guess));
    high = static_cast<WideReal>(ceill(high_guess));
  } else {
    low = YarnCorrectionDim<WideReal>(beta_fast, rotary_dim, base, context);
    high = YarnCorrectionDim<WideReal>(beta_slow, rotary_dim, base, context);
    if (yarn.truncate) {
      low = WideFloor(low);
      high = WideCeil(high);
    }
  }
  low = std::max<WideReal>(low, 0);
  high = std::min<WideReal>(high, static_cast<WideReal>(rotary_dim - 1));
  if (low == high) high += static_cast<WideReal>(0.001);  // HF: "Prevent singularity".

  // θ_i/factor·ramp + θ_i·(1 − ramp) = θ_i·w_i, w_i = 1 + ramp·(1/factor − 1):
  // ramp = 0 below `low` (high frequencies: extrapolate, keep θ), 1 above
  // `high` (low frequencies: interpolate, θ/factor). With integer bounds the
  // ramp is a ratio of small integers, formed in double-double.
  const WideReal wide_factor = static_cast<WideReal>(factor);
  auto wide_weight = [&](int64_t i) -> WideReal {
    const WideReal ramp = std::clamp<WideReal>(
        (static_cast<WideReal>(i) - low) / (high - low), 0, 1);
    return ramp / wide_factor + (1 - ramp);
  };
  const double low_d = static_cast<double>(low), high_d = static_cast<double>(high);
  // The shortcuts below assume an upward ramp (low < high); a downward one
  // (beta_fast < beta_slow) takes the general path.
  const bool integer_bounds = low_d < high_d && static_cast<WideReal>(low_d) == low &&
                              static_cast<WideReal>(high_d) == high &&
                              std::floor(low_d) == low_d && std::floor(high_d) == high_d;
  const DoubleDouble inverse_factor = Reciprocal(factor);
  const DoubleDouble slope = Add(inverse_factor, {-1.0, 0.0});  // 1/factor − 1
  std::vector<DoubleDouble> weights(static_cast<size_t>(rotary_dim / 2));
  for (size_t i = 0; i < weights.size(); ++i) {
    const double offset = static_cast<double>(i) - low_d;
    if (integer_bounds && offset <= 0) {
      weights[i] = {1.0, 0.0};
    } else if (integer_bounds && offset >= high_d - low_d) {
      weights[i] = inverse_factor;
    } else if (integer_bounds) {
      weights[i] = Add({1.0, 0.0}, Multiply(Quotient(offset, high_d - low_d), slope));
    } else {
      weights[i] = ToDoubleDouble(wide_weight(static_cast<int64_t>(i)));
    }
  }
  result.inv_freq = RoundedFrequencies(PlainLadder(base, rotary_dim),
                                       static_cast<WideReal>(base), rotary_dim,
                                       weights, wide_weight);
  return result;
}

RopeFrequencies LongRopeFrequencies(const LongRopeScaling& longrope,
                                    double base, int64_t rotary_dim,
                                    int64_t seq_len) {
  const int64_t original = longrope.original_max_position_embeddings.has_value()
                               ? *longrope.original_max_position_embeddings
                               : *longrope.max_position_embeddings;
  RopeFrequencies result;
  if (longrope.attention_factor.has_value()) {
    result.attention_factor = *longrope.attention_factor;
  } else {
    const double factor =
        longrope.factor.has_value()
            ? *longrope.factor
            : static_cast<double>(*longrope.max_position_embeddings) /
                  static_cast<double>(original);
    result.attention_factor =
        factor <= 1.0 ? 1.0
                      : std::sqrt(1.0 + std::log(factor) /
                                            std::log(static_cast<double>(original)));
  }
  const std::vector<double>& ext =
      seq_len > original ? longrope.long_factor : longrope.short_factor;
  // A one-element list applies to every pair (HF broadcasts it).
  result.inv_freq = DividedInverseFrequencies(
      base, rotary_dim,
      ext.size() == 1 ? std::vector<double>(static_cast<size_t>(rotary_dim / 2), ext[0])
                      : ext);
  return result;
}

RopeFrequencies Llama3Frequencies(const Llama3RopeScaling& llama3, double base,
                                  int64_t rotary_dim) {
  // θ_i·w_i with w_i = 1/factor (long wavelengths), 1 (short), or the smooth
  // blend (1 − s)/factor + s, s = (context/wavelength − low)/(high − low),
  // which depends on θ_i: that blend is formed in wide precision from the
  // double-double θ_i. The band is decided in double unless a wavelength is
  // within 1e-12 of a band edge.
  // L0: as given, else max_position_embeddings (HF's standardisation), else
  // Meta's 8192.
  constexpr int64_t kMetaOriginalContext = 8192;
  const WideReal context = static_cast<WideReal>(
      llama3.original_max_position_embeddings.has_value()
          ? *llama3.original_max_position_embeddings
          : llama3.max_position_embeddings.value_or(kMetaOriginalContext));
  const WideReal low_freq_factor = static_cast<WideReal>(llama3.low_freq_factor);
  const WideReal high_freq_factor = static_cast<WideReal>(llama3.high_freq_factor);
  const WideReal factor = static_cast<WideReal>(*llama3.factor);
  const WideReal low_freq_wavelength = context / low_freq_factor;
  const WideReal high_freq_wavelength = context / high_freq_factor;
  const double low_edge = static_cast<double>(low_freq_wavelength);
  const double high_edge = static_cast<double>(high_freq_wavelength);
  const std::vector<DoubleDouble> ladder = PlainLadder(base, rotary_dim);
  auto wide_weight = [&](int64_t i) -> WideReal {
    const WideReal wavelength = 2 * WidePi() / ToWide(ladder[i]);
    if (wavelength > low_freq_wavelength) return 1 / factor;
    if (wavelength < high_freq_wavelength) return 1;
    // Only reached with high_freq_factor >= low_freq_factor: otherwise the
    // band [L0/high, L0/low] is empty and the two branches above are a step
    // at L0/low, which is what HF's torch.where computes. With the two equal
    // the band is the single wavelength L0/low, where HF's smooth factor is
    // 0/0 = NaN; Phasor takes the limit from below the band (θ/factor).
    if (high_freq_factor == low_freq_factor) return 1 / factor;
    const WideReal smooth = (context / wavelength - low_freq_factor) /
                            (high_freq_factor - low_freq_factor);
    return (1 - smooth) / factor + smooth;
  };
  constexpr double kTwoPi = 6.283185307179586;
  const DoubleDouble inverse_factor = Reciprocal(*llama3.factor);
  std::vector<DoubleDouble> weights(ladder.size());
  for (size_t i = 0; i < ladder.size(); ++i) {
    const double wavelength = kTwoPi / ladder[i].hi;
    if (wavelength > low_edge * (1 + 1e-12)) {
      weights[i] = inverse_factor;
    } else if (wavelength < high_edge * (1 - 1e-12)) {
      weights[i] = {1.0, 0.0};
    } else {
      weights[i] = ToDoubleDouble(wide_weight(static_cast<int64_t>(i)));
    }
  }
  RopeFrequencies result;
  result.inv_freq = RoundedFrequencies(ladder, static_cast<WideReal>(base),
                                       rotary_dim, weights, wide_weight);
  return result;
}

}  // namespace

absl::string_view RopeScalingName(const RopeScaling& scaling) {
  return std::visit(
      Overloaded{
          [](const NoRopeScaling&) { return absl::string_view("default"); },
          [](const LinearRopeScaling&) { return absl::string_view("linear"); },
          [](const NtkRopeScaling&) { return absl::string_view("ntk"); },
          [](const DynamicNtkRopeScaling&) {
            return absl::string_view("dynamic");
          },
          [](const YarnRopeScaling&) { return absl::string_view("yarn"); },
          [](const LongRopeScaling&) { return absl::string_view("longrope"); },
          [](const Llama3RopeScaling&) { return absl::string_view("llama3"); },
          [](const ProportionalRopeScaling&) {
            return absl::string_view("proportional");
          },
      },
      scaling);
}

absl::Status ValidateRopeScaling(const RopeScaling& scaling, double base,
                                 int64_t rotary_dim,
                                 absl::string_view spec_field_prefix) {
  const std::string prefix = absl::StrCat(spec_field_prefix, ".scaling.",
                                          RopeScalingName(scaling));
  return std::visit(
      Overloaded{
          [&](const NoRopeScaling&) { return absl::OkStatus(); },
          [&](const LinearRopeScaling& linear) {
            return ValidateFactor(linear.factor, absl::StrCat(prefix, ".factor"));
          },
          [&](const NtkRopeScaling& ntk) {
            PHASOR_RETURN_IF_ERROR(
                ValidateFactor(ntk.factor, absl::StrCat(prefix, ".factor")));
            return ValidateNtkExponent(rotary_dim, "ntk", spec_field_prefix);
          },
          [&](const DynamicNtkRopeScaling& dynamic) {
            PHASOR_RETURN_IF_ERROR(ValidateFactor(
                dynamic.factor, absl::StrCat(prefix, ".factor")));
            if (dynamic.max_position_embeddings <= 0) {
              return InvalidField(
                  absl::StrCat(prefix, ".max_position_embeddings"),
                  absl::StrCat("must be > 0, got ",
                               dynamic.max_position_embeddings));
            }
            return ValidateNtkExponent(rotary_dim, "dynamic", spec_field_prefix);
          },
          [&](const YarnRopeScaling& yarn) {
            return ValidateYarn(yarn, base, spec_field_prefix, prefix);
          },
          [&](const LongRopeScaling& longrope) {
            return ValidateLongRope(longrope, rotary_dim, prefix);
          },
          [&](const Llama3RopeScaling& llama3) {
            return ValidateLlama3(llama3, prefix);
          },
          [&](const ProportionalRopeScaling& proportional) {
            PHASOR_RETURN_IF_ERROR(ValidateFactor(proportional.factor,
                                                  absl::StrCat(prefix, ".factor")));
            // HF does not check it; above 1 its inv_freq would be longer
            // than the head.
            if (!(proportional.partial_rotary_factor >= 0.0 &&
                  proportional.partial_rotary_factor <= 1.0)) {
              return InvalidField(absl::StrCat(prefix, ".partial_rotary_factor"),
                                  absl::StrCat("must be in [0, 1], got ",
                                               Fmt(proportional.partial_rotary_factor)));
            }
            return absl::OkStatus();
          },
      },
      scaling);
}

int64_t RopeSeqLenBucket(const RopeScaling& scaling, int64_t seq_len) {
  if (const auto* dynamic = std::get_if<DynamicNtkRopeScaling>(&scaling)) {
    return std::max(seq_len, dynamic->max_position_embeddings);
  }
  if (const auto* longrope = std::get_if<LongRopeScaling>(&scaling)) {
    // LongRopeFrequencies' switch between short and long factors.
    const std::optional<int64_t> original =
        longrope->original_max_position_embeddings.has_value()
            ? longrope->original_max_position_embeddings
            : longrope->max_position_embeddings;
    if (!original.has_value()) return seq_len;
    return seq_len > *original ? 1 : 0;
  }
  return 0;
}

RopeFrequencies ScaledRopeFrequencies(const RopeScaling& scaling, double base,
                                      int64_t rotary_dim, int64_t seq_len) {
  assert(rotary_dim >= 2 && rotary_dim % 2 == 0);
  assert(seq_len >= 1);
  return std::visit(
      Overloaded{
          [&](const NoRopeScaling&) {
            return RopeFrequencies{PlainInverseFrequencies(base, rotary_dim),
                                   1.0};
          },
          [&](const LinearRopeScaling& linear) {
            // Dividing θ equals dividing positions (θ·p/f).
            return RopeFrequencies{
                DividedInverseFrequencies(
                    base, rotary_dim,
                    std::vector<double>(static_cast<size_t>(rotary_dim / 2),
                                        linear.factor)),
                1.0};
          },
          [&](const NtkRopeScaling& ntk) {
            return RopeFrequencies{
                NtkInverseFrequencies(base, static_cast<WideReal>(ntk.factor),
                                      rotary_dim),
                1.0};
          },
          [&](const DynamicNtkRopeScaling& dynamic) {
            const WideReal original =
                static_cast<WideReal>(dynamic.max_position_embeddings);
            const WideReal length =
                std::max(static_cast<WideReal>(seq_len), original);
            const WideReal factor = static_cast<WideReal>(dynamic.factor);
            const WideReal stretch = factor * length / original - (factor - 1);
            return RopeFrequencies{
                NtkInverseFrequencies(base, stretch, rotary_dim), 1.0};
          },
          [&](const YarnRopeScaling& yarn) {
            return YarnFrequencies(yarn, base, rotary_dim);
          },
          [&](const LongRopeScaling& longrope) {
            return LongRopeFrequencies(longrope, base, rotary_dim, seq_len);
          },
          [&](const Llama3RopeScaling& llama3) {
            return Llama3Frequencies(llama3, base, rotary_dim);
          },
          [&](const ProportionalRopeScaling& proportional) {
            // HF: rope_angles = int(partial_rotary_factor * head_dim // 2);
            // the rotated pairs' θ, then zeros, all divided by factor.
            const int64_t half = rotary_dim / 2;
            const auto rotated = static_cast<int64_t>(std::floor(
                proportional.partial_rotary_factor * static_cast<double>(rotary_dim) / 2));
            RopeFrequencies result{
                DividedInverseFrequencies(
                    base, rotary_dim,
                    std::vector<double>(static_cast<size_t>(half), proportional.factor)),
                1.0};
            for (int64_t i = std::min(rotated, half); i < half; ++i) {
              result.inv_freq[i] = 0.0;
            }
            return result;
          },
      },
      scaling);
}

}  // namespace phasor
