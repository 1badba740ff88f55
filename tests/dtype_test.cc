#include "core/adapters/dtype.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/hwy_targets.h"

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

// DoublesToFloats gives static_cast's bits on every SIMD target the binary
// holds: specials (±0, ±Inf, NaNs with payloads, overflow past FLT_MAX,
// results that are float subnormals or round to zero, ties), then random
// bit patterns, at lengths that leave every tail size.
TEST(DTypeTest, DoublesToFloatsMatchesTheScalarConversionOnEveryTarget) {
  std::vector<double> in = {0.0, -0.0, 1.0, -1.0, 0.1,
      std::numeric_limits<double>::infinity(),
      -std::numeric_limits<double>::infinity(),
      std::numeric_limits<double>::quiet_NaN(),
      -std::numeric_limits<double>::quiet_NaN(),
      std::numeric_limits<double>::signaling_NaN(),
      std::numeric_limits<double>::max(),
      -std::numeric_limits<double>::max(),
      3.4028235677973366e38,   // Rounds to FLT_MAX.
      3.4028235677973370e38,   // Past the last float: Inf.
      1e-40, -1e-45, 1e-46, 7e-46,  // Float subnormals and the rounding to 0.
      std::numeric_limits<double>::denorm_min(),
      1.0 + 0x1p-24,  // A tie: rounds to even (1).
      1.0 + 3 * 0x1p-24,  // A tie: rounds to even (1 + 2^-22).
      16777217.0};
  std::mt19937_64 rng(5);
  for (int i = 0; i < 4000; ++i) {
    const uint64_t bits = rng();
    double v;
    std::memcpy(&v, &bits, sizeof(v));
    in.push_back(v);
    in.push_back(std::ldexp(static_cast<double>(rng() >> 11), -53 - (i % 200)));
  }
  OnEveryTarget([&](const char* target) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{7}, size_t{9},
                         size_t{17}, in.size()}) {
      std::vector<float> out(count + 1, 42.0f);
      DoublesToFloats(absl::MakeConstSpan(in.data(), count), out.data());
      for (size_t i = 0; i < count; ++i) {
        const float expected = static_cast<float>(in[i]);
        uint32_t got_bits, expected_bits;
        std::memcpy(&got_bits, &out[i], 4);
        std::memcpy(&expected_bits, &expected, 4);
        ASSERT_EQ(got_bits, expected_bits)
            << target << " count " << count << " value " << i
            << ": " << in[i];
      }
      EXPECT_EQ(out[count], 42.0f) << "wrote past the end";
    }
  });
}

}  // namespace
}  // namespace phasor
