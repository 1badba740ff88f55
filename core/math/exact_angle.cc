#include "core/math/exact_angle.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/types/span.h"
#include "core/math/sincos.h"

namespace phasor {
namespace {

// 1/(2π) to 1280 bits: bit j (weight 2^-j) is bit 64 − (j − 1) % 64 of word
// (j − 1) / 64, most significant first. Covers every finite double θ: the
// fraction of θ/2π needs bits up to weight 2^-(e + 192) for θ = m·2^e, and
// e <= 971 (generated with mpmath at 1500 bits of precision).
constexpr int kInverseTwoPiWords = 20;
constexpr uint64_t kInverseTwoPi[kInverseTwoPiWords] = {
    0x28be60db9391054aULL, 0x7f09d5f47d4d3770ULL, 0x36d8a5664f10e410ULL,
    0x7f9458eaf7aef158ULL, 0x6dc91b8e909374b8ULL, 0x01924bba82746487ULL,
    0x3f877ac72c4a69cfULL, 0xba208d7d4baed121ULL, 0x3a671c09ad17df90ULL,
    0x4e64758e60d4ce7dULL, 0x272117e2ef7e4a0eULL, 0xc7fe25fff7816603ULL,
    0xfbcbc462d6829b47ULL, 0xdb4d9fb3c9f2c26dULL, 0xd3d18fd9a797fa8bULL,
    0x5d49eeb1faf97c5eULL, 0xcf41ce7de294a4baULL, 0x9afed7ec47e35742ULL,
    0x1580cc11bf1edaeaULL, 0xfc33ef0826bd0d87ULL,
};

// Word k of 1/(2π), zero outside the table (k < 0: bits of weight >= 1).
inline uint64_t InverseTwoPiWord(int k) {
  return k >= 0 && k < kInverseTwoPiWords ? kInverseTwoPi[k] : 0;
}

// Phases per kernel call: 64 keeps the scratch on the stack and covers a
// RoPE row of head_dim 128.
constexpr int64_t kRowChunk = 64;

// cos_row[k], sin_row[k] for k < n from phase_of(k) (2^-64 turns), up to
// kRowChunk phases per SinCosOfTurns call.
template <typename PhaseOf>
void CosSinOfPhases(int64_t n, PhaseOf phase_of, double* __restrict cos_row,
                    double* __restrict sin_row) {
  uint64_t turns[kRowChunk];
  for (int64_t k0 = 0; k0 < n; k0 += kRowChunk) {
    const int64_t used = std::min(kRowChunk, n - k0);
    for (int64_t j = 0; j < used; ++j) turns[j] = phase_of(k0 + j);
    SinCosOfTurns(absl::MakeConstSpan(turns, used), sin_row + k0, cos_row + k0);
  }
}

}  // namespace

ExactAngle::ExactAngle(double theta)
    : step_(0),
      theta_(theta),
      turns_per_unit_(static_cast<double>(static_cast<long double>(theta) /
                                          6.283185307179586476925286766559L)) {
  assert(std::isfinite(theta) && theta >= 0.0);
  if (theta == 0.0) return;
  // θ = m·2^e with m < 2^53 an integer, read from the bits (frexp and ldexp
  // are library calls; a request builds one of these per frequency).
  uint64_t bits;
  std::memcpy(&bits, &theta, sizeof(bits));
  const int biased = static_cast<int>(bits >> 52);
  uint64_t mantissa = bits & ((uint64_t{1} << 52) - 1);
  int e = -1074;  // Subnormal: m·2^-1074.
  if (biased != 0) {
    mantissa |= uint64_t{1} << 52;
    e = biased - 1075;
  }
  // W = the 192 bits of 1/(2π) of weights 2^-(e+1) .. 2^-(e+192); bits of
  // weight 2^-e and above make m·2^e·bit an integer (whole turns). Then
  // frac(θ/2π) = (m·W mod 2^192)·2^-192, up to m·2^-192 < 2^-139 for the
  // bits left out.
  // Bit j of 1/(2π) (weight 2^-j) is bit 63 − (j − 1) mod 64 of word
  // floor((j − 1)/64); W starts at j = e + 1, so at word q, bit offset r.
  const int start = e;  // (e + 1) − 1
  const int q = start >= 0 ? start / 64 : -((-start + 63) / 64);
  const int r = start - 64 * q;
  uint64_t words[4];
  for (int t = 0; t < 4; ++t) words[t] = InverseTwoPiWord(q + t);
  auto window = [&](int t) {
    return r == 0 ? words[t] : (words[t] << r) | (words[t + 1] >> (64 - r));
  };
  const uint64_t w0 = window(0);
  const uint64_t w1 = window(1);
  const uint64_t w2 = window(2);
  using u128 = unsigned __int128;
  const u128 low = static_cast<u128>(mantissa) * w2;
  const u128 middle = static_cast<u128>(mantissa) * w1 + (low >> 64);
  const u128 high = static_cast<u128>(mantissa) * w0 + (middle >> 64);
  step_ = (static_cast<u128>(static_cast<uint64_t>(high)) << 64) |
          static_cast<uint64_t>(middle);
}

void ExactAngle::CosSinOfTurns(uint64_t turns, double* cos_out, double* sin_out) {
  SinCosOfTurns(absl::MakeConstSpan(&turns, 1), sin_out, cos_out);
}

void CosSinRow(const ExactAngle* __restrict angles, int64_t n, int64_t position,
               double* __restrict cos_row, double* __restrict sin_row) {
  CosSinOfPhases(
      n, [&](int64_t k) { return angles[k].Turns(position); }, cos_row, sin_row);
}

void CosSinRow(const ExactAngle* __restrict angles, int64_t n, double position,
               double* __restrict cos_row, double* __restrict sin_row) {
  if (!(std::fabs(position) < 0x1p63)) {  // The double product (CosSinReal).
    for (int64_t k = 0; k < n; ++k) {
      angles[k].CosSinReal(position, &cos_row[k], &sin_row[k]);
    }
    return;
  }
  CosSinOfPhases(
      n, [&](int64_t k) { return angles[k].TurnsReal(position); }, cos_row, sin_row);
}

}  // namespace phasor
