// Float64 outputs and the batched / multimodal RoPE layouts, against a
// __float128 reference (tests/quad_reference.h) and against the token-major
// float32 path they must agree with.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/types/span.h"
#include "core/alibi.h"
#include "core/exact_angle.h"
#include "core/learned.h"
#include "core/rope.h"
#include "core/sinusoidal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/quad_reference.h"
#include "tests/status_matchers.h"

extern "C" __float128 exp2q(__float128);
extern "C" __float128 fabsq(__float128);

namespace phasor {
namespace {

using ::phasor::testing::Quad;
using ::phasor::testing::QuadCos;
using ::phasor::testing::QuadSin;
using ::phasor::testing::ReduceTwoPi;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

// The positions issue 11 names, and their neighbours.
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

template <class T>
absl::Span<const uint8_t> BytesOf(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}
template <class T>
absl::Span<uint8_t> MutableBytesOf(std::vector<T>& v) {
  return {reinterpret_cast<uint8_t*>(v.data()), v.size() * sizeof(T)};
}

RopeFrequencies Frequencies(const RopeSpec& spec, int64_t head_dim) {
  absl::StatusOr<RopeFrequencies> f = ComputeRopeFrequencies(spec, head_dim, 1);
  EXPECT_TRUE(f.ok()) << f.status();
  return *f;
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

TEST(Float64Learned, RowsWidenedAndContentAddedInDouble) {
  HostArray array;
  array.shape = {3, 2};
  array.values = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  absl::StatusOr<LearnedTable> table = LearnedTable::FromArray(array, "t");
  ASSERT_TRUE(table.ok()) << table.status();
  const std::vector<int64_t> p = {2, 0};
  const std::vector<double> content = {1.0, 2.0, 3.0, 1e-12};
  std::vector<double> out(4);
  PHASOR_ASSERT_OK(table->ValidateInputs(Positions::Integers(p), absl::MakeConstSpan(content), 2.0));
  table->Encode(Positions::Integers(p), content, 2.0, ExecutionOptions(), absl::MakeSpan(out));
  EXPECT_EQ(out[0], 2.0 + double(0.5f));
  EXPECT_EQ(out[1], 4.0 + double(0.6f));
  EXPECT_EQ(out[2], 6.0 + double(0.1f));
  EXPECT_EQ(out[3], 2e-12 + double(0.2f));
}

TEST(Float64RopeTables, EveryInt64PositionWithin4e16OfExact) {
  RopeSpec spec;
  spec.rotary_dim = 128;
  spec.base = 500000.0;
  const RopeFrequencies f = Frequencies(spec, 128);
  const std::vector<int64_t>& p = HardPositions();
  std::vector<double> cos(p.size() * 64), sin(p.size() * 64);
  ComputeRopeTables(spec, f, Positions::Integers(p), ExecutionOptions(),
                    absl::MakeSpan(cos), absl::MakeSpan(sin));
  double worst = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    for (int64_t i = 0; i < 64; ++i) {
      worst = std::max(worst, std::fabs(cos[t * 64 + i] - double(QuadCos(f.inv_freq[i], p[t]))));
      worst = std::max(worst, std::fabs(sin[t * 64 + i] - double(QuadSin(f.inv_freq[i], p[t]))));
    }
  }
  EXPECT_LE(worst, 4e-16);
}

TEST(Float64RopeTables, RealPositionsWithin4e16OfExact) {
  RopeSpec spec;
  spec.rotary_dim = 64;
  const RopeFrequencies f = Frequencies(spec, 64);
  const std::vector<double>& p = RealPositions();
  std::vector<double> cos(p.size() * 32), sin(p.size() * 32);
  ComputeRopeTables(spec, f, Positions::Reals(p), ExecutionOptions(),
                    absl::MakeSpan(cos), absl::MakeSpan(sin));
  double worst = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    for (int64_t i = 0; i < 32; ++i) {
      const Quad angle = RealAngle(f.inv_freq[i], p[t]);
      worst = std::max(worst, std::fabs(cos[t * 32 + i] - double(cosq(angle))));
      worst = std::max(worst, std::fabs(sin[t * 32 + i] - double(sinq(angle))));
    }
  }
  EXPECT_LE(worst, 4e-16);
}

TEST(Float64RopeTables, RealPositionsAreExactFarBeyondTheDoubleProduct) {
  // At p = 1e15 + 0.5 the double product p·θ_0 is off by up to 0.06 rad;
  // float32 tables now carry the exact angle too.
  RopeSpec spec;
  spec.rotary_dim = 2;
  const RopeFrequencies f = Frequencies(spec, 2);
  const std::vector<double> p = {1e15 + 0.5};
  std::vector<float> cos(1), sin(1);
  ComputeRopeTables(spec, f, Positions::Reals(p), ExecutionOptions(),
                    absl::MakeSpan(cos), absl::MakeSpan(sin));
  const Quad angle = RealAngle(f.inv_freq[0], p[0]);
  EXPECT_NEAR(cos[0], double(cosq(angle)), 6e-8);
  EXPECT_NEAR(sin[0], double(sinq(angle)), 6e-8);
}

// A HALF-layout rotation in __float128 from exact cos/sin.
void QuadRotate(const std::vector<double>& x, const RopeFrequencies& f, int64_t p,
                int64_t head_dim, std::vector<Quad>* out) {
  const int64_t half = head_dim / 2;
  out->assign(head_dim, 0);
  for (int64_t i = 0; i < half; ++i) {
    const Quad c = QuadCos(f.inv_freq[i], p) * Quad(f.attention_factor);
    const Quad s = QuadSin(f.inv_freq[i], p) * Quad(f.attention_factor);
    (*out)[i] = Quad(x[i]) * c - Quad(x[i + half]) * s;
    (*out)[i + half] = Quad(x[i + half]) * c + Quad(x[i]) * s;
  }
}

TEST(Float64ApplyRope, RotatedPairsWithin4UlpOfTheLargerInput) {
  constexpr int64_t kDim = 64;
  RopeSpec spec;
  spec.base = 10000.0;
  const RopeFrequencies f = Frequencies(spec, kDim);
  const std::vector<int64_t>& p = HardPositions();
  const int64_t tokens = static_cast<int64_t>(p.size());
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-3.0, 3.0);
  std::vector<double> q(tokens * kDim);
  for (double& v : q) v = dist(rng);
  std::vector<double> out(q.size());
  RopeOperand query{.dtype = DType::kFloat64, .num_tokens = tokens, .num_heads = 1,
                    .head_dim = kDim, .in = BytesOf(q), .out = MutableBytesOf(out)};
  PHASOR_ASSERT_OK(ValidateRopeOperands(query, nullptr, tokens));
  ApplyRope(spec, f, Positions::Integers(p), ExecutionOptions(), query, nullptr);
  double worst_ulps = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    const std::vector<double> x(q.begin() + t * kDim, q.begin() + (t + 1) * kDim);
    std::vector<Quad> exact;
    QuadRotate(x, f, p[t], kDim, &exact);
    for (int64_t i = 0; i < kDim / 2; ++i) {
      const double unit = Ulp(std::max(std::fabs(x[i]), std::fabs(x[i + kDim / 2])));
      for (int64_t j : {i, i + kDim / 2}) {
        worst_ulps = std::max(
            worst_ulps, double(fabsq(Quad(out[t * kDim + j]) - exact[j])) / unit);
      }
    }
  }
  EXPECT_LE(worst_ulps, 4.0);
}

