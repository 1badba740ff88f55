// FLOAT64 over the wire, the batched ApplyRope layouts and M-RoPE positions:
// each RPC through a real channel, against formulas evaluated in long double
// here or against the token-major float path.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace phasor::server::testing {
namespace {

using ::testing::ElementsAre;

std::vector<double> Doubles(const v1::Tensor& tensor) {
  EXPECT_EQ(tensor.dtype(), v1::FLOAT64);
  std::vector<double> out(tensor.data().size() / 8);
  std::memcpy(out.data(), tensor.data().data(), out.size() * 8);
  return out;
}

class Float64RpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartTestServer(TestOptions());
    ASSERT_NE(server_.server, nullptr);
  }
  TestServer server_;
};

TEST_F(Float64RpcTest, EncodePositionsSinusoidWithContentInDouble) {
  const int n = 3, d = 8;
  // Positions below 2^11: p·θ is exact in long double's 64 bits (core's
  // tests check every int64 against __float128).
  const std::vector<int64_t> positions = {0, 1000, -2047};
  std::vector<double> content(n * d);
  for (int i = 0; i < n * d; ++i) content[i] = 1e-9 * (i + 1);
  v1::EncodePositionsRequest request;
  *request.mutable_positions()->mutable_values() = Int64Tensor(positions, {n});
  request.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(d);
  *request.mutable_content() = Float64Tensor(content, {n, d});
  request.set_content_scale(2.0);
  request.set_output_dtype(v1::FLOAT64);
  v1::EncodePositionsResponse response;
  const grpc::Status status = server_.stub->EncodePositions(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_THAT(response.encodings().shape(), ElementsAre(n, d));
  const std::vector<double> out = Doubles(response.encodings());
  for (int t = 0; t < n; ++t) {
    for (int k = 0; k < d / 2; ++k) {
      // The double frequency the server uses (correctly rounded).
      const long double omega = static_cast<double>(powl(10000.0L, -2.0L * k / d));
      const long double angle = fmodl(static_cast<long double>(positions[t]) * omega,
                                      6.283185307179586476925286766559L);
      EXPECT_NEAR(out[t * d + 2 * k], 2.0 * content[t * d + 2 * k] + double(sinl(angle)), 1e-15)
          << t << "," << k;
      EXPECT_NEAR(out[t * d + 2 * k + 1], 2.0 * content[t * d + 2 * k + 1] + double(cosl(angle)),
                  1e-15);
    }
  }
}

TEST_F(Float64RpcTest, ApplyRopeFloat64InAndOut) {
  const int tokens = 4, heads = 2, dim = 8;
  const std::vector<int64_t> positions = {0, 5, 1000, 2047};
  std::vector<double> query(tokens * heads * dim);
  for (size_t i = 0; i < query.size(); ++i) query[i] = std::sin(0.37 * i) * 3.0;
  v1::ApplyRopeRequest request;
  *request.mutable_query() = Float64Tensor(query, {tokens, heads, dim});
  *request.mutable_positions()->mutable_values() = Int64Tensor(positions, {tokens});
  request.mutable_spec()->mutable_rope();
  v1::ApplyRopeResponse response;
  const grpc::Status status = server_.stub->ApplyRope(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_THAT(response.query().shape(), ElementsAre(tokens, heads, dim));
  const std::vector<double> out = Doubles(response.query());
  for (int t = 0; t < tokens; ++t) {
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < dim / 2; ++i) {
        const long double theta = static_cast<double>(powl(10000.0L, -2.0L * i / dim));
        const long double angle = fmodl(positions[t] * theta, 6.283185307179586476925286766559L);
        const double* x = query.data() + (t * heads + h) * dim;
        const long double lo = x[i] * cosl(angle) - x[i + dim / 2] * sinl(angle);
        EXPECT_NEAR(out[(t * heads + h) * dim + i], double(lo), 2e-15);
      }
    }
  }
}

