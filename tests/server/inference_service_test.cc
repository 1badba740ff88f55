// The Open Inference Protocol (inference.GRPCInferenceService) through a real
// channel to an in-process server: health and metadata RPCs, the errors of
// ModelInfer and their field paths, metrics, the flag that turns the service
// off, the bearer token, and the response serializer. Outputs against the
// native RPCs: inference_parity_test.cc.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/binary_info.h"
#include "server/inference_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/inference_test_util.h"

namespace phasor::server::testing {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// --- Health and metadata ---------------------------------------------------------

TEST_F(InferenceTest, ServerLiveReadyAndMetadata) {
  inference::ServerLiveResponse live;
  ASSERT_TRUE(oip_->ServerLive(Context().get(), {}, &live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(oip_->ServerReady(Context().get(), {}, &ready).ok());
  EXPECT_TRUE(ready.ready());
  inference::ServerMetadataResponse metadata;
  ASSERT_TRUE(oip_->ServerMetadata(Context().get(), {}, &metadata).ok());
  EXPECT_EQ(metadata.name(), "phasor");
  EXPECT_EQ(metadata.version(), ProjectVersion());
  EXPECT_THAT(metadata.extensions(), Contains("parameters"));
}

TEST_F(InferenceTest, ModelReadyForEveryProfileAndVersionOne) {
  for (const char* model : {"sin", "learned", "rope", "vitals", "clock", "t5", "shaw"}) {
    for (const char* version : {"", "1"}) {
      inference::ModelReadyRequest request;
      request.set_name(model);
      request.set_version(version);
      inference::ModelReadyResponse response;
      const grpc::Status status = oip_->ModelReady(Context().get(), request, &response);
      ASSERT_TRUE(status.ok()) << model << ": " << status.error_message();
      EXPECT_TRUE(response.ready()) << model;
    }
  }
  inference::ModelReadyRequest unknown;
  unknown.set_name("no-such-model");
  inference::ModelReadyResponse response;
  grpc::Status status = oip_->ModelReady(Context().get(), unknown, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("no-such-model"));
  EXPECT_EQ(FieldOf(status), "name");

  inference::ModelReadyRequest version_two;
  version_two.set_name("rope");
  version_two.set_version("2");
  status = oip_->ModelReady(Context().get(), version_two, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(FieldOf(status), "version");
}

// Name, datatype and shape of each entry of a metadata list.
std::vector<std::string> Describe(
    const google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>&
        tensors) {
  std::vector<std::string> out;
  for (const auto& tensor : tensors) {
    std::string text = absl::StrCat(tensor.name(), " ", tensor.datatype(), " [");
    for (int i = 0; i < tensor.shape_size(); ++i) {
      absl::StrAppend(&text, i == 0 ? "" : ",", tensor.shape(i));
    }
    out.push_back(absl::StrCat(text, "]"));
  }
  return out;
}

TEST_F(InferenceTest, ModelMetadataDerivesShapesFromTheSpec) {
  const auto metadata = [this](const std::string& name) {
    inference::ModelMetadataRequest request;
    request.set_name(name);
    inference::ModelMetadataResponse response;
    const grpc::Status status = oip_->ModelMetadata(Context().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.name(), name);
    EXPECT_THAT(response.versions(), ElementsAre("1"));
    return response;
  };
  inference::ModelMetadataResponse sin = metadata("sin");
  EXPECT_EQ(sin.platform(), "phasor_positional");
  EXPECT_THAT(Describe(sin.inputs()), ElementsAre("positions INT64 [-1]", "content FP32 [-1,8]"));
  EXPECT_THAT(Describe(sin.outputs()), ElementsAre("encodings FP32 [-1,8]"));
  EXPECT_THAT(Describe(metadata("learned").outputs()), ElementsAre("encodings FP32 [-1,4]"));

  inference::ModelMetadataResponse rope = metadata("rope");
  EXPECT_EQ(rope.platform(), "phasor_rope");
  EXPECT_THAT(Describe(rope.inputs()),
              ElementsAre("query FP32 [-1,-1,-1]", "key FP32 [-1,-1,-1]", "positions INT64 [-1]"));
  EXPECT_THAT(Describe(rope.outputs()),
              ElementsAre("query FP32 [-1,-1,-1]", "key FP32 [-1,-1,-1]"));

  // time 4 + two CYCLIC calendar fields 2 x 2: eight columns whatever the
  // channels; with a content block the width depends on the request.
  EXPECT_THAT(Describe(metadata("clock").outputs()),
              ElementsAre("features FP32 [-1,8]", "state BYTES [1]", "states BYTES [-1]",
                          "series_offsets INT64 [-1]"));
  inference::ModelMetadataResponse vitals = metadata("vitals");
  EXPECT_EQ(vitals.platform(), "phasor_temporal");
  EXPECT_THAT(Describe(vitals.outputs()), Contains("features FP32 [-1,-1]"));
  EXPECT_THAT(Describe(vitals.inputs()),
              ElementsAre("timestamps INT64 [-1]", "values FP32 [-1,-1]", "mask BOOL [-1,-1]",
                          "event_times INT64 [-1]", "event_channels INT32 [-1]",
                          "event_values FP32 [-1]", "content FP32 [-1,-1]",
                          "series_offsets INT64 [-1]", "time_zone_index INT32 [-1]",
                          "channel_names BYTES [-1]", "time_zones BYTES [-1]",
                          "state BYTES [1]", "states BYTES [-1]"));

  inference::ModelMetadataResponse t5 = metadata("t5");
  EXPECT_EQ(t5.platform(), "phasor_relative_bias");
  EXPECT_THAT(Describe(t5.inputs()), ElementsAre("query_positions INT64 [-1]",
                                                 "key_positions INT64 [-1]", "table FP32 [32,3]"));
  EXPECT_THAT(Describe(t5.outputs()),
              ElementsAre("bias FP32 [3,-1,-1]", "bucket_ids INT32 [-1,-1]"));
  EXPECT_THAT(Describe(metadata("shaw").inputs()), Contains("table FP32 [5,-1]"));

  inference::ModelMetadataRequest unknown;
  unknown.set_name("nope");
  inference::ModelMetadataResponse response;
  const grpc::Status status = oip_->ModelMetadata(Context().get(), unknown, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(FieldOf(status), "name");
  EXPECT_THAT(status.error_message(), HasSubstr("'nope'"));
}
// --- Errors ------------------------------------------------------------------------------


TEST_F(InferenceTest, UnknownModelAndVersionAreNotFound) {
  ModelInferRequest request = RopeRequest();
  request.set_model_name("gpt-9");
  const grpc::Status status = InferFails(request, grpc::StatusCode::NOT_FOUND, "model_name");
  EXPECT_THAT(status.error_message(), HasSubstr("'gpt-9'"));
  request = RopeRequest();
  request.set_model_version("3");
  InferFails(request, grpc::StatusCode::NOT_FOUND, "model_version");
}

TEST_F(InferenceTest, InputErrorsNameTheInput) {
  // Wrong datatype.
  ModelInferRequest request = RopeRequest();
  request.mutable_inputs(0)->set_datatype("INT64");
  grpc::Status status =
      InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "inputs[query].datatype");
  EXPECT_THAT(status.error_message(), HasSubstr("FP32, FP16, BF16, FP64"));
  request = RopeRequest();
  request.mutable_inputs(1)->set_datatype("fp32");
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "inputs[positions].datatype");
  request = RopeRequest();
  request.mutable_inputs(0)->set_datatype("BYTES");
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "inputs[query].datatype");

  // Raw size that does not match the shape.
  request = RopeRequest();
  request.mutable_raw_input_contents(0)->pop_back();
  status = InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "inputs[query]");
  EXPECT_THAT(status.error_message(), HasSubstr("63 bytes"));
  request = RopeRequest();
  request.mutable_inputs(1)->set_shape(0, 3);
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "inputs[positions]");
  request = RopeRequest();
  request.mutable_inputs(0)->set_shape(0, -2);
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "inputs[query].shape");
  request = RopeRequest();
  request.mutable_inputs(0)->set_shape(0, int64_t{1} << 40);
  InferFails(request, grpc::StatusCode::RESOURCE_EXHAUSTED, "inputs[query].shape");

  // A shape the native handler refuses, at the input's path.
  request = RopeRequest();
  request.mutable_inputs(0)->clear_shape();
  request.mutable_inputs(0)->add_shape(2);
  request.mutable_inputs(0)->add_shape(8);
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "inputs[query].shape");
  request = RopeRequest();
  request.mutable_inputs(1)->set_shape(0, 1);
  request.mutable_raw_input_contents(1)->resize(8);
  status = InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "inputs[positions]");
  EXPECT_THAT(status.error_message(), HasSubstr("one position per query token"));

  // Unknown and duplicate names, a missing required input.
  request = RopeRequest();
  request.mutable_inputs(1)->set_name("positionz");
  status = InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "inputs[positionz]");
  EXPECT_THAT(status.error_message(), HasSubstr("query, key, positions"));
  request = RopeRequest();
  request.mutable_inputs(1)->set_name(std::string(1000, 'x') + "\n");
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "inputs[1]");
  request = RopeRequest();
  request.mutable_inputs(1)->set_name("query");
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "inputs[query]");
  request = RopeRequest();
  request.mutable_inputs()->RemoveLast();
  request.mutable_raw_input_contents()->RemoveLast();
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "inputs[positions]");

  // Per-input parameters.
  request = RopeRequest();
  (*request.mutable_inputs(0)->mutable_parameters())["shared_memory_region"].set_string_param("r");
  status = InferFails(request, grpc::StatusCode::INVALID_ARGUMENT,
                      "inputs[query].parameters[shared_memory_region]");
  EXPECT_THAT(status.error_message(), HasSubstr("shared-memory"));
}

