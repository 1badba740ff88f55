// -----------------------------------------------------------------------------
// File: core/rope/storage_codecs-inl.h
// -----------------------------------------------------------------------------
//
// Per-target (Highway) storage codecs of RoPE's operands: load N elements of
// storage as a vector of the arithmetic type (float32 for float32 and the
// 16-bit formats, double for float64), and store one back, plainly or with
// non-temporal stores. The 16-bit formats are widened in registers and
// narrowed once, round to nearest even, with the bits of the scalar
// conversions of core/adapters/dtype.h (HalfToFloat/FloatToHalf,
// BFloat16ToFloat/FloatToBFloat16): a NaN narrows to the quiet NaN of its
// sign (0x7e00, or the bfloat16 NaN with the quiet bit set), ±Inf and
// overflow to ±Inf, subnormals exactly. Pointers need no alignment.
//
// Include inside core/rope/rope_kernels.cc's per-target code, after
// "hwy/highway.h"; the codecs are in phasor::HWY_NAMESPACE.
//
// Thread-safety: stateless.
//
// Example (in a per-target kernel):
//
//   const hn::ScalableTag<float> d;
//   const auto x = BFloat16Codec</*kStream=*/false>::Load(d, in);
//   BFloat16Codec</*kStream=*/false>::Store(d, x, out);

// Per-target include guard (still compiled once per target).
#if defined(PHASOR_CORE_ROPE_STORAGE_CODECS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PHASOR_CORE_ROPE_STORAGE_CODECS_INL_H_
#undef PHASOR_CORE_ROPE_STORAGE_CODECS_INL_H_
#else
#define PHASOR_CORE_ROPE_STORAGE_CODECS_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace phasor {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// A vector's store to the output: with kStream, non-temporal where `p` is
// aligned to the vector (whole vectors of 16 bytes or more), else plain.
template <bool kStream, class D>
HWY_INLINE void Put(hn::Vec<D> v, D d, hn::TFromD<D>* HWY_RESTRICT p) {
  if constexpr (kStream && hn::MaxLanes(D()) * sizeof(hn::TFromD<D>) >= 16) {
    if ((reinterpret_cast<uintptr_t>(p) & (hn::Lanes(d) * sizeof(hn::TFromD<D>) - 1)) == 0) {
      hn::Stream(v, d, p);
      return;
    }
  }
  hn::StoreU(v, d, p);
}

// float32 and float64: the storage is the arithmetic type.
template <typename T, bool kStream>
struct PlainCodec {
  using Elem = T;
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const T* HWY_RESTRICT p) {
    return hn::LoadU(d, p);
  }
  template <class D>
  static HWY_INLINE void Store(D d, hn::Vec<D> v, T* HWY_RESTRICT p) {
    Put<kStream>(v, d, p);
  }
};

// bfloat16 is the top half of a float32: widening is a shift; narrowing
// rounds the low 16 bits to nearest even, (bits + 0x7fff + lsb) >> 16, and
// keeps a NaN's sign and top payload bits with the quiet bit set.
template <bool kStream>
struct BFloat16Codec {
  using Elem = uint16_t;
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const uint16_t* HWY_RESTRICT p) {
    const hn::Rebind<uint16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, p))));
  }
  template <class D>
  static HWY_INLINE void Store(D /*d*/, hn::Vec<D> v, uint16_t* HWY_RESTRICT p) {
    const hn::Rebind<uint16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const auto bits = hn::BitCast(du, v);
    const auto top = hn::ShiftRight<16>(bits);
    const auto lsb = hn::And(top, hn::Set(du, 1u));
    const auto rounded = hn::ShiftRight<16>(hn::Add(bits, hn::Add(hn::Set(du, 0x7fffu), lsb)));
    const auto quiet_nan = hn::Or(top, hn::Set(du, 0x0040u));
    const auto narrow = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet_nan, rounded);
    // Every lane is <= 0xffff, so the saturating narrow is exact.
    Put<kStream>(hn::DemoteTo(d16, hn::BitCast(di, narrow)), d16, p);
  }
};

