// -----------------------------------------------------------------------------
// File: core/relative/relative_bias.h
// -----------------------------------------------------------------------------
//
// Relative position biases: a learned, gap-dependent term added to the
// attention score (Shaw, Uszkoreit & Vaswani, "Self-Attention with Relative
// Position Representations", NAACL 2018), in four forms. With q the query's
// position and k the key's, relative = k − q (the "memory minus context"
// of HF T5 and Mesh TensorFlow, Shaw's j − i):
//
// T5 buckets (Raffel et al. 2020; HF transformers
// models/t5/modeling_t5.py T5Attention._relative_position_bucket and Mesh
// TensorFlow transformer/transformer_layers.py _relative_position_bucket,
// which agree). With N = num_buckets:
//   bidirectional: N' = N // 2, offset = N' when relative > 0 else 0,
//                  n = |relative|
//   causal:        N' = N, offset = 0, n = max(−relative, 0)
//   max_exact = N' // 2
//   bucket = offset + n                                        if n < max_exact
//          = offset + min(N' − 1, max_exact + trunc(
//              log(float(n) / max_exact) / log(max_distance / max_exact)
//              · (N' − max_exact)))                            otherwise
// evaluated as both references do: float32 n, float32 division and log,
// the divisor log(max_distance / max_exact) computed in double (Python's
// math.log) and rounded to float32, a float32 product truncated toward
// zero. Reproducing that arithmetic, not the real-number formula, is what
// makes the ids those the model was trained with: in real numbers
// n = 16 with (N' = 16, max_distance = 128) sits exactly on a bucket edge.
// Unlike the references, relative is the exact difference (no int64
// wrap-around) for every pair of int64 positions.
//
// Shaw: index = clip(relative, −K, K) + K into a table of 2K + 1 rows
// (tensor2tensor common_attention._generate_relative_positions_matrix).
//
// Time buckets: T5's bucketing over real time. With positions as int64
// nanoseconds and g = |τ_k − τ_q| in seconds, E = exact_seconds and
// M = max_seconds (E < M), the same halves (direction by the sign of
// τ_k − τ_q) and max_exact = N' // 2:
//   bucket = offset + floor(max_exact · g / E)                    if g < E
//          = offset + min(N' − 1, max_exact + floor(
//              ln(g / E) / ln(M / E) · (N' − max_exact)))         otherwise
// in double. The exact buckets are E / max_exact seconds wide (T5's unit);
// with E = max_exact·u and M = max_distance·u this is T5's formula over the
// gap measured in units u.
//
// Time ALiBi (Press et al. 2022, over real time instead of row distance):
//   bias[h, i, j] = −slope_h · |τ_k − τ_q| / unit_seconds
// and −inf for keys after the query (τ_k > τ_q) when causal.
//
// Bias tensors are [num_heads, q_len, k_len]: bias[h, i, j] =
// table[index(q_i, k_j), h] for a learned table [num_buckets, num_heads]
// (HF's relative_attention_bias.weight, permuted as HF's compute_bias does).
//
// Every value depends only on the pair's difference, so when queries and
// keys are arithmetic sequences with one step the kernels evaluate each
// distinct difference once and copy rows; otherwise they evaluate each pair.
// Both give the same bytes (tests check).
//
// Thread-safety: pure functions; a RelativeBucketing is a value.
//
// Example:
//
//   RelativeBucketing bucketing;  // T5's: 32 buckets, max distance 128.
//   PHASOR_RETURN_IF_ERROR(ValidateBucketing(bucketing, "spec.bucketing"));
//   const int32_t bucket = BucketOf(bucketing, /*query=*/5, /*key=*/2);
#ifndef PHASOR_CORE_RELATIVE_RELATIVE_BIAS_H_
#define PHASOR_CORE_RELATIVE_RELATIVE_BIAS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/adapters/dtype.h"
#include "core/adapters/parallel.h"

namespace phasor {

struct T5BucketSpec {
  // N; the table has N rows. HF's default relative_attention_num_buckets.
  int64_t num_buckets = 32;
  // Distances at or beyond it share the last bucket of their half
  // (HF relative_attention_max_distance).
  int64_t max_distance = 128;
  // Encoder self-attention (true) or decoder/causal (false).
  bool bidirectional = true;
};

struct TimeBucketSpec {
  int64_t num_buckets = 32;
  // Gaps below it get linear (exact) buckets, E / max_exact seconds wide.
  double exact_seconds = 0;
  // Gaps at or beyond it share the last bucket of their half.
  double max_seconds = 0;
  bool bidirectional = true;
};

struct TimeAlibiSpec {
  // Gap unit: the bias falls by slope_h per unit_seconds of elapsed time.
  double unit_seconds = 1;
  bool causal = false;
};

// Which index a (query, key) pair maps to.
struct RelativeBucketing {
  enum class Kind { kT5, kShaw, kTimeBuckets };
  Kind kind = Kind::kT5;
  T5BucketSpec t5;
  // Shaw's K >= 0: relative distances clipped to [−K, K].
  int64_t shaw_max_relative_position = 0;
  TimeBucketSpec time;

