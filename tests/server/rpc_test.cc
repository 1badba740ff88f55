// Success paths of every Encoder RPC through a real channel, checked against
// the formulas (or, for the temporal encoder, against core/ called directly).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/adapters/dtype.h"
#include "core/temporal/compose.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace phasor::server::testing {
namespace {

constexpr double kPi = 3.14159265358979323846;

// A profiles file with one profile of each kind and a learned table
// E[r][c] = r + 0.25·c, [6, 4].
class ProfilesFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<float> table;
    for (int r = 0; r < kRows; ++r) {
      for (int c = 0; c < kDim; ++c) table.push_back(TableValue(r, c));
    }
    dir_.WriteFile("table.npy", NpyFloat32(table, kRows, kDim));
    dir_.WriteFile("omega.npy", NpyFloat32(kOmega, 3));
    dir_.WriteFile("phi.npy", NpyFloat32(kPhi, 3));
    const std::string profiles = dir_.WriteFile("profiles.txtpb", R"pb(
      profile {
        name: "tiny-wpe"
        description: "a 6-row learned table"
        spec { positional { learned { table: "tiny" } } }
        learned_tables { name: "tiny" file { path: "table.npy" } }
      }
      profile {
        name: "llama-rope"
        spec { rope { rotary_dim: 8 base: 500000 } }
      }
      profile {
        name: "vitals"
        spec {
          temporal {
            time { dim: 4 min_period_seconds: 60 max_period_seconds: 86400 }
            gaps {}
          }
        }
        holiday_calendars { name: "demo" dates: "2024-12-25" }
        time2vec { name: "t2v" omega { path: "omega.npy" } phi { path: "phi.npy" } }
      }
    )pb");
    ServerOptions options = TestOptions();
    options.profiles_path = profiles;
    server_ = StartTestServer(options);
    ASSERT_NE(server_.server, nullptr);
  }

  static float TableValue(int r, int c) { return static_cast<float>(r + 0.25 * c); }
  static constexpr int kRows = 6;
  static constexpr int kDim = 4;
  // Time2Vec parameters; float32-exact so the file holds them exactly.
  inline static const std::vector<float> kOmega = {0.5f, 0.25f, 2.0f};
  inline static const std::vector<float> kPhi = {1.0f, -0.5f, 0.125f};

  TempDir dir_;
  TestServer server_;
};

