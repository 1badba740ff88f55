// The tensor layouts and position axes RoPE takes (core/rope/rope.h):
// [B, H, T, D] and [B, T, H, D] give the bytes of token-major [T, H, D] rows
// in every dtype, and M-RoPE's sections (Qwen2-VL, Qwen3-VL interleaved) take
// each pair's angle from its axis' position.
#include "core/rope/rope.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/types/span.h"
#include "core/math/exact_angle.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/quad_reference.h"
#include "tests/status_matchers.h"

namespace phasor {
namespace {

using ::phasor::testing::Quad;
using ::phasor::testing::QuadCos;
using ::phasor::testing::QuadSin;
using ::phasor::testing::ReduceTwoPi;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

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

template <typename T>
void CheckHeadsFirstLayout(DType dtype, const RopeSpec& spec, const ExecutionOptions& options) {
  constexpr int64_t kB = 2, kT = 37, kHq = 4, kHk = 2, kDim = 36;
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
  ASSERT_NE(q_ref, q_tokens);  // Rotated.

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
  ApplyRope(spec, f, Positions::Integers(p), options, q2, &k2);
  EXPECT_EQ(q_out, to_heads_first(q_ref, kHq));
  EXPECT_EQ(k_out, to_heads_first(k_ref, kHk));

  // In place.
  std::vector<T> q_in_place = q_first;
  q2.in = BytesOf(q_in_place);
  q2.out = MutableBytesOf(q_in_place);
  ApplyRope(spec, f, Positions::Integers(p), options, q2, nullptr);
  EXPECT_EQ(q_in_place, q_out);
}

// [B, H, T, D] and [B, T, H, D] against [T, H, D] token rows: the same bytes
// after the transpose, for every storage type and pair layout, with GQA key
// heads. T = 37 spans whole tiles of head-major tokens and a partial one;
// with three threads and a grain of one element, chunks start and end
// inside a sequence.
template <typename T>
void CheckHeadsFirstLayout(DType dtype) {
  for (RopeLayout layout : {RopeLayout::kHalf, RopeLayout::kInterleaved}) {
    // Partial, the last channels passing through: any width, and a width
    // with a fixed trip count (rd = 32).
    for (int64_t rotary_dim : {8, 32}) {
      for (int threads : {1, 3}) {
        SCOPED_TRACE(::testing::Message() << "interleaved " << (layout == RopeLayout::kInterleaved)
                                          << ", rd " << rotary_dim << ", threads " << threads);
        RopeSpec spec;
        spec.layout = layout;
        spec.rotary_dim = rotary_dim;
        CheckHeadsFirstLayout<T>(dtype, spec,
                                 ExecutionOptions{.max_threads = threads, .grain_elements = 1});
      }
    }
  }
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
