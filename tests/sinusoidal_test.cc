#include "core/positional/sinusoidal.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/math/exact_angle.h"
#include "core/positional/describe.h"
#include "core/positional/learned.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "tests/quad_reference.h"
#include "tests/status_matchers.h"

namespace phasor {
namespace {

using ::testing::ElementsAreArray;
using ::testing::Pointwise;
using ::testing::FloatNear;

std::vector<float> Encode(const SinusoidalSpec& spec, std::vector<int64_t> pos,
                          ExecutionOptions options = {}) {
  std::vector<float> out(SinusoidalOutputSize(spec, pos.size()));
  EncodeSinusoidal(spec, Positions::Integers(pos), {}, 1.0f, options,
                   absl::MakeSpan(out));
  return out;
}

std::vector<int64_t> Iota(int64_t begin, int64_t end) {
  std::vector<int64_t> v(end - begin);
  std::iota(v.begin(), v.end(), begin);
  return v;
}

// Long-double reference straight from the formula, interleaved layout.
long double Reference(int64_t t, int64_t col, int64_t dim, long double base) {
  const int64_t k = col / 2;
  const long double omega = powl(base, -2.0L * k / dim);
  const long double angle = static_cast<long double>(t) * omega;
  return col % 2 == 0 ? sinl(angle) : cosl(angle);
}

// Reference row, d = 16: pe[5] to 4 decimals (the formula's values, not
// the misprinted pairs 1 and 2 of a widely copied printout).
TEST(SinusoidalTest, SeedRowFiveOfDim16) {
  const std::vector<float> pe = Encode({.dim = 16}, Iota(0, 50));
  const std::vector<float> expected = {-0.9589, 0.2837, 0.9999, -0.0103, 0.4794, 0.8776,
                                       0.1575,  0.9875, 0.0500, 0.9988,  0.0158, 0.9999,
                                       0.0050,  1.0000, 0.0016, 1.0000};
  EXPECT_THAT(std::vector<float>(pe.begin() + 5 * 16, pe.begin() + 6 * 16),
              Pointwise(FloatNear(5e-5), expected));
}

TEST(SinusoidalTest, NearestNeighbourRecoversEveryRow) {
  const int64_t n = 50, d = 16;
  const std::vector<float> pe = Encode({.dim = d}, Iota(0, n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = -1;
    double best_distance = 1e300;
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t c = 0; c < d; ++c) {
        const double diff = pe[i * d + c] - pe[j * d + c];
        s += diff * diff;
      }
      if (s < best_distance) best_distance = s, best = j;
    }
    EXPECT_EQ(best, i);
  }
}

// Reference rows, d = 32, 1-based rows 1..64 (the formula's values).
TEST(SinusoidalTest, SeedRowsOfDim32) {
  const std::vector<float> pe = Encode({.dim = 32}, Iota(1, 65));
  EXPECT_THAT(std::vector<float>(pe.begin(), pe.begin() + 6),
              Pointwise(FloatNear(1e-6), {0.841471, 0.540302, 0.533168, 0.846009,
                                          0.310984, 0.950415}));
  EXPECT_THAT(std::vector<float>(pe.begin() + 63 * 32, pe.begin() + 63 * 32 + 6),
              Pointwise(FloatNear(1e-6), {0.920026, 0.391857, -0.990428, -0.138029,
                                          0.983524, 0.180776}));
}

// PE_t · PE_{t+k} = Σ_j cos(ω_j k), independent of t (Vaswani et al. §3.5).
TEST(SinusoidalTest, DotProductDependsOnOffsetOnly) {
  const int64_t d = 32;
  const std::vector<float> pe = Encode({.dim = d}, Iota(0, 80));
  const auto dot = [&](int64_t a, int64_t b) {
    double s = 0;
    for (int64_t c = 0; c < d; ++c) s += double{pe[a * d + c]} * pe[b * d + c];
    return s;
  };
  const std::vector<double> omega = SinusoidalFrequencies({.dim = d});
  double minimum = 1e300;
  int64_t argmin = -1;
  int close_pairs = 0;
  for (int64_t k = 0; k < 40; ++k) {
    double closed_form = 0;
    for (double w : omega) closed_form += std::cos(w * k);
    EXPECT_NEAR(dot(10, 10 + k), closed_form, 2e-5);
    EXPECT_NEAR(dot(20, 20 + k), dot(10, 10 + k), 2e-5);
    if (closed_form < minimum) minimum = closed_form, argmin = k;
  }
  for (double w : omega) close_pairs += std::cos(39 * w) > 0.9;
  EXPECT_EQ(argmin, 28);
  EXPECT_NEAR(minimum, 5.968563765195686, 1e-12);
  EXPECT_EQ(close_pairs, 9);
  EXPECT_NEAR(dot(7, 7), 16.0, 1e-5);
}

TEST(SinusoidalTest, SeedWavelengthsAndDistances) {
  const std::vector<double> omega = SinusoidalFrequencies({.dim = 32});
  absl::StatusOr<FrequencyDescription> d = DescribeFrequencies(omega, 131);
  PHASOR_ASSERT_OK(d.status());
  EXPECT_NEAR(d->wavelengths[0], 6.283185307179586, 1e-12);
  EXPECT_NEAR(d->wavelengths[4], 62.83185307179586, 1e-11);
  EXPECT_NEAR(d->wavelengths[15], 35332.94752055899, 1e-8);
  EXPECT_NEAR(d->unambiguous_range, 35332.94752055899, 1e-8);
  EXPECT_LT(d->unambiguous_range, 2 * M_PI * 1e4);  // Design bound 2π·base.
  // Reference tables label these ‖PE_t − PE_{t+k}‖², but their figures are
  // the norms themselves (the square roots of Σ(2 − 2cos)); we check the norms.
  // Pair 4 alone at k = 63, and all 16 pairs at k = 63.
  EXPECT_NEAR(std::sqrt(2 - 2 * std::cos(omega[4] * 63)), 0.016814494734299912, 1e-12);
  double all = 0;
  for (double w : omega) all += 2 - 2 * std::cos(w * 63);
  EXPECT_NEAR(std::sqrt(all), 3.782219814811988, 1e-12);
  // The nearest other code over k = 1..130 is the neighbour, k = 1.
  EXPECT_EQ(d->nearest_code_offset, 1);
  EXPECT_NEAR(d->nearest_code_distance, 1.1716234976260362, 1e-12);
  EXPECT_NEAR(d->similarity[0], 16.0, 1e-12);
  EXPECT_NEAR(d->similarity[28], 5.968563765195686, 1e-12);
}

TEST(SinusoidalTest, SixOfSixteenSinColumnsVaryOver64Rows) {
  const int64_t d = 32;
  const std::vector<float> pe = Encode({.dim = d}, Iota(1, 65));
  int varied = 0;
  for (int64_t k = 0; k < d / 2; ++k) {
    double mean = 0, sq = 0;
    for (int64_t t = 0; t < 64; ++t) mean += pe[t * d + 2 * k];
    mean /= 64;
    for (int64_t t = 0; t < 64; ++t) sq += std::pow(pe[t * d + 2 * k] - mean, 2);
    varied += sq / 64 > 0.1;
  }
  EXPECT_EQ(varied, 6);
}

// Translation is a rotation per pair: PE_{t+δ} = R(δ) PE_t on (sin, cos).
TEST(SinusoidalTest, TranslationIsRotation) {
  const int64_t d = 32, t = 11, delta = 7;
  const std::vector<float> pe = Encode({.dim = d}, {t, t + delta});
  const std::vector<double> omega = SinusoidalFrequencies({.dim = d});
  for (int64_t k = 0; k < d / 2; ++k) {
    const double c = std::cos(omega[k] * delta), s = std::sin(omega[k] * delta);
    const double sin_t = pe[2 * k], cos_t = pe[2 * k + 1];
    EXPECT_NEAR(pe[d + 2 * k], c * sin_t + s * cos_t, 1e-6);
    EXPECT_NEAR(pe[d + 2 * k + 1], -s * sin_t + c * cos_t, 1e-6);
  }
}

TEST(SinusoidalTest, LayoutsArePermutationsOfEachOther) {
  const int64_t d = 12;
  const std::vector<int64_t> pos = {0, 3, 1000, -5};
  const std::vector<float> inter = Encode({.dim = d}, pos);
  const std::vector<float> sin_cos =
      Encode({.dim = d, .layout = SinusoidalLayout::kSplitSinCos}, pos);
  const std::vector<float> cos_sin =
      Encode({.dim = d, .layout = SinusoidalLayout::kSplitCosSin}, pos);
  for (size_t t = 0; t < pos.size(); ++t) {
    for (int64_t k = 0; k < d / 2; ++k) {
      EXPECT_EQ(sin_cos[t * d + k], inter[t * d + 2 * k]);
      EXPECT_EQ(sin_cos[t * d + d / 2 + k], inter[t * d + 2 * k + 1]);
      EXPECT_EQ(cos_sin[t * d + k], inter[t * d + 2 * k + 1]);
      EXPECT_EQ(cos_sin[t * d + d / 2 + k], inter[t * d + 2 * k]);
    }
  }
}

// tensor2tensor/fairseq: ω_k = exp(−k·ln(base)/(d/2 − 1)), so the slowest
// pair has ω = 1/base exactly, where Vaswani's has base^(−(d−2)/d).
TEST(SinusoidalTest, Tensor2TensorFrequencies) {
  const std::vector<double> t2t = SinusoidalFrequencies(
      {.dim = 8, .base = 10000, .frequencies = FrequencyScheme::kTensor2Tensor});
  ASSERT_EQ(t2t.size(), 4u);
  EXPECT_DOUBLE_EQ(t2t[0], 1.0);
  EXPECT_NEAR(t2t[1], std::pow(10000.0, -1.0 / 3), 1e-15);
  EXPECT_NEAR(t2t[3], 1e-4, 1e-18);
  const std::vector<double> vaswani = SinusoidalFrequencies({.dim = 8});
  EXPECT_NEAR(vaswani[3], std::pow(10000.0, -6.0 / 8), 1e-15);
  // dim 2: a single timescale, no division by zero.
  EXPECT_EQ(SinusoidalFrequencies({.dim = 2, .frequencies = FrequencyScheme::kTensor2Tensor}),
            std::vector<double>{1.0});
}

TEST(SinusoidalTest, RealPositionsInterpolate) {
  const SinusoidalSpec spec{.dim = 8, .base = 100};
  const std::vector<double> pos = {0.5, 2.25, -1e6 + 0.125};
  std::vector<float> out(SinusoidalOutputSize(spec, pos.size()));
  EncodeSinusoidal(spec, Positions::Reals(pos), {}, 1.0f, {}, absl::MakeSpan(out));
  const std::vector<double> omega = SinusoidalFrequencies(spec);
  for (size_t t = 0; t < pos.size(); ++t) {
    for (int k = 0; k < 4; ++k) {
      EXPECT_NEAR(out[t * 8 + 2 * k], std::sin(pos[t] * omega[k]), 1e-7);
      EXPECT_NEAR(out[t * 8 + 2 * k + 1], std::cos(pos[t] * omega[k]), 1e-7);
    }
  }
}

TEST(SinusoidalTest, ContentIsScaledAndAddedInTheSamePass) {
  const SinusoidalSpec spec{.dim = 4};
  const std::vector<int64_t> pos = {2, 9};
  std::vector<float> content = {1, -2, 3, 0.5, 4, 5, -6, 7};
  std::vector<float> out(8);
  EncodeSinusoidal(spec, Positions::Integers(pos), content, 2.0f, {},
                   absl::MakeSpan(out));
  const std::vector<float> pe = Encode(spec, pos);
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(out[i], content[i] * 2.0f + pe[i]);
}

// The float32 contract: within 2e-6 of a long-double reference for |t| <= 2^31.
// float32 angle arithmetic at 2^24 + 1 is off by 0.885 in sin; we are not.
// The row loops run on whichever SIMD target the CPU offers best; every
// target computes the same operations (no fused multiply-adds), so each
// gives the same bytes, ladder runs, exact rows and content included.
TEST(SinusoidalTest, EverySimdTargetGivesIdenticalBytes) {
  std::vector<int64_t> positions(700);
  for (size_t t = 0; t < positions.size(); ++t) {
    positions[t] = t < 600 ? 3 * static_cast<int64_t>(t) - 50 : 977 * static_cast<int64_t>(t);
  }
  const Positions pos = Positions::Integers(positions);
  std::vector<float> content(positions.size() * 38);
  for (size_t j = 0; j < content.size(); ++j) content[j] = 0.01f * static_cast<float>(j % 97);
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_GT(targets.size(), 1u);
  for (SinusoidalLayout layout : {SinusoidalLayout::kInterleaved,
                                  SinusoidalLayout::kSplitSinCos,
                                  SinusoidalLayout::kSplitCosSin}) {
    SinusoidalSpec spec;
    spec.dim = 38;  // 19 pairs: vector body and a tail on every target.
    spec.layout = layout;
    std::vector<float> first, first_with_content;
    std::vector<double> first_double;
    for (int64_t target : targets) {
      hwy::SetSupportedTargetsForTest(target);
      SCOPED_TRACE(hwy::TargetName(target));
      std::vector<float> out(content.size()), with_content(content.size());
      std::vector<double> out_double(content.size());
      EncodeSinusoidal(spec, pos, {}, 1.0f, ExecutionOptions(), absl::MakeSpan(out));
      EncodeSinusoidal(spec, pos, content, 0.5f, ExecutionOptions(),
                       absl::MakeSpan(with_content));
      EncodeSinusoidal(spec, pos, {}, 1.0, ExecutionOptions(), absl::MakeSpan(out_double));
      if (first.empty()) {
        first = out;
        first_with_content = with_content;
        first_double = out_double;
        continue;
      }
      EXPECT_EQ(0, std::memcmp(first.data(), out.data(), out.size() * 4));
      EXPECT_EQ(0, std::memcmp(first_with_content.data(), with_content.data(),
                               with_content.size() * 4));
      EXPECT_EQ(0, std::memcmp(first_double.data(), out_double.data(),
                               out_double.size() * 8));
    }
    hwy::SetSupportedTargetsForTest(0);
    EXPECT_NE(first, first_with_content);
  }
}

TEST(SinusoidalTest, AccurateAgainstLongDoubleUpTo2To31) {
  const int64_t d = 64;
  const std::vector<int64_t> pos = {
      (int64_t{1} << 24) + 1, (int64_t{1} << 24), (int64_t{1} << 31),
      -(int64_t{1} << 31), (int64_t{1} << 31) - 1, 123456789, 1999999999, 0, 1};
  const std::vector<float> pe = Encode({.dim = d}, pos);
  long double worst = 0;
  for (size_t t = 0; t < pos.size(); ++t) {
    for (int64_t c = 0; c < d; ++c) {
      const long double err = fabsl(pe[t * d + c] - Reference(pos[t], c, d, 10000.0L));
      worst = std::max(worst, err);
    }
  }
  EXPECT_LT(worst, 2e-6L) << "worst error " << static_cast<double>(worst);
  RecordProperty("max_abs_error", absl::StrFormat("%.3g", static_cast<double>(worst)));
  // The float32 failure mode this guards against.
  const float f = static_cast<float>((int64_t{1} << 24) + 1);
  EXPECT_GT(std::fabs(std::sin(static_cast<double>(f)) -
                      static_cast<double>(sinl((1LL << 24) + 1))), 0.8);
}

// Evenly spaced positions take the angle-addition ladder (sinusoidal.cc);
// its rows meet the same contract, up to and across 2^31.
TEST(SinusoidalTest, LadderRunsAccurateAgainstLongDouble) {
  const int64_t d = 64;
  long double worst = 0;
  for (const auto& [first, step] : std::vector<std::pair<int64_t, int64_t>>{
           {(int64_t{1} << 31) - 1000, 1}, {(int64_t{1} << 24) - 500, 3}, {-7000, 5}}) {
    std::vector<int64_t> pos(2000);
    for (size_t t = 0; t < pos.size(); ++t) pos[t] = first + static_cast<int64_t>(t) * step;
    const std::vector<float> pe = Encode({.dim = d}, pos);
    for (size_t t = 0; t < pos.size(); ++t) {
      for (int64_t c = 0; c < d; ++c) {
        worst = std::max(worst, fabsl(pe[t * d + c] - Reference(pos[t], c, d, 10000.0L)));
      }
    }
  }
  EXPECT_LT(worst, 2e-6L) << "worst error " << static_cast<double>(worst);
  RecordProperty("max_abs_error", absl::StrFormat("%.3g", static_cast<double>(worst)));
}

TEST(SinusoidalTest, OneThreadEqualsManyThreadsBytewise) {
  const SinusoidalSpec spec{.dim = 96, .layout = SinusoidalLayout::kSplitSinCos};
  std::vector<int64_t> pos = Iota(-500, 3000);
  pos[1777] = 42;  // A break in the run: the ladder re-anchors mid-chunk.
  const std::vector<float> serial = Encode(spec, pos, {.max_threads = 1});
  const std::vector<float> parallel =
      Encode(spec, pos, {.max_threads = 4, .grain_elements = 1000});
  ASSERT_EQ(serial.size(), parallel.size());
  EXPECT_EQ(std::memcmp(serial.data(), parallel.data(), serial.size() * 4), 0);
}

TEST(SinusoidalTest, ValidationNamesTheField) {
  using absl::StatusCode;
  EXPECT_THAT(ValidateSinusoidalSpec({.dim = 7}),
              IsFieldError(StatusCode::kInvalidArgument, "spec.positional.sinusoidal.dim"));
  EXPECT_THAT(ValidateSinusoidalSpec({.dim = 0}),
              IsFieldError(StatusCode::kInvalidArgument, "spec.positional.sinusoidal.dim"));
  EXPECT_THAT(ValidateSinusoidalSpec({.dim = 8, .base = -1}),
              IsFieldError(StatusCode::kInvalidArgument, "spec.positional.sinusoidal.base"));
  EXPECT_THAT(ValidateSinusoidalSpec({.dim = 8, .base = NAN}, "p"),
              IsFieldError(StatusCode::kInvalidArgument, "p.base"));
  // A subnormal base makes 1/base, the largest frequency, infinite (found by
  // fuzz_encode_positions: base 1.2e-322 reached ExactAngle with an infinite
  // frequency); the smallest normal base still gives finite frequencies.
  EXPECT_THAT(ValidateSinusoidalSpec({.dim = 78, .base = 1.2e-322}),
              IsFieldError(StatusCode::kInvalidArgument, "spec.positional.sinusoidal.base"));
  const SinusoidalSpec smallest{.dim = 78, .base = std::numeric_limits<double>::min()};
  PHASOR_ASSERT_OK(ValidateSinusoidalSpec(smallest));
  for (double w : SinusoidalFrequencies(smallest)) EXPECT_TRUE(std::isfinite(w)) << w;
  PHASOR_ASSERT_OK(ValidateSinusoidalSpec({.dim = 8}));

  const std::vector<double> bad = {1.0, INFINITY};
  EXPECT_THAT(ValidateSinusoidalInputs({.dim = 4}, Positions::Reals(bad), absl::Span<const float>(), 1.0f),
              IsFieldError(StatusCode::kInvalidArgument, "positions[1]"));
  const std::vector<int64_t> pos = {1, 2};
  const std::vector<float> content(7);
  EXPECT_THAT(ValidateSinusoidalInputs({.dim = 4}, Positions::Integers(pos), content, 1),
              IsFieldError(StatusCode::kInvalidArgument, "content"));
  const std::vector<float> content8(8);
  EXPECT_THAT(ValidateSinusoidalInputs({.dim = 4}, Positions::Integers(pos), content8, NAN),
              IsFieldError(StatusCode::kInvalidArgument, "content_scale"));
  PHASOR_ASSERT_OK(ValidateSinusoidalInputs({.dim = 4}, Positions::Integers(pos), content8, 1));
}


// ---------------------------------------------------------------------------
// Frequencies correctly rounded; every int64 position exact.

TEST(SinusoidalPrecision, FrequenciesAreTheNearestDoublesOfTheFormula) {
  int64_t checked = 0;
  for (FrequencyScheme scheme : {FrequencyScheme::kVaswani, FrequencyScheme::kTensor2Tensor}) {
    for (double base : {10000.0, 500.0, 1e6, 2.5}) {
      for (int64_t dim : {2, 4, 16, 128, 512, 1024}) {
        const std::vector<double> omega = SinusoidalFrequencies(
            {.dim = dim, .base = base, .frequencies = scheme});
        const int64_t half = dim / 2;
        // tensor2tensor's max(d/2 − 1, 1): d = 2 has ω_0 = 1 only.
        const int64_t n = scheme == FrequencyScheme::kVaswani ? half
                                                              : std::max<int64_t>(half - 1, 1);
        for (int64_t k = 0; k < half; ++k) {
          const testing::Quad exact =
              powq(testing::Quad(base), -testing::Quad(static_cast<double>(k)) /
                                            testing::Quad(static_cast<double>(n)));
          EXPECT_EQ(omega[k], testing::NearestDouble(exact))
              << "scheme " << static_cast<int>(scheme) << " base " << base
              << " dim " << dim << " k " << k;
          ++checked;
        }
      }
    }
  }
  std::printf("sinusoid ω correctly rounded: %lld frequencies\n",
              static_cast<long long>(checked));
}

TEST(SinusoidalPrecision, Tensor2TensorDimTwoIsTheSingleFrequencyOne) {
  // The documented formula with tensor2tensor's max(d/2 − 1, 1) denominator.
  const SinusoidalSpec spec{.dim = 2, .frequencies = FrequencyScheme::kTensor2Tensor};
  EXPECT_THAT(SinusoidalFrequencies(spec), ElementsAreArray({1.0}));
  const std::vector<int64_t> pos = {0, 3};
  std::vector<float> out(4);
  EncodeSinusoidal(spec, Positions::Integers(pos), {}, 1.0f, {}, absl::MakeSpan(out));
  EXPECT_FLOAT_EQ(out[2], static_cast<float>(std::sin(3.0)));
  EXPECT_FLOAT_EQ(out[3], static_cast<float>(std::cos(3.0)));
}

std::vector<int64_t> HardPositions() {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  return {(int64_t{1} << 24) + 1, (int64_t{1} << 31) - 1, -(int64_t{1} << 31),
          (int64_t{1} << 53) - 1, (int64_t{1} << 53) + 1, int64_t{1} << 53,
          kMax, kMin, kMax - 1, kMin + 1, 12345678901234567, 0};
}

TEST(SinusoidalPrecision, EveryInt64PositionIsExact) {
  // Reference: sin/cos of p·ω_k (ω_k the double the encoder uses) in quad.
  // The doubles before the float rounding are ExactAngle's (within 4e-16);
  // the float outputs are those doubles rounded once.
  for (FrequencyScheme scheme : {FrequencyScheme::kVaswani, FrequencyScheme::kTensor2Tensor}) {
    const SinusoidalSpec spec{.dim = 64, .frequencies = scheme};
    const std::vector<double> omega = SinusoidalFrequencies(spec);
    const std::vector<int64_t> pos = HardPositions();
    std::vector<float> out(pos.size() * 64);
    EncodeSinusoidal(spec, Positions::Integers(pos), {}, 1.0f, {}, absl::MakeSpan(out));
    double worst_double = 0, worst_float = 0;
    for (size_t t = 0; t < pos.size(); ++t) {
      for (int64_t k = 0; k < 32; ++k) {
        const double sin_ref = static_cast<double>(testing::QuadSin(omega[k], pos[t]));
        const double cos_ref = static_cast<double>(testing::QuadCos(omega[k], pos[t]));
        double c, s;
        ExactAngle(omega[k]).CosSin(pos[t], &c, &s);
        worst_double = std::max({worst_double, std::fabs(s - sin_ref), std::fabs(c - cos_ref)});
        EXPECT_EQ(out[t * 64 + 2 * k], static_cast<float>(s)) << pos[t] << " " << k;
        EXPECT_EQ(out[t * 64 + 2 * k + 1], static_cast<float>(c)) << pos[t] << " " << k;
        worst_float = std::max({worst_float, std::fabs(out[t * 64 + 2 * k] - sin_ref),
                                std::fabs(out[t * 64 + 2 * k + 1] - cos_ref)});
      }
    }
    EXPECT_LE(worst_double, 4e-16);
    EXPECT_LE(worst_float, 6e-8);  // Half an ulp of 1 in float32.
    std::printf("sinusoid at int64 positions (scheme %d): double %.3g, float32 %.3g\n",
                static_cast<int>(scheme), worst_double, worst_float);
  }
}

TEST(SinusoidalPrecision, LadderRunsAtTheEndsOfInt64) {
  // Runs of 1000 near INT64_MAX (step 1) and INT64_MIN (step 7) go through
  // the angle-addition ladder from exact anchors.
  const SinusoidalSpec spec{.dim = 32};
  const std::vector<double> omega = SinusoidalFrequencies(spec);
  for (auto [first, step] : {std::pair<int64_t, int64_t>{std::numeric_limits<int64_t>::max() - 999, 1},
                             {std::numeric_limits<int64_t>::min(), 7}}) {
    std::vector<int64_t> pos(1000);
    for (size_t t = 0; t < pos.size(); ++t) pos[t] = first + static_cast<int64_t>(t) * step;
    std::vector<float> out(pos.size() * 32);
    EncodeSinusoidal(spec, Positions::Integers(pos), {}, 1.0f, {}, absl::MakeSpan(out));
    double worst = 0;
    for (size_t t = 0; t < pos.size(); ++t) {
      for (int64_t k = 0; k < 16; ++k) {
        worst = std::max(worst, std::fabs(out[t * 32 + 2 * k] -
                                          static_cast<double>(testing::QuadSin(omega[k], pos[t]))));
        worst = std::max(worst, std::fabs(out[t * 32 + 2 * k + 1] -
                                          static_cast<double>(testing::QuadCos(omega[k], pos[t]))));
      }
    }
    EXPECT_LE(worst, 7e-8) << "first " << first;
  }
}

// Float64 outputs against __float128 (every row exact).
namespace float64_output {


using ::phasor::testing::Quad;
using ::phasor::testing::QuadCos;
using ::phasor::testing::QuadSin;
using ::phasor::testing::ReduceTwoPi;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

// The positions where a double or float32 angle goes wrong (2^24 + 1,
// 2^53 ± 1, the ends of int64), and their neighbours.
const std::vector<int64_t>& HardPositions() {
  static const std::vector<int64_t> positions = {
      0,         1,         -1,         (int64_t{1} << 24) + 1, (int64_t{1} << 31) - 1,
      -(int64_t{1} << 31), (int64_t{1} << 53) - 1, (int64_t{1} << 53) + 1,
      1234567890123456789, kInt64Max, kInt64Min,  kInt64Min + 1};
  return positions;
}

// Real positions with a fraction, up to 2^52 (where doubles still have one).
const std::vector<double>& RealPositions() {
  static const std::vector<double> positions = {
      0.5, -3.25, 1e6 + 0.125, 0x1p40 + 0.375, -(0x1p45 + 0.75), 1e15 + 0.5,
      0x1p52 + 0.5, 123456.789};
  return positions;
}

// Exact cos/sin of p·θ for a real p: the product of two doubles is exact in
// __float128 (106 of its 113 bits).
Quad RealAngle(double theta, double p) { return ReduceTwoPi(Quad(p) * Quad(theta)); }

double Ulp(double x) {
  x = std::fabs(x);
  return std::nextafter(x, std::numeric_limits<double>::infinity()) - x;
}



TEST(Float64Sinusoid, IntegerPositionsWithin4e16OfExact) {
  for (SinusoidalLayout layout :
       {SinusoidalLayout::kInterleaved, SinusoidalLayout::kSplitSinCos}) {
    const SinusoidalSpec spec{.dim = 64, .base = 10000.0, .layout = layout};
    const std::vector<double> omega = SinusoidalFrequencies(spec);
    const std::vector<int64_t>& p = HardPositions();
    std::vector<double> out(p.size() * 64);
    EncodeSinusoidal(spec, Positions::Integers(p), {}, 1.0, ExecutionOptions(),
                     absl::MakeSpan(out));
    double worst = 0;
    for (size_t t = 0; t < p.size(); ++t) {
      for (int64_t k = 0; k < 32; ++k) {
        const int64_t sin_col = layout == SinusoidalLayout::kInterleaved ? 2 * k : k;
        const int64_t cos_col = layout == SinusoidalLayout::kInterleaved ? 2 * k + 1 : 32 + k;
        worst = std::max(worst, std::fabs(out[t * 64 + sin_col] -
                                          double(QuadSin(omega[k], p[t]))));
        worst = std::max(worst, std::fabs(out[t * 64 + cos_col] -
                                          double(QuadCos(omega[k], p[t]))));
      }
    }
    EXPECT_LE(worst, 4e-16);
  }
}

TEST(Float64Sinusoid, ConsecutiveRowsAreExactNotLadderSteps) {
  // 0..999 is the progression float32 fills by angle addition (~1e-9
  // drift); float64 evaluates every row exactly.
  const SinusoidalSpec spec{.dim = 16, .base = 10000.0};
  const std::vector<double> omega = SinusoidalFrequencies(spec);
  std::vector<int64_t> p(1000);
  for (int64_t i = 0; i < 1000; ++i) p[i] = 1'000'000'000 + i;
  std::vector<double> out(p.size() * 16);
  EncodeSinusoidal(spec, Positions::Integers(p), {}, 1.0, ExecutionOptions(),
                   absl::MakeSpan(out));
  double worst = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    for (int64_t k = 0; k < 8; ++k) {
      worst = std::max(worst, std::fabs(out[t * 16 + 2 * k] - double(QuadSin(omega[k], p[t]))));
    }
  }
  EXPECT_LE(worst, 4e-16);
}

TEST(Float64Sinusoid, RealPositionsWithin4e16OfExact) {
  const SinusoidalSpec spec{.dim = 32, .base = 10000.0};
  const std::vector<double> omega = SinusoidalFrequencies(spec);
  const std::vector<double>& p = RealPositions();
  std::vector<double> out(p.size() * 32);
  EncodeSinusoidal(spec, Positions::Reals(p), {}, 1.0, ExecutionOptions(),
                   absl::MakeSpan(out));
  double worst = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    for (int64_t k = 0; k < 16; ++k) {
      const Quad angle = RealAngle(omega[k], p[t]);
      worst = std::max(worst, std::fabs(out[t * 32 + 2 * k] - double(sinq(angle))));
      worst = std::max(worst, std::fabs(out[t * 32 + 2 * k + 1] - double(cosq(angle))));
    }
  }
  EXPECT_LE(worst, 4e-16);
}