TEST_F(InferenceTest, RawAndTypedContentsErrors) {
  // Both at once.
  ModelInferRequest request = RopeRequest();
  request.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.0f);
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "inputs[query].contents");
  // Raw for some inputs only.
  request = RopeRequest();
  request.mutable_raw_input_contents()->RemoveLast();
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "raw_input_contents");

  // Typed: wrong field, wrong count, no data, FP16 (raw only), UINT8 range.
  ModelInferRequest typed = ToTyped(RopeRequest());
  typed.mutable_inputs(1)->mutable_contents()->add_int_contents(4);
  grpc::Status status =
      InferFails(typed, grpc::StatusCode::INVALID_ARGUMENT, "inputs[positions].contents");
  EXPECT_THAT(status.error_message(), HasSubstr("int64_contents"));
  typed = ToTyped(RopeRequest());
  typed.mutable_inputs(1)->mutable_contents()->add_int64_contents(4);
  status = InferFails(typed, grpc::StatusCode::INVALID_ARGUMENT, "inputs[positions].contents");
  EXPECT_THAT(status.error_message(), HasSubstr("3 elements"));
  typed = ToTyped(RopeRequest());
  typed.mutable_inputs(0)->clear_contents();
  InferFails(typed, grpc::StatusCode::INVALID_ARGUMENT, "inputs[query]");
  typed = ToTyped(RopeRequest());
  typed.mutable_inputs(0)->set_datatype("FP16");
  status = InferFails(typed, grpc::StatusCode::INVALID_ARGUMENT, "inputs[query].contents");
  EXPECT_THAT(status.error_message(), HasSubstr("raw_input_contents"));

  ModelInferRequest wide;
  wide.set_model_name("vitals");
  AddInput(&wide, "timestamps", Int64Values({kStart}));
  AddInput(&wide, "values", FloatValues(v1::FLOAT32, {1, 1}));
  v1::Tensor mask;
  mask.add_shape(1);
  mask.add_shape(1);
  mask.set_dtype(v1::UINT8);
  mask.set_data(std::string(1, '\1'));
  AddInput(&wide, "mask", mask);
  ModelInferRequest typed_wide = ToTyped(wide);
  typed_wide.mutable_inputs(2)->mutable_contents()->set_uint_contents(0, 256);
  InferFails(typed_wide, grpc::StatusCode::INVALID_ARGUMENT,
             "inputs[mask].contents.uint_contents[0]");
}

