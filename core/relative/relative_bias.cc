#include "core/relative/relative_bias.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace phasor {
namespace {

// Tables are indexed by int32 ids; 2^30 rows is far beyond any model (T5
// uses 32, LongT5 32, UL2 32) and keeps every id and N' arithmetic in range.
constexpr int64_t kMaxBuckets = int64_t{1} << 30;
constexpr int64_t kMaxShaw = int64_t{1} << 29;

std::string Field(absl::string_view prefix, absl::string_view name) {
  return absl::StrCat(prefix, ".", name);
}

// N' (the buckets of one half) for a T5-style bucketing.
int64_t HalfBuckets(int64_t num_buckets, bool bidirectional) {
  return bidirectional ? num_buckets / 2 : num_buckets;
}

absl::Status ValidateHalves(int64_t num_buckets, bool bidirectional,
                            absl::string_view prefix) {
  if (num_buckets <= 0 || num_buckets > kMaxBuckets) {
    return InvalidField(Field(prefix, "num_buckets"),
                        absl::StrCat("must be in [", bidirectional ? 4 : 2, ", 2^30], got ",
                                     num_buckets));
  }
  if (HalfBuckets(num_buckets, bidirectional) < 2) {
    return InvalidField(
        Field(prefix, "num_buckets"),
        absl::StrCat("must be >= ", bidirectional ? 4 : 2,
                     (bidirectional ? " when bidirectional" : " when causal"),
                     " (max_exact = N'/2 must be >= 1, or the log branch divides by 0), got ",
                     num_buckets));
  }
  return absl::OkStatus();
}

// Bucket in the half given the log-branch value v >= 0 (real or float32):
// max_exact + trunc(v), capped at N' − 1. Compared before converting, so a
// huge v never reaches an integer conversion.
template <typename F>
int64_t LogBranch(F v, int64_t half, int64_t max_exact) {
  const int64_t cap = half - 1 - max_exact;
  if (!(v < static_cast<F>(cap))) return half - 1;
  return max_exact + static_cast<int64_t>(v);
}

}  // namespace

int64_t RelativeBucketing::NumBuckets() const {
  switch (kind) {
    case Kind::kT5: return t5.num_buckets;
    case Kind::kShaw: return 2 * shaw_max_relative_position + 1;
    case Kind::kTimeBuckets: return time.num_buckets;
  }
  return 0;
}

absl::Status ValidateBucketing(const RelativeBucketing& bucketing,
                               absl::string_view prefix) {
  switch (bucketing.kind) {
    case RelativeBucketing::Kind::kT5: {
      const T5BucketSpec& t5 = bucketing.t5;
      const absl::Status halves = ValidateHalves(t5.num_buckets, t5.bidirectional, prefix);
      if (!halves.ok()) return halves;
      const int64_t max_exact = HalfBuckets(t5.num_buckets, t5.bidirectional) / 2;
      if (t5.max_distance <= max_exact) {
        return InvalidField(
            Field(prefix, "max_distance"),
            absl::StrCat("must be > max_exact = ", max_exact,
                         " (half of the ", t5.bidirectional ? "N/2" : "N",
                         " buckets of one direction), got ", t5.max_distance));
      }
      return absl::OkStatus();
    }
    case RelativeBucketing::Kind::kShaw: {
      const int64_t k = bucketing.shaw_max_relative_position;
      if (k < 0 || k > kMaxShaw) {
        return InvalidField(Field(prefix, "max_relative_position"),
                            absl::StrCat("must be in [0, 2^29], got ", k));
      }
      return absl::OkStatus();
    }
    case RelativeBucketing::Kind::kTimeBuckets: {
      const TimeBucketSpec& time = bucketing.time;
      const absl::Status halves =
          ValidateHalves(time.num_buckets, time.bidirectional, prefix);
      if (!halves.ok()) return halves;
      if (!std::isfinite(time.exact_seconds) || time.exact_seconds <= 0) {
        return InvalidField(Field(prefix, "exact_seconds"),
                            absl::StrCat("must be finite and > 0, got ", time.exact_seconds));
      }
      if (!std::isfinite(time.max_seconds) || !(time.max_seconds > time.exact_seconds)) {
        return InvalidField(Field(prefix, "max_seconds"),
                            absl::StrCat("must be finite and > exact_seconds (",
                                         time.exact_seconds, "), got ", time.max_seconds));
      }
      // ln(M/E) must be a positive normal number for the log branch.
      if (!(std::log(time.max_seconds / time.exact_seconds) > 0)) {
        return InvalidField(Field(prefix, "max_seconds"),
                            "is too close to exact_seconds: ln(max/exact) rounds to 0");
      }
      return absl::OkStatus();
    }
  }
  return InvalidField(prefix, "unknown bucketing");
}

