#include "core/relative/alibi.h"

#include <cassert>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace phasor {

absl::Status ValidateAlibi(int64_t num_heads, int64_t q_len, int64_t k_len) {
  if (num_heads <= 0) {
    return InvalidField("num_heads", absl::StrCat("must be > 0, got ", num_heads));
  }
  if (q_len < 0) return InvalidField("q_len", absl::StrCat("must be >= 0, got ", q_len));
  if (k_len < 0) return InvalidField("k_len", absl::StrCat("must be >= 0, got ", k_len));
  // One length alone is a half-sent request, not a request for slopes: name
  // the missing field rather than answer without the bias asked for.
  if (q_len > 0 && k_len == 0) {
    return InvalidField("k_len", absl::StrCat("is required when q_len is set (the bias "
                                              "[num_heads, q_len, k_len] needs k_len >= "
                                              "q_len = ", q_len,
                                              "); leave both 0 for slopes only"));
  }
  if (k_len > 0 && q_len == 0) {
    return InvalidField("q_len", absl::StrCat("is required when k_len is set (the bias "
                                              "[num_heads, q_len, k_len] needs q_len in "
                                              "[1, k_len = ", k_len,
                                              "]); leave both 0 for slopes only"));
  }
  if (q_len > k_len) {
    return InvalidField("q_len", absl::StrCat("must be <= k_len (", k_len, "), got ", q_len));
  }
  return absl::OkStatus();
}

namespace {

// Slope of head h among n heads, n a power of two: 2^(−8(h+1)/n).
double PowerOfTwoSlope(int64_t h, int64_t n) {
  return std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(n));
}

// Slopes of `num_heads` heads, each `slope_of(h, n)` rounded to T.
template <typename T, typename SlopeOf>
void FillSlopes(int64_t num_heads, SlopeOf slope_of, absl::Span<T> slopes) {
  assert(num_heads > 0 && static_cast<int64_t>(slopes.size()) == num_heads);
  int64_t p = 1;
  while (p * 2 <= num_heads) p *= 2;
  for (int64_t h = 0; h < p; ++h) {
    slopes[h] = static_cast<T>(slope_of(h, p));
  }
  // Press et al.'s interleave: every other slope of the 2p-head sequence.
  for (int64_t h = p; h < num_heads; ++h) {
    slopes[h] = static_cast<T>(slope_of(2 * (h - p), 2 * p));
  }
}

// The bias in T: −m_h·distance, one rounding of the exact product (the
// distance is an integer below 2^53 under any server limit).
template <typename T>
void FillBias(absl::Span<const T> slopes, int64_t q_len, int64_t k_len,
              bool causal, const ExecutionOptions& options, absl::Span<T> bias) {
  const int64_t heads = static_cast<int64_t>(slopes.size());
  assert(static_cast<int64_t>(bias.size()) == AlibiBiasSize(heads, q_len, k_len));
  const int64_t offset = k_len - q_len;
  constexpr T kMasked = -std::numeric_limits<T>::infinity();
  // One item = one (head, query) row of k_len values.
  ParallelFor(options, heads * q_len, k_len, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t h = row / q_len;
      const int64_t pos = row % q_len + offset;
      const T slope = slopes[h];
      T* out = bias.data() + row * k_len;
      for (int64_t j = 0; j < k_len; ++j) {
        const int64_t distance = pos - j;
        if (distance >= 0) {
          out[j] = -slope * static_cast<T>(distance);
        } else {
          out[j] = causal ? kMasked : slope * static_cast<T>(distance);
        }
      }
    }
  });
}

}  // namespace

void AlibiSlopes(int64_t num_heads, absl::Span<float> slopes) {
  FillSlopes(num_heads, PowerOfTwoSlope, slopes);
}

void AlibiSlopes(int64_t num_heads, absl::Span<double> slopes) {
  // 2^(−8(h+1)/n) in long double, rounded once: the correctly rounded double
  // (exact when n divides 8(h+1), as for every power-of-two head count <= 8).
  FillSlopes(
      num_heads,
      [](int64_t h, int64_t n) {
        return std::exp2l(-8.0L * static_cast<long double>(h + 1) /
                          static_cast<long double>(n));
      },
      slopes);
}

void AlibiBias(absl::Span<const float> slopes, int64_t q_len, int64_t k_len,
               bool causal, const ExecutionOptions& options,
               absl::Span<float> bias) {
  FillBias(slopes, q_len, k_len, causal, options, bias);
}

void AlibiBias(absl::Span<const double> slopes, int64_t q_len, int64_t k_len,
               bool causal, const ExecutionOptions& options,
               absl::Span<double> bias) {
  FillBias(slopes, q_len, k_len, causal, options, bias);
}

}  // namespace phasor
