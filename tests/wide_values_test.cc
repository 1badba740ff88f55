#include "core/temporal/wide_values.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "core/temporal/observations.h"
#include "gtest/gtest.h"
#include "tests/hwy_targets.h"

namespace phasor {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Values of either precision, with or without a mask, as a wide view.
struct Wide {
  std::vector<double> f64;
  std::vector<float> f32;
  std::vector<uint8_t> mask;
  int64_t channels = 0;

  ObservationsView view(bool as_f32, bool with_mask) const {
    ObservationsView v;
    v.layout = ObservationLayout::kWide;
    v.num_channels = channels;
    if (as_f32) {
      v.values.f32 = f32;
    } else {
      v.values.f64 = f64;
    }
    if (with_mask) v.mask = mask;
    return v;
  }
};

Wide RandomWide(int64_t rows, int64_t channels, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> value(-1e6, 1e6);
  Wide w;
  w.channels = channels;
  for (int64_t k = 0; k < rows * channels; ++k) {
    const uint64_t pick = rng() % 10;
    // NaN (not observed without a mask), signed zeros and ordinary values;
    // the mask disagrees with the NaNs now and then.
    const double v = pick < 3 ? kNaN : pick == 3 ? -0.0 : pick == 4 ? 0.0 : value(rng);
    w.f64.push_back(v);
    w.f32.push_back(static_cast<float>(v));
    w.mask.push_back(static_cast<uint8_t>(rng() % 4 != 0 ? (rng() % 3) + 1 : 0));
  }
  return w;
}

uint64_t Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof(b));
  return b;
}

// WriteValuesAndFlags writes what the definition says, bit for bit (signed
// zeros kept), on every target: channel counts around every vector width,
// row strides with room past the 2·C columns (left alone), a first row
// inside the tensor.
TEST(WideValues, ValuesAndFlagsAreTheDefinitionOnEveryTarget) {
  std::mt19937_64 rng(21);
  OnEveryTarget([&](const char* target) {
    for (int64_t channels : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33}) {
      const int64_t rows = 9;
      const Wide w = RandomWide(rows, channels, rng);
      for (bool as_f32 : {false, true}) {
        for (bool with_mask : {false, true}) {
          const ObservationsView obs = w.view(as_f32, with_mask);
          const int64_t begin = 2;
          const int64_t n = 6;
          const int64_t stride = 2 * channels + 3;
          std::vector<double> out(static_cast<size_t>(n * stride), 42.0);
          WriteValuesAndFlags(obs, begin, n, out.data(), stride);
          for (int64_t i = 0; i < n; ++i) {
            for (int64_t c = 0; c < channels; ++c) {
              const int64_t k = (begin + i) * channels + c;
              const double v = as_f32 ? static_cast<double>(w.f32[k]) : w.f64[k];
              const bool observed = with_mask ? w.mask[k] != 0 : !std::isnan(v);
              ASSERT_EQ(Bits(out[i * stride + c]), Bits(observed ? v : 0.0))
                  << target << " C " << channels << " f32 " << as_f32 << " mask "
                  << with_mask << " row " << i << " channel " << c;
              ASSERT_EQ(out[i * stride + channels + c], observed ? 1.0 : 0.0)
                  << target << " C " << channels << " row " << i << " channel " << c;
            }
            for (int64_t j = 2 * channels; j < stride; ++j) {
              ASSERT_EQ(out[i * stride + j], 42.0) << target << " wrote past 2·C";
            }
          }
        }
      }
    }
  });
}

// AnyObservedNonFinite finds one infinity at any position of tensors of
// every tail length, in both precisions; NaN alone is "not observed"
// without a mask and an error where the mask marks it observed.
TEST(WideValues, AnyObservedNonFiniteFindsEveryPosition) {
  OnEveryTarget([&](const char* target) {
    for (int64_t count : {1, 2, 3, 5, 8, 9, 16, 17, 31, 64, 67}) {
      Wide w;
      w.channels = 1;
      w.f64.assign(count, 1.5);
      w.mask.assign(count, 1);
      for (int64_t k = 0; k < count; k += 3) w.f64[k] = kNaN;
      w.f32.assign(w.f64.begin(), w.f64.end());
      // Not observed where NaN: without a mask nothing is wrong, with an
      // all-ones mask the NaNs are.
      EXPECT_FALSE(AnyObservedNonFinite(w.view(false, false))) << target << " " << count;
      EXPECT_FALSE(AnyObservedNonFinite(w.view(true, false))) << target << " " << count;
      EXPECT_TRUE(AnyObservedNonFinite(w.view(false, true))) << target << " " << count;
      for (int64_t k = 0; k < count; k += 3) w.mask[k] = 0;
      EXPECT_FALSE(AnyObservedNonFinite(w.view(false, true))) << target << " " << count;
      for (int64_t at = 0; at < count; ++at) {
        for (double inf : {kInf, -kInf}) {
          Wide bad = w;
          bad.f64[at] = inf;
          bad.f32[at] = static_cast<float>(inf);
          bad.mask[at] = 1;
          EXPECT_TRUE(AnyObservedNonFinite(bad.view(false, false)))
              << target << " count " << count << " at " << at;
          EXPECT_TRUE(AnyObservedNonFinite(bad.view(true, false)))
              << target << " count " << count << " at " << at;
          EXPECT_TRUE(AnyObservedNonFinite(bad.view(false, true)))
              << target << " count " << count << " at " << at;
          bad.mask[at] = 0;  // Masked out: not observed, not an error.
          EXPECT_FALSE(AnyObservedNonFinite(bad.view(true, true)))
              << target << " count " << count << " at " << at;
        }
      }
    }
  });
}

}  // namespace
}  // namespace phasor
