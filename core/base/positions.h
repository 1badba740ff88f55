// -----------------------------------------------------------------------------
// File: core/base/positions.h
// -----------------------------------------------------------------------------
//
// Positions: what the positional encodings are evaluated at.
//
// A position is either an exact integer (token index) or a real value
// (continuous position, e.g. time in some unit). Integers stay int64 into the
// kernels: the sinusoid and RoPE reduce p·θ exactly for every int64
// (core/math/exact_angle.h); a double would round 2^53 + 1 to 2^53 (and float32
// 2^24 + 1 to 2^24).
//
// A Positions object does not own its storage; the caller keeps the span alive.
//
// Thread-safety: a Positions is an immutable view.
//
// Example:
//
//   const std::vector<int64_t> tokens = {0, 1, 2, 3};
//   const Positions positions = Positions::Integers(tokens);
#ifndef PHASOR_CORE_BASE_POSITIONS_H_
#define PHASOR_CORE_BASE_POSITIONS_H_

#include <cstdint>

#include "absl/types/span.h"

namespace phasor {

class Positions final {
 public:
  static Positions Integers(absl::Span<const int64_t> values) {
    return Positions(values, {});
  }
  static Positions Reals(absl::Span<const double> values) {
    return Positions({}, values);
  }

  bool is_real() const { return is_real_; }
  int64_t size() const {
    return is_real_ ? static_cast<int64_t>(reals_.size())
                    : static_cast<int64_t>(integers_.size());
  }
  absl::Span<const int64_t> integers() const { return integers_; }
  absl::Span<const double> reals() const { return reals_; }

  // Position i as a double; exact for integers up to 2^53 in magnitude (the
  // angle kernels use integers() directly).
  // REQUIRES: 0 <= i < size().
  double at(int64_t i) const {
    return is_real_ ? reals_[i] : static_cast<double>(integers_[i]);
  }

 private:
  Positions(absl::Span<const int64_t> integers, absl::Span<const double> reals)
      : integers_(integers), reals_(reals), is_real_(integers.empty() && !reals.empty()) {}

  absl::Span<const int64_t> integers_;
  absl::Span<const double> reals_;
  bool is_real_;
};

}  // namespace phasor

#endif  // PHASOR_CORE_BASE_POSITIONS_H_