TEST_F(ProfilesFixture, SinusoidalRangeMatchesFormula) {
  v1::EncodePositionsRequest request;
  request.mutable_positions()->mutable_range()->set_count(50);
  request.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(16);
  v1::EncodePositionsResponse response;
  const grpc::Status status =
      server_.stub->EncodePositions(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_THAT(response.encodings().shape(), ::testing::ElementsAre(50, 16));
  const std::vector<float> pe = Floats(response.encodings());
  for (int t = 0; t < 50; ++t) {
    for (int k = 0; k < 8; ++k) {
      const double angle = t * std::pow(10000.0, -2.0 * k / 16);
      EXPECT_NEAR(pe[t * 16 + 2 * k], std::sin(angle), 2e-6) << t << "," << k;
      EXPECT_NEAR(pe[t * 16 + 2 * k + 1], std::cos(angle), 2e-6) << t << "," << k;
    }
  }
  // The values tutorials print for d = 16 at position 5, to four places:
  // sin 5, cos 5, sin 5ω_1, cos 5ω_1 with ω_1 = 10000^(−1/8).
  EXPECT_NEAR(pe[5 * 16 + 0], -0.9589, 5e-5);
  EXPECT_NEAR(pe[5 * 16 + 1], 0.2837, 5e-5);
  EXPECT_NEAR(pe[5 * 16 + 2], 0.9999, 5e-5);
  EXPECT_NEAR(pe[5 * 16 + 3], -0.0103, 5e-5);
}

TEST_F(ProfilesFixture, SinusoidalContentSplitLayoutAndHalfOutput) {
  const int n = 3, d = 6;
  const std::vector<double> positions = {0.5, 1e6 + 0.25, -7.0};
  std::vector<float> content(n * d);
  for (int i = 0; i < n * d; ++i) content[i] = 0.1f * static_cast<float>(i) - 0.5f;
  v1::EncodePositionsRequest request;
  *request.mutable_positions()->mutable_values() = Float64Tensor(positions, {n});
  v1::SinusoidalSpec* spec = request.mutable_spec()->mutable_positional()->mutable_sinusoidal();
  spec->set_dim(d);
  spec->set_base(100.0);
  spec->set_layout(v1::SinusoidalSpec::SPLIT_SIN_COS);
  *request.mutable_content() = FloatTensor(content, {n, d});
  request.set_content_scale(std::sqrt(6.0));
  request.set_output_dtype(v1::FLOAT16);
  v1::EncodePositionsResponse response;
  const grpc::Status status =
      server_.stub->EncodePositions(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.encodings().dtype(), v1::FLOAT16);
  ASSERT_EQ(response.encodings().data().size(), size_t{n * d * 2});
  for (int t = 0; t < n; ++t) {
    for (int k = 0; k < d / 2; ++k) {
      const double angle = positions[t] * std::pow(100.0, -2.0 * k / d);
      const double expected_sin = content[t * d + k] * std::sqrt(6.0) + std::sin(angle);
      const double expected_cos =
          content[t * d + d / 2 + k] * std::sqrt(6.0) + std::cos(angle);
      uint16_t bits[2];
      std::memcpy(&bits[0], response.encodings().data().data() + 2 * (t * d + k), 2);
      std::memcpy(&bits[1], response.encodings().data().data() + 2 * (t * d + d / 2 + k), 2);
      // fp16 keeps 11 significant bits: relative error <= 2^-11.
      EXPECT_NEAR(HalfToFloat(bits[0]), expected_sin, std::fabs(expected_sin) * 4.9e-4 + 1e-6);
      EXPECT_NEAR(HalfToFloat(bits[1]), expected_cos, std::fabs(expected_cos) * 4.9e-4 + 1e-6);
    }
  }
}

TEST_F(ProfilesFixture, LearnedTableFromProfile) {
  const std::vector<int64_t> positions = {3, 0, 5, 3};
  v1::EncodePositionsRequest request;
  *request.mutable_positions()->mutable_values() = Int64Tensor(positions, {4});
  request.set_profile("tiny-wpe");
  v1::EncodePositionsResponse response;
  const grpc::Status status =
      server_.stub->EncodePositions(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_THAT(response.encodings().shape(), ::testing::ElementsAre(4, kDim));
  const std::vector<float> out = Floats(response.encodings());
  for (size_t i = 0; i < positions.size(); ++i) {
    for (int c = 0; c < kDim; ++c) {
      EXPECT_EQ(out[i * kDim + c], TableValue(static_cast<int>(positions[i]), c));
    }
  }
}

// HF rotate_half / GPT-J interleave, written out from the RoFormer formula.
std::vector<float> RotateReference(const std::vector<float>& x, int tokens, int heads,
                                   int dim, int rotary_dim, double base,
                                   const std::vector<int64_t>& positions, bool half) {
  std::vector<float> out = x;
  for (int t = 0; t < tokens; ++t) {
    for (int h = 0; h < heads; ++h) {
      const float* in = &x[(t * heads + h) * dim];
      float* o = &out[(t * heads + h) * dim];
      for (int i = 0; i < rotary_dim / 2; ++i) {
        const double angle =
            static_cast<double>(positions[t]) * std::pow(base, -2.0 * i / rotary_dim);
        const int a = half ? i : 2 * i;
        const int b = half ? i + rotary_dim / 2 : 2 * i + 1;
        o[a] = static_cast<float>(in[a] * std::cos(angle) - in[b] * std::sin(angle));
        o[b] = static_cast<float>(in[b] * std::cos(angle) + in[a] * std::sin(angle));
      }
    }
  }
  return out;
}

std::vector<float> Ramp(int n, float scale) {
  std::vector<float> out(n);
  for (int i = 0; i < n; ++i) out[i] = scale * std::sin(0.37f * static_cast<float>(i) + 0.1f);
  return out;
}

TEST_F(ProfilesFixture, ApplyRopeHalfAndInterleavedMatchFormula) {
  const int tokens = 5, heads = 3, kv_heads = 1, dim = 8;
  const std::vector<int64_t> positions = {0, 1, 2, 1000, 123456};
  const std::vector<float> query = Ramp(tokens * heads * dim, 1.0f);
  const std::vector<float> key = Ramp(tokens * kv_heads * dim, -2.0f);
  for (const bool half : {true, false}) {
    for (const int rotary_dim : {8, 4}) {
      v1::ApplyRopeRequest request;
      *request.mutable_query() = FloatTensor(query, {tokens, heads, dim});
      *request.mutable_key() = FloatTensor(key, {tokens, kv_heads, dim});
      *request.mutable_positions()->mutable_values() = Int64Tensor(positions, {tokens});
      v1::RopeSpec* rope = request.mutable_spec()->mutable_rope();
      rope->set_rotary_dim(rotary_dim);
      rope->set_layout(half ? v1::RopeSpec::HALF : v1::RopeSpec::INTERLEAVED);
      v1::ApplyRopeResponse response;
      const grpc::Status status = server_.stub->ApplyRope(Context().get(), request, &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
      EXPECT_EQ(response.attention_factor(), 1.0);
      ASSERT_THAT(response.query().shape(), ::testing::ElementsAre(tokens, heads, dim));
      const std::vector<float> q = Floats(response.query());
      const std::vector<float> k = Floats(response.key());
      const std::vector<float> q_ref =
          RotateReference(query, tokens, heads, dim, rotary_dim, 10000, positions, half);
      const std::vector<float> k_ref =
          RotateReference(key, tokens, kv_heads, dim, rotary_dim, 10000, positions, half);
      for (size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(q[i], q_ref[i], 4e-6) << i;
      for (size_t i = 0; i < k.size(); ++i) EXPECT_NEAR(k[i], k_ref[i], 4e-6) << i;
    }
  }
}

TEST_F(ProfilesFixture, ApplyRopeBfloat16KeepsDtypeAndProfileBase) {
  const int tokens = 4, heads = 2, dim = 8;
  const std::vector<int64_t> positions = {7, 8, 9, 10};
  std::vector<float> query = Ramp(tokens * heads * dim, 1.5f);
  std::vector<uint16_t> bits(query.size());
  for (size_t i = 0; i < query.size(); ++i) {
    bits[i] = FloatToBFloat16(query[i]);
    query[i] = BFloat16ToFloat(bits[i]);  // The exact input the server sees.
  }
  v1::ApplyRopeRequest request;
  v1::Tensor* q = request.mutable_query();
  for (int extent : {tokens, heads, dim}) q->add_shape(extent);
  q->set_dtype(v1::BFLOAT16);
  q->set_data(std::string(reinterpret_cast<const char*>(bits.data()), bits.size() * 2));
  request.mutable_positions()->mutable_range()->set_start(7);
  request.mutable_positions()->mutable_range()->set_count(tokens);
  request.set_profile("llama-rope");  // rotary_dim 8, base 500000
  v1::ApplyRopeResponse response;
  const grpc::Status status = server_.stub->ApplyRope(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.query().dtype(), v1::BFLOAT16);
  ASSERT_FALSE(response.has_key());
  const std::vector<float> expected =
      RotateReference(query, tokens, heads, dim, 8, 500000, positions, /*half=*/true);
  for (size_t i = 0; i < expected.size(); ++i) {
    uint16_t out_bits;
    std::memcpy(&out_bits, response.query().data().data() + 2 * i, 2);
    // bf16 keeps 8 significant bits: relative error <= 2^-8.
    EXPECT_NEAR(BFloat16ToFloat(out_bits), expected[i],
                std::fabs(expected[i]) * 4e-3 + 1e-5) << i;
  }
}

TEST_F(ProfilesFixture, RopeTablesPlainAndLinearMatchFormula) {
  const int rotary_dim = 16;
  for (const double factor : {0.0, 4.0}) {
    v1::RopeTablesRequest request;
    request.mutable_positions()->mutable_range()->set_start(-3);
    request.mutable_positions()->mutable_range()->set_count(20);
    request.mutable_positions()->mutable_range()->set_step(1000);
    v1::RopeSpec* rope = request.mutable_spec()->mutable_rope();
    rope->set_rotary_dim(rotary_dim);
    if (factor > 0) rope->mutable_scaling()->mutable_linear()->set_factor(factor);
    v1::RopeTablesResponse response;
    const grpc::Status status = server_.stub->RopeTables(Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_THAT(response.cos().shape(), ::testing::ElementsAre(20, rotary_dim / 2));
    ASSERT_EQ(response.inv_freq_size(), rotary_dim / 2);
    const std::vector<float> cos = Floats(response.cos());
    const std::vector<float> sin = Floats(response.sin());
    for (int i = 0; i < rotary_dim / 2; ++i) {
      const double theta =
          std::pow(10000.0, -2.0 * i / rotary_dim) / (factor > 0 ? factor : 1.0);
      EXPECT_NEAR(response.inv_freq(i), theta, 1e-15 + theta * 1e-14);
      for (int r = 0; r < 20; ++r) {
        const double angle = (-3.0 + 1000.0 * r) * theta;
        EXPECT_NEAR(cos[r * rotary_dim / 2 + i], std::cos(angle), 2e-6);
        EXPECT_NEAR(sin[r * rotary_dim / 2 + i], std::sin(angle), 2e-6);
      }
    }
  }
}

TEST_F(ProfilesFixture, YarnAttentionFactorIsFoldedOrReported) {
  const double factor = 4.0;
  for (const bool fold : {true, false}) {
    v1::RopeTablesRequest request;
    request.mutable_positions()->mutable_range()->set_count(8);
    v1::RopeSpec* rope = request.mutable_spec()->mutable_rope();
    rope->set_rotary_dim(32);
    rope->set_max_position_embeddings(4096);
    rope->set_fold_attention_factor(fold);
    v1::RopeScaling::Yarn* yarn = rope->mutable_scaling()->mutable_yarn();
    yarn->set_factor(factor);
    yarn->set_original_max_position_embeddings(1024);
    v1::RopeTablesResponse response;
    const grpc::Status status = server_.stub->RopeTables(Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    // YaRN paper eq. 22 / HF get_mscale: 0.1·ln(s) + 1.
    const double attention = 0.1 * std::log(factor) + 1.0;
    EXPECT_NEAR(response.attention_factor(), attention, 1e-12);
    const std::vector<float> cos = Floats(response.cos());
    const std::vector<float> sin = Floats(response.sin());
    const double norm = fold ? attention : 1.0;
    for (size_t i = 0; i < cos.size(); ++i) {
      EXPECT_NEAR(std::hypot(cos[i], sin[i]), norm, 4e-6) << i;
    }
    // The slowest pair is fully interpolated (θ/f), the fastest untouched.
    EXPECT_NEAR(response.inv_freq(0), 1.0, 1e-15);
    EXPECT_NEAR(response.inv_freq(15), std::pow(10000.0, -30.0 / 32) / factor, 1e-15);
  }
}

TEST_F(ProfilesFixture, AlibiSlopesAndBias) {
  {
    v1::AlibiBiasRequest request;
    request.set_num_heads(8);
    request.set_q_len(3);
    request.set_k_len(5);
    request.set_causal(true);
    v1::AlibiBiasResponse response;
    const grpc::Status status = server_.stub->AlibiBias(Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    const std::vector<float> slopes = Floats(response.slopes());
    ASSERT_EQ(slopes.size(), 8u);
    for (int h = 0; h < 8; ++h) EXPECT_EQ(slopes[h], std::ldexp(1.0f, -(h + 1)));
    ASSERT_THAT(response.bias().shape(), ::testing::ElementsAre(8, 3, 5));
    const std::vector<float> bias = Floats(response.bias());
    for (int h = 0; h < 8; ++h) {
      for (int i = 0; i < 3; ++i) {
        const int position = 5 - 3 + i;  // Queries are the last q_len keys.
        for (int j = 0; j < 5; ++j) {
          const float value = bias[(h * 3 + i) * 5 + j];
          if (j > position) {
            EXPECT_TRUE(std::isinf(value) && value < 0) << h << i << j;
          } else {
            EXPECT_FLOAT_EQ(value, -slopes[h] * static_cast<float>(position - j));
          }
        }
      }
    }
  }
  {
    // 6 heads (not a power of two): Press et al.'s get_slopes gives the 4-head
    // slopes 2^-2, 2^-4, 2^-6, 2^-8, then every other 8-head slope: 2^-1, 2^-3.
    v1::AlibiBiasRequest request;
    request.set_num_heads(6);
    v1::AlibiBiasResponse response;
    const grpc::Status status = server_.stub->AlibiBias(Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_THAT(Floats(response.slopes()),
                ::testing::ElementsAre(0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f));
    EXPECT_FALSE(response.has_bias());
  }
}

TEST_F(ProfilesFixture, DescribeSinusoidalMatchesClosedForm) {
  v1::DescribeRequest request;
  request.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(32);
  request.set_num_offsets(131);
  v1::DescribeResponse response;
  const grpc::Status status = server_.stub->Describe(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.unit(), "positions");
  ASSERT_EQ(response.wavelengths_size(), 16);
  // Wavelengths 2π·10000^(2j/32) of pairs j = 0, 4 and 15, worked out by hand.
  EXPECT_NEAR(response.wavelengths(0), 6.283185307179586, 1e-12);
  EXPECT_NEAR(response.wavelengths(4), 62.83185307179586, 1e-10);
  EXPECT_NEAR(response.wavelengths(15), 35332.94752055899, 1e-7);
  EXPECT_NEAR(response.unambiguous_range(), 35332.94752055899, 1e-7);
  ASSERT_EQ(response.similarity_size(), 131);
  EXPECT_NEAR(response.similarity(0), 16.0, 1e-12);
  double nearest = 1e300;
  int64_t nearest_offset = 0;
  for (int k = 0; k < 131; ++k) {
    double sum = 0, squared = 0;
    for (int j = 0; j < 16; ++j) {
      const double omega = std::pow(10000.0, -2.0 * j / 32);
      sum += std::cos(omega * k);
      squared += 2 - 2 * std::cos(omega * k);
    }
    EXPECT_NEAR(response.similarity(k), sum, 1e-12) << k;
    if (k > 0 && squared < nearest) {
      nearest = squared;
      nearest_offset = k;
    }
  }
  EXPECT_NEAR(response.nearest_code_distance(), std::sqrt(nearest), 1e-9);
  EXPECT_EQ(response.nearest_code_offset(), nearest_offset);
  // A fixed figure of the d = 32 ladder, independent of the loop above:
  // over k = 0..39 the similarity is smallest at k = 28.
  const auto first40 = response.similarity().begin();
  const auto lowest = std::min_element(first40, first40 + 40);
  EXPECT_EQ(lowest - first40, 28);
  EXPECT_NEAR(*lowest, 5.968563765195686, 1e-12);
}

TEST_F(ProfilesFixture, DescribeTimeLadderAndRope) {
  {
    v1::DescribeRequest request;
    request.set_profile("vitals");  // time: dim 4, periods 60 s .. 86400 s
    v1::DescribeResponse response;
    const grpc::Status status = server_.stub->Describe(Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.unit(), "seconds");
    ASSERT_EQ(response.wavelengths_size(), 2);
    EXPECT_NEAR(response.wavelengths(0), 60.0, 1e-9);
    EXPECT_NEAR(response.wavelengths(1), 86400.0, 1e-7);
    EXPECT_EQ(response.similarity_size(), 64);  // The default K.
  }
  {
    v1::DescribeRequest request;
    v1::RopeSpec* rope = request.mutable_spec()->mutable_rope();
    rope->set_rotary_dim(8);
    rope->set_base(500000);
    request.set_num_offsets(4);
    v1::DescribeResponse response;
    const grpc::Status status = server_.stub->Describe(Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.frequencies_size(), 4);
    for (int i = 0; i < 4; ++i) {
      EXPECT_NEAR(response.frequencies(i), std::pow(500000.0, -2.0 * i / 8), 1e-15);
    }
    EXPECT_NEAR(response.wavelengths(3), 2 * kPi / std::pow(500000.0, -6.0 / 8), 1e-6);
  }
}

// Describe's frequencies for a rope spec are RopeTables' inv_freq for the
// same spec and positions whose largest is seq_len − 1.
class DescribeSeqLenTest : public ProfilesFixture {
 protected:
  v1::DescribeResponse Describe(const v1::RopeSpec& rope, int64_t seq_len) {
    v1::DescribeRequest request;
    *request.mutable_spec()->mutable_rope() = rope;
    request.set_seq_len(seq_len);
    request.set_num_offsets(2);
    v1::DescribeResponse response;
    const grpc::Status status = server_.stub->Describe(Context().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // inv_freq of RopeTables at positions {0, largest}: the server's default
  // sequence length is then largest + 1.
  std::vector<double> TablesInvFreq(const v1::RopeSpec& rope, int64_t largest) {
    v1::RopeTablesRequest request;
    const std::vector<int64_t> positions = {0, largest};
    *request.mutable_positions()->mutable_values() = Int64Tensor(positions, {2});
    *request.mutable_spec()->mutable_rope() = rope;
    v1::RopeTablesResponse response;
    const grpc::Status status = server_.stub->RopeTables(Context().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return {response.inv_freq().begin(), response.inv_freq().end()};
  }

  static std::vector<double> Frequencies(const v1::DescribeResponse& response) {
    return {response.frequencies().begin(), response.frequencies().end()};
  }
};

TEST_F(DescribeSeqLenTest, DynamicUsesTheScaledFrequenciesApplyRopeWould) {
  v1::RopeSpec rope;
  rope.set_rotary_dim(16);
  rope.set_max_position_embeddings(4096);
  rope.mutable_scaling()->mutable_dynamic()->set_factor(4);

  const v1::DescribeResponse at_100k = Describe(rope, /*seq_len=*/100000);
  EXPECT_EQ(at_100k.seq_len(), 100000);
  const std::vector<double> scaled = TablesInvFreq(rope, /*largest=*/99999);
  ASSERT_EQ(scaled.size(), 8u);
  EXPECT_EQ(Frequencies(at_100k), scaled);  // Same doubles, bit for bit.
  // base' = 10000·(4·100000/4096 − 3)^(16/14): every pair but the first is
  // slower than plain RoPE's.
  const double stretch = 4.0 * 100000 / 4096 - 3;
  const double scaled_base = 10000.0 * std::pow(stretch, 16.0 / 14);
  for (int i = 0; i < 8; ++i) {
    const double expected = std::pow(scaled_base, -2.0 * i / 16);
    EXPECT_NEAR(at_100k.frequencies(i), expected, expected * 1e-14) << i;
  }

  // Without seq_len: max_position_embeddings, where dynamic is unscaled.
  const v1::DescribeResponse by_default = Describe(rope, /*seq_len=*/0);
  EXPECT_EQ(by_default.seq_len(), 4096);
  EXPECT_EQ(Frequencies(by_default), TablesInvFreq(rope, /*largest=*/4095));
  for (int i = 0; i < 8; ++i) {
    const double plain = std::pow(10000.0, -2.0 * i / 16);
    EXPECT_NEAR(by_default.frequencies(i), plain, plain * 1e-14) << i;
  }
  EXPECT_GT(by_default.frequencies(7), 2 * at_100k.frequencies(7));
}

TEST_F(DescribeSeqLenTest, LongRopeChoosesShortOrLongFactorsBySeqLen) {
  v1::RopeSpec rope;
  rope.set_rotary_dim(8);
  rope.set_max_position_embeddings(8192);
  v1::RopeScaling::LongRope* longrope = rope.mutable_scaling()->mutable_longrope();
  for (const double f : {1.0, 1.5, 2.0, 2.5}) longrope->add_short_factor(f);
  for (const double f : {2.0, 3.0, 4.0, 5.0}) longrope->add_long_factor(f);
  longrope->set_original_max_position_embeddings(4096);

  const v1::DescribeResponse short_context = Describe(rope, /*seq_len=*/4096);
  EXPECT_EQ(short_context.seq_len(), 4096);
  EXPECT_EQ(Frequencies(short_context), TablesInvFreq(rope, /*largest=*/4095));
  EXPECT_NEAR(short_context.frequencies(1), std::pow(10000.0, -0.25) / 1.5, 1e-15);

  const v1::DescribeResponse long_context = Describe(rope, /*seq_len=*/4097);
  EXPECT_EQ(Frequencies(long_context), TablesInvFreq(rope, /*largest=*/4096));
  EXPECT_NEAR(long_context.frequencies(1), std::pow(10000.0, -0.25) / 3.0, 1e-15);

  // Default: what HF builds at initialisation (seq_len None), the short
  // factors, reported as original_max_position_embeddings.
  const v1::DescribeResponse by_default = Describe(rope, /*seq_len=*/0);
  EXPECT_EQ(by_default.seq_len(), 4096);
  EXPECT_EQ(Frequencies(by_default), Frequencies(short_context));

  // A spec that pins seq_len wins, as it does in ApplyRope and RopeTables
  // (whatever the positions), and the response says so.
  rope.set_seq_len(100);
  const v1::DescribeResponse pinned = Describe(rope, /*seq_len=*/100000);
  EXPECT_EQ(pinned.seq_len(), 100);
  EXPECT_EQ(Frequencies(pinned), Frequencies(short_context));
  EXPECT_EQ(Frequencies(pinned), TablesInvFreq(rope, /*largest=*/99999));
}

TEST_F(DescribeSeqLenTest, ReportsNoSeqLenForSpecsThatDoNotDependOnIt) {
  v1::DescribeRequest request;
  request.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(8);
  v1::DescribeResponse response;
  const grpc::Status status = server_.stub->Describe(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.seq_len(), 0);
  // Plain RoPE without max_position_embeddings: seq_len 1 (any gives the
  // same frequencies).
  v1::RopeSpec rope;
  rope.set_rotary_dim(8);
  EXPECT_EQ(Describe(rope, /*seq_len=*/0).seq_len(), 1);
}

TEST_F(ProfilesFixture, ListProfilesSortedWithTables) {
  v1::ListProfilesResponse response;
  const grpc::Status status =
      server_.stub->ListProfiles(Context().get(), v1::ListProfilesRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.profiles_size(), 3);
  EXPECT_EQ(response.profiles(0).name(), "llama-rope");
  EXPECT_EQ(response.profiles(1).name(), "tiny-wpe");
  EXPECT_EQ(response.profiles(2).name(), "vitals");
  EXPECT_EQ(response.profiles(1).description(), "a 6-row learned table");
  ASSERT_EQ(response.profiles(1).learned_tables_size(), 1);
  EXPECT_EQ(response.profiles(1).learned_tables(0).rows(), kRows);
  EXPECT_EQ(response.profiles(1).learned_tables(0).dim(), kDim);
  EXPECT_TRUE(response.profiles(0).spec().has_rope());
  EXPECT_THAT(response.profiles(2).holiday_calendars(), ::testing::ElementsAre("demo"));
}

int64_t Ns(int64_t seconds) { return seconds * 1000000000; }

// A wide two-channel series across the 2024 US spring-forward: 2024-03-10
// 06:30Z is 01:30 EST; 07:30Z is 03:30 EDT.
struct WideSeries {
  std::vector<int64_t> timestamps;
  std::vector<double> values;  // [T, 2], NaN = not observed
};
WideSeries DstSeries() {
  const int64_t base = 1710052200;  // 2024-03-10T06:30:00Z
  const double nan = std::nan("");
  return {{Ns(base), Ns(base + 1800), Ns(base + 3600), Ns(base + 3600), Ns(base + 9000)},
          {1.0, nan, nan, 2.0, 3.0, nan, nan, 4.0, 5.0, 6.0}};
}

v1::EncodeObservationsRequest WideRequest(const WideSeries& series) {
  v1::EncodeObservationsRequest request;
  const int64_t rows = static_cast<int64_t>(series.timestamps.size());
  *request.mutable_observations()->mutable_timestamps() =
      Int64Tensor(series.timestamps, {rows});
  *request.mutable_observations()->mutable_values() =
      Float64Tensor(series.values, {rows, 2});
  v1::TemporalSpec* spec = request.mutable_spec()->mutable_temporal();
  spec->mutable_time()->set_dim(4);
  spec->mutable_time()->set_min_period_seconds(60);
  spec->mutable_time()->set_max_period_seconds(86400);
  spec->mutable_gaps();  // Δt and per-channel δ, RAW seconds.
  spec->mutable_calendar()->set_time_zone("America/New_York");
  spec->mutable_calendar()->add_fields(v1::CalendarBlock::HOUR_OF_DAY);
  return request;
}

TEST_F(ProfilesFixture, EncodeObservationsMatchesCoreAndFormulas) {
  const WideSeries series = DstSeries();
  v1::EncodeObservationsRequest request = WideRequest(series);
  request.mutable_observations()->add_channel_names("heart_rate");
  request.mutable_observations()->add_channel_names("spo2");
  v1::EncodeObservationsResponse response;
  const grpc::Status status =
      server_.stub->EncodeObservations(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const int64_t rows = 5;
  ASSERT_EQ(response.features().shape(0), rows);
  const int64_t width = response.features().shape(1);
  const std::vector<float> features = Floats(response.features());

  // Against core/ directly, with the same spec.
  TemporalSpec spec;
  spec.time = TimeBlock{4, 60, 86400, OriginKind::kFirstObservation, 0, {}};
  spec.gaps = GapsBlock{};
  spec.calendar = CalendarBlock{};
  spec.calendar->time_zone = "America/New_York";
  spec.calendar->fields = {CalendarField::kHourOfDay};
  ObservationsView view;
  view.num_channels = 2;
  view.timestamps = series.timestamps;
  view.values.f64 = series.values;
  std::vector<float> expected(rows * width);
  SeriesState state;
  ASSERT_TRUE(EncodeObservations(spec, view, nullptr, ExecutionOptions{},
                                 absl::MakeSpan(expected), &state)
                  .ok());
  EXPECT_EQ(std::memcmp(features.data(), expected.data(), expected.size() * 4), 0);

  // And a few columns from their formulas, located through the schema.
  auto column = [&](const std::string& block) -> int64_t {
    for (const v1::SchemaEntry& entry : response.schema()) {
      if (entry.block() == block) return entry.offset();
    }
    ADD_FAILURE() << "no schema entry " << block;
    return 0;
  };
  const int64_t delta = column("gaps.global_delta");
  const int64_t hour = column("calendar.hour_of_day");
  const int64_t per_channel = column("gaps.delta");
  const double expected_delta[] = {0, 1800, 1800, 0, 5400};
  for (int r = 0; r < rows; ++r) {
    EXPECT_NEAR(features[r * width + delta], expected_delta[r], 1e-3) << r;
  }
  // Local hours 01:30 EST and, after the clocks jump, 02:00 → 03:00 EDT.
  EXPECT_NEAR(features[0 * width + hour], std::sin(2 * kPi * 1 / 24), 2e-6);
  EXPECT_NEAR(features[2 * width + hour], std::sin(2 * kPi * 3 / 24), 2e-6);
  EXPECT_NEAR(features[2 * width + hour + 1], std::cos(2 * kPi * 3 / 24), 2e-6);
  // GRU-D δ looks strictly back in time: both rows at t0 + 3600 s see
  // channel 1's observation at t0 + 1800 s, whatever their order; row 4
  // (t0 + 9000 s) sees the one at t0 + 3600 s.
  EXPECT_NEAR(features[2 * width + per_channel + 1], 1800, 1e-3);
  EXPECT_NEAR(features[3 * width + per_channel + 1], 1800, 1e-3);
  EXPECT_NEAR(features[4 * width + per_channel + 1], 5400, 1e-3);
  EXPECT_NEAR(features[1 * width + per_channel + 0], 1800, 1e-3);
  // The channel names reach the per-channel schema entries.
  for (const v1::SchemaEntry& entry : response.schema()) {
    if (entry.block() == "gaps.delta") {
      EXPECT_THAT(entry.meaning(), ::testing::HasSubstr("heart_rate, spo2"));
    }
  }
  // The state says where the series ended.
  EXPECT_EQ(response.state().last_timestamp_ns(), series.timestamps.back());
  EXPECT_EQ(response.state().first_timestamp_ns(), series.timestamps.front());
  ASSERT_EQ(response.state().channels_size(), 2);
  EXPECT_EQ(response.state().channels(0).last_value(), 5.0);
}

TEST_F(ProfilesFixture, EncodeObservationsLongLayoutWithSecondsAndProfile) {
  // Long triplets with float64 seconds; the "vitals" profile (time + gaps).
  const std::vector<double> times = {100.0, 100.0, 160.5, 400.0};
  const std::vector<int32_t> channels = {0, 2, 1, 0};
  const std::vector<float> values = {1, 2, 3, 4};
  v1::EncodeObservationsRequest request;
  v1::Observations* observations = request.mutable_observations();
  *observations->mutable_event_times() = Float64Tensor(times, {4});
  v1::Tensor* channel_tensor = observations->mutable_event_channels();
  channel_tensor->add_shape(4);
  channel_tensor->set_dtype(v1::INT32);
  channel_tensor->set_data(std::string(reinterpret_cast<const char*>(channels.data()), 16));
  *observations->mutable_event_values() = FloatTensor(values, {4});
  request.set_profile("vitals");
  v1::EncodeObservationsResponse response;
  const grpc::Status status =
      server_.stub->EncodeObservations(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  // time (4) + Δt (1) + δ for 3 channels (1 + max channel).
  ASSERT_THAT(response.features().shape(), ::testing::ElementsAre(4, 4 + 1 + 3));
  const std::vector<float> features = Floats(response.features());
  // The time block at row 2: τ = 60.5 s, first period 60 s.
  EXPECT_NEAR(features[2 * 8 + 0], std::sin(2 * kPi * 60.5 / 60), 2e-6);
  EXPECT_NEAR(features[2 * 8 + 1], std::cos(2 * kPi * 60.5 / 60), 2e-6);
  // Δt at row 3 = 239.5 s; δ of channel 0 at row 3 = 300 s.
  EXPECT_NEAR(features[3 * 8 + 4], 239.5, 1e-4);
  EXPECT_NEAR(features[3 * 8 + 5], 300.0, 1e-4);
}

TEST_F(ProfilesFixture, Time2VecParametersFromProfileFiles) {
  const std::vector<int64_t> times = {Ns(1000), Ns(1090), Ns(1600)};
  v1::EncodeObservationsRequest request;
  *request.mutable_observations()->mutable_timestamps() = Int64Tensor(times, {3});
  v1::Time2VecBlock* t2v = request.mutable_spec()->mutable_temporal()->mutable_time2vec();
  t2v->set_parameters("t2v");
  t2v->set_unit_seconds(60);  // τ in minutes
  v1::EncodeObservationsResponse response;
  const grpc::Status status =
      server_.stub->EncodeObservations(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_THAT(response.features().shape(), ::testing::ElementsAre(3, 3));
  const std::vector<float> features = Floats(response.features());
  for (int r = 0; r < 3; ++r) {
    const double tau = static_cast<double>(times[r] - times[0]) / Ns(60);
    // Kazemi et al. 2019, eq. 1: one linear term, then periodic ones.
    EXPECT_NEAR(features[r * 3 + 0], kOmega[0] * tau + kPhi[0], 2e-6) << r;
    for (int i = 1; i < 3; ++i) {
      EXPECT_NEAR(features[r * 3 + i], std::sin(kOmega[i] * tau + kPhi[i]), 2e-6) << r;
    }
  }
  // Inline parameters and a name at once are ambiguous.
  t2v->add_omega(1.0);
  t2v->add_phi(0.0);
  const grpc::Status both =
      server_.stub->EncodeObservations(Context().get(), request, &response);
  EXPECT_EQ(both.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(both.error_message(),
              ::testing::StartsWith("spec.temporal.time2vec.parameters: "));
}

TEST_F(ProfilesFixture, EchoReturnsPayloadWhenEnabled) {
  ServerOptions options = TestOptions();
  options.enable_echo = true;
  TestServer echo = StartTestServer(options);
  v1::EchoRequest request;
  request.set_payload(std::string("\x00\x01phasor\xff", 9));
  v1::EchoResponse response;
  const grpc::Status status = echo.stub->Echo(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.payload(), request.payload());
  // The default server does not serve it.
  const grpc::Status disabled = server_.stub->Echo(Context().get(), request, &response);
  EXPECT_EQ(disabled.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(disabled.error_message(), ::testing::HasSubstr("--enable_echo"));
}

}  // namespace
}  // namespace phasor::server::testing