  // Rows the learned table needs: N, or 2K + 1 for Shaw.
  int64_t NumBuckets() const;
};

// Checks the spec; errors name `prefix`.field (e.g. "spec.t5.num_buckets").
// T5 and time buckets need N' >= 2 (so max_exact >= 1; N >= 4 when
// bidirectional) and N <= 2^30; T5 needs max_distance > max_exact (HF would
// divide by log 1 = 0, or take a log of a ratio below 1); time buckets need
// 0 < exact_seconds < max_seconds, both finite; Shaw needs 0 <= K <= 2^29.
absl::Status ValidateBucketing(const RelativeBucketing& bucketing,
                               absl::string_view prefix);
absl::Status ValidateTimeAlibi(const TimeAlibiSpec& spec, absl::string_view prefix);

// The bucket of one pair. Exact for all int64 inputs (the difference is
// taken without overflow).
// REQUIRES: the spec passes validation.
int32_t T5Bucket(const T5BucketSpec& spec, int64_t query, int64_t key);
int32_t ShawIndex(int64_t max_relative_position, int64_t query, int64_t key);
int32_t TimeBucket(const TimeBucketSpec& spec, int64_t query_ns, int64_t key_ns);
int32_t BucketOf(const RelativeBucketing& bucketing, int64_t query, int64_t key);

// |key − query| as an exact unsigned magnitude, and whether key > query.
uint64_t AbsoluteDifference(int64_t query, int64_t key);

// ids[i, j] = BucketOf(query[i], key[j]), [q_len, k_len] row-major.
// REQUIRES: ids.size() == query.size() · key.size().
void ComputeBucketIds(const RelativeBucketing& bucketing,
                      absl::Span<const int64_t> query,
                      absl::Span<const int64_t> key,
                      const ExecutionOptions& options, absl::Span<int32_t> ids);

// bias[h, i, j] = table[BucketOf(query[i], key[j]) · num_heads + h], the
// table [NumBuckets(), num_heads] widened to double, rounded once to the
// output type. The 16-bit overload writes `dtype` (kFloat16 or kBFloat16)
// bits, rounded once from the float32 value (as StoreFloats does).
// REQUIRES: table.size() == NumBuckets() · num_heads, num_heads > 0,
//           bias.size() == num_heads · query.size() · key.size().
void ComputeRelativeBias(const RelativeBucketing& bucketing,
                         absl::Span<const int64_t> query,
                         absl::Span<const int64_t> key,
                         absl::Span<const double> table, int64_t num_heads,
                         const ExecutionOptions& options, absl::Span<float> bias);
void ComputeRelativeBias(const RelativeBucketing& bucketing,
                         absl::Span<const int64_t> query,
                         absl::Span<const int64_t> key,
                         absl::Span<const double> table, int64_t num_heads,
                         const ExecutionOptions& options, absl::Span<double> bias);
void ComputeRelativeBias(const RelativeBucketing& bucketing,
                         absl::Span<const int64_t> query,
                         absl::Span<const int64_t> key,
                         absl::Span<const double> table, int64_t num_heads,
                         DType dtype, const ExecutionOptions& options,
                         absl::Span<uint16_t> bias);

// Time ALiBi bias [slopes.size(), q_len, k_len] over int64 ns timestamps:
// −slope_h · gap computed in double (gap = |Δns| · 1e-9 / unit_seconds) and
// rounded once to the output type (the 16-bit one via float32).
// REQUIRES: ValidateTimeAlibi(spec).ok(); sizes as ComputeRelativeBias.
void ComputeTimeAlibiBias(const TimeAlibiSpec& spec, absl::Span<const double> slopes,
                          absl::Span<const int64_t> query_ns,
                          absl::Span<const int64_t> key_ns,
                          const ExecutionOptions& options, absl::Span<float> bias);
void ComputeTimeAlibiBias(const TimeAlibiSpec& spec, absl::Span<const double> slopes,
                          absl::Span<const int64_t> query_ns,
                          absl::Span<const int64_t> key_ns,
                          const ExecutionOptions& options, absl::Span<double> bias);
void ComputeTimeAlibiBias(const TimeAlibiSpec& spec, absl::Span<const double> slopes,
                          absl::Span<const int64_t> query_ns,
                          absl::Span<const int64_t> key_ns, DType dtype,
                          const ExecutionOptions& options, absl::Span<uint16_t> bias);

// True, with *step = s, when `values` is an arithmetic sequence v_0 + i·s
// (no overflow between neighbours); fewer than two values give `fallback`.
bool ArithmeticStep(absl::Span<const int64_t> values, int64_t fallback, int64_t* step);

}  // namespace phasor

#endif  // PHASOR_CORE_RELATIVE_RELATIVE_BIAS_H_