TEST(Float64Sinusoid, FloatOutputIsTheDoubleRoundedOnceForExactRows) {
  // Irregular positions take the exact row on both paths: float32 is the
  // double value rounded once.
  const SinusoidalSpec spec{.dim = 8, .base = 500.0};
  const std::vector<int64_t> p = {7, -100000, 3, kInt64Max, 42};
  std::vector<double> wide(p.size() * 8);
  std::vector<float> narrow(p.size() * 8);
  EncodeSinusoidal(spec, Positions::Integers(p), {}, 1.0, ExecutionOptions(),
                   absl::MakeSpan(wide));
  EncodeSinusoidal(spec, Positions::Integers(p), {}, 1.0f, ExecutionOptions(),
                   absl::MakeSpan(narrow));
  for (size_t i = 0; i < wide.size(); ++i) {
    EXPECT_EQ(narrow[i], static_cast<float>(wide[i])) << i;
  }
}

TEST(Float64Sinusoid, ContentIsAddedInDouble) {
  const SinusoidalSpec spec{.dim = 4, .base = 10000.0};
  const std::vector<int64_t> p = {5, 6};
  const std::vector<double> content = {0.1, 1e-17, -2.5, 1.0 / 3.0,
                                       1e300, -0.0, 7.0, 0.2};
  std::vector<double> pe(8), out(8);
  EncodeSinusoidal(spec, Positions::Integers(p), {}, 1.0, ExecutionOptions(),
                   absl::MakeSpan(pe));
  EncodeSinusoidal(spec, Positions::Integers(p), content, 0.75, ExecutionOptions(),
                   absl::MakeSpan(out));
  // One rounding of content·scale + pe (two without FMA): within an ulp of
  // the larger term, in double.
  for (size_t i = 0; i < out.size(); ++i) {
    const double bound = Ulp(std::max(std::fabs(content[i] * 0.75), std::fabs(pe[i])));
    EXPECT_NEAR(out[i], content[i] * 0.75 + pe[i], bound) << i;
  }
}

}  // namespace float64_output

}  // namespace
}  // namespace phasor
