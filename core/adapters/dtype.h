// -----------------------------------------------------------------------------
// File: core/adapters/dtype.h
// -----------------------------------------------------------------------------
//
// Element types of tensors that travel through Phasor, and the conversions
// between the 16-bit float storage formats and float32.
//
// fp16 is IEEE 754 binary16; bf16 is the upper half of an IEEE binary32.
// Narrowing rounds to nearest, ties to even; NaN stays NaN, overflow in fp16
// becomes infinity. All functions are pure and thread-safe.
//
// Example:
//
//   const uint16_t half = FloatToHalf(1.5f);   // 0x3e00
//   const float back = HalfToFloat(half);      // 1.5f
#ifndef PHASOR_CORE_ADAPTERS_DTYPE_H_
#define PHASOR_CORE_ADAPTERS_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace phasor {

enum class DType {
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat64,
  kInt64,
  kInt32,
  kUInt8,
  kBool,
};

// Bytes per element.
size_t DTypeSize(DType dtype);
// Lower-case name as numpy/torch spell it ("float32", "bfloat16", ...).
absl::string_view DTypeName(DType dtype);

// binary16 <-> binary32.
float HalfToFloat(uint16_t bits);
uint16_t FloatToHalf(float value);

// out[i] = static_cast<float>(in[i]) (round to nearest even; a NaN stays a
// quiet NaN), in vectors of the widest unit the CPU has: the same bits as
// the scalar conversion on every target.
void DoublesToFloats(absl::Span<const double> in, float* out);

// bfloat16 <-> binary32.
inline float BFloat16ToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &wide, sizeof(out));
  return out;
}
inline uint16_t FloatToBFloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet and a NaN.
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  // Round to nearest even on the 16 discarded bits.
  const uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

}  // namespace phasor

#endif  // PHASOR_CORE_ADAPTERS_DTYPE_H_