absl::Status ValidateTimeAlibi(const TimeAlibiSpec& spec, absl::string_view prefix) {
  if (!std::isfinite(spec.unit_seconds) || spec.unit_seconds <= 0) {
    return InvalidField(Field(prefix, "unit_seconds"),
                        absl::StrCat("must be finite and > 0, got ", spec.unit_seconds));
  }
  return absl::OkStatus();
}

uint64_t AbsoluteDifference(int64_t query, int64_t key) {
  // Two's-complement subtraction in uint64 is exact modulo 2^64, and the
  // true magnitude is below 2^64.
  const uint64_t q = static_cast<uint64_t>(query);
  const uint64_t k = static_cast<uint64_t>(key);
  return key >= query ? k - q : q - k;
}

// The two halves of T5's bucketing: bidirectional keys after the query take
// the upper half (HF: relative_buckets += (relative_position > 0) ·
// num_buckets) and use |key − query|; causal bucketing uses
// max(query − key, 0) (HF: relative_position = −min(relative_position, 0)).
struct Directed {
  int64_t offset;
  uint64_t magnitude;
};
Directed Direct(bool bidirectional, int64_t half, int64_t query, int64_t key) {
  if (bidirectional) {
    return {key > query ? half : 0, AbsoluteDifference(query, key)};
  }
  return {0, query > key ? AbsoluteDifference(query, key) : 0};
}

int32_t T5Bucket(const T5BucketSpec& spec, int64_t query, int64_t key) {
  const int64_t half = HalfBuckets(spec.num_buckets, spec.bidirectional);
  const int64_t max_exact = half / 2;
  const auto [offset, n] = Direct(spec.bidirectional, half, query, key);
  if (n < static_cast<uint64_t>(max_exact)) return static_cast<int32_t>(offset + n);
  // The references' float32 steps: log(float(n) / max_exact), divided by
  // float32(math.log(max_distance / max_exact)), times (N' − max_exact).
  const float ratio = static_cast<float>(n) / static_cast<float>(max_exact);
  const float divisor = static_cast<float>(
      std::log(static_cast<double>(spec.max_distance) / static_cast<double>(max_exact)));
  const float v = std::log(ratio) / divisor * static_cast<float>(half - max_exact);
  return static_cast<int32_t>(offset + LogBranch(v, half, max_exact));
}

int32_t ShawIndex(int64_t max_relative_position, int64_t query, int64_t key) {
  const uint64_t magnitude = AbsoluteDifference(query, key);
  const int64_t clipped =
      magnitude >= static_cast<uint64_t>(max_relative_position)
          ? max_relative_position
          : static_cast<int64_t>(magnitude);
  return static_cast<int32_t>(max_relative_position + (key >= query ? clipped : -clipped));
}

int32_t TimeBucket(const TimeBucketSpec& spec, int64_t query_ns, int64_t key_ns) {
  const int64_t half = HalfBuckets(spec.num_buckets, spec.bidirectional);
  const int64_t max_exact = half / 2;
  const auto [offset, gap_ns] = Direct(spec.bidirectional, half, query_ns, key_ns);
  const double gap_seconds = static_cast<double>(gap_ns) * 1e-9;
  if (gap_seconds < spec.exact_seconds) {
    // floor(max_exact·g/E) < max_exact in real numbers; the min guards the
    // last rounding.
    const double linear =
        std::floor(static_cast<double>(max_exact) * gap_seconds / spec.exact_seconds);
    return static_cast<int32_t>(
        offset + std::min<int64_t>(static_cast<int64_t>(linear), max_exact - 1));
  }
  const double v = std::log(gap_seconds / spec.exact_seconds) /
                   std::log(spec.max_seconds / spec.exact_seconds) *
                   static_cast<double>(half - max_exact);
  return static_cast<int32_t>(offset + LogBranch(v, half, max_exact));
}

int32_t BucketOf(const RelativeBucketing& bucketing, int64_t query, int64_t key) {
  switch (bucketing.kind) {
    case RelativeBucketing::Kind::kT5: return T5Bucket(bucketing.t5, query, key);
    case RelativeBucketing::Kind::kShaw:
      return ShawIndex(bucketing.shaw_max_relative_position, query, key);
    case RelativeBucketing::Kind::kTimeBuckets:
      return TimeBucket(bucketing.time, query, key);
  }
  return 0;
}

