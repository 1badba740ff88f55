// Tests for core/rope/rope.h: relative-position property, layouts, the kernels
// against a plain scalar oracle, 16-bit storage, accuracy against long
// double, thread-count determinism and every validation path.
#include "core/rope/rope.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/adapters/dtype.h"
#include "core/adapters/parallel.h"
#include "core/base/errors.h"
#include "core/base/positions.h"
#include "core/math/exact_angle.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "tests/quad_reference.h"
#include "tests/status_matchers.h"

extern "C" __float128 exp2q(__float128);
extern "C" __float128 fabsq(__float128);

namespace phasor {
namespace {

using ::testing::Each;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------
// Helpers

template <class T>
absl::Span<const uint8_t> BytesOf(const std::vector<T>& v) {
  return absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()),
                                   v.size() * sizeof(T));
}
template <class T>
absl::Span<uint8_t> MutableBytesOf(std::vector<T>& v) {
  return absl::Span<uint8_t>(reinterpret_cast<uint8_t*>(v.data()),
                             v.size() * sizeof(T));
}

RopeOperand Operand(DType dtype, int64_t tokens, int64_t heads, int64_t head_dim,
                    absl::Span<const uint8_t> in, absl::Span<uint8_t> out) {
  RopeOperand operand;
  operand.dtype = dtype;
  operand.num_tokens = tokens;
  operand.num_heads = heads;
  operand.head_dim = head_dim;
  operand.in = in;
  operand.out = out;
  return operand;
}

std::vector<float> RandomFloats(size_t n, uint32_t seed, float low = -1.0f,
                                float high = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

RopeFrequencies Frequencies(const RopeSpec& spec, int64_t head_dim,
                            const Positions& positions) {
  absl::StatusOr<RopeFrequencies> f =
      ComputeRopeFrequencies(spec, head_dim, DefaultRopeSeqLen(positions));
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? *f : RopeFrequencies();
}

// Validates everything, then rotates. `key` may be null.
void RunRope(const RopeSpec& spec, const Positions& positions,
         const RopeOperand& query, const RopeOperand* key,
         const ExecutionOptions& options = ExecutionOptions()) {
  const RopeFrequencies f = Frequencies(spec, query.head_dim, positions);
  PHASOR_ASSERT_OK(ValidateRopePositions(positions, f));
  PHASOR_ASSERT_OK(ValidateRopeOperands(query, key, positions.size()));
  ApplyRope(spec, f, positions, options, query, key);
}

// fp32 [T, H, D] → rotated copy.
std::vector<float> Rotated(const RopeSpec& spec, const Positions& positions,
                           int64_t heads, int64_t head_dim,
                           const std::vector<float>& x) {
  std::vector<float> out(x.size());
  RunRope(spec, positions,
      Operand(DType::kFloat32, positions.size(), heads, head_dim, BytesOf(x),
              MutableBytesOf(out)),
      nullptr);
  return out;
}

// Runs `body` once per Highway target this binary and CPU support.
template <class Body>
void ForEveryTarget(Body body) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    body();
  }
  hwy::SetSupportedTargetsForTest(0);
}