TEST(Float64ApplyRope, InPlaceMisalignedAndParallelGiveTheSameBytes) {
  constexpr int64_t kTokens = 300, kHeads = 3, kDim = 16;
  RopeSpec spec;
  spec.layout = RopeLayout::kInterleaved;
  std::vector<int64_t> p(kTokens);
  for (int64_t i = 0; i < kTokens; ++i) p[i] = i;
  const RopeFrequencies f = Frequencies(spec, kDim);
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> q(kTokens * kHeads * kDim);
  for (double& v : q) v = dist(rng);
  std::vector<double> out(q.size());
  RopeOperand base{.dtype = DType::kFloat64, .num_tokens = kTokens, .num_heads = kHeads,
                   .head_dim = kDim, .in = BytesOf(q), .out = MutableBytesOf(out)};
  ApplyRope(spec, f, Positions::Integers(p), ExecutionOptions(), base, nullptr);

  std::vector<double> in_place = q;
  RopeOperand same = base;
  same.in = BytesOf(in_place);
  same.out = MutableBytesOf(in_place);
  ExecutionOptions threads;
  threads.max_threads = 4;
  threads.grain_elements = 64;
  ApplyRope(spec, f, Positions::Integers(p), threads, same, nullptr);
  EXPECT_EQ(std::memcmp(in_place.data(), out.data(), out.size() * 8), 0);

  std::vector<uint8_t> shifted_in(q.size() * 8 + 1), shifted_out(q.size() * 8 + 1);
  std::memcpy(shifted_in.data() + 1, q.data(), q.size() * 8);
  RopeOperand odd = base;
  odd.in = absl::MakeConstSpan(shifted_in).subspan(1);
  odd.out = absl::MakeSpan(shifted_out).subspan(1);
  ApplyRope(spec, f, Positions::Integers(p), ExecutionOptions(), odd, nullptr);
  EXPECT_EQ(std::memcmp(shifted_out.data() + 1, out.data(), out.size() * 8), 0);
}