TEST_F(InferenceTest, ParameterAndOutputErrors) {
  ModelInferRequest request = RopeRequest();
  (*request.mutable_parameters())["output_dtype"].set_string_param("FP32");
  grpc::Status status =
      InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "parameters[output_dtype]");
  EXPECT_THAT(status.error_message(), HasSubstr("tensor_layout"));
  request = RopeRequest();
  (*request.mutable_parameters())["tensor_layout"].set_int64_param(2);
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "parameters[tensor_layout]");
  request = RopeRequest();
  (*request.mutable_parameters())["tensor_layout"].set_string_param("THD");
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "parameters[tensor_layout]");
  request = RopeRequest();
  (*request.mutable_parameters())["tensor_layout"].set_string_param("BATCH_HEADS_SEQ_DIM");
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "inputs[query].shape");

  ModelInferRequest positions;
  positions.set_model_name("sin");
  AddInput(&positions, "positions", Int64Values({1, 2}));
  (*positions.mutable_parameters())["output_dtype"].set_string_param("FP8");
  InferFails(positions, grpc::StatusCode::INVALID_ARGUMENT, "parameters[output_dtype]");
  (*positions.mutable_parameters())["output_dtype"].set_string_param("INT64");
  InferFails(positions, grpc::StatusCode::INVALID_ARGUMENT, "parameters[output_dtype]");
  positions.mutable_parameters()->erase("output_dtype");
  (*positions.mutable_parameters())["content_scale"].set_bool_param(true);
  InferFails(positions, grpc::StatusCode::INVALID_ARGUMENT, "parameters[content_scale]");
  (*positions.mutable_parameters())["content_scale"].set_int64_param(3);  // Integers are fine.
  InferOk(positions);

  request = RopeRequest();
  request.add_outputs()->set_name("keys");
  status = InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "outputs[keys]");
  EXPECT_THAT(status.error_message(), HasSubstr("query, key"));
  request = RopeRequest();
  request.add_outputs()->set_name("key");  // Not produced without a key input.
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "outputs[key]");
  request = RopeRequest();
  request.add_outputs()->set_name("query");
  request.add_outputs()->set_name("query");
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "outputs[query]");
  request = RopeRequest();
  ModelInferRequest::InferRequestedOutputTensor* output = request.add_outputs();
  output->set_name("query");
  (*output->mutable_parameters())["classification"].set_int64_param(3);
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT,
             "outputs[query].parameters[classification]");
}