// The plain scalar oracle: rope.h's formulas one element at a time.
std::vector<float> ReferenceRotate(const RopeSpec& spec,
                                   const RopeFrequencies& f,
                                   const Positions& positions, int64_t heads,
                                   int64_t head_dim,
                                   const std::vector<float>& x) {
  const int64_t rd = RopeRotaryDim(spec, head_dim);
  const int64_t half = rd / 2;
  const double scale = spec.fold_attention_factor ? f.attention_factor : 1.0;
  std::vector<float> out = x;
  for (int64_t t = 0; t < positions.size(); ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = positions.at(t) * f.inv_freq[i];
      const float c = static_cast<float>(std::cos(angle) * scale);
      const float s = static_cast<float>(std::sin(angle) * scale);
      for (int64_t h = 0; h < heads; ++h) {
        const float* row = x.data() + (t * heads + h) * head_dim;
        float* dst = out.data() + (t * heads + h) * head_dim;
        const int64_t a = spec.layout == RopeLayout::kHalf ? i : 2 * i;
        const int64_t b = spec.layout == RopeLayout::kHalf ? i + half : 2 * i + 1;
        dst[a] = row[a] * c - row[b] * s;
        dst[b] = row[b] * c + row[a] * s;
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Relative position: q_m·k_n depends on n − m only.

// Max over diagonals of (max − min) of scores[m][n] along n − m = const.
double MaxDiagonalSpread(const std::vector<std::vector<double>>& scores) {
  const int n = static_cast<int>(scores.size());
  double worst = 0.0;
  for (int d = -(n - 1); d <= n - 1; ++d) {
    double lo = INFINITY, hi = -INFINITY;
    for (int m = 0; m < n; ++m) {
      const int k = m + d;
      if (k < 0 || k >= n) continue;
      lo = std::min(lo, scores[m][k]);
      hi = std::max(hi, scores[m][k]);
    }
    worst = std::max(worst, hi - lo);
  }
  return worst;
}

std::vector<std::vector<double>> Scores(const std::vector<float>& q,
                                        const std::vector<float>& k, int n,
                                        int head_dim) {
  std::vector<std::vector<double>> scores(n, std::vector<double>(n));
  for (int m = 0; m < n; ++m) {
    for (int j = 0; j < n; ++j) {
      double dot = 0.0;
      for (int c = 0; c < head_dim; ++c) {
        dot += static_cast<double>(q[m * head_dim + c]) * k[j * head_dim + c];
      }
      scores[m][j] = dot;
    }
  }
  return scores;
}

struct LayoutParam {
  RopeLayout layout;
  const char* name;
};
void PrintTo(const LayoutParam& param, std::ostream* os) { *os << param.name; }

class RopeRelative : public ::testing::TestWithParam<LayoutParam> {};

TEST_P(RopeRelative, ScoreIsConstantAlongDiagonals) {
  constexpr int kN = 32, kDim = 64;
  const std::vector<float> q = RandomFloats(kDim, 1);
  const std::vector<float> k = RandomFloats(kDim, 2);
  std::vector<float> queries, keys;
  std::vector<int64_t> positions;
  for (int t = 0; t < kN; ++t) {
    queries.insert(queries.end(), q.begin(), q.end());
    keys.insert(keys.end(), k.begin(), k.end());
    positions.push_back(t);
  }
  for (int64_t rotary_dim : {0, 32}) {  // full and partial rotation
    RopeSpec spec;
    spec.layout = GetParam().layout;
    spec.rotary_dim = rotary_dim;
    std::vector<float> q_out(queries.size()), k_out(keys.size());
    const RopeOperand query = Operand(DType::kFloat32, kN, 1, kDim,
                                      BytesOf(queries), MutableBytesOf(q_out));
    const RopeOperand key =
        Operand(DType::kFloat32, kN, 1, kDim, BytesOf(keys), MutableBytesOf(k_out));
    RunRope(spec, Positions::Integers(positions), query, &key);
    const auto scores = Scores(q_out, k_out, kN, kDim);
    const double spread = MaxDiagonalSpread(scores);
    EXPECT_LE(spread, 1e-5) << "rotary_dim " << rotary_dim;
    // The rotation did something: scores change with the offset.
    double offset_effect = 0.0;
    for (int d = 1; d < kN; ++d) {
      offset_effect = std::max(offset_effect, std::fabs(scores[0][d] - scores[0][0]));
    }
    EXPECT_GT(offset_effect, 1e-2);
  }
}

TEST(RopeRelativeControl, AdditiveSinusoidalPeIsNotShiftInvariant) {
  constexpr int kN = 32, kDim = 64;
  const std::vector<float> q = RandomFloats(kDim, 1);
  const std::vector<float> k = RandomFloats(kDim, 2);
  std::vector<float> queries(kN * kDim), keys(kN * kDim);
  for (int t = 0; t < kN; ++t) {
    for (int j = 0; j < kDim / 2; ++j) {
      // Vaswani et al. 2017: PE[t,2j] = sin(t·ω_j), PE[t,2j+1] = cos(t·ω_j).
      const double omega = std::pow(10000.0, -2.0 * j / kDim);
      queries[t * kDim + 2 * j] = q[2 * j] + static_cast<float>(std::sin(t * omega));
      queries[t * kDim + 2 * j + 1] =
          q[2 * j + 1] + static_cast<float>(std::cos(t * omega));
      keys[t * kDim + 2 * j] = k[2 * j] + static_cast<float>(std::sin(t * omega));
      keys[t * kDim + 2 * j + 1] = k[2 * j + 1] + static_cast<float>(std::cos(t * omega));
    }
  }
  EXPECT_GT(MaxDiagonalSpread(Scores(queries, keys, kN, kDim)), 1e-2);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, RopeRelative,
    ::testing::Values(LayoutParam{RopeLayout::kHalf, "Half"},
                      LayoutParam{RopeLayout::kInterleaved, "Interleaved"}),
    [](const ::testing::TestParamInfo<LayoutParam>& info) {
      return std::string(info.param.name);
    });

// ---------------------------------------------------------------------------
// Layouts

TEST(RopeLayouts, HalfAndInterleavedAgreeUnderChannelPermutation) {
  constexpr int64_t kTokens = 5, kHeads = 3, kDim = 64, kRotary = 48;
  const std::vector<int64_t> positions = {0, 1, 17, 4096, 1 << 20};
  const std::vector<float> x = RandomFloats(kTokens * kHeads * kDim, 3);
  // interleaved[2i] = half[i], interleaved[2i+1] = half[i + rd/2]; rest fixed.
  auto to_interleaved = [&](const std::vector<float>& half_layout) {
    std::vector<float> out = half_layout;
    for (int64_t row = 0; row < kTokens * kHeads; ++row) {
      for (int64_t i = 0; i < kRotary / 2; ++i) {
        out[row * kDim + 2 * i] = half_layout[row * kDim + i];
        out[row * kDim + 2 * i + 1] = half_layout[row * kDim + i + kRotary / 2];
      }
    }
    return out;
  };
  RopeSpec half_spec;
  half_spec.rotary_dim = kRotary;
  half_spec.layout = RopeLayout::kHalf;
  RopeSpec interleaved_spec = half_spec;
  interleaved_spec.layout = RopeLayout::kInterleaved;
  const Positions pos = Positions::Integers(positions);
  const std::vector<float> via_half =
      to_interleaved(Rotated(half_spec, pos, kHeads, kDim, x));
  const std::vector<float> via_interleaved =
      Rotated(interleaved_spec, pos, kHeads, kDim, to_interleaved(x));
  ASSERT_EQ(via_half.size(), via_interleaved.size());
  int changed = 0;
  for (size_t j = 0; j < x.size(); ++j) {
    EXPECT_FLOAT_EQ(via_half[j], via_interleaved[j]) << j;
    if (via_half[j] != to_interleaved(x)[j]) ++changed;
  }
  EXPECT_GT(changed, 0);
}

// ---------------------------------------------------------------------------
// Kernels against the scalar oracle

struct KernelCase {
  int64_t head_dim;
  int64_t rotary_dim;
  RopeLayout layout;
};

TEST(RopeKernel, MatchesScalarReferenceForEveryShape) {
  const std::vector<KernelCase> cases = {
      {128, 0, RopeLayout::kHalf},  {128, 0, RopeLayout::kInterleaved},
      {96, 64, RopeLayout::kHalf},  {96, 64, RopeLayout::kInterleaved},
      {20, 20, RopeLayout::kHalf},  {20, 20, RopeLayout::kInterleaved},  // body + tail
      {6, 4, RopeLayout::kHalf},    {6, 4, RopeLayout::kInterleaved},    // tail only
      {34, 2, RopeLayout::kHalf},   {34, 2, RopeLayout::kInterleaved},
  };
  const std::vector<int64_t> positions = {0, 1, 2, 31, 1000, 65535, 1 << 24, -7};
  const Positions pos = Positions::Integers(positions);
  const int64_t tokens = pos.size();
  for (const KernelCase& kc : cases) {
    for (bool with_key : {false, true}) {
      RopeSpec spec;
      spec.rotary_dim = kc.rotary_dim;
      spec.layout = kc.layout;
      spec.scaling = LinearRopeScaling{2.0};
      const int64_t q_heads = 3, k_heads = 2;
      const std::vector<float> q = RandomFloats(tokens * q_heads * kc.head_dim, 4, -2, 2);
      const std::vector<float> k = RandomFloats(tokens * k_heads * kc.head_dim, 5, -2, 2);
      std::vector<float> q_out(q.size()), k_out(k.size());
      const RopeOperand query = Operand(DType::kFloat32, tokens, q_heads, kc.head_dim,
                                        BytesOf(q), MutableBytesOf(q_out));
      const RopeOperand key = Operand(DType::kFloat32, tokens, k_heads, kc.head_dim,
                                      BytesOf(k), MutableBytesOf(k_out));
      // Every SIMD target agrees with the scalar formula (the last target
      // run, the best one, leaves its outputs for the checks below).
      const RopeFrequencies f = Frequencies(spec, kc.head_dim, pos);
      const std::vector<float> q_ref_all =
          ReferenceRotate(spec, f, pos, q_heads, kc.head_dim, q);
      ForEveryTarget([&] {
        std::vector<float> q_target(q.size());
        RunRope(spec, pos,
                Operand(DType::kFloat32, tokens, q_heads, kc.head_dim, BytesOf(q),
                        MutableBytesOf(q_target)),
                nullptr);
        for (size_t j = 0; j < q.size(); ++j) {
          ASSERT_NEAR(q_target[j], q_ref_all[j], 1e-6)
              << "D=" << kc.head_dim << " rd=" << kc.rotary_dim << " j=" << j;
        }
      });
      RunRope(spec, pos, query, with_key ? &key : nullptr);
      const std::vector<float> q_ref =
          ReferenceRotate(spec, f, pos, q_heads, kc.head_dim, q);
      for (size_t j = 0; j < q.size(); ++j) {
        ASSERT_NEAR(q_out[j], q_ref[j], 1e-6)
            << "D=" << kc.head_dim << " rd=" << kc.rotary_dim << " j=" << j;
      }
      if (with_key) {
        const std::vector<float> k_ref =
            ReferenceRotate(spec, f, pos, k_heads, kc.head_dim, k);
        for (size_t j = 0; j < k.size(); ++j) {
          ASSERT_NEAR(k_out[j], k_ref[j], 1e-6) << "key j=" << j;
        }
      } else {
        // No key operand: nothing may have been written to its buffer.
        EXPECT_EQ(k_out, std::vector<float>(k.size(), 0.0f));
      }
    }
  }
}

TEST(RopeKernel, ChannelsBeyondRotaryDimPassThroughBitwise) {
  constexpr int64_t kTokens = 3, kHeads = 2, kDim = 16, kRotary = 8;
  std::vector<uint32_t> bits(kTokens * kHeads * kDim);
  for (size_t j = 0; j < bits.size(); ++j) {
    // A NaN with a payload: any float arithmetic on it would likely change it.
    bits[j] = (j % kDim) >= kRotary ? 0x7fc01234u + static_cast<uint32_t>(j)
                                    : 0x3f800000u;  // 1.0f
  }
  std::vector<uint32_t> out(bits.size(), 0);
  RopeSpec spec;
  spec.rotary_dim = kRotary;
  RunRope(spec, Positions::Integers(std::vector<int64_t>{5, 6, 7}),
      Operand(DType::kFloat32, kTokens, kHeads, kDim, BytesOf(bits),
              MutableBytesOf(out)),
      nullptr);
  for (size_t j = 0; j < bits.size(); ++j) {
    if (static_cast<int64_t>(j % kDim) >= kRotary) {
      EXPECT_EQ(out[j], bits[j]) << j;
    } else {
      EXPECT_NE(out[j], 0u) << j;  // rotated channels were written
    }
  }
}

TEST(RopeKernel, ZeroTokensIsANoOp) {
  // Zero tokens validate, and neither operand's memory is read or written:
  // the empty spans point into sentinel buffers that must come back intact.
  RopeSpec spec;
  constexpr float kSentinel = -7.25f;
  std::vector<float> query_memory(2 * 4 * 8, kSentinel);
  std::vector<float> key_memory(2 * 4 * 8, kSentinel);
  const std::vector<int64_t> no_positions;
  const RopeOperand query =
      Operand(DType::kFloat32, 0, 4, 8, BytesOf(query_memory).subspan(0, 0),
              MutableBytesOf(query_memory).subspan(0, 0));
  const RopeOperand key =
      Operand(DType::kFloat32, 0, 4, 8, BytesOf(key_memory).subspan(0, 0),
              MutableBytesOf(key_memory).subspan(0, 0));
  RunRope(spec, Positions::Integers(no_positions), query, &key);
  EXPECT_THAT(query_memory, Each(kSentinel));
  EXPECT_THAT(key_memory, Each(kSentinel));
}

TEST(RopeKernel, RealPositionsEqualIntegerPositionsWhenIntegral) {
  constexpr int64_t kHeads = 2, kDim = 32;
  const std::vector<int64_t> ints = {0, 3, 1 << 24, (int64_t{1} << 24) + 1};
  const std::vector<double> reals = {0.0, 3.0, 16777216.0, 16777217.0};
  const std::vector<float> x = RandomFloats(ints.size() * kHeads * kDim, 6);
  RopeSpec spec;
  EXPECT_EQ(Rotated(spec, Positions::Integers(ints), kHeads, kDim, x),
            Rotated(spec, Positions::Reals(reals), kHeads, kDim, x));
  // And fractional (continuous-time) positions follow the oracle.
  const std::vector<double> fractional = {0.25, 3.5, -1.75, 1e6 + 0.125};
  const Positions pos = Positions::Reals(fractional);
  const std::vector<float> out = Rotated(spec, pos, kHeads, kDim, x);
  const std::vector<float> ref =
      ReferenceRotate(spec, Frequencies(spec, kDim, pos), pos, kHeads, kDim, x);
  for (size_t j = 0; j < x.size(); ++j) EXPECT_NEAR(out[j], ref[j], 1e-6) << j;
}

TEST(RopeKernel, AttentionFactorIsFoldedOnlyWhenAsked) {
  RopeSpec folded;
  YarnRopeScaling yarn;
  yarn.factor = 16.0;
  yarn.original_max_position_embeddings = 2048;
  folded.scaling = yarn;
  RopeSpec unfolded = folded;
  unfolded.fold_attention_factor = false;
  const std::vector<int64_t> positions = {0, 9, 100000};
  const Positions pos = Positions::Integers(positions);
  constexpr int64_t kDim = 64;
  const RopeFrequencies f = Frequencies(folded, kDim, pos);
  ASSERT_GT(f.attention_factor, 1.2);  // 0.1·ln 16 + 1 = 1.277
  const int64_t width = RopeTableWidth(folded, kDim);
  std::vector<float> cos_a(3 * width), sin_a(3 * width), cos_b(3 * width),
      sin_b(3 * width);
  ComputeRopeTables(f, true, pos, ExecutionOptions(), absl::MakeSpan(cos_a),
                    absl::MakeSpan(sin_a));
  ComputeRopeTables(f, false, pos, ExecutionOptions(), absl::MakeSpan(cos_b),
                    absl::MakeSpan(sin_b));
  for (size_t j = 0; j < cos_a.size(); ++j) {
    EXPECT_NEAR(cos_a[j], f.attention_factor * cos_b[j], 3e-7) << j;
    EXPECT_NEAR(sin_a[j], f.attention_factor * sin_b[j], 3e-7) << j;
    // Unfolded tables are unit vectors.
    EXPECT_NEAR(double(cos_b[j]) * cos_b[j] + double(sin_b[j]) * sin_b[j], 1.0, 3e-7);
  }
  const std::vector<float> x = RandomFloats(3 * kDim, 7);
  const std::vector<float> a = Rotated(folded, pos, 1, kDim, x);
  const std::vector<float> b = Rotated(unfolded, pos, 1, kDim, x);
  for (size_t j = 0; j < x.size(); ++j) {
    EXPECT_NEAR(a[j], f.attention_factor * b[j], 1e-6) << j;
  }
}

// ---------------------------------------------------------------------------
// fp16 / bf16 storage

struct Narrow16 {
  DType dtype;
  uint16_t (*narrow)(float);
  float (*widen)(uint16_t);
  double half_ulp_relative;  // 2^-(mantissa bits + 1)
  double smallest_half_ulp;  // absolute, for subnormals
};

const Narrow16 kFloat16{DType::kFloat16, FloatToHalf, HalfToFloat, 0x1p-11, 0x1p-25};
const Narrow16 kBFloat16{DType::kBFloat16, FloatToBFloat16, BFloat16ToFloat, 0x1p-8,
                         0x1p-134};

void PrintTo(const Narrow16& format, std::ostream* os) {
  *os << DTypeName(format.dtype);
}

class RopeHalfPrecision : public ::testing::TestWithParam<Narrow16> {};

TEST_P(RopeHalfPrecision, MatchesFloat32RotationWithinItsPrecision) {
  const Narrow16& format = GetParam();
  constexpr int64_t kTokens = 6, kHeads = 4, kDim = 40;
  const std::vector<int64_t> positions = {0, 1, 5, 777, 1 << 20, 123456789};
  const Positions pos = Positions::Integers(positions);
  const std::vector<float> source = RandomFloats(kTokens * kHeads * kDim, 8, -4, 4);
  std::vector<uint16_t> in(source.size());
  std::vector<float> widened(source.size());
  for (size_t j = 0; j < source.size(); ++j) {
    in[j] = format.narrow(source[j]);
    widened[j] = format.widen(in[j]);
  }
  for (RopeLayout layout : {RopeLayout::kHalf, RopeLayout::kInterleaved}) {
    RopeSpec spec;
    spec.layout = layout;
    spec.rotary_dim = 32;
    std::vector<uint16_t> out(in.size());
    RunRope(spec, pos,
        Operand(format.dtype, kTokens, kHeads, kDim, BytesOf(in), MutableBytesOf(out)),
        nullptr);
    const std::vector<float> reference = Rotated(spec, pos, kHeads, kDim, widened);
    double max_relative = 0.0;
    for (size_t j = 0; j < in.size(); ++j) {
      // Same fp32 arithmetic, one rounding at the end.
      ASSERT_EQ(out[j], format.narrow(reference[j])) << j;
      const double err = std::fabs(double(format.widen(out[j])) - reference[j]);
      ASSERT_LE(err, format.half_ulp_relative * std::fabs(reference[j]) +
                         format.smallest_half_ulp)
          << j;
      if (std::fabs(reference[j]) > 1e-3) {
        max_relative = std::max(max_relative, err / std::fabs(reference[j]));
      }
    }
    EXPECT_GT(max_relative, 0.0);  // the narrowing really happened
  }
}

TEST_P(RopeHalfPrecision, PositionZeroRoundTripsExactly) {
  const Narrow16& format = GetParam();
  constexpr int64_t kDim = 24;
  const std::vector<float> source = RandomFloats(2 * kDim, 9, -100, 100);
  std::vector<uint16_t> in(source.size());
  for (size_t j = 0; j < in.size(); ++j) in[j] = format.narrow(source[j]);
  std::vector<uint16_t> out(in.size());
  RopeSpec spec;
  spec.layout = RopeLayout::kInterleaved;
  RunRope(spec, Positions::Integers(std::vector<int64_t>{0}),
      Operand(format.dtype, 1, 2, kDim, BytesOf(in), MutableBytesOf(out)), nullptr);
  EXPECT_EQ(out, in);
}

INSTANTIATE_TEST_SUITE_P(Formats, RopeHalfPrecision,
                         ::testing::Values(kFloat16, kBFloat16),
                         [](const ::testing::TestParamInfo<Narrow16>& info) {
                           return info.param.dtype == DType::kFloat16 ? "Float16"
                                                                      : "BFloat16";
                         });

// The vector kernels widen and narrow 16-bit storage in registers (F16C on
// AVX2 and up, integer code elsewhere). On every SIMD target this build
// carries, each 16-bit output must be the scalar conversions' bits
// (FloatToHalf / FloatToBFloat16 of the float32 kernel's result on the
// scalar-widened input), NaN, Inf, subnormals and ties included.

// Every 16-bit pattern at position 0 with the attention factor `factor`:
// cos = factor and sin = 0 exactly, so out = round16(x·factor) with x·factor
// exact in float32. factor 1.5 makes round-to-nearest-even ties (an odd
// significand times 3/2), overflow to Inf and subnormal results.
TEST_P(RopeHalfPrecision, EveryBitPatternNarrowsAsTheScalarConversion) {
  const Narrow16& format = GetParam();
  constexpr int64_t kDim = 128, kHalfDim = 64;
  constexpr int64_t kHeads = 65536 / kHalfDim;
  std::vector<uint16_t> patterns(65536);
  for (size_t j = 0; j < patterns.size(); ++j) patterns[j] = static_cast<uint16_t>(j);
  const uint16_t plus_one = format.narrow(1.0f), minus_one = format.narrow(-1.0f);
  RopeSpec spec;  // HALF: pairs (i, i + 64).
  const std::vector<int64_t> position_zero = {0};
  const Positions zero = Positions::Integers(position_zero);
  RopeFrequencies f = Frequencies(spec, kDim, zero);
  ForEveryTarget([&] {
    for (double factor : {1.0, 1.5}) {
      f.attention_factor = factor;
      // `tested_low`: patterns in channels i < 64 with +1 as partner (its
      // product with sin = 0 is +0, so x·c − (+0) = x·c for x = −0 too),
      // else in channels i >= 64 with −1 as partner (x·c + (−0)).
      for (bool tested_low : {true, false}) {
        std::vector<uint16_t> in(kHeads * kDim), out(in.size());
        for (int64_t h = 0; h < kHeads; ++h) {
          for (int64_t i = 0; i < kHalfDim; ++i) {
            const uint16_t x = patterns[h * kHalfDim + i];
            in[h * kDim + i] = tested_low ? x : minus_one;
            in[h * kDim + kHalfDim + i] = tested_low ? plus_one : x;
          }
        }
        ApplyRope(spec, f, zero, ExecutionOptions(),
                  Operand(format.dtype, 1, kHeads, kDim, BytesOf(in), MutableBytesOf(out)),
                  nullptr);
        int64_t mismatches = 0;
        for (int64_t h = 0; h < kHeads; ++h) {
          for (int64_t i = 0; i < kHalfDim; ++i) {
            const uint16_t x = patterns[h * kHalfDim + i];
            const uint16_t expected =
                format.narrow(static_cast<float>(format.widen(x) * factor));
            const uint16_t got = out[h * kDim + (tested_low ? i : kHalfDim + i)];
            if (got != expected && ++mismatches <= 5) {
              ADD_FAILURE() << "factor " << factor << " input 0x" << std::hex << x
                            << " got 0x" << got << " expected 0x" << expected;
            }
          }
        }
        EXPECT_EQ(mismatches, 0) << "factor " << factor;
      }
    }
  });
}

// Random bit patterns (NaN, Inf and subnormal inputs among them) rotated at
// scattered positions, both layouts, partial rotary, in place and out of
// place: each output equals the scalar narrowing of the float32 kernel's
// output for the scalar-widened input on the same target (same arithmetic,
// so the same fused or unfused products).
TEST_P(RopeHalfPrecision, RandomBitsMatchTheFloat32KernelNarrowedOnEveryTarget) {
  const Narrow16& format = GetParam();
  constexpr int64_t kTokens = 7, kHeads = 5, kDim = 72;
  std::mt19937 rng(21);
  std::vector<uint16_t> in(kTokens * kHeads * kDim);
  for (uint16_t& x : in) x = static_cast<uint16_t>(rng());
  std::vector<float> widened(in.size());
  for (size_t j = 0; j < in.size(); ++j) widened[j] = format.widen(in[j]);
  const std::vector<int64_t> positions = {3, 0, 99991, -17, 1 << 30, 12, 13};
  const Positions pos = Positions::Integers(positions);
  ForEveryTarget([&] {
    for (RopeLayout layout : {RopeLayout::kHalf, RopeLayout::kInterleaved}) {
      for (int64_t rotary_dim : {kDim, int64_t{20}}) {
        RopeSpec spec;
        spec.layout = layout;
        spec.rotary_dim = rotary_dim;
        const std::vector<float> reference = Rotated(spec, pos, kHeads, kDim, widened);
        std::vector<uint16_t> out(in.size());
        RunRope(spec, pos,
                Operand(format.dtype, kTokens, kHeads, kDim, BytesOf(in),
                        MutableBytesOf(out)),
                nullptr);
        std::vector<uint16_t> in_place = in;
        RunRope(spec, pos,
                Operand(format.dtype, kTokens, kHeads, kDim, BytesOf(in_place),
                        MutableBytesOf(in_place)),
                nullptr);
        int64_t mismatches = 0, nan_outputs = 0;
        for (size_t j = 0; j < in.size(); ++j) {
          // Channels beyond rotary_dim are copied bit for bit.
          const bool rotated = static_cast<int64_t>(j % kDim) < rotary_dim;
          const uint16_t expected = rotated ? format.narrow(reference[j]) : in[j];
          if (std::isnan(reference[j])) ++nan_outputs;
          // With both inputs of a pair NaN, IEEE 754 leaves open which one
          // the result carries (its sign and payload): only NaN-ness counts.
          const size_t channel = j % kDim, half = static_cast<size_t>(rotary_dim / 2);
          const size_t partner =
              j - channel + (layout == RopeLayout::kHalf
                                 ? (channel < half ? channel + half : channel - half)
                                 : (channel ^ 1));
          if (rotated && std::isnan(widened[j]) && std::isnan(widened[partner])) {
            EXPECT_TRUE(std::isnan(format.widen(out[j])) &&
                        std::isnan(format.widen(in_place[j])))
                << j;
            continue;
          }
          if ((out[j] != expected || in_place[j] != expected) && ++mismatches <= 5) {
            ADD_FAILURE() << "element " << j << " input 0x" << std::hex << in[j]
                          << " got 0x" << out[j] << " in place 0x" << in_place[j]
                          << " expected 0x" << expected;
          }
        }
        EXPECT_EQ(mismatches, 0);
        EXPECT_GT(nan_outputs, 0);  // NaN inputs really were exercised.
      }
    }
  });
}

// M-RoPE with every pair on the temporal axis ([rd/2, 0, 0]) still reads
// positions as 3 rows of N: its tables are N rows, equal to plain RoPE's on
// the first row, and nothing is written past them.
TEST(RopeMrope, AllPairsOnTheTemporalAxisGiveNRows) {
  constexpr int64_t kRows = 5, kWidth = 4;
  RopeSpec spec;
  spec.rotary_dim = 2 * kWidth;
  spec.mrope_section = {kWidth, 0, 0};
  const std::vector<int64_t> axes = {0, 3, 9, 27, 81,     // temporal
                                     1, 1, 1, 1, 1,       // height
                                     2, 2, 2, 2, 2};      // width
  const std::vector<int64_t> temporal(axes.begin(), axes.begin() + kRows);
  const RopeFrequencies f = Frequencies(spec, spec.rotary_dim, Positions::Integers(axes));
  constexpr float kGuard = -7.0f;
  std::vector<float> cos(kRows * kWidth + 64, kGuard), sin(cos.size(), kGuard);
  ComputeRopeTables(spec, f, Positions::Integers(axes), ExecutionOptions(),
                    absl::MakeSpan(cos.data(), kRows * kWidth),
                    absl::MakeSpan(sin.data(), kRows * kWidth));
  RopeSpec plain;
  plain.rotary_dim = spec.rotary_dim;
  std::vector<float> plain_cos(kRows * kWidth), plain_sin(kRows * kWidth);
  ComputeRopeTables(plain, f, Positions::Integers(temporal), ExecutionOptions(),
                    absl::MakeSpan(plain_cos), absl::MakeSpan(plain_sin));
  for (int64_t j = 0; j < kRows * kWidth; ++j) {
    EXPECT_EQ(cos[j], plain_cos[j]) << j;
    EXPECT_EQ(sin[j], plain_sin[j]) << j;
  }
  for (size_t j = kRows * kWidth; j < cos.size(); ++j) {
    ASSERT_EQ(cos[j], kGuard) << "written past the table at " << j;
    ASSERT_EQ(sin[j], kGuard) << "written past the table at " << j;
  }
}

// ---------------------------------------------------------------------------
// RopePlan: the plan rotates as its frequencies do.

TEST(RopePlan, PlanRotatesAsTheFrequenciesDo) {
  constexpr int64_t kHeads = 2, kDim = 16;
  const std::vector<int64_t> positions = {5, 6, 7, 100};
  const Positions pos = Positions::Integers(positions);
  RopeSpec spec;
  spec.layout = RopeLayout::kInterleaved;
  const RopeFrequencies f = Frequencies(spec, kDim, pos);
  const RopePlan plan = MakeRopePlan(f);
  const std::vector<float> x = RandomFloats(positions.size() * kHeads * kDim, 31);
  std::vector<float> by_frequencies(x.size()), by_plan(x.size());
  ApplyRope(spec, f, pos, ExecutionOptions(),
            Operand(DType::kFloat32, 4, kHeads, kDim, BytesOf(x), MutableBytesOf(by_frequencies)),
            nullptr);
  ApplyRope(spec, plan, pos, ExecutionOptions(),
            Operand(DType::kFloat32, 4, kHeads, kDim, BytesOf(x), MutableBytesOf(by_plan)),
            nullptr);
  EXPECT_EQ(0, std::memcmp(by_frequencies.data(), by_plan.data(), x.size() * 4));
  EXPECT_NE(by_plan, x);
}

// ---------------------------------------------------------------------------
// In place, out of place and misaligned buffers give identical bytes.

TEST(RopeKernel, InPlaceEqualsOutOfPlaceBytewiseForEveryDtype) {
  constexpr int64_t kTokens = 9, kHeads = 3, kKeyHeads = 1, kDim = 50;
  std::vector<int64_t> positions;
  for (int64_t t = 0; t < kTokens; ++t) positions.push_back(t * 1001 - 3);
  const Positions pos = Positions::Integers(positions);
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (RopeLayout layout : {RopeLayout::kHalf, RopeLayout::kInterleaved}) {
      RopeSpec spec;
      spec.layout = layout;
      spec.rotary_dim = 36;
      const size_t es = DTypeSize(dtype);
      const size_t q_bytes = kTokens * kHeads * kDim * es;
      const size_t k_bytes = kTokens * kKeyHeads * kDim * es;
      // Random bit patterns that are finite numbers in every format.
      std::vector<uint8_t> q_in(q_bytes), k_in(k_bytes);
      const std::vector<float> qf = RandomFloats(q_bytes / es, 10, -3, 3);
      const std::vector<float> kf = RandomFloats(k_bytes / es, 11, -3, 3);
      auto fill = [&](const std::vector<float>& values, std::vector<uint8_t>& bytes) {
        for (size_t j = 0; j < values.size(); ++j) {
          if (dtype == DType::kFloat32) {
            std::memcpy(&bytes[j * 4], &values[j], 4);
          } else {
            const uint16_t h = dtype == DType::kFloat16 ? FloatToHalf(values[j])
                                                        : FloatToBFloat16(values[j]);
            std::memcpy(&bytes[j * 2], &h, 2);
          }
        }
      };
      fill(qf, q_in);
      fill(kf, k_in);

      // Out of place, aligned.
      std::vector<uint8_t> q_out(q_bytes), k_out(k_bytes);
      RopeOperand query = Operand(dtype, kTokens, kHeads, kDim, BytesOf(q_in),
                                  MutableBytesOf(q_out));
      RopeOperand key = Operand(dtype, kTokens, kKeyHeads, kDim, BytesOf(k_in),
                                MutableBytesOf(k_out));
      RunRope(spec, pos, query, &key);

      // In place.
      std::vector<uint8_t> q_inplace = q_in, k_inplace = k_in;
      query = Operand(dtype, kTokens, kHeads, kDim, BytesOf(q_inplace),
                      MutableBytesOf(q_inplace));
      key = Operand(dtype, kTokens, kKeyHeads, kDim, BytesOf(k_inplace),
                    MutableBytesOf(k_inplace));
      RunRope(spec, pos, query, &key);
      EXPECT_EQ(q_inplace, q_out) << DTypeName(dtype);
      EXPECT_EQ(k_inplace, k_out) << DTypeName(dtype);

      // Misaligned by one byte, out of place and in place.
      std::vector<uint8_t> q_src(q_bytes + 1), q_dst(q_bytes + 1);
      std::memcpy(q_src.data() + 1, q_in.data(), q_bytes);
      query = Operand(dtype, kTokens, kHeads, kDim,
                      absl::MakeConstSpan(q_src.data() + 1, q_bytes),
                      absl::MakeSpan(q_dst.data() + 1, q_bytes));
      RunRope(spec, pos, query, nullptr);
      EXPECT_TRUE(std::equal(q_out.begin(), q_out.end(), q_dst.begin() + 1))
          << DTypeName(dtype);
      query = Operand(dtype, kTokens, kHeads, kDim,
                      absl::MakeConstSpan(q_src.data() + 1, q_bytes),
                      absl::MakeSpan(q_src.data() + 1, q_bytes));
      RunRope(spec, pos, query, nullptr);
      EXPECT_TRUE(std::equal(q_out.begin(), q_out.end(), q_src.begin() + 1))
          << DTypeName(dtype);
      EXPECT_NE(q_out, q_in);
    }
  }
}

// ---------------------------------------------------------------------------
// Accuracy against long double

struct AccuracyFigures {
  double table = 0;
  double apply = 0;
};

AccuracyFigures MeasureAgainstLongDouble(double base, int64_t rotary_dim,
                                         const Positions& pos) {
  RopeSpec spec;
  spec.base = base;
  spec.rotary_dim = rotary_dim;
  const RopeFrequencies f = Frequencies(spec, rotary_dim, pos);
  const int64_t half = rotary_dim / 2;
  const int64_t n = pos.size();
  std::vector<float> cos(n * half), sin(n * half);
  ComputeRopeTables(f, true, pos, ExecutionOptions(), absl::MakeSpan(cos),
                    absl::MakeSpan(sin));
  const std::vector<float> x = RandomFloats(n * rotary_dim, 12);
  const std::vector<float> y = Rotated(spec, pos, 1, rotary_dim, x);
  AccuracyFigures worst;
  for (int64_t t = 0; t < n; ++t) {
    const long double p = pos.is_real()
                              ? static_cast<long double>(pos.reals()[t])
                              : static_cast<long double>(pos.integers()[t]);
    for (int64_t i = 0; i < half; ++i) {
      const long double theta =
          powl(static_cast<long double>(base),
               -static_cast<long double>(2 * i) / static_cast<long double>(rotary_dim));
      const long double c = cosl(p * theta), s = sinl(p * theta);
      worst.table = std::max<double>(worst.table, fabsl(cos[t * half + i] - c));
      worst.table = std::max<double>(worst.table, fabsl(sin[t * half + i] - s));
      const long double a = x[t * rotary_dim + i];
      const long double b = x[t * rotary_dim + i + half];
      worst.apply = std::max<double>(worst.apply,
                                     fabsl(y[t * rotary_dim + i] - (a * c - b * s)));
      worst.apply = std::max<double>(
          worst.apply, fabsl(y[t * rotary_dim + i + half] - (b * c + a * s)));
    }
  }
  return worst;
}

TEST(RopeAccuracy, Float32WithinTwoMicroOfLongDoubleUpTo2To31) {
  std::vector<int64_t> ints = {0,
                               1,
                               3,
                               1000,
                               (1 << 24) - 1,
                               1 << 24,
                               (1 << 24) + 1,
                               -((1 << 24) + 1),
                               (int64_t{1} << 31) - 1,
                               int64_t{1} << 31,
                               -(int64_t{1} << 31)};
  std::mt19937_64 rng(13);
  std::uniform_int_distribution<int64_t> dist(-(int64_t{1} << 31), int64_t{1} << 31);
  for (int j = 0; j < 200; ++j) ints.push_back(dist(rng));
  std::vector<double> reals = {0.5, 16777216.5, 16777217.25, -2147483647.75,
                               1e9 + 0.125, 2147483648.0};
  std::uniform_real_distribution<double> real_dist(-2147483648.0, 2147483648.0);
  for (int j = 0; j < 100; ++j) reals.push_back(real_dist(rng));

  double worst_table = 0, worst_apply = 0;
  for (const auto& [base, rotary_dim] :
       std::vector<std::pair<double, int64_t>>{{10000.0, 128}, {500000.0, 96}}) {
    for (const Positions& pos :
         {Positions::Integers(ints), Positions::Reals(reals)}) {
      const AccuracyFigures figures = MeasureAgainstLongDouble(base, rotary_dim, pos);
      EXPECT_LE(figures.table, 2e-6) << "base " << base;
      EXPECT_LE(figures.apply, 2e-6) << "base " << base;
      worst_table = std::max(worst_table, figures.table);
      worst_apply = std::max(worst_apply, figures.apply);
    }
  }
  std::printf("RoPE max |error| vs long double, |p| <= 2^31: cos/sin table %.3g, "
              "applied fp32 %.3g\n",
              worst_table, worst_apply);
  RecordProperty("max_table_error", std::to_string(worst_table));
  RecordProperty("max_apply_error", std::to_string(worst_apply));

  // Control: the same angle formed in float32 loses the position entirely.
  const float position_f = static_cast<float>((1 << 24) + 1);
  EXPECT_GT(std::fabs(std::sin(static_cast<double>(position_f)) -
                      static_cast<double>(sinl(16777217.0L))),
            0.5);
}

// ---------------------------------------------------------------------------
// Determinism across thread counts

TEST(RopeThreads, OneAndFourThreadsGiveIdenticalBytes) {
  constexpr int64_t kTokens = 301, kHeads = 4, kKeyHeads = 2, kDim = 64;
  std::mt19937_64 rng(14);
  std::uniform_int_distribution<int64_t> dist(0, 1 << 20);
  std::vector<int64_t> positions(kTokens);
  for (int64_t& p : positions) p = dist(rng);
  const Positions pos = Positions::Integers(positions);
  RopeSpec spec;
  spec.rotary_dim = 48;
  YarnRopeScaling yarn;
  yarn.factor = 4.0;
  yarn.original_max_position_embeddings = 4096;
  spec.scaling = yarn;
  ExecutionOptions serial;
  serial.max_threads = 1;
  ExecutionOptions parallel;
  parallel.max_threads = 4;
  parallel.grain_elements = 64;

  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    const size_t es = DTypeSize(dtype);
    std::vector<uint8_t> q(kTokens * kHeads * kDim * es), k(kTokens * kKeyHeads * kDim * es);
    const std::vector<float> values = RandomFloats((q.size() + k.size()) / es, 15);
    for (size_t j = 0; j < values.size(); ++j) {
      uint8_t* dst = j < q.size() / es ? &q[j * es] : &k[(j - q.size() / es) * es];
      if (dtype == DType::kFloat32) {
        std::memcpy(dst, &values[j], 4);
      } else {
        const uint16_t h = dtype == DType::kFloat16 ? FloatToHalf(values[j])
                                                    : FloatToBFloat16(values[j]);
        std::memcpy(dst, &h, 2);
      }
    }
    std::vector<uint8_t> q1(q.size()), k1(k.size()), q4(q.size()), k4(k.size());
    RopeOperand query = Operand(dtype, kTokens, kHeads, kDim, BytesOf(q), MutableBytesOf(q1));
    RopeOperand key = Operand(dtype, kTokens, kKeyHeads, kDim, BytesOf(k), MutableBytesOf(k1));
    RunRope(spec, pos, query, &key, serial);
    query.out = MutableBytesOf(q4);
    key.out = MutableBytesOf(k4);
    RunRope(spec, pos, query, &key, parallel);
    EXPECT_EQ(q1, q4) << DTypeName(dtype);
    EXPECT_EQ(k1, k4) << DTypeName(dtype);
    EXPECT_NE(q1, q);
  }

  const RopeFrequencies f = Frequencies(spec, kDim, pos);
  const int64_t width = RopeTableWidth(spec, kDim);
  std::vector<float> c1(kTokens * width), s1(kTokens * width), c4(c1.size()), s4(s1.size());
  ComputeRopeTables(f, true, pos, serial, absl::MakeSpan(c1), absl::MakeSpan(s1));
  ComputeRopeTables(f, true, pos, parallel, absl::MakeSpan(c4), absl::MakeSpan(s4));
  EXPECT_EQ(0, std::memcmp(c1.data(), c4.data(), c1.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(s1.data(), s4.data(), s1.size() * sizeof(float)));
}

// Evenly spaced integer positions take the angle-addition ladder (exact
// re-anchor every 256 rows); its rows must meet the same contract, and a
// chunk that starts mid-ladder must reproduce the serial bytes.
TEST(RopeLadder, EvenlySpacedRunsMeetTheAccuracyContract) {
  for (const auto& [first, step, count] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {(int64_t{1} << 31) - 700, 1, 1400},  // crosses 2^31
           {(int64_t{1} << 24) - 300, 7, 900},   // crosses 2^24 + 1
           {-5000, 3, 1200}}) {
    std::vector<int64_t> ints(count);
    for (int64_t t = 0; t < count; ++t) ints[t] = first + t * step;
    for (const auto& [base, rotary_dim] :
         std::vector<std::pair<double, int64_t>>{{10000.0, 128}, {500000.0, 96}}) {
      const AccuracyFigures figures =
          MeasureAgainstLongDouble(base, rotary_dim, Positions::Integers(ints));
      EXPECT_LE(figures.table, 2e-6) << "first " << first << " step " << step;
      EXPECT_LE(figures.apply, 2e-6) << "first " << first << " step " << step;
    }
  }
}

TEST(RopeLadder, OneAndThreeThreadsGiveIdenticalBytesOnARun) {
  constexpr int64_t kTokens = 1000, kHeads = 2, kDim = 128;
  std::vector<int64_t> positions(kTokens);
  for (int64_t t = 0; t < kTokens; ++t) positions[t] = 100 + 2 * t;
  positions[613] = 5;  // A break in the run forces a re-anchor mid-chunk.
  const Positions pos = Positions::Integers(positions);
  RopeSpec spec;
  ExecutionOptions serial;
  ExecutionOptions parallel;
  parallel.max_threads = 3;
  parallel.grain_elements = 64;  // Chunks start at rows that are not anchors.
  const RopeFrequencies f = Frequencies(spec, kDim, pos);
  std::vector<float> c1(kTokens * kDim / 2), s1(c1.size()), c3(c1.size()), s3(c1.size());
  ComputeRopeTables(f, true, pos, serial, absl::MakeSpan(c1), absl::MakeSpan(s1));
  ComputeRopeTables(f, true, pos, parallel, absl::MakeSpan(c3), absl::MakeSpan(s3));
  EXPECT_EQ(0, std::memcmp(c1.data(), c3.data(), c1.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(s1.data(), s3.data(), s1.size() * sizeof(float)));
  const std::vector<float> x = RandomFloats(kTokens * kHeads * kDim, 21);
  std::vector<float> y1(x.size()), y3(x.size());
  RopeOperand q1 = Operand(DType::kFloat32, kTokens, kHeads, kDim, BytesOf(x),
                           MutableBytesOf(y1));
  RunRope(spec, pos, q1, nullptr, serial);
  RopeOperand q3 = q1;
  q3.out = MutableBytesOf(y3);
  RunRope(spec, pos, q3, nullptr, parallel);
  EXPECT_EQ(0, std::memcmp(y1.data(), y3.data(), y1.size() * sizeof(float)));
  // Row 613 (the break) still holds cos/sin of its own position, 5.
  EXPECT_NEAR(c1[613 * kDim / 2 + 0], std::cos(5.0), 1e-7);
  EXPECT_NEAR(s1[613 * kDim / 2 + 1], std::sin(5.0 * f.inv_freq[1]), 1e-7);
}

// ---------------------------------------------------------------------------
// Sequence length default

TEST(RopeSeqLen, DefaultIsMaxPositionPlusOne) {
  EXPECT_EQ(DefaultRopeSeqLen(Positions::Integers(std::vector<int64_t>{3, 9, 2})), 10);
  EXPECT_EQ(DefaultRopeSeqLen(Positions::Integers(std::vector<int64_t>{})), 1);
  EXPECT_EQ(DefaultRopeSeqLen(Positions::Integers(std::vector<int64_t>{-5, -1})), 1);
  EXPECT_EQ(DefaultRopeSeqLen(Positions::Integers(
                std::vector<int64_t>{std::numeric_limits<int64_t>::max()})),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(DefaultRopeSeqLen(Positions::Reals(std::vector<double>{2.5, 7.9})), 8);
  EXPECT_EQ(DefaultRopeSeqLen(Positions::Reals(std::vector<double>{-3.5})), 1);
  EXPECT_EQ(DefaultRopeSeqLen(Positions::Reals(std::vector<double>{1e300})),
            int64_t{1} << 62);
}

// ---------------------------------------------------------------------------
// Validation

TEST(RopeValidation, SpecErrorsNameTheirField) {
  struct Bad {
    int64_t rotary_dim;
    double base;
    int64_t head_dim;
    std::string field;
  };
  const double nan = std::nan("");
  const std::vector<Bad> bad = {
      {-2, 1e4, 128, "spec.rope.rotary_dim"},  {7, 1e4, 128, "spec.rope.rotary_dim"},
      {130, 1e4, 128, "spec.rope.rotary_dim"}, {0, 1e4, 7, "spec.rope.rotary_dim"},
      {0, 1e4, 0, "spec.rope.rotary_dim"},     {0, 0.0, 64, "spec.rope.base"},
      {0, -1.0, 64, "spec.rope.base"},         {0, nan, 64, "spec.rope.base"},
      {0, INFINITY, 64, "spec.rope.base"},
  };
  for (const Bad& b : bad) {
    RopeSpec spec;
    spec.rotary_dim = b.rotary_dim;
    spec.base = b.base;
    EXPECT_THAT(ValidateRopeSpec(spec, b.head_dim),
                IsFieldError(absl::StatusCode::kInvalidArgument, b.field))
        << b.rotary_dim << " " << b.base << " " << b.head_dim;
    EXPECT_THAT(ComputeRopeFrequencies(spec, b.head_dim, 1).status(),
                IsFieldError(absl::StatusCode::kInvalidArgument, b.field));
  }
  RopeSpec spec;
  spec.rotary_dim = 130;
  EXPECT_EQ(ValidateRopeSpec(spec, 128).message(),
            "spec.rope.rotary_dim: must be even and <= head_dim 128, got 130");
  // The counterparts pass.
  spec.rotary_dim = 128;
  EXPECT_TRUE(ValidateRopeSpec(spec, 128).ok());
  spec.rotary_dim = 0;
  spec.base = 0.5;
  EXPECT_TRUE(ValidateRopeSpec(spec, 2).ok());
}

TEST(RopeValidation, SeqLenMustBePositive) {
  RopeSpec spec;
  EXPECT_THAT(ComputeRopeFrequencies(spec, 64, 0).status(),
              IsFieldError(absl::StatusCode::kInvalidArgument, std::string("seq_len")));
  EXPECT_TRUE(ComputeRopeFrequencies(spec, 64, 1).ok());
}

TEST(RopeValidation, PositionsMustGiveFiniteAngles) {
  RopeSpec spec;
  const RopeFrequencies f = *ComputeRopeFrequencies(spec, 8, 1);
  EXPECT_THAT(ValidateRopePositions(
                  Positions::Reals(std::vector<double>{1, 2, std::nan(""), 4}), f),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           std::string("positions[2]")));
  EXPECT_THAT(ValidateRopePositions(
                  Positions::Reals(std::vector<double>{-INFINITY}), f, "req.positions"),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           std::string("req.positions[0]")));
  // base < 1 makes θ_1 = 1e5; 1e308 · 1e5 overflows.
  RopeSpec small_base;
  small_base.base = 1e-10;
  const RopeFrequencies g = *ComputeRopeFrequencies(small_base, 4, 1);
  const absl::Status overflow =
      ValidateRopePositions(Positions::Reals(std::vector<double>{1e308}), g);
  EXPECT_THAT(overflow,
              IsFieldError(absl::StatusCode::kInvalidArgument, std::string("positions")));
  EXPECT_THAT(std::string(overflow.message()), HasSubstr("overflows"));
  EXPECT_TRUE(ValidateRopePositions(Positions::Reals(std::vector<double>{1e300}), f).ok());
}

TEST(RopeValidation, OperandErrorsNameTheirField) {
  std::vector<float> q(2 * 3 * 8), k(2 * 1 * 8), out_q(q.size()), out_k(k.size());
  auto query = [&]() {
    return Operand(DType::kFloat32, 2, 3, 8, BytesOf(q), MutableBytesOf(out_q));
  };
  auto key = [&]() {
    return Operand(DType::kFloat32, 2, 1, 8, BytesOf(k), MutableBytesOf(out_k));
  };
  const RopeOperand good_key = key();
  PHASOR_ASSERT_OK(ValidateRopeOperands(query(), &good_key, 2));
  PHASOR_ASSERT_OK(ValidateRopeOperands(query(), nullptr, 2));

  struct Case {
    std::string label;
    RopeOperand query;
    std::optional<RopeOperand> key;
    int64_t positions;
    std::string field;
  };
  std::vector<Case> cases;
  auto with_query = [&](auto mutate) {
    RopeOperand o = query();
    mutate(o);
    return o;
  };
  auto with_key = [&](auto mutate) {
    RopeOperand o = key();
    mutate(o);
    return o;
  };
  cases.push_back({"query int64", with_query([](RopeOperand& o) { o.dtype = DType::kInt64; }),
                   std::nullopt, 2, "query.dtype"});
  cases.push_back({"query float64",
                   with_query([](RopeOperand& o) { o.dtype = DType::kInt64; }),
                   std::nullopt, 2, "query.dtype"});
  cases.push_back({"query head_dim 0",
                   with_query([](RopeOperand& o) { o.head_dim = 0; }), std::nullopt, 2,
                   "query.shape"});
  cases.push_back({"query negative tokens",
                   with_query([](RopeOperand& o) { o.num_tokens = -1; }), std::nullopt,
                   -1, "query.shape"});
  cases.push_back({"query overflow", with_query([](RopeOperand& o) {
                     o.num_tokens = int64_t{1} << 40;
                     o.num_heads = int64_t{1} << 40;
                   }),
                   std::nullopt, int64_t{1} << 40, "query.shape"});
  cases.push_back({"query short data",
                   with_query([&](RopeOperand& o) { o.in = o.in.subspan(0, 10); }),
                   std::nullopt, 2, "query.data"});
  cases.push_back({"query fp16 bytes for fp32 shape",
                   with_query([](RopeOperand& o) { o.dtype = DType::kFloat16; }),
                   std::nullopt, 2, "query.data"});
  cases.push_back({"positions count", query(), std::nullopt, 3, "positions"});
  cases.push_back({"key dtype", query(),
                   with_key([](RopeOperand& o) { o.dtype = DType::kBFloat16; }), 2,
                   "key.dtype"});
  cases.push_back({"key tokens", query(),
                   with_key([](RopeOperand& o) { o.num_tokens = 1; }), 2, "key.shape"});
  cases.push_back({"key head_dim", query(),
                   with_key([](RopeOperand& o) { o.head_dim = 4; }), 2, "key.shape"});
  cases.push_back({"key data", query(),
                   with_key([](RopeOperand& o) { o.num_heads = 2; }), 2, "key.data"});
  for (const Case& c : cases) {
    const RopeOperand* key_pointer = c.key.has_value() ? &*c.key : nullptr;
    EXPECT_THAT(ValidateRopeOperands(c.query, key_pointer, c.positions),
                IsFieldError(absl::StatusCode::kInvalidArgument, c.field))
        << c.label;
  }
}

TEST(RopeValidation, OperandBytes) {
  EXPECT_EQ(RopeOperandBytes(DType::kFloat32, 2, 3, 8), 192);
  EXPECT_EQ(RopeOperandBytes(DType::kBFloat16, 2, 3, 8), 96);
  EXPECT_EQ(RopeOperandBytes(DType::kFloat16, 0, 3, 8), 0);
  EXPECT_EQ(RopeOperandBytes(DType::kFloat32, int64_t{1} << 40, int64_t{1} << 40, 8), -1);
  EXPECT_EQ(RopeOperandBytes(DType::kFloat32, -1, 1, 1), -1);
}


// ---------------------------------------------------------------------------
// Every int64 position exact: RopeTables at the positions past
// float32 and double's integer range, against a __float128 reference of
// cos/sin(p·θ_i) with θ_i the (correctly rounded) double frequencies.

TEST(RopePrecision, EveryInt64PositionIsExact) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const std::vector<int64_t> positions = {
      (int64_t{1} << 24) + 1, (int64_t{1} << 31) - 1, -(int64_t{1} << 31),
      (int64_t{1} << 53) - 1, (int64_t{1} << 53) + 1, int64_t{1} << 53,
      kMax, kMin, kMax - 1, kMin + 1, 987654321987654321, 1};
  std::vector<RopeSpec> specs(2);
  specs[0].base = 10000.0;
  specs[1].base = 500000.0;
  Llama3RopeScaling llama3;
  llama3.factor = 8.0;
  specs[1].scaling = llama3;
  for (const RopeSpec& spec : specs) {
    const Positions pos = Positions::Integers(positions);
    const absl::StatusOr<RopeFrequencies> f =
        ComputeRopeFrequencies(spec, 128, DefaultRopeSeqLen(pos));
    ASSERT_TRUE(f.ok()) << f.status();
    const int64_t half = 64;
    const int64_t n = pos.size();
    std::vector<float> cos(n * half), sin(n * half);
    ComputeRopeTables(*f, true, pos, ExecutionOptions(), absl::MakeSpan(cos),
                      absl::MakeSpan(sin));
    double worst_double = 0, worst_float = 0;
    int64_t worst_position = 0;
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < half; ++i) {
        const double theta = f->inv_freq[i];
        const double cos_ref = static_cast<double>(testing::QuadCos(theta, positions[t]));
        const double sin_ref = static_cast<double>(testing::QuadSin(theta, positions[t]));
        double c, s;
        ExactAngle(theta).CosSin(positions[t], &c, &s);
        worst_double = std::max({worst_double, std::fabs(c - cos_ref), std::fabs(s - sin_ref)});
        // The table is those doubles rounded once to float.
        EXPECT_EQ(cos[t * half + i], static_cast<float>(c)) << positions[t] << " " << i;
        EXPECT_EQ(sin[t * half + i], static_cast<float>(s)) << positions[t] << " " << i;
        const double e = std::max(std::fabs(cos[t * half + i] - cos_ref),
                                  std::fabs(sin[t * half + i] - sin_ref));
        if (e > worst_float) {
          worst_float = e;
          worst_position = positions[t];
        }
      }
    }
    EXPECT_LE(worst_double, 4e-16);
    EXPECT_LE(worst_float, 6e-8);  // Half an ulp of 1 in float32.
    std::printf("RoPE tables at int64 positions (base %g): double %.3g, float32 %.3g "
                "(at p = %lld)\n",
                spec.base, worst_double, worst_float, static_cast<long long>(worst_position));
  }
  // Neighbours a double position would merge.
  RopeSpec spec;
  const std::vector<int64_t> pair = {int64_t{1} << 53, (int64_t{1} << 53) + 1, kMax, kMin};
  const absl::StatusOr<RopeFrequencies> f = ComputeRopeFrequencies(spec, 2, 1);
  ASSERT_TRUE(f.ok());
  std::vector<float> cos(4), sin(4);
  ComputeRopeTables(*f, true, Positions::Integers(pair), ExecutionOptions(),
                    absl::MakeSpan(cos), absl::MakeSpan(sin));
  EXPECT_NE(cos[0], cos[1]);
  EXPECT_NE(cos[2], cos[3]);
}