TEST(Float64Alibi, SlopesAreCorrectlyRoundedAndBiasIsOneProduct) {
  for (int64_t heads : {1, 5, 8, 12, 48}) {
    std::vector<double> slopes(heads);
    AlibiSlopes(heads, absl::MakeSpan(slopes));
    int64_t n = 1;
    while (n * 2 <= heads) n *= 2;
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t num = h < n ? h + 1 : 2 * (h - n) + 1;
      const int64_t den = h < n ? n : 2 * n;
      const Quad exact = exp2q(Quad(-8.0) * Quad(double(num)) / Quad(double(den)));
      EXPECT_EQ(slopes[h], static_cast<double>(exact)) << heads << " heads, head " << h;
    }
    std::vector<float> slopes32(heads);
    AlibiSlopes(heads, absl::MakeSpan(slopes32));
    for (int64_t h = 0; h < heads; ++h) {
      EXPECT_EQ(slopes32[h], static_cast<float>(slopes[h]));
    }
    constexpr int64_t kQ = 3, kK = 7;
    std::vector<double> bias(heads * kQ * kK);
    AlibiBias(slopes, kQ, kK, /*causal=*/true, ExecutionOptions(), absl::MakeSpan(bias));
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < kQ; ++i) {
        for (int64_t j = 0; j < kK; ++j) {
          const int64_t d = (kK - kQ + i) - j;
          const double got = bias[(h * kQ + i) * kK + j];
          if (d < 0) {
            EXPECT_EQ(got, -std::numeric_limits<double>::infinity());
          } else {
            EXPECT_EQ(got, -slopes[h] * double(d));
          }
        }
      }
    }
  }
}

// [B, H, T, D] and [B, T, H, D] against [T, H, D] token rows: the same bytes
// after the transpose, for every storage type, with GQA key heads.
template <typename T>
void CheckHeadsFirstLayout(DType dtype) {
  constexpr int64_t kB = 2, kT = 5, kHq = 4, kHk = 2, kDim = 12;
  RopeSpec spec;
  spec.rotary_dim = 8;  // Partial: the last 4 channels pass through.
  const RopeFrequencies f = Frequencies(spec, kDim);
  std::vector<int64_t> p(kB * kT);
  for (int64_t b = 0; b < kB; ++b) {
    for (int64_t t = 0; t < kT; ++t) p[b * kT + t] = (b == 0 ? 3 : 0) + t;  // Left padding.
  }
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> dist(0, 1 << 14);
  auto random = [&](int64_t n) {
    std::vector<T> v(n);
    for (T& x : v) {
      if constexpr (std::is_same_v<T, uint16_t>) {
        x = static_cast<uint16_t>(0x3c00 + dist(rng) % 0x0400);  // fp16/bf16 near 1.
      } else {
        x = static_cast<T>(dist(rng)) / T(1 << 14) - T(0.5);
      }
    }
    return v;
  };
  // Token-major [B·T, H, D].
  const std::vector<T> q_tokens = random(kB * kT * kHq * kDim);
  const std::vector<T> k_tokens = random(kB * kT * kHk * kDim);
  auto to_heads_first = [&](const std::vector<T>& tokens, int64_t heads) {
    std::vector<T> out(tokens.size());
    for (int64_t b = 0; b < kB; ++b)
      for (int64_t t = 0; t < kT; ++t)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t d = 0; d < kDim; ++d)
            out[((b * heads + h) * kT + t) * kDim + d] =
                tokens[((b * kT + t) * heads + h) * kDim + d];
    return out;
  };
  std::vector<T> q_ref(q_tokens.size()), k_ref(k_tokens.size());
  RopeOperand q{.dtype = dtype, .num_tokens = kB * kT, .num_heads = kHq, .head_dim = kDim,
                .in = BytesOf(q_tokens), .out = MutableBytesOf(q_ref)};
  RopeOperand k{.dtype = dtype, .num_tokens = kB * kT, .num_heads = kHk, .head_dim = kDim,
                .in = BytesOf(k_tokens), .out = MutableBytesOf(k_ref)};
  PHASOR_ASSERT_OK(ValidateRopeOperands(q, &k, kB * kT));
  ApplyRope(spec, f, Positions::Integers(p), ExecutionOptions(), q, &k);

  const std::vector<T> q_first = to_heads_first(q_tokens, kHq);
  const std::vector<T> k_first = to_heads_first(k_tokens, kHk);
  std::vector<T> q_out(q_first.size()), k_out(k_first.size());
  RopeOperand q2 = q, k2 = k;
  q2.seq_len = kT;
  k2.seq_len = kT;
  q2.in = BytesOf(q_first);
  q2.out = MutableBytesOf(q_out);
  k2.in = BytesOf(k_first);
  k2.out = MutableBytesOf(k_out);
  PHASOR_ASSERT_OK(ValidateRopeOperands(q2, &k2, kB * kT));
  ApplyRope(spec, f, Positions::Integers(p), ExecutionOptions(), q2, &k2);
  EXPECT_EQ(q_out, to_heads_first(q_ref, kHq));
  EXPECT_EQ(k_out, to_heads_first(k_ref, kHk));

  // In place.
  std::vector<T> q_in_place = q_first;
  q2.in = BytesOf(q_in_place);
  q2.out = MutableBytesOf(q_in_place);
  ApplyRope(spec, f, Positions::Integers(p), ExecutionOptions(), q2, nullptr);
  EXPECT_EQ(q_in_place, q_out);
}

