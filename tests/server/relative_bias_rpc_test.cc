// RelativeBias and Describe(relative_bias) through a real channel.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/adapters/dtype.h"
#include "core/relative/relative_bias.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/test_util.h"

namespace phasor::server::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kBuckets = 32;
constexpr int kHeads = 3;

float TableValue(int bucket, int head) { return 0.5f * bucket - 0.25f * head - 4.0f; }

std::vector<float> Table(int rows, int heads) {
  std::vector<float> table;
  for (int r = 0; r < rows; ++r) {
    for (int h = 0; h < heads; ++h) table.push_back(TableValue(r, h));
  }
  return table;
}

std::vector<int32_t> Int32s(const v1::Tensor& tensor) {
  std::vector<int32_t> out(tensor.data().size() / 4);
  std::memcpy(out.data(), tensor.data().data(), tensor.data().size());
  return out;
}

std::vector<double> Doubles(const v1::Tensor& tensor) {
  std::vector<double> out(tensor.data().size() / 8);
  std::memcpy(out.data(), tensor.data().data(), tensor.data().size());
  return out;
}

class RelativeBiasRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.WriteFile("t5.npy", NpyFloat32(Table(kBuckets, kHeads), kBuckets, kHeads));
    const std::string profiles = dir_.WriteFile("profiles.txtpb", R"pb(
      profile {
        name: "t5-small-rel"
        spec { relative_bias { t5 { num_buckets: 32 max_distance: 128 } table: "t5rel" } }
        learned_tables { name: "t5rel" file { path: "t5.npy" } }
      }
      profile {
        name: "llama-rope"
        spec { rope { rotary_dim: 8 } }
      }
    )pb");
    ServerOptions options = TestOptions();
    options.profiles_path = profiles;
    server_ = StartTestServer(options);
    ASSERT_NE(server_.server, nullptr);
  }

  grpc::Status Call(const v1::RelativeBiasRequest& request,
                    v1::RelativeBiasResponse* response) {
    return server_.stub->RelativeBias(Context().get(), request, response);
  }

  static void SetRange(v1::Positions* positions, int64_t start, int64_t count,
                       int64_t step = 1) {
    positions->mutable_range()->set_start(start);
    positions->mutable_range()->set_count(count);
    positions->mutable_range()->set_step(step);
  }

  TempDir dir_;
  TestServer server_;
};

void ExpectFieldError(const grpc::Status& status, grpc::StatusCode code,
                      const std::string& field) {
  EXPECT_EQ(status.error_code(), code) << status.error_message();
  EXPECT_THAT(status.error_message(), ::testing::StartsWith(field + ":"));
  const google::rpc::BadRequest bad = BadRequestOf(status);
  if (code == grpc::StatusCode::INVALID_ARGUMENT) {
    ASSERT_EQ(bad.field_violations_size(), 1) << status.error_message();
    EXPECT_EQ(bad.field_violations(0).field(), field);
  }
}

TEST_F(RelativeBiasRpcTest, T5InlineTableIsLookupOfHfBuckets) {
  v1::RelativeBiasRequest request;
  auto* t5 = request.mutable_spec()->mutable_relative_bias()->mutable_t5();
  t5->set_num_buckets(kBuckets);
  t5->set_max_distance(128);
  t5->set_direction(v1::RelativeBiasSpec::CAUSAL);
  // KV-cache decoding: 3 new queries at 197..199 against all 200 keys.
  SetRange(request.mutable_query_positions(), 197, 3);
  SetRange(request.mutable_key_positions(), 0, 200);
  *request.mutable_table() = FloatTensor(Table(kBuckets, kHeads), {kBuckets, kHeads});
  request.set_include_bucket_ids(true);
  v1::RelativeBiasResponse response;
  const grpc::Status status = Call(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.num_buckets(), kBuckets);
  ASSERT_THAT(response.bias().shape(), ElementsAre(kHeads, 3, 200));
  ASSERT_THAT(response.bucket_ids().shape(), ElementsAre(3, 200));
  EXPECT_EQ(response.bucket_ids().dtype(), v1::INT32);
  const std::vector<int32_t> ids = Int32s(response.bucket_ids());
  const std::vector<float> bias = Floats(response.bias());
  const T5BucketSpec spec{kBuckets, 128, /*bidirectional=*/false};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 200; ++j) {
      const int32_t bucket = T5Bucket(spec, 197 + i, j);
      ASSERT_EQ(ids[i * 200 + j], bucket);
      for (int h = 0; h < kHeads; ++h) {
        ASSERT_EQ(bias[(h * 3 + i) * 200 + j], TableValue(bucket, h));
      }
    }
  }
  EXPECT_EQ(ids[0 * 200 + 196], 1);   // one back
  EXPECT_EQ(ids[0 * 200 + 198], 0);   // a later key: bucket 0 when causal
  EXPECT_EQ(ids[2 * 200 + 0], 31);    // 199 back: the last bucket
}

