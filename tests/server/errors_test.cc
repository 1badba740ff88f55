// The error model: each bad input gets the most specific code, a message
// starting with the field path, and a google.rpc.BadRequest naming it; the
// server keeps serving afterwards.
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace phasor::server::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class ErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.WriteFile("table.npy", NpyFloat32(std::vector<float>(4 * 2, 0.5f), 4, 2));
    ServerOptions options = TestOptions();
    options.profiles_path = dir_.WriteFile("profiles.txtpb", R"pb(
      profile {
        name: "four-rows"
        spec { positional { learned { table: "four" } } }
        learned_tables { name: "four" file { path: "table.npy" } }
      }
      profile { name: "rope16" spec { rope { rotary_dim: 16 } } }
    )pb");
    options.max_elements_per_request = 100000;
    options.max_message_bytes = 1 << 20;
    server_ = StartTestServer(options);
    ASSERT_NE(server_.server, nullptr);
  }

  // Asserts `status` has `code`, a message starting with `field`, and one
  // BadRequest violation naming `field`.
  static void ExpectFieldError(const grpc::Status& status, grpc::StatusCode code,
                               const std::string& field) {
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_THAT(status.error_message(), StartsWith(field + ": "));
    const google::rpc::BadRequest bad = BadRequestOf(status);
    ASSERT_EQ(bad.field_violations_size(), 1) << status.error_message();
    EXPECT_EQ(bad.field_violations(0).field(), field);
    EXPECT_FALSE(bad.field_violations(0).description().empty());
  }

  void ExpectStillServing() { ExpectServing(*server_.stub); }

  TempDir dir_;
  TestServer server_;
};

v1::ApplyRopeRequest RopeRequest(int tokens, int heads, int dim) {
  v1::ApplyRopeRequest request;
  *request.mutable_query() =
      FloatTensor(std::vector<float>(tokens * heads * dim, 0.25f), {tokens, heads, dim});
  request.mutable_positions()->mutable_range()->set_count(tokens);
  request.mutable_spec()->mutable_rope();
  return request;
}

TEST_F(ErrorsTest, TensorByteCountMismatchNamesTheField) {
  v1::ApplyRopeRequest request = RopeRequest(2, 4, 128);
  request.mutable_query()->mutable_data()->resize(4000);
  v1::ApplyRopeResponse response;
  const grpc::Status status = server_.stub->ApplyRope(Context().get(), request, &response);
  ExpectFieldError(status, grpc::StatusCode::INVALID_ARGUMENT, "query.data");
  EXPECT_EQ(status.error_message(),
            "query.data: expected 4096 bytes for shape [2,4,128] float32, got 4000");
  ExpectStillServing();
}