TEST(RopeLayouts, HeadsFirstEqualsTokenMajorFloat32) { CheckHeadsFirstLayout<float>(DType::kFloat32); }
TEST(RopeLayouts, HeadsFirstEqualsTokenMajorFloat64) { CheckHeadsFirstLayout<double>(DType::kFloat64); }
TEST(RopeLayouts, HeadsFirstEqualsTokenMajorFloat16) { CheckHeadsFirstLayout<uint16_t>(DType::kFloat16); }
TEST(RopeLayouts, HeadsFirstEqualsTokenMajorBFloat16) { CheckHeadsFirstLayout<uint16_t>(DType::kBFloat16); }

TEST(RopeLayouts, HeadsFirstNeedsWholeSequences) {
  std::vector<float> q(3 * 2 * 4), out(q.size());
  RopeOperand op{.dtype = DType::kFloat32, .num_tokens = 3, .num_heads = 2, .head_dim = 4,
                 .seq_len = 2, .in = BytesOf(q), .out = MutableBytesOf(out)};
  EXPECT_THAT(ValidateRopeOperands(op, nullptr, 3),
              IsFieldError(absl::StatusCode::kInvalidArgument, "query.shape"));
}

// M-RoPE: each pair takes the angle of its section's axis.
TEST(Mrope, SectionsTakeTheirAxisPositions) {
  for (bool interleaved : {false, true}) {
    RopeSpec spec;
    spec.rotary_dim = 24;  // 12 pairs.
    spec.mrope_section = {4, 4, 4};
    spec.mrope_interleaved = interleaved;
    PHASOR_ASSERT_OK(ValidateRopeSpec(spec, 24));
    const RopeFrequencies f = Frequencies(spec, 24);
    // Two tokens, axes temporal / height / width.
    const std::vector<int64_t> p = {10, 11, /*h*/ 200, 300, /*w*/ -7, 9};
    std::vector<double> cos(2 * 12), sin(2 * 12);
    ComputeRopeTables(spec, f, Positions::Integers(p), ExecutionOptions(),
                      absl::MakeSpan(cos), absl::MakeSpan(sin));
    for (int64_t t = 0; t < 2; ++t) {
      for (int64_t i = 0; i < 12; ++i) {
        int64_t axis = i / 4;
        if (interleaved) axis = (i % 3 == 1 && i < 12) ? 1 : (i % 3 == 2 && i < 12) ? 2 : 0;
        const int64_t position = p[axis * 2 + t];
        EXPECT_NEAR(cos[t * 12 + i], double(QuadCos(f.inv_freq[i], position)), 4e-16)
            << "interleaved " << interleaved << " token " << t << " pair " << i;
        EXPECT_NEAR(sin[t * 12 + i], double(QuadSin(f.inv_freq[i], position)), 4e-16);
      }
    }
  }
}