// IEEE binary16. x86 targets with F16C (AVX2 and up) convert in hardware
// (vcvtph2ps / vcvtps2ph, round to nearest even); a NaN is replaced by the
// quiet NaN of its sign first, so it narrows to sign | 0x7e00 as
// FloatToHalf does. Other targets use the integer formulation below (Highway
// 1.0.3's portable float16 conversions truncate, so they are not used).
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
template <bool kStream>
struct Float16Codec {
  using Elem = uint16_t;
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const uint16_t* HWY_RESTRICT p) {
    const hn::Rebind<hwy::float16_t, D> d16;
    return hn::PromoteTo(d, hn::LoadU(d16, reinterpret_cast<const hwy::float16_t*>(p)));
  }
  template <class D>
  static HWY_INLINE void Store(D d, hn::Vec<D> v, uint16_t* HWY_RESTRICT p) {
    const hn::Rebind<hwy::float16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    const auto quiet_nan = hn::CopySign(hn::BitCast(d, hn::Set(du, 0x7fc00000u)), v);
    const auto canonical = hn::IfThenElse(hn::IsNaN(v), quiet_nan, v);
    Put<kStream>(hn::DemoteTo(d16, canonical), d16, reinterpret_cast<hwy::float16_t*>(p));
  }
};
#else
template <bool kStream>
struct Float16Codec {
  using Elem = uint16_t;
  // Exponent and mantissa moved into float32 position and rebiased by
  // 127 − 15; Inf/NaN (exponent 31) rebiased again to 255; zero and
  // subnormals (exponent 0) formed as (2^-14 + m·2^-24) − 2^-14, exact.
  template <class D>
  static HWY_INLINE hn::Vec<D> Load(D d, const uint16_t* HWY_RESTRICT p) {
    const hn::Rebind<uint16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    const auto h = hn::PromoteTo(du, hn::LoadU(d16, p));
    const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
    const auto shifted = hn::ShiftLeft<13>(hn::And(h, hn::Set(du, 0x7fffu)));
    const auto exponent = hn::And(shifted, hn::Set(du, 0x0f800000u));
    const auto rebias = hn::Set(du, (127u - 15u) << 23);
    const auto normal = hn::Add(shifted, rebias);
    const auto special = hn::Add(normal, rebias);  // Exponent 31 -> 255.
    const auto min_normal = hn::BitCast(d, hn::Set(du, 113u << 23));  // 2^-14
    const auto small = hn::BitCast(
        du, hn::Sub(hn::BitCast(d, hn::Add(normal, hn::Set(du, 1u << 23))), min_normal));
    auto bits = hn::IfThenElse(hn::Eq(exponent, hn::Set(du, 0x0f800000u)), special, normal);
    bits = hn::IfThenElse(hn::Eq(exponent, hn::Zero(du)), small, bits);
    return hn::BitCast(d, hn::Or(bits, sign));
  }
  // |x| < 2^-14 (a subnormal or zero half): adding 0.5 puts the half's last
  // bit (2^-24) at float's last place, so the float addition rounds to
  // nearest even there. Normal: rebias and round the 13 dropped bits to
  // nearest even. |x| >= 65520 overflows to Inf; NaN gives 0x7e00.
  template <class D>
  static HWY_INLINE void Store(D d, hn::Vec<D> v, uint16_t* HWY_RESTRICT p) {
    const hn::Rebind<uint16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const auto bits = hn::BitCast(du, v);
    const auto sign = hn::ShiftRight<16>(hn::And(bits, hn::Set(du, 0x80000000u)));
    const auto magnitude = hn::And(bits, hn::Set(du, 0x7fffffffu));
    const auto odd = hn::And(hn::ShiftRight<13>(magnitude), hn::Set(du, 1u));
    // magnitude − (112 << 23) + 0xfff + odd, modulo 2^32.
    const auto normal = hn::ShiftRight<13>(
        hn::Add(hn::Add(magnitude, hn::Set(du, 0xc8000fffu)), odd));
    const auto half = hn::Set(d, 0.5f);
    const auto small = hn::Sub(
        hn::BitCast(du, hn::Add(hn::BitCast(d, magnitude), half)), hn::BitCast(du, half));
    const auto m = hn::BitCast(di, magnitude);
    auto narrow = hn::IfThenElse(RebindMask(du, hn::Lt(m, hn::Set(di, 0x38800000))),
                                 small, normal);
    narrow = hn::IfThenElse(RebindMask(du, hn::Gt(m, hn::Set(di, 0x477fefff))),
                            hn::Set(du, 0x7c00u), narrow);
    narrow = hn::IfThenElse(RebindMask(du, hn::Gt(m, hn::Set(di, 0x7f800000))),
                            hn::Set(du, 0x7e00u), narrow);
    Put<kStream>(hn::DemoteTo(d16, hn::BitCast(di, hn::Or(narrow, sign))), d16, p);
  }
};
#endif

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace phasor
HWY_AFTER_NAMESPACE();

#endif  // PHASOR_CORE_ROPE_STORAGE_CODECS_INL_H_