TEST(RopePrecision, LadderRunNearInt64MaxIsExact) {
  RopeSpec spec;
  std::vector<int64_t> positions(1000);
  for (size_t t = 0; t < positions.size(); ++t) {
    positions[t] = std::numeric_limits<int64_t>::max() - 999 + static_cast<int64_t>(t);
  }
  const Positions pos = Positions::Integers(positions);
  const absl::StatusOr<RopeFrequencies> f = ComputeRopeFrequencies(spec, 64, 1);
  ASSERT_TRUE(f.ok());
  std::vector<float> cos(positions.size() * 32), sin(positions.size() * 32);
  ComputeRopeTables(*f, true, pos, ExecutionOptions(), absl::MakeSpan(cos),
                    absl::MakeSpan(sin));
  double worst = 0;
  for (size_t t = 0; t < positions.size(); ++t) {
    for (size_t i = 0; i < 32; ++i) {
      const double theta = f->inv_freq[i];
      worst = std::max(worst, std::fabs(cos[t * 32 + i] - static_cast<double>(
                                                              testing::QuadCos(theta, positions[t]))));
      worst = std::max(worst, std::fabs(sin[t * 32 + i] - static_cast<double>(
                                                              testing::QuadSin(theta, positions[t]))));
    }
  }
  EXPECT_LE(worst, 7e-8);
}