TEST_F(InferenceTest, NativeErrorsArriveAtTheirInputs) {
  // A position beyond the learned table: OUT_OF_RANGE at the position.
  ModelInferRequest learned;
  learned.set_model_name("learned");
  AddInput(&learned, "positions", Int64Values({0, kTableRows}));
  InferFails(learned, grpc::StatusCode::OUT_OF_RANGE, "inputs[positions][1]");

  // Content of the wrong width.
  ModelInferRequest content;
  content.set_model_name("sin");
  AddInput(&content, "positions", Int64Values({0, 1}));
  AddInput(&content, "content", FloatValues(v1::FLOAT32, {2, 7}));
  InferFails(content, grpc::StatusCode::INVALID_ARGUMENT, "inputs[content].shape");

  // Panel: series 1's timestamps decrease at its row 1.
  ModelInferRequest panel;
  panel.set_model_name("clock");
  AddInput(&panel, "timestamps", Int64Values({kStart, kStart + kNs, kStart + 9 * kNs, kStart}));
  AddInput(&panel, "series_offsets", Int64Values({0, 2, 4}));
  InferFails(panel, grpc::StatusCode::INVALID_ARGUMENT, "inputs[timestamps].series[1][1]");

  // Neither layout.
  ModelInferRequest nothing;
  nothing.set_model_name("clock");
  InferFails(nothing, grpc::StatusCode::INVALID_ARGUMENT, "inputs[timestamps]");

  // A state that is not one, too many states, a bad name.
  ModelInferRequest state;
  state.set_model_name("clock");
  AddInput(&state, "timestamps", Int64Values({kStart}));
  AddBytesInput(&state, "state", {"\xff\xff garbage"});
  InferFails(state, grpc::StatusCode::INVALID_ARGUMENT, "inputs[state][0]");
  state.mutable_inputs(1)->set_shape(0, 2);
  *state.mutable_raw_input_contents(1) = BytesRaw({"", ""});
  InferFails(state, grpc::StatusCode::INVALID_ARGUMENT, "inputs[state]");
  ModelInferRequest truncated = state;
  *truncated.mutable_raw_input_contents(1) = BytesRaw({"", ""}).substr(0, 6);
  InferFails(truncated, grpc::StatusCode::INVALID_ARGUMENT, "inputs[state]");
  ModelInferRequest names;
  names.set_model_name("vitals");
  AddInput(&names, "timestamps", Int64Values({kStart}));
  AddInput(&names, "values", FloatValues(v1::FLOAT32, {1, 1}));
  AddBytesInput(&names, "channel_names", {"\xc0\x80"});
  InferFails(names, grpc::StatusCode::INVALID_ARGUMENT, "inputs[channel_names][0]");
  names.mutable_raw_input_contents(2)->assign(BytesRaw({"a", "b"}));
  names.mutable_inputs(2)->set_shape(0, 2);
  InferFails(names, grpc::StatusCode::INVALID_ARGUMENT, "inputs[channel_names]");
  // A wrong num_channels kind and value.
  ModelInferRequest channels;
  channels.set_model_name("vitals");
  AddInput(&channels, "timestamps", Int64Values({kStart}));
  AddInput(&channels, "values", FloatValues(v1::FLOAT32, {1, 2}));
  (*channels.mutable_parameters())["num_channels"].set_string_param("2");
  InferFails(channels, grpc::StatusCode::INVALID_ARGUMENT, "parameters[num_channels]");
  (*channels.mutable_parameters())["num_channels"].set_int64_param(3);
  InferFails(channels, grpc::StatusCode::INVALID_ARGUMENT, "parameters[num_channels]");

  // Relative bias: a table of the wrong row count.
  ModelInferRequest table;
  table.set_model_name("t5");
  AddInput(&table, "query_positions", Int64Values({1}));
  AddInput(&table, "key_positions", Int64Values({1, 2}));
  AddInput(&table, "table", FloatValues(v1::FLOAT32, {31, kHeads}));
  InferFails(table, grpc::StatusCode::INVALID_ARGUMENT, "inputs[table].shape");
}