TEST_F(RelativeBiasRpcTest, ProfileTableInFloat64AndBfloat16) {
  v1::RelativeBiasRequest request;
  request.set_profile("t5-small-rel");
  const std::vector<int64_t> queries = {5, -7, std::numeric_limits<int64_t>::max()};
  const std::vector<int64_t> keys = {std::numeric_limits<int64_t>::min(), 0, 5, 6, 300};
  *request.mutable_query_positions()->mutable_values() = Int64Tensor(queries, {3});
  *request.mutable_key_positions()->mutable_values() = Int64Tensor(keys, {5});
  request.set_output_dtype(v1::FLOAT64);
  v1::RelativeBiasResponse response;
  grpc::Status status = Call(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(response.has_bucket_ids());
  ASSERT_EQ(response.bias().dtype(), v1::FLOAT64);
  const std::vector<double> bias = Doubles(response.bias());
  const T5BucketSpec spec{kBuckets, 128, /*bidirectional=*/true};
  ASSERT_EQ(bias.size(), static_cast<size_t>(kHeads * 3 * 5));
  for (int h = 0; h < kHeads; ++h) {
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 5; ++j) {
        EXPECT_EQ(bias[(h * 3 + i) * 5 + j],
                  TableValue(T5Bucket(spec, queries[i], keys[j]), h));
      }
    }
  }
  request.set_output_dtype(v1::BFLOAT16);
  status = Call(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.bias().dtype(), v1::BFLOAT16);
  ASSERT_EQ(response.bias().data().size(), bias.size() * 2);
  for (size_t n = 0; n < bias.size(); ++n) {
    uint16_t bits;
    std::memcpy(&bits, response.bias().data().data() + 2 * n, 2);
    EXPECT_EQ(bits, FloatToBFloat16(static_cast<float>(bias[n])));
  }
}

TEST_F(RelativeBiasRpcTest, ShawClipsAndIdsWithoutTable) {
  v1::RelativeBiasRequest request;
  request.mutable_spec()->mutable_relative_bias()->mutable_shaw()->set_max_relative_position(2);
  SetRange(request.mutable_query_positions(), 0, 6);
  SetRange(request.mutable_key_positions(), 0, 6);
  v1::RelativeBiasResponse response;
  const grpc::Status status = Call(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.num_buckets(), 5);
  EXPECT_FALSE(response.has_bias());
  const std::vector<int32_t> ids = Int32s(response.bucket_ids());
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j) EXPECT_EQ(ids[i * 6 + j], std::clamp(j - i, -2, 2) + 2);
  }
}

TEST_F(RelativeBiasRpcTest, TimeBucketsAndTimeAlibiOverNanoseconds) {
  const std::vector<int64_t> times = {1'700'000'000'000'000'000, 1'700'000'000'500'000'000,
                                      1'700'000'060'000'000'000, 1'700'086'400'000'000'000};
  {
    v1::RelativeBiasRequest request;
    auto* time = request.mutable_spec()->mutable_relative_bias()->mutable_time_buckets();
    time->set_num_buckets(16);
    time->set_exact_seconds(4);
    time->set_max_seconds(3600);
    *request.mutable_query_positions()->mutable_values() = Int64Tensor(times, {4});
    *request.mutable_key_positions()->mutable_values() = Int64Tensor(times, {4});
    v1::RelativeBiasResponse response;
    const grpc::Status status = Call(request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    const std::vector<int32_t> ids = Int32s(response.bucket_ids());
    const TimeBucketSpec spec{16, 4.0, 3600.0, true};
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) EXPECT_EQ(ids[i * 4 + j], TimeBucket(spec, times[i], times[j]));
    }
    EXPECT_EQ(ids[1 * 4 + 0], 0);  // 0.5 s back: exact bucket floor(4·0.5/4)
    EXPECT_EQ(ids[3 * 4 + 0], 7);  // a day back: beyond max_seconds
    EXPECT_EQ(ids[0 * 4 + 3], 15);
  }
  {
    v1::RelativeBiasRequest request;
    auto* alibi = request.mutable_spec()->mutable_relative_bias()->mutable_time_alibi();
    alibi->set_num_heads(2);
    alibi->set_unit_seconds(60);
    alibi->set_causal(true);
    *request.mutable_query_positions()->mutable_values() = Int64Tensor(times, {4});
    *request.mutable_key_positions()->mutable_values() = Int64Tensor(times, {4});
    v1::RelativeBiasResponse response;
    const grpc::Status status = Call(request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_THAT(response.bias().shape(), ElementsAre(2, 4, 4));
    const std::vector<float> bias = Floats(response.bias());
    // 2 heads: slopes 2^-4, 2^-8. Query 2 (60 s) against key 0: one unit.
    EXPECT_EQ(bias[(0 * 4 + 2) * 4 + 0], -0.0625f);
    EXPECT_EQ(bias[(1 * 4 + 3) * 4 + 0], static_cast<float>(-1440.0 / 256));
    EXPECT_TRUE(std::isinf(bias[(0 * 4 + 0) * 4 + 1]) && bias[1] < 0);
  }
}