// Outputs of 32 MiB and more are written with non-temporal stores where a
// vector is aligned (core/rope/rope_kernels.cc kStreamBytes): the bytes must be those of
// the same rotation done in calls too small to stream, for every dtype and
// both layouts, with the output page-aligned (every vector streamed) and
// one element past a page (a mix of streamed and plain stores).
TEST(RopeStreaming, LargeOutputsGiveTheBytesOfSmallCalls) {
  constexpr int64_t kHeads = 32;
  constexpr int64_t kDim = 128;
  constexpr int64_t kCallTokens = 256;  // 2 MiB of float64: plain stores.
  for (const DType dtype : {DType::kFloat32, DType::kFloat64, DType::kBFloat16,
                            DType::kFloat16}) {
    const size_t es = DTypeSize(dtype);
    const int64_t tokens = (int64_t{32} << 20) / (kHeads * kDim * static_cast<int64_t>(es));
    const size_t bytes = static_cast<size_t>(tokens * kHeads * kDim) * es;
    std::vector<uint8_t> in(bytes);
    const std::vector<float> values = RandomFloats(bytes / es, 31);
    for (size_t j = 0; j < values.size(); ++j) {
      uint8_t* dst = &in[j * es];
      if (dtype == DType::kFloat32) {
        std::memcpy(dst, &values[j], 4);
      } else if (dtype == DType::kFloat64) {
        const double v = values[j];
        std::memcpy(dst, &v, 8);
      } else {
        const uint16_t h = dtype == DType::kFloat16 ? FloatToHalf(values[j])
                                                    : FloatToBFloat16(values[j]);
        std::memcpy(dst, &h, 2);
      }
    }
    std::vector<int64_t> positions(static_cast<size_t>(tokens));
    for (int64_t t = 0; t < tokens; ++t) positions[t] = 3 * t + 5;
    std::unique_ptr<uint8_t, decltype(&std::free)> page(
        static_cast<uint8_t*>(std::aligned_alloc(4096, bytes + 4096)), &std::free);
    ASSERT_NE(page, nullptr);
    for (const RopeLayout layout : {RopeLayout::kHalf, RopeLayout::kInterleaved}) {
      RopeSpec spec;
      spec.layout = layout;
      std::vector<uint8_t> reference(bytes);
      for (int64_t t0 = 0; t0 < tokens; t0 += kCallTokens) {
        const size_t offset = static_cast<size_t>(t0 * kHeads * kDim) * es;
        const size_t call_bytes = static_cast<size_t>(kCallTokens * kHeads * kDim) * es;
        RunRope(spec,
                Positions::Integers(absl::MakeConstSpan(positions).subspan(
                    static_cast<size_t>(t0), kCallTokens)),
                Operand(dtype, kCallTokens, kHeads, kDim,
                        absl::MakeConstSpan(in).subspan(offset, call_bytes),
                        absl::MakeSpan(reference).subspan(offset, call_bytes)),
                nullptr);
      }
      for (const size_t shift : {size_t{0}, es}) {
        SCOPED_TRACE(absl::StrCat(DTypeName(dtype), layout == RopeLayout::kHalf ? " half" : " interleaved",
                                  shift == 0 ? ", page-aligned" : ", one element past a page"));
        const absl::Span<uint8_t> out(page.get() + shift, bytes);
        RunRope(spec, Positions::Integers(positions),
                Operand(dtype, tokens, kHeads, kDim, absl::MakeConstSpan(in), out), nullptr);
        EXPECT_EQ(0, std::memcmp(out.data(), reference.data(), bytes));
      }
    }
  }
}

// Float64 tables and operands against __float128 (every row exact).
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

}  // namespace float64_output

}  // namespace
}  // namespace phasor