TEST(Mrope, Qwen3InterleavedAssignsLeftoverPairsToTime) {
  // mrope_section [24, 20, 20] over 64 pairs: pairs 1, 4, .., 58 height,
  // 2, 5, .., 59 width, the rest (incl. 60..63) temporal.
  RopeSpec spec;
  spec.rotary_dim = 128;
  spec.mrope_section = {24, 20, 20};
  spec.mrope_interleaved = true;
  const RopeFrequencies f = Frequencies(spec, 128);
  const std::vector<int64_t> p = {5, 1000, 77};  // One token: t, h, w.
  std::vector<double> cos(64), sin(64);
  ComputeRopeTables(spec, f, Positions::Integers(p), ExecutionOptions(),
                    absl::MakeSpan(cos), absl::MakeSpan(sin));
  int counts[3] = {0, 0, 0};
  for (int64_t i = 0; i < 64; ++i) {
    const int64_t axis = (i % 3 == 1 && i < 60) ? 1 : (i % 3 == 2 && i < 60) ? 2 : 0;
    ++counts[axis];
    EXPECT_NEAR(cos[i], double(QuadCos(f.inv_freq[i], p[axis])), 4e-16) << i;
  }
  EXPECT_EQ(counts[0], 24);
  EXPECT_EQ(counts[1], 20);
  EXPECT_EQ(counts[2], 20);
}

TEST(Mrope, ApplyRopeRotatesWithTheSectionsAngles) {
  // Rotating with M-RoPE equals rotating with the tables of each axis,
  // pair by pair (float32, HALF).
  RopeSpec spec;
  spec.rotary_dim = 16;
  spec.mrope_section = {2, 3, 3};
  const RopeFrequencies f = Frequencies(spec, 16);
  const std::vector<int64_t> p = {4, 9, 100};  // One token.
  std::vector<float> q(16), out(16);
  for (int i = 0; i < 16; ++i) q[i] = 0.1f * static_cast<float>(i + 1);
  RopeOperand op{.dtype = DType::kFloat32, .num_tokens = 1, .num_heads = 1, .head_dim = 16,
                 .in = BytesOf(q), .out = MutableBytesOf(out)};
  ApplyRope(spec, f, Positions::Integers(p), ExecutionOptions(), op, nullptr);
  std::vector<float> cos(8), sin(8);
  ComputeRopeTables(spec, f, Positions::Integers(p), ExecutionOptions(),
                    absl::MakeSpan(cos), absl::MakeSpan(sin));
  for (int i = 0; i < 8; ++i) {
    const int axis = i < 2 ? 0 : i < 5 ? 1 : 2;
    EXPECT_NEAR(cos[i], double(QuadCos(f.inv_freq[i], p[axis])), 6e-8) << i;
    // Within float32 rounding (the kernel may contract to FMA).
    EXPECT_NEAR(out[i], q[i] * cos[i] - q[i + 8] * sin[i], 4e-7) << i;
    EXPECT_NEAR(out[i + 8], q[i + 8] * cos[i] + q[i] * sin[i], 4e-7) << i;
  }
}

TEST(Mrope, ValidationNamesTheField) {
  RopeSpec spec;
  spec.rotary_dim = 16;
  spec.mrope_section = {2, 3};
  EXPECT_THAT(ValidateRopeSpec(spec, 16),
              IsFieldError(absl::StatusCode::kInvalidArgument, "spec.rope.mrope_section"));
  spec.mrope_section = {2, 3, 4};
  EXPECT_THAT(std::string(ValidateRopeSpec(spec, 16).message()),
              ::testing::HasSubstr("must sum to rotary_dim/2 = 8, got 9"));
  spec.mrope_section = {-1, 5, 4};
  EXPECT_THAT(ValidateRopeSpec(spec, 16),
              IsFieldError(absl::StatusCode::kInvalidArgument, "spec.rope.mrope_section[0]"));
  spec.mrope_section.clear();
  spec.mrope_interleaved = true;
  EXPECT_THAT(ValidateRopeSpec(spec, 16),
              IsFieldError(absl::StatusCode::kInvalidArgument, "spec.rope.mrope_interleaved"));
}

}  // namespace
}  // namespace phasor