TEST_F(RelativeBiasRpcTest, ErrorsNameTheField) {
  v1::RelativeBiasRequest base;
  SetRange(base.mutable_query_positions(), 0, 4);
  SetRange(base.mutable_key_positions(), 0, 4);
  v1::RelativeBiasResponse response;
  {
    v1::RelativeBiasRequest request = base;
    ExpectFieldError(Call(request, &response), grpc::StatusCode::INVALID_ARGUMENT, "spec");
  }
  {
    v1::RelativeBiasRequest request = base;
    request.mutable_spec()->mutable_relative_bias()->mutable_t5()->set_num_buckets(3);
    ExpectFieldError(Call(request, &response), grpc::StatusCode::INVALID_ARGUMENT,
                     "spec.relative_bias.t5.num_buckets");
  }
  {
    v1::RelativeBiasRequest request = base;
    request.mutable_spec()->mutable_relative_bias()->mutable_t5()->set_max_distance(8);
    ExpectFieldError(Call(request, &response), grpc::StatusCode::INVALID_ARGUMENT,
                     "spec.relative_bias.t5.max_distance");
  }
  {
    v1::RelativeBiasRequest request = base;
    request.mutable_spec()->mutable_relative_bias()->mutable_t5();
    *request.mutable_table() = FloatTensor(Table(31, 2), {31, 2});
    ExpectFieldError(Call(request, &response), grpc::StatusCode::INVALID_ARGUMENT,
                     "table.shape");
  }
  {
    v1::RelativeBiasRequest request = base;
    request.mutable_spec()->mutable_relative_bias()->mutable_t5();
    request.mutable_spec()->mutable_relative_bias()->set_table("absent");
    ExpectFieldError(Call(request, &response), grpc::StatusCode::NOT_FOUND,
                     "spec.relative_bias.table");
  }
  {
    v1::RelativeBiasRequest request = base;
    request.mutable_spec()->mutable_relative_bias()->mutable_shaw();
    const std::vector<double> reals = {0.5, 1.0};
    *request.mutable_key_positions()->mutable_values() = Float64Tensor(reals, {2});
    ExpectFieldError(Call(request, &response), grpc::StatusCode::INVALID_ARGUMENT,
                     "key_positions.values.dtype");
  }
  {
    v1::RelativeBiasRequest request = base;
    request.mutable_spec()->mutable_relative_bias()->mutable_time_buckets()->set_exact_seconds(5);
    ExpectFieldError(Call(request, &response), grpc::StatusCode::INVALID_ARGUMENT,
                     "spec.relative_bias.time_buckets.max_seconds");
  }
  {
    v1::RelativeBiasRequest request = base;
    request.mutable_spec()->mutable_relative_bias()->mutable_time_alibi()->add_slopes(-1);
    ExpectFieldError(Call(request, &response), grpc::StatusCode::INVALID_ARGUMENT,
                     "spec.relative_bias.time_alibi.slopes[0]");
  }
  {
    v1::RelativeBiasRequest request = base;
    request.set_profile("llama-rope");
    ExpectFieldError(Call(request, &response), grpc::StatusCode::INVALID_ARGUMENT, "profile");
  }
  {
    v1::RelativeBiasRequest request = base;
    request.mutable_spec()->mutable_relative_bias()->mutable_t5();
    request.set_output_dtype(v1::INT64);
    ExpectFieldError(Call(request, &response), grpc::StatusCode::INVALID_ARGUMENT,
                     "output_dtype");
  }
}