bool ArithmeticStep(absl::Span<const int64_t> values, int64_t fallback, int64_t* step) {
  if (values.size() < 2) {
    *step = fallback;
    return true;
  }
  int64_t first = 0;
  if (__builtin_sub_overflow(values[1], values[0], &first)) return false;
  for (size_t i = 2; i < values.size(); ++i) {
    int64_t next = 0;
    if (__builtin_sub_overflow(values[i], values[i - 1], &next) || next != first) {
      return false;
    }
  }
  *step = first;
  return true;
}

namespace {

// The layered kernel every bias shares. `pair(q, k)` gives the per-pair
// quantity P (a bucket id, a gap) and `head(h, P)` the output value; both
// depend on the pair only through k − q, which is what lets the fast path
// evaluate each distinct difference once.
//
// Fast path (queries and keys arithmetic with one step s): k_j − q_i =
// (k_0 − q_0) + (j − i)·s, so row (h, i) is the window
// line_h[q_len − 1 − i, q_len − 1 − i + k_len) of the line of values over
// d = j − i ∈ (−q_len, k_len): a copy per row.
// General path: per query row, P for every key once, then each head maps it.
template <typename T, typename P, typename PairFn, typename HeadFn>
void FillHeads(absl::Span<const int64_t> query, absl::Span<const int64_t> key,
               int64_t num_heads, const ExecutionOptions& options, PairFn pair,
               HeadFn head, absl::Span<T> out) {
  const int64_t q_len = static_cast<int64_t>(query.size());
  const int64_t k_len = static_cast<int64_t>(key.size());
  assert(static_cast<int64_t>(out.size()) == num_heads * q_len * k_len);
  if (q_len == 0 || k_len == 0 || num_heads == 0) return;
  int64_t query_step = 0, key_step = 0;
  const bool query_arithmetic = ArithmeticStep(query, 0, &query_step);
  const bool key_arithmetic = ArithmeticStep(key, 0, &key_step);
  const bool one_step = query_arithmetic && key_arithmetic &&
                        (q_len < 2 || k_len < 2 || query_step == key_step);
  if (one_step) {
    const int64_t line_len = q_len + k_len - 1;
    std::vector<T> lines(static_cast<size_t>(num_heads * line_len));
    ParallelFor(options, line_len, num_heads, [&](int64_t begin, int64_t end) {
      for (int64_t index = begin; index < end; ++index) {
        const int64_t delta = index - (q_len - 1);  // j − i
        const P value = delta >= 0 ? pair(query[0], key[delta]) : pair(query[-delta], key[0]);
        for (int64_t h = 0; h < num_heads; ++h) lines[h * line_len + index] = head(h, value);
      }
    });
    ParallelFor(options, num_heads * q_len, k_len, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t h = row / q_len;
        const int64_t i = row % q_len;
        std::memcpy(out.data() + row * k_len, lines.data() + h * line_len + (q_len - 1 - i),
                    static_cast<size_t>(k_len) * sizeof(T));
      }
    });
    return;
  }
  ParallelFor(options, q_len, num_heads * k_len, [&](int64_t begin, int64_t end) {
    std::vector<P> values(static_cast<size_t>(k_len));
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t j = 0; j < k_len; ++j) values[j] = pair(query[i], key[j]);
      for (int64_t h = 0; h < num_heads; ++h) {
        T* row = out.data() + (h * q_len + i) * k_len;
        for (int64_t j = 0; j < k_len; ++j) row[j] = head(h, values[j]);
      }
    }
  });
}

// The table [buckets, heads] as per-head rows in the output type.
template <typename T, typename Convert>
std::vector<T> HeadMajorTable(absl::Span<const double> table, int64_t num_buckets,
                              int64_t num_heads, Convert convert) {
  assert(static_cast<int64_t>(table.size()) == num_buckets * num_heads);
  std::vector<T> lut(table.size());
  for (int64_t b = 0; b < num_buckets; ++b) {
    for (int64_t h = 0; h < num_heads; ++h) {
      lut[h * num_buckets + b] = convert(table[b * num_heads + h]);
    }
  }
  return lut;
}

template <typename T, typename Convert>
void BucketBias(const RelativeBucketing& bucketing, absl::Span<const int64_t> query,
                absl::Span<const int64_t> key, absl::Span<const double> table,
                int64_t num_heads, const ExecutionOptions& options, Convert convert,
                absl::Span<T> bias) {
  const int64_t num_buckets = bucketing.NumBuckets();
  const std::vector<T> lut = HeadMajorTable<T>(table, num_buckets, num_heads, convert);
  FillHeads<T, int32_t>(
      query, key, num_heads, options,
      [&bucketing](int64_t q, int64_t k) { return BucketOf(bucketing, q, k); },
      [&lut, num_buckets](int64_t h, int32_t b) { return lut[h * num_buckets + b]; },
      bias);
}