TEST_F(InferenceTest, RequestThatDoesNotParseIsInvalidArgument) {
  std::string response;
  const grpc::Status status =
      GenericUnary(server_.channel, "/inference.GRPCInferenceService/ModelInfer",
                   std::string("\x0a\xff\xff\xff\xff\x0f", 6), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("inference.ModelInferRequest"));
}

TEST_F(InferenceTest, ResponseOverTheMessageLimitIsResourceExhausted) {
  // 4 MiB limit (TestOptions): 600k positions x 8 float64 columns = 38 MB.
  ModelInferRequest request;
  request.set_model_name("sin");
  std::vector<int64_t> positions(500000);
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int64_t>(i);
  AddInput(&request, "positions", Int64Values(positions));
  (*request.mutable_parameters())["output_dtype"].set_string_param("FP64");
  ModelInferResponse response;
  const grpc::Status status = Infer(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("max_message_bytes"));
}
// --- Operations ------------------------------------------------------------------------

TEST(InferenceServiceOpsTest, MetricsCountInferenceCalls) {
  ServerOptions options = TestOptions();
  options.metrics_address = "127.0.0.1:0";
  TempDir dir;
  options.profiles_path = dir.WriteFile("profiles.txtpb", kProfiles);
  dir.WriteFile("wpe.npy", NpyFloat32(Table(kTableRows, kTableDim), kTableRows, kTableDim));
  dir.WriteFile("t5.npy", NpyFloat32(Table(kBuckets, kHeads), kBuckets, kHeads));
  TestServer server = StartTestServer(options);
  ASSERT_NE(server.server, nullptr);
  auto oip = inference::GRPCInferenceService::NewStub(server.channel);
  ModelInferRequest request = RopeRequest();
  ModelInferResponse response;
  ASSERT_TRUE(oip->ModelInfer(Context().get(), request, &response).ok());
  ASSERT_TRUE(oip->ModelInfer(Context().get(), request, &response).ok());
  request.set_model_name("nope");
  ASSERT_FALSE(oip->ModelInfer(Context().get(), request, &response).ok());

  const std::string text = HttpGet(server.server->metrics_port(), "/metrics");
  const std::string labels =
      R"(grpc_method="ModelInfer",grpc_service="inference.GRPCInferenceService",grpc_type="unary")";
  EXPECT_EQ(MetricValue(text, absl::StrCat("grpc_server_started_total{", labels, "}")), 3);
  EXPECT_EQ(MetricValue(text, absl::StrCat(R"(grpc_server_handled_total{grpc_code="OK",)",
                                           labels, "}")),
            2);
  EXPECT_EQ(MetricValue(text, absl::StrCat(R"(grpc_server_handled_total{grpc_code="NotFound",)",
                                           labels, "}")),
            1);
  EXPECT_GT(MetricValue(text, R"(phasor_request_bytes_total{grpc_method="ModelInfer"})"), 0);
  EXPECT_GT(MetricValue(text, R"(phasor_response_bytes_total{grpc_method="ModelInfer"})"), 0);
  EXPECT_GT(MetricValue(text, R"(phasor_encoded_values_total{kind="rope"})"), 0);
}