// [32, 4096, 4096] float32 is 2 GiB: refused before anything is allocated
// (the test server's message limit is 4 MiB, its element cap 2^24).
TEST_F(RelativeBiasRpcTest, OutputOverLimitsIsResourceExhausted) {
  v1::RelativeBiasRequest request;
  request.set_profile("t5-small-rel");
  SetRange(request.mutable_query_positions(), 0, 4096);
  SetRange(request.mutable_key_positions(), 0, 4096);
  v1::RelativeBiasResponse response;
  grpc::Status status = Call(request, &response);
  ExpectFieldError(status, grpc::StatusCode::RESOURCE_EXHAUSTED, "key_positions");
  EXPECT_THAT(status.error_message(), HasSubstr("limit"));
  // Ids alone, 4096 x 4096 INT32 = 64 MiB: over the message limit too.
  request.clear_profile();
  request.mutable_spec()->mutable_relative_bias()->mutable_t5();
  status = Call(request, &response);
  ExpectFieldError(status, grpc::StatusCode::RESOURCE_EXHAUSTED, "key_positions");
  // Time ALiBi with a head count far beyond any output.
  request.mutable_spec()->mutable_relative_bias()->mutable_time_alibi()->set_num_heads(
      int64_t{1} << 40);
  SetRange(request.mutable_query_positions(), 0, 1);
  SetRange(request.mutable_key_positions(), 0, 1);
  status = Call(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  ExpectServing(*server_.stub);
}

// No queries: empty outputs of the right shapes, and the keys (a range at
// the element limit) are never materialised.
TEST_F(RelativeBiasRpcTest, EmptyQueriesGiveEmptyOutputs) {
  v1::RelativeBiasRequest request;
  request.set_profile("t5-small-rel");
  request.set_include_bucket_ids(true);
  SetRange(request.mutable_query_positions(), 0, 0);
  SetRange(request.mutable_key_positions(), 0, int64_t{1} << 24);
  v1::RelativeBiasResponse response;
  const grpc::Status status = Call(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(response.bias().shape(), ElementsAre(kHeads, 0, int64_t{1} << 24));
  EXPECT_THAT(response.bucket_ids().shape(), ElementsAre(0, int64_t{1} << 24));
  EXPECT_TRUE(response.bias().data().empty());
}

TEST_F(RelativeBiasRpcTest, DescribeListsBucketRanges) {
  v1::DescribeRequest request;
  request.set_profile("t5-small-rel");
  v1::DescribeResponse response;
  grpc::Status status = server_.stub->Describe(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.unit(), "positions");
  // Bidirectional 32: rows 0..15 before (0..7 exact), 17..31 after (row 16
  // is never used: a later key is at least 1 away).
  ASSERT_EQ(response.buckets_size(), 31);
  const T5BucketSpec spec{32, 128, true};
  for (const auto& range : response.buckets()) {
    const int64_t min = static_cast<int64_t>(range.min_distance());
    const int64_t sign = range.key_after_query() ? 1 : -1;
    EXPECT_EQ(T5Bucket(spec, 0, sign * min), range.bucket());
    if (std::isinf(range.end_distance())) continue;
    const int64_t end = static_cast<int64_t>(range.end_distance());
    EXPECT_EQ(T5Bucket(spec, 0, sign * (end - 1)), range.bucket());
    EXPECT_NE(T5Bucket(spec, 0, sign * end), range.bucket());
  }
  EXPECT_EQ(response.buckets(0).bucket(), 0);
  EXPECT_EQ(response.buckets(0).end_distance(), 1);
  EXPECT_EQ(response.buckets(15).bucket(), 15);
  EXPECT_TRUE(std::isinf(response.buckets(15).end_distance()));
  // 8 + trunc(log(n/8)/log(16)·8) reaches 15 at n/8 >= 16^(7/8) = 11.31.
  EXPECT_EQ(response.buckets(15).min_distance(), 91);

  v1::DescribeRequest time_request;
  auto* time = time_request.mutable_spec()->mutable_relative_bias()->mutable_time_buckets();
  time->set_num_buckets(8);
  time->set_exact_seconds(2);
  time->set_max_seconds(200);
  time->set_direction(v1::RelativeBiasSpec::CAUSAL);
  status = server_.stub->Describe(Context().get(), time_request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.unit(), "seconds");
  // N' = 8, max_exact = 4: four 0.5 s buckets below 2 s, then log-spaced
  // edges 2·100^(k/4): 2, 6.32, 20, 63.2, then +inf.
  ASSERT_EQ(response.buckets_size(), 8);
  EXPECT_DOUBLE_EQ(response.buckets(1).min_distance(), 0.5);
  EXPECT_DOUBLE_EQ(response.buckets(4).min_distance(), 2.0);
  EXPECT_NEAR(response.buckets(5).min_distance(), 2 * std::pow(100.0, 0.25), 1e-8);
  EXPECT_NEAR(response.buckets(6).min_distance(), 20.0, 1e-8);
  EXPECT_TRUE(std::isinf(response.buckets(7).end_distance()));
}

}  // namespace
}  // namespace phasor::server::testing
