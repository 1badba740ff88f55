#include "core/dtype.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"

namespace phasor {
namespace {

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(DTypeSize(DType::kFloat32), 4u);
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kInt64), 8u);
  EXPECT_EQ(DTypeSize(DType::kBool), 1u);
  EXPECT_EQ(DTypeName(DType::kFloat16), "float16");
}

// Every one of the 65536 half bit patterns widens and narrows back to itself
// (NaNs stay NaN).
TEST(DTypeTest, HalfRoundTripsEveryBitPattern) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const float f = HalfToFloat(static_cast<uint16_t>(bits));
    const bool is_nan = (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0;
    if (is_nan) {
      EXPECT_TRUE(std::isnan(f));
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f))));
    } else {
      EXPECT_EQ(FloatToHalf(f), bits) << bits;
    }
  }
}

TEST(DTypeTest, HalfKnownValuesAndRounding) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);          // max half
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);          // rounds to inf
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // min subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: 0
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -26)), 0x0001);  // 0.75 ulp: up
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_FLOAT_EQ(HalfToFloat(0x3555), 0.333251953125f);
}

TEST(DTypeTest, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: ties to even.
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::infinity()), 0x7f80);
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const float f = BFloat16ToFloat(static_cast<uint16_t>(bits));
    if (!std::isnan(f)) {
      EXPECT_EQ(FloatToBFloat16(f), bits);
    }
  }
}

}  // namespace
}  // namespace phasor
