#include "core/relative/alibi.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/quad_reference.h"
#include "tests/status_matchers.h"

extern "C" __float128 exp2q(__float128);
extern "C" __float128 fabsq(__float128);

namespace phasor {
namespace {

std::vector<float> Slopes(int64_t n) {
  std::vector<float> s(n);
  AlibiSlopes(n, absl::MakeSpan(s));
  return s;
}

// Press et al.: 8 heads give 1/2, 1/4, ..., 1/256.
TEST(AlibiTest, PowerOfTwoSlopesAreGeometric) {
  const std::vector<float> s = Slopes(8);
  for (int h = 0; h < 8; ++h) EXPECT_FLOAT_EQ(s[h], std::ldexp(1.0f, -(h + 1)));
  const std::vector<float> s16 = Slopes(16);
  for (int h = 0; h < 16; ++h) EXPECT_FLOAT_EQ(s16[h], std::exp2(-0.5f * (h + 1)));
  EXPECT_FLOAT_EQ(Slopes(1)[0], 1.0f / 256);
}

// 12 heads: the 8-head slopes, then every other slope of the 16-head ladder
// 2^(-0.5(h+1)): 2^(-0.5), 2^(-1.5), 2^(-2.5), 2^(-3.5).
TEST(AlibiTest, NonPowerOfTwoInterleaves) {
  const std::vector<float> s = Slopes(12);
  for (int h = 0; h < 8; ++h) EXPECT_FLOAT_EQ(s[h], std::ldexp(1.0f, -(h + 1)));
  for (int h = 0; h < 4; ++h) EXPECT_FLOAT_EQ(s[8 + h], std::exp2(-0.5f - 1.0f * h));
  const std::vector<float> s3 = Slopes(3);
  EXPECT_FLOAT_EQ(s3[0], std::exp2(-4.0f));  // p = 2: 2^-4, 2^-8
  EXPECT_FLOAT_EQ(s3[1], std::exp2(-8.0f));
  EXPECT_FLOAT_EQ(s3[2], std::exp2(-2.0f));  // 4-head ladder, index 0
}

TEST(AlibiTest, CausalBiasIsLinearInDistanceAndMasksTheFuture) {
  const std::vector<float> s = Slopes(2);
  const int64_t q = 3, k = 5;
  std::vector<float> bias(AlibiBiasSize(2, q, k));
  AlibiBias(s, q, k, /*causal=*/true, {}, absl::MakeSpan(bias));
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < q; ++i) {
      const int pos = i + (k - q);
      for (int j = 0; j < k; ++j) {
        const float b = bias[(h * q + i) * k + j];
        if (j > pos) {
          EXPECT_TRUE(std::isinf(b) && b < 0);
        } else {
          EXPECT_FLOAT_EQ(b, -s[h] * (pos - j));
        }
      }
    }
  }
  std::vector<float> sym(bias.size());
  AlibiBias(s, q, k, /*causal=*/false, {}, absl::MakeSpan(sym));
  EXPECT_FLOAT_EQ(sym[(0 * q + 0) * k + 4], -s[0] * 2);  // pos 2, key 4
  EXPECT_FLOAT_EQ(sym[(1 * q + 2) * k + 0], -s[1] * 4);
}

TEST(AlibiTest, OneThreadEqualsManyThreadsBytewise) {
  const std::vector<float> s = Slopes(12);
  std::vector<float> a(AlibiBiasSize(12, 64, 96)), b(a.size());
  AlibiBias(s, 64, 96, true, {.max_threads = 1}, absl::MakeSpan(a));
  AlibiBias(s, 64, 96, true, {.max_threads = 3, .grain_elements = 500}, absl::MakeSpan(b));
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
}

TEST(AlibiTest, ValidationNamesTheField) {
  using absl::StatusCode;
  EXPECT_THAT(ValidateAlibi(0, 0, 0), IsFieldError(StatusCode::kInvalidArgument, "num_heads"));
  EXPECT_THAT(ValidateAlibi(4, -1, 3), IsFieldError(StatusCode::kInvalidArgument, "q_len"));
  EXPECT_THAT(ValidateAlibi(4, 1, -3), IsFieldError(StatusCode::kInvalidArgument, "k_len"));
  EXPECT_THAT(ValidateAlibi(4, 5, 3), IsFieldError(StatusCode::kInvalidArgument, "q_len"));
  PHASOR_ASSERT_OK(ValidateAlibi(4, 3, 5));
  PHASOR_ASSERT_OK(ValidateAlibi(4, 0, 0));  // Slopes only.
}

TEST(AlibiTest, OneLengthWithoutTheOtherNamesTheMissingField) {
  using ::absl::StatusCode;
  const absl::Status no_k_len = ValidateAlibi(4, 3, 0);
  EXPECT_THAT(no_k_len, IsFieldError(StatusCode::kInvalidArgument, "k_len"));
  EXPECT_THAT(std::string(no_k_len.message()), ::testing::HasSubstr("is required"));
  const absl::Status no_q_len = ValidateAlibi(4, 0, 5);
  EXPECT_THAT(no_q_len, IsFieldError(StatusCode::kInvalidArgument, "q_len"));
  EXPECT_THAT(std::string(no_q_len.message()), ::testing::HasSubstr("is required"));
}

// Float64 outputs: correctly rounded slopes, one product per bias.
namespace float64_output {

using ::phasor::testing::Quad;
using ::phasor::testing::ReduceTwoPi;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

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

}  // namespace float64_output

}  // namespace
}  // namespace phasor
