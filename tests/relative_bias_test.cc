#include "core/relative/relative_bias.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

namespace phasor {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// HF T5Attention._relative_position_bucket / Mesh TensorFlow
// _relative_position_bucket, written out again from the published formula
// with 128-bit integers for the relative position and the references'
// float32 steps.
int64_t ReferenceT5(int64_t query, int64_t key, int64_t num_buckets,
                    int64_t max_distance, bool bidirectional) {
  __int128 relative = static_cast<__int128>(key) - query;
  int64_t ret = 0;
  int64_t n_buckets = num_buckets;
  if (bidirectional) {
    n_buckets /= 2;
    if (relative > 0) ret += n_buckets;
    if (relative < 0) relative = -relative;
  } else {
    relative = relative < 0 ? -relative : 0;
  }
  const int64_t max_exact = n_buckets / 2;
  if (relative < max_exact) return ret + static_cast<int64_t>(relative);
  const float x = static_cast<float>(relative) / static_cast<float>(max_exact);
  const float large = logf(x) / static_cast<float>(log(static_cast<double>(max_distance) /
                                                      static_cast<double>(max_exact))) *
                      static_cast<float>(n_buckets - max_exact);
  // min(max_exact + trunc(large), n_buckets - 1), the cap taken in float so
  // no conversion overflows.
  const double capped = std::min<double>(std::trunc(large), n_buckets - 1 - max_exact);
  return ret + max_exact + static_cast<int64_t>(capped);
}

// The same in real numbers (long double), for distances away from edges.
int64_t RealT5(uint64_t n, int64_t half, int64_t max_distance, long double* fraction) {
  const int64_t max_exact = half / 2;
  if (n < static_cast<uint64_t>(max_exact)) {
    *fraction = 0.5L;
    return static_cast<int64_t>(n);
  }
  const long double v = logl(static_cast<long double>(n) / max_exact) /
                        logl(static_cast<long double>(max_distance) / max_exact) *
                        (half - max_exact);
  *fraction = v - floorl(v);
  return std::min<int64_t>(max_exact + static_cast<int64_t>(floorl(v)), half - 1);
}

std::vector<int64_t> Range(int64_t start, int64_t count, int64_t step = 1) {
  std::vector<int64_t> out(count);
  for (int64_t i = 0; i < count; ++i) out[i] = start + i * step;
  return out;
}

RelativeBucketing T5(int64_t num_buckets, int64_t max_distance, bool bidirectional) {
  RelativeBucketing b;
  b.kind = RelativeBucketing::Kind::kT5;
  b.t5 = {num_buckets, max_distance, bidirectional};
  return b;
}

TEST(T5BucketTest, MatchesReferenceOverManySettings) {
  const int64_t bucket_counts[] = {2, 3, 4, 5, 7, 8, 16, 31, 32, 33, 64, 128, 257};
  const int64_t distances[] = {2, 3, 5, 20, 128, 129, 256, 1000, 4096};
  int64_t checked = 0;
  for (bool bidirectional : {true, false}) {
    for (int64_t num_buckets : bucket_counts) {
      const int64_t half = bidirectional ? num_buckets / 2 : num_buckets;
      if (half < 2) continue;
      for (int64_t max_distance : distances) {
        if (max_distance <= half / 2) continue;
        const T5BucketSpec spec{num_buckets, max_distance, bidirectional};
        for (int64_t rel = -5000; rel <= 5000; ++rel) {
          const int64_t q = 777;
          ASSERT_EQ(T5Bucket(spec, q, q + rel),
                    ReferenceT5(q, q + rel, num_buckets, max_distance, bidirectional))
              << num_buckets << " " << max_distance << " " << bidirectional << " rel " << rel;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 1000000);
}

// HF's default (32 buckets, 128, bidirectional): hand-checkable values.
TEST(T5BucketTest, DefaultConfigurationKnownValues) {
  const T5BucketSpec spec{32, 128, true};
  EXPECT_EQ(T5Bucket(spec, 10, 10), 0);
  EXPECT_EQ(T5Bucket(spec, 10, 9), 1);    // key one before: lower half, n = 1
  EXPECT_EQ(T5Bucket(spec, 10, 11), 17);  // key one after: upper half
  EXPECT_EQ(T5Bucket(spec, 10, 3), 7);    // n = 7 < max_exact 8
  EXPECT_EQ(T5Bucket(spec, 0, 1000), 31);
  EXPECT_EQ(T5Bucket(spec, 1000, 0), 15);
  const T5BucketSpec causal{32, 128, false};
  EXPECT_EQ(T5Bucket(causal, 10, 11), 0);  // future keys: n = 0
  EXPECT_EQ(T5Bucket(causal, 10, 9), 1);
  EXPECT_EQ(T5Bucket(causal, 1000, 0), 31);
}

// Away from bucket edges the float32 steps agree with real arithmetic; this
// checks the formula, not just its transcription.
TEST(T5BucketTest, AgreesWithRealFormulaAwayFromEdges) {
  for (int64_t half : {8, 16, 32, 64}) {
    for (int64_t max_distance : {64, 128, 1000}) {
      if (max_distance <= half / 2) continue;
      const T5BucketSpec spec{half, max_distance, /*bidirectional=*/false};
      int64_t compared = 0;
      for (uint64_t n = 0; n < 20000; ++n) {
        long double fraction = 0;
        const int64_t real = RealT5(n, half, max_distance, &fraction);
        if (fraction < 1e-4L || fraction > 1 - 1e-4L) continue;
        EXPECT_EQ(T5Bucket(spec, static_cast<int64_t>(n), 0), real) << n;
        ++compared;
      }
      EXPECT_GT(compared, 19000);
    }
  }
}

TEST(T5BucketTest, Int64ExtremesDoNotOverflow) {
  for (bool bidirectional : {true, false}) {
    for (int64_t num_buckets : {4, 5, 32, 33}) {
      const T5BucketSpec spec{num_buckets, 128, bidirectional};
      const int64_t pairs[][2] = {{kMin, kMax}, {kMax, kMin}, {kMin, kMin}, {kMax, kMax},
                                  {0, kMin},   {kMin, 0},    {-1, kMax},   {kMax, -1},
                                  {kMin + 1, kMin}, {kMax - 3, kMax}};
      for (const auto& pair : pairs) {
        EXPECT_EQ(T5Bucket(spec, pair[0], pair[1]),
                  ReferenceT5(pair[0], pair[1], num_buckets, 128, bidirectional));
      }
      const int64_t half = bidirectional ? num_buckets / 2 : num_buckets;
      EXPECT_EQ(T5Bucket(spec, kMax, kMin), half - 1);
      EXPECT_EQ(T5Bucket(spec, kMin, kMax), bidirectional ? 2 * half - 1 : 0);
    }
  }
}

TEST(T5BucketTest, IdsMatchPerPairForRangesAndListsWithQLenNotKLen) {
  const RelativeBucketing b = T5(33, 50, true);
  std::vector<int64_t> q = Range(90, 7);            // decoding: last tokens
  std::vector<int64_t> k = Range(0, 97);            // all keys
  std::vector<int64_t> k_list = {5, -3, 1000, kMin, kMax, 96, 0};
  for (const auto& keys : {k, k_list}) {
    std::vector<int32_t> ids(q.size() * keys.size());
    ComputeBucketIds(b, q, keys, ExecutionOptions{}, absl::MakeSpan(ids));
    for (size_t i = 0; i < q.size(); ++i) {
      for (size_t j = 0; j < keys.size(); ++j) {
        ASSERT_EQ(ids[i * keys.size() + j], ReferenceT5(q[i], keys[j], 33, 50, true));
      }
    }
  }
}

TEST(ShawTest, ClipsAtBothEnds) {
  for (int64_t k : {0, 1, 4, 16}) {
    for (int64_t rel = -40; rel <= 40; ++rel) {
      const int64_t want = std::clamp<int64_t>(rel, -k, k) + k;
      EXPECT_EQ(ShawIndex(k, 100, 100 + rel), want) << k << " " << rel;
    }
    EXPECT_EQ(ShawIndex(k, kMin, kMax), 2 * k);
    EXPECT_EQ(ShawIndex(k, kMax, kMin), 0);
    EXPECT_EQ(ShawIndex(k, kMax, kMax), k);
  }
}

// Time buckets against a float64 evaluation of the stated formula.
int64_t ReferenceTime(int64_t query_ns, int64_t key_ns, int64_t num_buckets,
                      double exact_seconds, double max_seconds, bool bidirectional) {
  const __int128 relative = static_cast<__int128>(key_ns) - query_ns;
  int64_t half = num_buckets, offset = 0;
  __int128 gap = 0;
  if (bidirectional) {
    half = num_buckets / 2;
    if (relative > 0) offset = half;
    gap = relative < 0 ? -relative : relative;
  } else {
    gap = relative < 0 ? -relative : 0;
  }
  const int64_t max_exact = half / 2;
  const double g = static_cast<double>(gap) * 1e-9;
  if (g < exact_seconds) {
    return offset + std::min<int64_t>(
                        static_cast<int64_t>(std::floor(max_exact * g / exact_seconds)),
                        max_exact - 1);
  }
  const double v = std::log(g / exact_seconds) / std::log(max_seconds / exact_seconds) *
                   (half - max_exact);
  return offset + (v >= half - 1 - max_exact ? half - 1 : max_exact + static_cast<int64_t>(v));
}

TEST(TimeBucketTest, MatchesFloat64Formula) {
  for (bool bidirectional : {true, false}) {
    for (int64_t num_buckets : {4, 7, 32, 33}) {
      for (const auto& [exact, max] : {std::pair{1.0, 3600.0}, std::pair{0.25, 86400.0},
                                       std::pair{60.0, 61.0}}) {
        TimeBucketSpec spec{num_buckets, exact, max, bidirectional};
        RelativeBucketing b;
        b.kind = RelativeBucketing::Kind::kTimeBuckets;
        b.time = spec;
        PHASOR_ASSERT_OK(ValidateBucketing(b, "spec"));
        const int64_t q = 1'700'000'000'000'000'000;
        for (int64_t step = -200000; step <= 200000; ++step) {
          // Gaps from ns to ~10^6 s on a roughly geometric grid.
          const int64_t gap = (step < 0 ? -1 : 1) *
                              static_cast<int64_t>(std::pow(1.0002, std::abs(step)) - 1 +
                                                   std::abs(step));
          ASSERT_EQ(TimeBucket(spec, q, q + gap),
                    ReferenceTime(q, q + gap, num_buckets, exact, max, bidirectional))
              << gap;
        }
        EXPECT_EQ(TimeBucket(spec, kMin, kMax),
                  ReferenceTime(kMin, kMax, num_buckets, exact, max, bidirectional));
        EXPECT_EQ(TimeBucket(spec, kMax, kMin),
                  ReferenceTime(kMax, kMin, num_buckets, exact, max, bidirectional));
      }
    }
  }
}

// With E = max_exact·u and M = max_distance·u, gaps of whole units u away
// from the log edges bucket as T5 does.
TEST(TimeBucketTest, WholeUnitGapsMatchT5) {
  const int64_t unit_ns = 1'000'000'000;  // 1 s
  const TimeBucketSpec time{32, 8.0, 128.0, true};
  const T5BucketSpec t5{32, 128, true};
  for (int64_t rel = -300; rel <= 300; ++rel) {
    long double fraction = 0;
    RealT5(static_cast<uint64_t>(std::abs(rel)), 16, 128, &fraction);
    if (fraction < 1e-4L || fraction > 1 - 1e-4L) continue;
    EXPECT_EQ(TimeBucket(time, 0, rel * unit_ns), T5Bucket(t5, 0, rel)) << rel;
  }
}

TEST(RelativeBiasTest, BiasIsTableLookupFastAndGeneralPathsAgree) {
  const int64_t heads = 3;
  for (const RelativeBucketing& b : {T5(32, 128, true), T5(9, 20, false)}) {
    const int64_t rows = b.NumBuckets();
    std::vector<double> table(rows * heads);
    for (size_t i = 0; i < table.size(); ++i) table[i] = 0.25 * static_cast<double>(i) - 3;
    const std::vector<int64_t> q = Range(40, 9, 3);
    const std::vector<int64_t> k = Range(-20, 70, 3);
    // Same values, but not one step: forces the general path.
    std::vector<int64_t> k_general = k;
    k_general.push_back(kMax);
    for (const auto& keys : {k, k_general}) {
      std::vector<float> bias(heads * q.size() * keys.size());
      ComputeRelativeBias(b, q, keys, table, heads, ExecutionOptions{}, absl::MakeSpan(bias));
      std::vector<double> bias64(bias.size());
      ComputeRelativeBias(b, q, keys, table, heads, ExecutionOptions{},
                          absl::MakeSpan(bias64));
      std::vector<uint16_t> bias16(bias.size());
      ComputeRelativeBias(b, q, keys, table, heads, DType::kBFloat16, ExecutionOptions{},
                          absl::MakeSpan(bias16));
      for (int64_t h = 0; h < heads; ++h) {
        for (size_t i = 0; i < q.size(); ++i) {
          for (size_t j = 0; j < keys.size(); ++j) {
            const size_t at = (h * q.size() + i) * keys.size() + j;
            const double want = table[BucketOf(b, q[i], keys[j]) * heads + h];
            ASSERT_EQ(bias64[at], want);
            ASSERT_EQ(bias[at], static_cast<float>(want));
            ASSERT_EQ(bias16[at], FloatToBFloat16(static_cast<float>(want)));
          }
        }
      }
      if (keys.size() == k.size()) continue;
      // The general path's first k.size() columns equal the fast path's.
      std::vector<float> fast(heads * q.size() * k.size());
      ComputeRelativeBias(b, q, k, table, heads, ExecutionOptions{}, absl::MakeSpan(fast));
      for (int64_t r = 0; r < heads * static_cast<int64_t>(q.size()); ++r) {
        ASSERT_EQ(0, std::memcmp(&fast[r * k.size()], &bias[r * keys.size()],
                                 k.size() * sizeof(float)));
      }
    }
  }
}

TEST(RelativeBiasTest, OneThreadEqualsManyBytewise) {
  const RelativeBucketing b = T5(32, 128, true);
  const int64_t heads = 4;
  std::vector<double> table(32 * heads);
  std::iota(table.begin(), table.end(), -50.0);
  const std::vector<int64_t> q = Range(0, 300), k = Range(0, 300);
  std::vector<int64_t> k_list = k;
  k_list[7] = 1000;
  for (const auto& keys : {k, k_list}) {
    std::vector<float> one(heads * q.size() * keys.size()), many(one.size());
    ExecutionOptions serial;
    ExecutionOptions parallel;
    parallel.max_threads = 4;
    parallel.grain_elements = 1000;
    ComputeRelativeBias(b, q, keys, table, heads, serial, absl::MakeSpan(one));
    ComputeRelativeBias(b, q, keys, table, heads, parallel, absl::MakeSpan(many));
    EXPECT_EQ(0, std::memcmp(one.data(), many.data(), one.size() * sizeof(float)));
  }
}

TEST(TimeAlibiTest, LinearInElapsedTimeAndCausalMask) {
  const TimeAlibiSpec spec{/*unit_seconds=*/60.0, /*causal=*/true};
  const std::vector<double> slopes = {0.5, 0.125};
  const std::vector<int64_t> times = {0, 30'000'000'000, 3'600'000'000'000, kMax};
  std::vector<double> bias(2 * 4 * 4);
  ComputeTimeAlibiBias(spec, slopes, times, times, ExecutionOptions{}, absl::MakeSpan(bias));
  std::vector<float> bias32(bias.size());
  ComputeTimeAlibiBias(spec, slopes, times, times, ExecutionOptions{},
                       absl::MakeSpan(bias32));
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) {
        const double got = bias[(h * 4 + i) * 4 + j];
        if (times[j] > times[i]) {
          EXPECT_EQ(got, -std::numeric_limits<double>::infinity());
        } else {
          const double gap = static_cast<double>(static_cast<uint64_t>(times[i]) -
                                                 static_cast<uint64_t>(times[j])) *
                             1e-9 / 60.0;
          EXPECT_EQ(got, -slopes[h] * gap);
        }
        EXPECT_EQ(bias32[(h * 4 + i) * 4 + j], static_cast<float>(got));
      }
    }
  }
  EXPECT_EQ(bias[(0 * 4 + 2) * 4 + 0], -0.5 * 60.0);  // one hour = 60 units
}

TEST(RelativeBiasValidationTest, NamesFields) {
  EXPECT_THAT(ValidateBucketing(T5(3, 128, true), "spec.t5"),
              IsFieldError(absl::StatusCode::kInvalidArgument, "spec.t5.num_buckets"));
  EXPECT_THAT(ValidateBucketing(T5(32, 8, true), "spec.t5"),
              IsFieldError(absl::StatusCode::kInvalidArgument, "spec.t5.max_distance"));
  PHASOR_ASSERT_OK(ValidateBucketing(T5(32, 9, true), "spec.t5"));
  PHASOR_ASSERT_OK(ValidateBucketing(T5(2, 2, false), "spec.t5"));
  RelativeBucketing shaw;
  shaw.kind = RelativeBucketing::Kind::kShaw;
  shaw.shaw_max_relative_position = -1;
  EXPECT_THAT(ValidateBucketing(shaw, "spec.shaw"),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           "spec.shaw.max_relative_position"));
  RelativeBucketing time;
  time.kind = RelativeBucketing::Kind::kTimeBuckets;
  time.time = {32, 10.0, 5.0, true};
  EXPECT_THAT(ValidateBucketing(time, "spec.time_buckets"),
              IsFieldError(absl::StatusCode::kInvalidArgument, "spec.time_buckets.max_seconds"));
  time.time = {32, std::nan(""), 5.0, true};
  EXPECT_THAT(ValidateBucketing(time, "spec.time_buckets"),
              IsFieldError(absl::StatusCode::kInvalidArgument,
                           "spec.time_buckets.exact_seconds"));
  EXPECT_THAT(ValidateTimeAlibi({0.0, false}, "spec.time_alibi"),
              IsFieldError(absl::StatusCode::kInvalidArgument, "spec.time_alibi.unit_seconds"));
}

}  // namespace
}  // namespace phasor