// The time gap in units, or +inf for a key after the query under a causal
// mask (the head function turns it into −inf).
double TimeGapUnits(const TimeAlibiSpec& spec, int64_t query_ns, int64_t key_ns) {
  if (spec.causal && key_ns > query_ns) return std::numeric_limits<double>::infinity();
  return static_cast<double>(AbsoluteDifference(query_ns, key_ns)) * 1e-9 /
         spec.unit_seconds;
}

template <typename T, typename Convert>
void TimeAlibi(const TimeAlibiSpec& spec, absl::Span<const double> slopes,
               absl::Span<const int64_t> query, absl::Span<const int64_t> key,
               const ExecutionOptions& options, Convert convert, absl::Span<T> bias) {
  const T masked = convert(-std::numeric_limits<double>::infinity());
  FillHeads<T, double>(
      query, key, static_cast<int64_t>(slopes.size()), options,
      [&spec](int64_t q, int64_t k) { return TimeGapUnits(spec, q, k); },
      [&slopes, masked, &convert](int64_t h, double gap) {
        return std::isinf(gap) ? masked : convert(-slopes[h] * gap);
      },
      bias);
}

struct ToFloat {
  float operator()(double v) const { return static_cast<float>(v); }
};
struct ToDouble {
  double operator()(double v) const { return v; }
};
struct ToHalfBits {
  bool bfloat16;
  uint16_t operator()(double v) const {
    const float f = static_cast<float>(v);
    return bfloat16 ? FloatToBFloat16(f) : FloatToHalf(f);
  }
};

}  // namespace

void ComputeBucketIds(const RelativeBucketing& bucketing,
                      absl::Span<const int64_t> query,
                      absl::Span<const int64_t> key,
                      const ExecutionOptions& options, absl::Span<int32_t> ids) {
  FillHeads<int32_t, int32_t>(
      query, key, /*num_heads=*/1, options,
      [&bucketing](int64_t q, int64_t k) { return BucketOf(bucketing, q, k); },
      [](int64_t, int32_t b) { return b; }, ids);
}

void ComputeRelativeBias(const RelativeBucketing& bucketing,
                         absl::Span<const int64_t> query,
                         absl::Span<const int64_t> key,
                         absl::Span<const double> table, int64_t num_heads,
                         const ExecutionOptions& options, absl::Span<float> bias) {
  BucketBias(bucketing, query, key, table, num_heads, options, ToFloat{}, bias);
}

void ComputeRelativeBias(const RelativeBucketing& bucketing,
                         absl::Span<const int64_t> query,
                         absl::Span<const int64_t> key,
                         absl::Span<const double> table, int64_t num_heads,
                         const ExecutionOptions& options, absl::Span<double> bias) {
  BucketBias(bucketing, query, key, table, num_heads, options, ToDouble{}, bias);
}

void ComputeRelativeBias(const RelativeBucketing& bucketing,
                         absl::Span<const int64_t> query,
                         absl::Span<const int64_t> key,
                         absl::Span<const double> table, int64_t num_heads,
                         DType dtype, const ExecutionOptions& options,
                         absl::Span<uint16_t> bias) {
  assert(dtype == DType::kFloat16 || dtype == DType::kBFloat16);
  BucketBias(bucketing, query, key, table, num_heads, options,
             ToHalfBits{dtype == DType::kBFloat16}, bias);
}

void ComputeTimeAlibiBias(const TimeAlibiSpec& spec, absl::Span<const double> slopes,
                          absl::Span<const int64_t> query_ns,
                          absl::Span<const int64_t> key_ns,
                          const ExecutionOptions& options, absl::Span<float> bias) {
  TimeAlibi(spec, slopes, query_ns, key_ns, options, ToFloat{}, bias);
}

void ComputeTimeAlibiBias(const TimeAlibiSpec& spec, absl::Span<const double> slopes,
                          absl::Span<const int64_t> query_ns,
                          absl::Span<const int64_t> key_ns,
                          const ExecutionOptions& options, absl::Span<double> bias) {
  TimeAlibi(spec, slopes, query_ns, key_ns, options, ToDouble{}, bias);
}

void ComputeTimeAlibiBias(const TimeAlibiSpec& spec, absl::Span<const double> slopes,
                          absl::Span<const int64_t> query_ns,
                          absl::Span<const int64_t> key_ns, DType dtype,
                          const ExecutionOptions& options, absl::Span<uint16_t> bias) {
  assert(dtype == DType::kFloat16 || dtype == DType::kBFloat16);
  TimeAlibi(spec, slopes, query_ns, key_ns, options, ToHalfBits{dtype == DType::kBFloat16},
            bias);
}

}  // namespace phasor