TEST_F(Float64RpcTest, RopeTablesFloat64WithBatchedPositionIds) {
  const int batch = 2, seq = 3, rotary_dim = 8;
  const std::vector<int64_t> ids = {0, 1, 2, 10, 11, 12};
  v1::RopeTablesRequest request;
  *request.mutable_positions()->mutable_values() = Int64Tensor(ids, {batch, seq});
  request.mutable_spec()->mutable_rope()->set_rotary_dim(rotary_dim);
  request.set_output_dtype(v1::FLOAT64);
  v1::RopeTablesResponse response;
  const grpc::Status status = server_.stub->RopeTables(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_THAT(response.cos().shape(), ElementsAre(batch, seq, rotary_dim / 2));
  const std::vector<double> cos = Doubles(response.cos());
  for (int n = 0; n < batch * seq; ++n) {
    for (int i = 0; i < rotary_dim / 2; ++i) {
      const long double theta = static_cast<double>(powl(10000.0L, -2.0L * i / rotary_dim));
      EXPECT_NEAR(cos[n * 4 + i], double(cosl(ids[n] * theta)), 4e-16);
    }
  }
}

TEST_F(Float64RpcTest, AlibiFloat64SlopesAndBias) {
  v1::AlibiBiasRequest request;
  request.set_num_heads(6);
  request.set_q_len(2);
  request.set_k_len(3);
  request.set_output_dtype(v1::FLOAT64);
  v1::AlibiBiasResponse response;
  const grpc::Status status = server_.stub->AlibiBias(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const std::vector<double> slopes = Doubles(response.slopes());
  ASSERT_EQ(slopes.size(), 6u);
  // 6 heads: 4 of 2^(-8(h+1)/4), then every other slope of 8: 2^-1, 2^-3... ·2^(-0.5)
  EXPECT_EQ(slopes[0], 0.25);
  EXPECT_EQ(slopes[4], double(exp2l(-1.0L)));
  EXPECT_EQ(slopes[5], double(exp2l(-3.0L)));
  const std::vector<double> bias = Doubles(response.bias());
  ASSERT_THAT(response.bias().shape(), ElementsAre(6, 2, 3));
  EXPECT_EQ(bias[(1 * 2 + 1) * 3 + 0], -slopes[1] * 2.0);
}

// [B, H, T, D] with per-row position_ids equals [T, H, D] over the
// transposed tokens, bytewise.
TEST_F(Float64RpcTest, BatchHeadsSeqLayoutEqualsTokenMajor) {
  const int batch = 2, heads = 3, seq = 4, dim = 8;
  const std::vector<int64_t> ids = {0, 0, 1, 2, 0, 1, 2, 3};  // Row 0 left-padded.
  std::vector<float> bhtd(batch * heads * seq * dim), thd(bhtd.size());
  for (size_t i = 0; i < bhtd.size(); ++i) bhtd[i] = std::cos(0.1f * i);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int t = 0; t < seq; ++t)
        for (int d = 0; d < dim; ++d)
          thd[((b * seq + t) * heads + h) * dim + d] = bhtd[((b * heads + h) * seq + t) * dim + d];

  v1::ApplyRopeRequest batched;
  *batched.mutable_query() = FloatTensor(bhtd, {batch, heads, seq, dim});
  *batched.mutable_positions()->mutable_values() = Int64Tensor(ids, {batch, seq});
  batched.mutable_spec()->mutable_rope();
  batched.set_tensor_layout(v1::ApplyRopeRequest::BATCH_HEADS_SEQ_DIM);
  v1::ApplyRopeResponse batched_response;
  grpc::Status status = server_.stub->ApplyRope(Context().get(), batched, &batched_response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_THAT(batched_response.query().shape(), ElementsAre(batch, heads, seq, dim));

  v1::ApplyRopeRequest flat;
  *flat.mutable_query() = FloatTensor(thd, {batch * seq, heads, dim});
  *flat.mutable_positions()->mutable_values() = Int64Tensor(ids, {batch * seq});
  flat.mutable_spec()->mutable_rope();
  v1::ApplyRopeResponse flat_response;
  status = server_.stub->ApplyRope(Context().get(), flat, &flat_response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const std::vector<float> a = Floats(batched_response.query());
  const std::vector<float> b = Floats(flat_response.query());
  for (int bb = 0; bb < batch; ++bb)
    for (int h = 0; h < heads; ++h)
      for (int t = 0; t < seq; ++t)
        for (int d = 0; d < dim; ++d)
          ASSERT_EQ(a[((bb * heads + h) * seq + t) * dim + d],
                    b[((bb * seq + t) * heads + h) * dim + d]);

  // [B, T, H, D] with one [T] row of positions shared by both batch rows.
  v1::ApplyRopeRequest shared;
  *shared.mutable_query() = FloatTensor(thd, {batch, seq, heads, dim});
  shared.mutable_positions()->mutable_range()->set_count(seq);
  shared.mutable_spec()->mutable_rope();
  shared.set_tensor_layout(v1::ApplyRopeRequest::BATCH_SEQ_HEADS_DIM);
  v1::ApplyRopeResponse shared_response;
  status = server_.stub->ApplyRope(Context().get(), shared, &shared_response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const std::vector<float> c = Floats(shared_response.query());
  // Row 1's ids are 0..3, the shared range: its tokens match the flat call.
  for (size_t i = seq * heads * dim; i < c.size(); ++i) ASSERT_EQ(c[i], b[i]) << i;
}

TEST_F(Float64RpcTest, BatchedShapeErrorsNameTheField) {
  v1::ApplyRopeRequest request;
  *request.mutable_query() = FloatTensor(std::vector<float>(2 * 3 * 4 * 8), {2, 3, 4, 8});
  *request.mutable_positions()->mutable_values() = Int64Tensor({0, 1, 2}, {3});
  request.mutable_spec()->mutable_rope();
  request.set_tensor_layout(v1::ApplyRopeRequest::BATCH_HEADS_SEQ_DIM);
  v1::ApplyRopeResponse response;
  grpc::Status status = server_.stub->ApplyRope(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              ::testing::StartsWith("positions.values.shape: must be [4] or [2,4]"));

  *request.mutable_positions()->mutable_values() = Int64Tensor({0, 1, 2, 3}, {4});
  *request.mutable_key() = FloatTensor(std::vector<float>(2 * 1 * 3 * 8), {2, 1, 3, 8});
  status = server_.stub->ApplyRope(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), ::testing::StartsWith("key.shape: must match query's B, T and D"));

  // No heads: no elements, but B·T shared positions would still be
  // materialised, so B·T is bounded too.
  request.clear_key();
  // [B, H, T, D] = [2^22, 0, 8, 8] holds no element; its 2^25 shared
  // positions are over the 2^24 limit.
  *request.mutable_query() = FloatTensor({}, {int64_t{1} << 22, 0, 8, 8});
  request.mutable_positions()->mutable_range()->set_count(8);
  status = server_.stub->ApplyRope(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), ::testing::StartsWith("query.shape: B·T ="));

  *request.mutable_query() = FloatTensor(std::vector<float>(3 * 4 * 8), {3, 4, 8});
  status = server_.stub->ApplyRope(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), ::testing::StartsWith("query.shape: must have 4 dimensions"));
}

TEST_F(Float64RpcTest, MropeTablesTakeOneRowPerAxis) {
  const int n = 2;
  // Axes: temporal, height, width.
  const std::vector<int64_t> ids = {3, 4, 100, 200, 7, 9};
  v1::RopeTablesRequest request;
  *request.mutable_positions()->mutable_values() = Int64Tensor(ids, {3, n});
  v1::RopeSpec* rope = request.mutable_spec()->mutable_rope();
  rope->set_rotary_dim(12);
  for (int s : {2, 2, 2}) rope->add_mrope_section(s);
  request.set_output_dtype(v1::FLOAT64);
  v1::RopeTablesResponse response;
  grpc::Status status = server_.stub->RopeTables(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_THAT(response.cos().shape(), ElementsAre(n, 6));
  const std::vector<double> cos = Doubles(response.cos());
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < 6; ++i) {
      const int64_t p = ids[(i / 2) * n + t];
      const long double theta = static_cast<double>(powl(10000.0L, -2.0L * i / 12));
      EXPECT_NEAR(cos[t * 6 + i], double(cosl(p * theta)), 4e-16);
    }
  }
  // A range cannot carry three axes.
  request.mutable_positions()->mutable_range()->set_count(2);
  status = server_.stub->RopeTables(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), ::testing::StartsWith("positions.range"));
}

}  // namespace
}  // namespace phasor::server::testing
