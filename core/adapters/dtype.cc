#include "core/adapters/dtype.h"

#include <cstring>

// DoublesToFloats is compiled once per SIMD target Highway finds, as in
// core/rope/rope_kernels.cc (foreach_target.h re-includes this file; HWY_DYNAMIC_DISPATCH
// picks the best the CPU runs).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/adapters/dtype.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// DemoteTo from double to float rounds as the scalar conversion does on
// SIMD units (vcvtpd2ps under the default rounding mode). Highway's scalar
// and emulated targets clamp out-of-range values to ±FLT_MAX instead of
// rounding them to ±Inf, so those convert one value at a time.
void DoublesToFloatsKernel(const double* HWY_RESTRICT in, size_t count,
                           float* HWY_RESTRICT out) {
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<float>(in[i]);
#else
  const hn::ScalableTag<double> d;
  const hn::Rebind<float, decltype(d)> df;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + lanes <= count; i += lanes) {
    hn::StoreU(hn::DemoteTo(df, hn::LoadU(d, in + i)), df, out + i);
  }
  for (; i < count; ++i) out[i] = static_cast<float>(in[i]);
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace phasor
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace phasor {

HWY_EXPORT(DoublesToFloatsKernel);

void DoublesToFloats(absl::Span<const double> in, float* out) {
  HWY_DYNAMIC_DISPATCH(DoublesToFloatsKernel)(in.data(), in.size(), out);
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kUInt8:
    case DType::kBool:
      return 1;
  }
  return 0;
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat64:
      return "float64";
    case DType::kInt64:
      return "int64";
    case DType::kInt32:
      return "int32";
    case DType::kUInt8:
      return "uint8";
    case DType::kBool:
      return "bool";
  }
  return "unknown";
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;  // +-0
    } else {
      // Subnormal half: normalise into a float32 normal.
      int shift = 0;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        ++shift;
      }
      mantissa &= 0x3ffu;
      bits = sign | (static_cast<uint32_t>(127 - 15 - shift + 1) << 23) |
             (mantissa << 13);
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // Inf or NaN
  } else {
    bits = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

uint16_t FloatToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (abs_bits >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to Inf
  if (abs_bits < 0x38800000u) {
    // Result is subnormal (or zero) in half: value = m * 2^-24.
    if (abs_bits < 0x33000000u) return sign;  // < 2^-25 rounds to 0
    const uint32_t exponent = abs_bits >> 23;
    const uint32_t mantissa = (abs_bits & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24 for this range
    uint32_t half_mantissa = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half_mantissa & 1u))) {
      ++half_mantissa;
    }
    return sign | static_cast<uint16_t>(half_mantissa);
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits.
  uint32_t half = ((abs_bits >> 13) - ((127u - 15u) << 10));
  const uint32_t remainder = abs_bits & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (half & 1u))) ++half;
  return sign | static_cast<uint16_t>(half);
}

}  // namespace phasor
#endif  // HWY_ONCE