TEST_F(ErrorsTest, WrongDtypeAndRank) {
  v1::ApplyRopeRequest request = RopeRequest(2, 1, 4);
  request.mutable_query()->set_dtype(v1::INT64);
  v1::ApplyRopeResponse response;
  ExpectFieldError(server_.stub->ApplyRope(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT, "query.dtype");
  request = RopeRequest(2, 1, 4);
  request.mutable_query()->clear_shape();
  request.mutable_query()->add_shape(8);
  ExpectFieldError(server_.stub->ApplyRope(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT, "query.shape");
}

// HF main only warns when beta_fast < beta_slow (modeling_rope_utils.py,
// _validate_yarn_rope_parameters) and computes anyway; so does Phasor.
TEST_F(ErrorsTest, YarnBetaFastBelowBetaSlowIsAcceptedAsInHf) {
  v1::ApplyRopeRequest request = RopeRequest(2, 1, 8);
  v1::RopeScaling::Yarn* yarn =
      request.mutable_spec()->mutable_rope()->mutable_scaling()->mutable_yarn();
  yarn->set_factor(4);
  yarn->set_original_max_position_embeddings(2048);
  yarn->set_beta_fast(1);
  yarn->set_beta_slow(2);
  v1::ApplyRopeResponse response;
  const grpc::Status status = server_.stub->ApplyRope(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_NEAR(response.attention_factor(), 0.1 * std::log(4.0) + 1.0, 1e-15);
}

TEST_F(ErrorsTest, YarnNegativeBetaNamesTheField) {
  v1::ApplyRopeRequest request = RopeRequest(2, 1, 8);
  v1::RopeScaling::Yarn* yarn =
      request.mutable_spec()->mutable_rope()->mutable_scaling()->mutable_yarn();
  yarn->set_factor(4);
  yarn->set_original_max_position_embeddings(2048);
  yarn->set_beta_slow(-1);
  v1::ApplyRopeResponse response;
  ExpectFieldError(server_.stub->ApplyRope(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT,
                   "spec.rope.scaling.yarn.beta_slow");
}

TEST_F(ErrorsTest, ScalingFactorAtOrBelowZeroNamesTheField) {
  v1::ApplyRopeRequest request = RopeRequest(2, 1, 8);
  request.mutable_spec()->mutable_rope()->mutable_scaling()->mutable_linear()->set_factor(
      -2);
  v1::ApplyRopeResponse response;
  ExpectFieldError(server_.stub->ApplyRope(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT,
                   "spec.rope.scaling.linear.factor");
  // Below 1 is only a warning in HF: accepted.
  request.mutable_spec()->mutable_rope()->mutable_scaling()->mutable_linear()->set_factor(
      0.5);
  EXPECT_TRUE(server_.stub->ApplyRope(Context().get(), request, &response).ok());
}

TEST_F(ErrorsTest, Llama3FactorIsRequired) {
  v1::RopeTablesRequest request;
  request.mutable_positions()->mutable_range()->set_count(4);
  request.mutable_spec()->mutable_rope()->set_rotary_dim(8);
  request.mutable_spec()->mutable_rope()->mutable_scaling()->mutable_llama3();
  v1::RopeTablesResponse response;
  ExpectFieldError(server_.stub->RopeTables(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT,
                   "spec.rope.scaling.llama3.factor");
}

// HF fills llama3's original_max_position_embeddings from the config's
// max_position_embeddings (RotaryEmbeddingConfigMixin.standardize_rope_params).
TEST_F(ErrorsTest, Llama3OriginalDefaultsToSpecMaxPositionEmbeddings) {
  enum class Original { kFromMax, kExplicit, kAbsent };
  auto tables = [&](Original original) {
    v1::RopeTablesRequest request;
    request.mutable_positions()->mutable_range()->set_count(4);
    v1::RopeSpec* rope = request.mutable_spec()->mutable_rope();
    rope->set_rotary_dim(128);
    rope->set_base(500000);
    v1::RopeScaling::Llama3* llama3 = rope->mutable_scaling()->mutable_llama3();
    llama3->set_factor(8);
    if (original == Original::kExplicit) {
      llama3->set_original_max_position_embeddings(1024);
    } else if (original == Original::kFromMax) {
      rope->set_max_position_embeddings(1024);
    }
    v1::RopeTablesResponse response;
    const grpc::Status status =
        server_.stub->RopeTables(Context().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.cos().data();
  };
  const std::string from_max = tables(Original::kFromMax);
  EXPECT_FALSE(from_max.empty());
  EXPECT_EQ(from_max, tables(Original::kExplicit));
  EXPECT_NE(from_max, tables(Original::kAbsent));  // 8192, Meta's value.
}

TEST_F(ErrorsTest, DynamicScalingNeedsMaxPositionEmbeddingsOnTheWirePath) {
  v1::RopeTablesRequest request;
  request.mutable_positions()->mutable_range()->set_count(4);
  request.mutable_spec()->mutable_rope()->set_rotary_dim(8);
  request.mutable_spec()->mutable_rope()->mutable_scaling()->mutable_dynamic()->set_factor(2);
  v1::RopeTablesResponse response;
  ExpectFieldError(server_.stub->RopeTables(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT,
                   "spec.rope.max_position_embeddings");
}

TEST_F(ErrorsTest, AlibiOneLengthWithoutTheOtherNamesTheMissingField) {
  v1::AlibiBiasRequest request;
  request.set_num_heads(4);
  request.set_q_len(3);  // k_len missing: not "must be <= k_len (0)".
  v1::AlibiBiasResponse response;
  grpc::Status status = server_.stub->AlibiBias(Context().get(), request, &response);
  ExpectFieldError(status, grpc::StatusCode::INVALID_ARGUMENT, "k_len");
  EXPECT_THAT(status.error_message(), HasSubstr("required"));
  request.clear_q_len();
  request.set_k_len(5);  // q_len missing: not slopes alone with OK.
  status = server_.stub->AlibiBias(Context().get(), request, &response);
  ExpectFieldError(status, grpc::StatusCode::INVALID_ARGUMENT, "q_len");
  EXPECT_THAT(status.error_message(), HasSubstr("required"));
  EXPECT_FALSE(response.has_bias());
  ExpectStillServing();
}

TEST_F(ErrorsTest, DescribeSeqLenIsForRopeSpecsAndNotNegative) {
  v1::DescribeRequest request;
  request.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(8);
  request.set_seq_len(100);
  v1::DescribeResponse response;
  ExpectFieldError(server_.stub->Describe(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT, "seq_len");
  request.mutable_spec()->mutable_rope()->set_rotary_dim(8);
  request.set_seq_len(-1);
  ExpectFieldError(server_.stub->Describe(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT, "seq_len");
}

TEST_F(ErrorsTest, OddSinusoidalDim) {
  v1::EncodePositionsRequest request;
  request.mutable_positions()->mutable_range()->set_count(3);
  request.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(7);
  v1::EncodePositionsResponse response;
  ExpectFieldError(server_.stub->EncodePositions(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT, "spec.positional.sinusoidal.dim");
}

TEST_F(ErrorsTest, WrongSpecKindForTheRpc) {
  v1::EncodePositionsRequest request;
  request.mutable_positions()->mutable_range()->set_count(3);
  request.mutable_spec()->mutable_rope()->set_rotary_dim(8);
  v1::EncodePositionsResponse response;
  ExpectFieldError(server_.stub->EncodePositions(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT, "spec.positional");
  request.clear_spec();
  ExpectFieldError(server_.stub->EncodePositions(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT, "spec");
}

TEST_F(ErrorsTest, PositionBeyondLearnedTableIsOutOfRange) {
  v1::EncodePositionsRequest request;
  const std::vector<int64_t> positions = {0, 3, 4};
  *request.mutable_positions()->mutable_values() = Int64Tensor(positions, {3});
  request.set_profile("four-rows");
  v1::EncodePositionsResponse response;
  const grpc::Status status =
      server_.stub->EncodePositions(Context().get(), request, &response);
  // core/ says "positions[2]"; the client sent positions.values.
  ExpectFieldError(status, grpc::StatusCode::OUT_OF_RANGE, "positions.values[2]");
  EXPECT_THAT(status.error_message(), HasSubstr("4 rows"));
  // A range has no elements on the wire: the range is named, and the index
  // and position are in the description.
  request.mutable_positions()->mutable_range()->set_start(1);
  request.mutable_positions()->mutable_range()->set_count(5);
  const grpc::Status range =
      server_.stub->EncodePositions(Context().get(), request, &response);
  ExpectFieldError(range, grpc::StatusCode::OUT_OF_RANGE, "positions.range");
  EXPECT_EQ(range.error_message(),
            "positions.range: element 3 of the range: position 4 is outside the "
            "learned table of 4 rows (valid: 0..3)");
  // Whole-number real positions index the table; others are named by index.
  const std::vector<double> reals = {0.0, 1.5};
  *request.mutable_positions()->mutable_values() = Float64Tensor(reals, {2});
  ExpectFieldError(server_.stub->EncodePositions(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT, "positions.values[1]");
  ExpectStillServing();
}

// A request naming a profile sent no spec: an error in the profile's spec
// (here rotary_dim 16 against the request's 8-wide heads) is on "profile".
TEST_F(ErrorsTest, ProfileSpecErrorsNameTheProfile) {
  v1::ApplyRopeRequest request = RopeRequest(2, 1, 8);
  request.set_profile("rope16");
  v1::ApplyRopeResponse response;
  const grpc::Status status = server_.stub->ApplyRope(Context().get(), request, &response);
  ExpectFieldError(status, grpc::StatusCode::INVALID_ARGUMENT, "profile");
  EXPECT_THAT(status.error_message(),
              StartsWith("profile: profile 'rope16' spec.rope.rotary_dim: must be even and "
                         "<= head_dim 8"));
  // Inline, the same spec is named by its own path.
  request.mutable_spec()->mutable_rope()->set_rotary_dim(16);
  ExpectFieldError(server_.stub->ApplyRope(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT, "spec.rope.rotary_dim");
}

TEST_F(ErrorsTest, UnknownProfileAndTableAreNotFound) {
  v1::EncodePositionsRequest request;
  request.mutable_positions()->mutable_range()->set_count(3);
  request.set_profile("no-such-profile");
  v1::EncodePositionsResponse response;
  ExpectFieldError(server_.stub->EncodePositions(Context().get(), request, &response),
                   grpc::StatusCode::NOT_FOUND, "profile");
  request.mutable_spec()->mutable_positional()->mutable_learned()->set_table("nope");
  ExpectFieldError(server_.stub->EncodePositions(Context().get(), request, &response),
                   grpc::StatusCode::NOT_FOUND, "spec.positional.learned.table");
}

TEST_F(ErrorsTest, ElementCapIsResourceExhausted) {
  v1::EncodePositionsRequest request;
  request.mutable_positions()->mutable_range()->set_count(int64_t{1} << 40);
  request.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(8);
  v1::EncodePositionsResponse response;
  ExpectFieldError(server_.stub->EncodePositions(Context().get(), request, &response),
                   grpc::StatusCode::RESOURCE_EXHAUSTED, "positions.range.count");
  // Within the position count but over the cap once multiplied by dim.
  request.mutable_positions()->mutable_range()->set_count(20000);
  ExpectFieldError(server_.stub->EncodePositions(Context().get(), request, &response),
                   grpc::StatusCode::RESOURCE_EXHAUSTED, "positions");
  // ALiBi's bias grows as heads·q·k.
  v1::AlibiBiasRequest alibi;
  alibi.set_num_heads(64);
  alibi.set_q_len(1000);
  alibi.set_k_len(1000);
  v1::AlibiBiasResponse alibi_response;
  ExpectFieldError(server_.stub->AlibiBias(Context().get(), alibi, &alibi_response),
                   grpc::StatusCode::RESOURCE_EXHAUSTED, "k_len");
  ExpectStillServing();
}

TEST_F(ErrorsTest, HugeWidthsAreRefusedEvenWithoutRows) {
  // Zero rows produce no output, but the tables a width implies would still
  // be allocated: the width itself is bounded.
  v1::EncodePositionsRequest positions;
  positions.mutable_positions()->mutable_range()->set_count(0);
  positions.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(
      int64_t{1} << 40);
  v1::EncodePositionsResponse positions_response;
  ExpectFieldError(
      server_.stub->EncodePositions(Context().get(), positions, &positions_response),
      grpc::StatusCode::RESOURCE_EXHAUSTED, "spec.positional.sinusoidal.dim");

  v1::RopeTablesRequest tables;
  tables.mutable_positions()->mutable_range()->set_count(0);
  tables.mutable_spec()->mutable_rope()->set_rotary_dim(int64_t{1} << 40);
  v1::RopeTablesResponse tables_response;
  ExpectFieldError(server_.stub->RopeTables(Context().get(), tables, &tables_response),
                   grpc::StatusCode::RESOURCE_EXHAUSTED, "spec.rope.rotary_dim");

  v1::EncodeObservationsRequest observations;
  *observations.mutable_observations()->mutable_timestamps() = Int64Tensor({}, {0});
  observations.mutable_spec()->mutable_temporal()->mutable_time()->set_dim(int64_t{1} << 40);
  v1::EncodeObservationsResponse observations_response;
  ExpectFieldError(server_.stub->EncodeObservations(Context().get(), observations,
                                                    &observations_response),
                   grpc::StatusCode::RESOURCE_EXHAUSTED, "spec.temporal.time.dim");

  v1::EncodeObservationsRequest channels;
  v1::Observations* events = channels.mutable_observations();
  *events->mutable_event_times() = Int64Tensor({}, {0});
  events->mutable_event_channels()->add_shape(0);
  events->mutable_event_channels()->set_dtype(v1::INT32);
  *events->mutable_event_values() = FloatTensor({}, {0});
  events->set_num_channels(int64_t{1} << 40);
  channels.mutable_spec()->mutable_temporal()->mutable_gaps();
  ExpectFieldError(
      server_.stub->EncodeObservations(Context().get(), channels, &observations_response),
      grpc::StatusCode::RESOURCE_EXHAUSTED, "observations.num_channels");
  ExpectStillServing();
}

TEST_F(ErrorsTest, MessageOverTheLimitIsResourceExhausted) {
  // 2 MiB of query against the server's 1 MiB limit.
  v1::ApplyRopeRequest request = RopeRequest(128, 32, 128);
  v1::ApplyRopeResponse response;
  const grpc::Status status = server_.stub->ApplyRope(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << status.error_message();
  ExpectStillServing();
}

TEST_F(ErrorsTest, TemporalInputErrors) {
  v1::EncodeObservationsRequest request;
  const std::vector<int64_t> times = {30, 20, 40};
  *request.mutable_observations()->mutable_timestamps() = Int64Tensor(times, {3});
  request.mutable_spec()->mutable_temporal()->mutable_gaps();
  v1::EncodeObservationsResponse response;
  ExpectFieldError(server_.stub->EncodeObservations(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT, "observations.timestamps[1]");

  const std::vector<double> seconds = {1.0, std::nan(""), 3.0};
  *request.mutable_observations()->mutable_timestamps() = Float64Tensor(seconds, {3});
  ExpectFieldError(server_.stub->EncodeObservations(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT, "observations.timestamps[1]");

  const std::vector<int64_t> ordered = {10, 20, 30};
  *request.mutable_observations()->mutable_timestamps() = Int64Tensor(ordered, {3});
  v1::CalendarBlock* calendar =
      request.mutable_spec()->mutable_temporal()->mutable_calendar();
  calendar->set_time_zone("Mars/Olympus_Mons");
  calendar->add_fields(v1::CalendarBlock::HOUR_OF_DAY);
  const grpc::Status zone =
      server_.stub->EncodeObservations(Context().get(), request, &response);
  ExpectFieldError(zone, grpc::StatusCode::INVALID_ARGUMENT,
                   "spec.temporal.calendar.time_zone");
  EXPECT_THAT(zone.error_message(), HasSubstr("Mars/Olympus_Mons"));
}

// Paths name the fields the client sent, even where core/ names its own
// structs: a NaN position is an element of positions.values, and a state's
// "seen" flags travel as the presence of last_seen_ns / before_last_seen_ns.
TEST_F(ErrorsTest, PathsNameTheWireFields) {
  v1::ApplyRopeRequest rope = RopeRequest(2, 1, 8);
  const std::vector<double> positions = {0.0, std::nan("")};
  *rope.mutable_positions()->mutable_values() = Float64Tensor(positions, {2});
  v1::ApplyRopeResponse rope_response;
  ExpectFieldError(server_.stub->ApplyRope(Context().get(), rope, &rope_response),
                   grpc::StatusCode::INVALID_ARGUMENT, "positions.values[1]");

  v1::EncodeObservationsRequest request;
  const std::vector<int64_t> times = {10, 20};
  const std::vector<double> values = {1.0, 2.0};
  *request.mutable_observations()->mutable_timestamps() = Int64Tensor(times, {2});
  *request.mutable_observations()->mutable_values() = Float64Tensor(values, {2, 1});
  request.mutable_spec()->mutable_temporal()->mutable_gaps();
  // A channel seen in a series that has not started.
  request.mutable_state()->add_channels()->set_last_seen_ns(5);
  v1::EncodeObservationsResponse response;
  ExpectFieldError(server_.stub->EncodeObservations(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT, "state.channels[0].last_seen_ns");
  // A started series whose remembered earlier value is NaN.
  v1::SeriesState* state = request.mutable_state();
  state->Clear();
  state->set_first_timestamp_ns(1);
  state->set_last_timestamp_ns(5);
  v1::SeriesState::Channel* channel = state->add_channels();
  channel->set_last_seen_ns(5);
  channel->set_last_value(1.0);
  channel->set_before_last_seen_ns(1);
  channel->set_before_last_value(std::nan(""));
  ExpectFieldError(server_.stub->EncodeObservations(Context().get(), request, &response),
                   grpc::StatusCode::INVALID_ARGUMENT,
                   "state.channels[0].before_last_value");

  // Long layout without num_channels: C comes from event_channels, and so do
  // the errors about it.
  v1::EncodeObservationsRequest events;
  v1::Observations* in = events.mutable_observations();
  *in->mutable_event_times() = Int64Tensor(times, {2});
  const std::vector<float> event_values = {1.0f, 2.0f};
  *in->mutable_event_values() = FloatTensor(event_values, {2});
  in->mutable_event_channels()->set_dtype(v1::INT32);
  in->mutable_event_channels()->add_shape(2);
  const auto set_channels = [in](int32_t first, int32_t second) {
    const int32_t channels[] = {first, second};
    in->mutable_event_channels()->set_data(reinterpret_cast<const char*>(channels),
                                           sizeof(channels));
  };
  events.mutable_spec()->mutable_temporal()->mutable_gaps();
  set_channels(0, -3);
  ExpectFieldError(server_.stub->EncodeObservations(Context().get(), events, &response),
                   grpc::StatusCode::INVALID_ARGUMENT, "observations.event_channels[1]");
  set_channels(0, 200000);  // C = 200001, over this server's 100000.
  ExpectFieldError(server_.stub->EncodeObservations(Context().get(), events, &response),
                   grpc::StatusCode::RESOURCE_EXHAUSTED, "observations.event_channels");
  set_channels(1, 0);
  EXPECT_TRUE(
      server_.stub->EncodeObservations(Context().get(), events, &response).ok());
  EXPECT_EQ(response.state().channels_size(), 2);
  ExpectStillServing();
}

TEST(ProfilesLoadTest, BadProfilesStopStartupNamingTheEntry) {
  TempDir dir;
  ServerOptions options = TestOptions();
  options.profiles_path = dir.WriteFile("bad.txtpb", R"pb(
    profile { name: "ok" spec { rope { rotary_dim: 8 } } }
    profile { name: "odd" spec { positional { sinusoidal { dim: 5 } } } }
  )pb");
  absl::StatusOr<std::unique_ptr<PhasorServer>> server = PhasorServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr("profile 'odd'"));
  EXPECT_THAT(server.status().message(), HasSubstr("spec.positional.sinusoidal.dim"));

  options.profiles_path = dir.WriteFile("dup.txtpb", R"pb(
    profile { name: "same" spec { rope { rotary_dim: 8 } } }
    profile { name: "same" spec { rope { rotary_dim: 4 } } }
  )pb");
  server = PhasorServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr("duplicate profile name"));

  options.profiles_path = dir.WriteFile("syntax.txtpb", "profile { name: ");
  server = PhasorServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr("syntax.txtpb"));

  options.profiles_path = dir.WriteFile("missing.txtpb", R"pb(
    profile { name: "wpe" spec { positional { learned { table: "t" } } }
              learned_tables { name: "t" file { path: "absent.npy" } } }
  )pb");
  server = PhasorServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(server.status().message(), HasSubstr("learned_tables 't'"));

  // Named holiday calendars and Time2Vec sets are checked at startup, so a
  // request naming one never gets an error pointing into the file.
  options.profiles_path = dir.WriteFile("dates.txtpb", R"pb(
    profile { name: "us" spec { rope { rotary_dim: 8 } }
              holiday_calendars { name: "us" dates: "2026-01-01" dates: "2026-02-30" } }
  )pb");
  server = PhasorServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr("holiday_calendars 'us' dates[1]"));
  EXPECT_THAT(server.status().message(), HasSubstr("2026-02-30"));

  dir.WriteFile("omega.npy", NpyFloat32({1.0f, std::nanf("")}, 2));
  dir.WriteFile("phi.npy", NpyFloat32({0.0f, 0.0f}, 2));
  options.profiles_path = dir.WriteFile("t2v.txtpb", R"pb(
    profile { name: "t2v" spec { rope { rotary_dim: 8 } }
              time2vec { name: "daily" omega { path: "omega.npy" } phi { path: "phi.npy" } } }
  )pb");
  server = PhasorServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(server.status().message(), HasSubstr("time2vec 'daily'"));
  EXPECT_THAT(server.status().message(), HasSubstr("omega[1]"));
}

TEST_F(ErrorsTest, PastDeadlineIsDeadlineExceeded) {
  v1::EncodePositionsRequest request;
  request.mutable_positions()->mutable_range()->set_count(4);
  request.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(8);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() - std::chrono::seconds(1));
  v1::EncodePositionsResponse response;
  const grpc::Status status = server_.stub->EncodePositions(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  ExpectStillServing();
}

}  // namespace
}  // namespace phasor::server::testing
