// -----------------------------------------------------------------------------
// File: core/relative/alibi.h
// -----------------------------------------------------------------------------
//
// ALiBi: attention with linear biases (Press, Smith & Lewis, "Train Short,
// Test Long", ICLR 2022, §3 and their reference get_slopes).
//
// Slopes: for n heads, n a power of two, m_h = 2^(−8(h+1)/n), h = 0..n−1.
// Otherwise, with p = 2^⌊log2 n⌋: the p slopes for p heads, followed by the
// even-indexed slopes for 2p heads (0, 2, 4, ...), the first n − p of them.
//
// Bias [H, q_len, k_len]: query row i sits at absolute position
// i + (k_len − q_len) (the queries are the last q_len keys, as in decoding
// with a KV cache). bias[h, i, j] = −m_h · (pos_i − j) for j ≤ pos_i; for
// j > pos_i it is −∞ when causal, and −m_h · (j − pos_i) otherwise (the
// symmetric form used by bidirectional encoders).
//
// Thread-safety: pure functions.
//
// Example:
//
//   std::vector<float> slopes(num_heads);
//   AlibiSlopes(num_heads, absl::MakeSpan(slopes));
//   std::vector<float> bias(AlibiBiasSize(num_heads, q_len, k_len));
//   AlibiBias(slopes, q_len, k_len, /*causal=*/true, ExecutionOptions(),
//             absl::MakeSpan(bias));
#ifndef PHASOR_CORE_RELATIVE_ALIBI_H_
#define PHASOR_CORE_RELATIVE_ALIBI_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/adapters/parallel.h"

namespace phasor {

// num_heads > 0; q_len and k_len both 0 (slopes only) or both > 0 with
// q_len <= k_len. One length without the other is an error naming the
// missing one: the bias needs both, and answering with slopes alone would
// drop what the caller asked for.
absl::Status ValidateAlibi(int64_t num_heads, int64_t q_len, int64_t k_len);

// REQUIRES: slopes.size() == num_heads > 0.
// The double overload rounds each slope once from a long-double evaluation.
void AlibiSlopes(int64_t num_heads, absl::Span<float> slopes);
void AlibiSlopes(int64_t num_heads, absl::Span<double> slopes);

inline int64_t AlibiBiasSize(int64_t num_heads, int64_t q_len, int64_t k_len) {
  return num_heads * q_len * k_len;
}

// REQUIRES: ValidateAlibi(...).ok(); bias.size() == AlibiBiasSize(...).
void AlibiBias(absl::Span<const float> slopes, int64_t q_len, int64_t k_len,
               bool causal, const ExecutionOptions& options,
               absl::Span<float> bias);
void AlibiBias(absl::Span<const double> slopes, int64_t q_len, int64_t k_len,
               bool causal, const ExecutionOptions& options,
               absl::Span<double> bias);

}  // namespace phasor

#endif  // PHASOR_CORE_RELATIVE_ALIBI_H_