TEST(InferenceServiceOpsTest, FlagTurnsTheServiceOff) {
  ServerOptions options = TestOptions();
  options.enable_inference_protocol = false;
  TestServer server = StartTestServer(options);
  ASSERT_NE(server.server, nullptr);
  auto oip = inference::GRPCInferenceService::NewStub(server.channel);
  inference::ServerLiveResponse live;
  EXPECT_EQ(oip->ServerLive(Context().get(), {}, &live).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  ExpectServing(*server.stub);
}

TEST(InferenceServiceOpsTest, BearerTokenGuardsAllButLiveAndReady) {
  ServerOptions options = TestOptions();
  TempDir dir;
  options.auth_token_path = dir.WriteFile("token", "s3cret\n");
  options.profiles_path = dir.WriteFile("profiles.txtpb",
                                        R"pb(profile { name: "rope" spec { rope {} } })pb");
  TestServer server = StartTestServer(options);
  ASSERT_NE(server.server, nullptr);
  auto oip = inference::GRPCInferenceService::NewStub(server.channel);
  inference::ServerLiveResponse live;
  EXPECT_TRUE(oip->ServerLive(Context().get(), {}, &live).ok());
  inference::ServerReadyResponse ready;
  EXPECT_TRUE(oip->ServerReady(Context().get(), {}, &ready).ok());
  inference::ServerMetadataResponse metadata;
  EXPECT_EQ(oip->ServerMetadata(Context().get(), {}, &metadata).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  ModelInferResponse response;
  EXPECT_EQ(oip->ModelInfer(Context().get(), RopeRequest(), &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  std::unique_ptr<grpc::ClientContext> context = Context();
  context->AddMetadata("authorization", "Bearer s3cret");
  const grpc::Status status = oip->ModelInfer(context.get(), RopeRequest(), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// The detached form parses to the message protobuf itself would send.
TEST(SerializeInferResponseTest, DetachedRawOutputsParseToTheSameMessage) {
  for (const size_t big : {size_t{10}, kZeroCopyTensorBytes, 3 * kZeroCopyTensorBytes + 1}) {
    ModelInferResponse response;
    response.set_model_name("m");
    response.set_id("id");
    for (const size_t size : {big, size_t{0}, size_t{5}}) {
      ModelInferResponse::InferOutputTensor* output = response.add_outputs();
      output->set_name(absl::StrCat("o", size));
      output->set_datatype("UINT8");
      output->add_shape(static_cast<int64_t>(size));
      std::string* raw = response.add_raw_output_contents();
      for (size_t i = 0; i < size; ++i) raw->push_back(static_cast<char>(i * 7));
    }
    (*response.mutable_parameters())["p"].set_int64_param(4);
    const ModelInferResponse expected = response;
    grpc::ByteBuffer buffer;  // Empty, as gRPC hands it to a method.
    ASSERT_TRUE(SerializeInferResponse(&response, int64_t{1} << 30, "inputs", &buffer).ok());
    ModelInferResponse parsed;
    ASSERT_TRUE(parsed.ParseFromString(FromBuffer(buffer)));
    EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString()) << big;
    // Over the limit: RESOURCE_EXHAUSTED naming the field, nothing sent.
    ModelInferResponse again = expected;
    grpc::ByteBuffer unused;
    const absl::Status status = SerializeInferResponse(&again, 10, "inputs", &unused);
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  }
}
}  // namespace
}  // namespace phasor::server::testing
