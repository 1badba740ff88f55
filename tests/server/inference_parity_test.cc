// ModelInfer byte for byte against the native RPC of each model kind
// (positional sinusoidal and learned, RoPE in fp32/fp16/bf16/fp64, temporal
// single series across chunks and panels, relative bias), in every datatype
// each model accepts, and typed contents against raw ones.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/inference_test_util.h"

namespace phasor::server::testing {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// --- Byte equality with the native RPCs ---------------------------------------------


TEST_F(InferenceTest, PositionalMatchesEncodePositionsForEveryDatatype) {
  const std::vector<int64_t> positions = {0, 1, 5, 15, 3};
  for (const char* model : {"sin", "learned"}) {
    const int64_t dim = std::string(model) == "sin" ? 8 : kTableDim;
    for (const v1::DType positions_dtype : {v1::INT64, v1::FLOAT64}) {
      if (std::string(model) == "learned" && positions_dtype == v1::FLOAT64) continue;
      for (const v1::DType content_dtype :
           {v1::DTYPE_UNSPECIFIED, v1::FLOAT32, v1::FLOAT16, v1::BFLOAT16, v1::FLOAT64}) {
        for (const v1::DType output_dtype : {v1::FLOAT32, v1::FLOAT16, v1::BFLOAT16, v1::FLOAT64}) {
          SCOPED_TRACE(absl::StrCat(model, " positions ", Datatype(positions_dtype), " content ",
                                    Datatype(content_dtype), " out ", Datatype(output_dtype)));
          v1::EncodePositionsRequest native;
          native.set_profile(model);
          if (positions_dtype == v1::INT64) {
            *native.mutable_positions()->mutable_values() = Int64Values(positions);
          } else {
            *native.mutable_positions()->mutable_values() =
                Float64Tensor({0.0, 1.5, 5.0, -15.25, 3.0}, {5});
          }
          if (content_dtype != v1::DTYPE_UNSPECIFIED) {
            *native.mutable_content() = FloatValues(content_dtype, {5, dim});
            native.set_content_scale(2.5);
          }
          native.set_output_dtype(output_dtype);
          v1::EncodePositionsResponse expected;
          ASSERT_TRUE(server_.stub->EncodePositions(Context().get(), native, &expected).ok());

          ModelInferRequest request;
          request.set_model_name(model);
          request.set_id("call-7");
          AddInput(&request, "positions", native.positions().values());
          if (native.has_content()) {
            AddInput(&request, "content", native.content());
            (*request.mutable_parameters())["content_scale"].set_double_param(2.5);
          }
          (*request.mutable_parameters())["output_dtype"].set_string_param(
              Datatype(output_dtype));
          const ModelInferResponse response = InferOk(request);
          EXPECT_EQ(response.model_name(), model);
          EXPECT_EQ(response.model_version(), "1");
          EXPECT_EQ(response.id(), "call-7");
          ASSERT_EQ(response.outputs_size(), 1);
          ExpectSameTensor(response, "encodings", expected.encodings());
        }
      }
    }
  }
}

TEST_F(InferenceTest, RopeMatchesApplyRopeInEveryFloatType) {
  constexpr int64_t kTokens = 6, kQueryHeads = 4, kKeyHeads = 2, kDim = 16;
  for (const v1::DType dtype : {v1::FLOAT32, v1::FLOAT16, v1::BFLOAT16, v1::FLOAT64}) {
    SCOPED_TRACE(Datatype(dtype));
    v1::ApplyRopeRequest native;
    native.set_profile("rope");
    *native.mutable_query() = FloatValues(dtype, {kTokens, kQueryHeads, kDim});
    *native.mutable_key() = FloatValues(dtype, {kTokens, kKeyHeads, kDim});
    *native.mutable_positions()->mutable_values() = Int64Values({7, 8, 9, 10, 11, 1 << 30});
    v1::ApplyRopeResponse expected;
    ASSERT_TRUE(server_.stub->ApplyRope(Context().get(), native, &expected).ok());

    ModelInferRequest request;
    request.set_model_name("rope");
    request.set_model_version("1");
    AddInput(&request, "query", native.query());
    AddInput(&request, "key", native.key());
    AddInput(&request, "positions", native.positions().values());
    const ModelInferResponse response = InferOk(request);
    ASSERT_EQ(response.outputs_size(), 2);
    ExpectSameTensor(response, "query", expected.query());
    ExpectSameTensor(response, "key", expected.key());
    EXPECT_EQ(response.parameters().at("attention_factor").double_param(),
              expected.attention_factor());
  }
}

TEST_F(InferenceTest, RopeBatchedLayoutAndFloatPositionsAndRequestedOutputs) {
  v1::ApplyRopeRequest native;
  native.set_profile("rope");
  native.set_tensor_layout(v1::ApplyRopeRequest::BATCH_SEQ_HEADS_DIM);
  *native.mutable_query() = FloatValues(v1::FLOAT32, {2, 3, 2, 8});
  *native.mutable_key() = FloatValues(v1::FLOAT32, {2, 3, 1, 8});
  *native.mutable_positions()->mutable_values() =
      Float64Tensor({0.5, 1.5, 2.5, 10.0, 11.0, 12.0}, {2, 3});
  v1::ApplyRopeResponse expected;
  ASSERT_TRUE(server_.stub->ApplyRope(Context().get(), native, &expected).ok());

  ModelInferRequest request;
  request.set_model_name("rope");
  AddInput(&request, "query", native.query());
  AddInput(&request, "key", native.key());
  AddInput(&request, "positions", native.positions().values());
  (*request.mutable_parameters())["tensor_layout"].set_string_param("BATCH_SEQ_HEADS_DIM");
  // Only the keys, and only them, come back.
  request.add_outputs()->set_name("key");
  const ModelInferResponse response = InferOk(request);
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.raw_output_contents_size(), 1);
  ExpectSameTensor(response, "key", expected.key());

  // Both, in the order asked.
  request.clear_outputs();
  request.add_outputs()->set_name("key");
  request.add_outputs()->set_name("query");
  const ModelInferResponse both = InferOk(request);
  ASSERT_EQ(both.outputs_size(), 2);
  EXPECT_EQ(both.outputs(0).name(), "key");
  EXPECT_EQ(both.outputs(1).name(), "query");
  ExpectSameTensor(both, "query", expected.query());
  ExpectSameTensor(both, "key", expected.key());
}

TEST_F(InferenceTest, LargeRopeOutputsTravelWhole) {
  // 2 MiB of float32 queries: the response's raw contents go out as slices
  // of their own buffers (SerializeInferResponse).
  v1::ApplyRopeRequest native;
  native.set_profile("rope");
  *native.mutable_query() = FloatValues(v1::FLOAT32, {4096, 2, 64});
  *native.mutable_key() = FloatValues(v1::FLOAT32, {4096, 1, 64});
  std::vector<int64_t> positions(4096);
  for (int64_t t = 0; t < 4096; ++t) positions[static_cast<size_t>(t)] = 3 * t;
  *native.mutable_positions()->mutable_values() = Int64Values(positions);
  v1::ApplyRopeResponse expected;
  ASSERT_TRUE(server_.stub->ApplyRope(Context().get(), native, &expected).ok());
  ModelInferRequest request;
  request.set_model_name("rope");
  AddInput(&request, "query", native.query());
  AddInput(&request, "key", native.key());
  AddInput(&request, "positions", native.positions().values());
  const ModelInferResponse response = InferOk(request);
  ExpectSameTensor(response, "query", expected.query());
  ExpectSameTensor(response, "key", expected.key());
}

// Wide single-series observations, two chunks: the second carries the state
// the first returned, through OIP and natively.
TEST_F(InferenceTest, TemporalSingleSeriesMatchesEncodeObservationsAcrossChunks) {
  constexpr int64_t kRows = 5, kChannels = 2;
  std::vector<int64_t> times;
  std::vector<double> values;
  std::vector<uint8_t> mask;
  for (int64_t t = 0; t < 2 * kRows; ++t) {
    times.push_back(kStart + t * 1800 * kNs + (t % 3) * 7 * kNs);
    for (int64_t c = 0; c < kChannels; ++c) {
      values.push_back(static_cast<double>(Value(t * kChannels + c)));
      mask.push_back(static_cast<uint8_t>((t + c) % 3 != 0));
    }
  }
  v1::SeriesState native_state;
  std::string oip_state;
  for (int chunk = 0; chunk < 2; ++chunk) {
    SCOPED_TRACE(absl::StrCat("chunk ", chunk));
    const auto begin = static_cast<size_t>(chunk * kRows);
    v1::EncodeObservationsRequest native;
    native.set_profile("vitals");
    v1::Observations* observations = native.mutable_observations();
    *observations->mutable_timestamps() = Int64Tensor(
        std::vector<int64_t>(times.begin() + begin, times.begin() + begin + kRows), {kRows});
    *observations->mutable_values() = Float64Tensor(
        std::vector<double>(values.begin() + begin * kChannels,
                            values.begin() + (begin + kRows) * kChannels),
        {kRows, kChannels});
    v1::Tensor* mask_tensor = observations->mutable_mask();
    mask_tensor->add_shape(kRows);
    mask_tensor->add_shape(kChannels);
    mask_tensor->set_dtype(v1::BOOL);
    mask_tensor->set_data(Raw(std::vector<uint8_t>(mask.begin() + begin * kChannels,
                                                   mask.begin() + (begin + kRows) * kChannels)));
    observations->add_channel_names("heart_rate");
    observations->add_channel_names("spo2");
    if (chunk > 0) *native.mutable_state() = native_state;
    native.set_output_dtype(v1::FLOAT64);
    v1::EncodeObservationsResponse expected;
    ASSERT_TRUE(server_.stub->EncodeObservations(Context().get(), native, &expected).ok());

    ModelInferRequest request;
    request.set_model_name("vitals");
    AddInput(&request, "timestamps", observations->timestamps());
    AddInput(&request, "values", observations->values());
    AddInput(&request, "mask", observations->mask());
    AddBytesInput(&request, "channel_names", {"heart_rate", "spo2"});
    if (chunk > 0) AddBytesInput(&request, "state", {oip_state});
    (*request.mutable_parameters())["output_dtype"].set_string_param("FP64");
    const ModelInferResponse response = InferOk(request);
    ExpectSameTensor(response, "features", expected.features());
    const int state_index = OutputIndex(response, "state");
    ASSERT_GE(state_index, 0);
    EXPECT_EQ(response.outputs(state_index).datatype(), "BYTES");
    EXPECT_THAT(response.outputs(state_index).shape(), ElementsAre(1));
    const std::vector<std::string> states =
        DecodeBytes(response.raw_output_contents(state_index));
    ASSERT_EQ(states.size(), 1u);
    EXPECT_EQ(StateOf(states[0]).SerializeAsString(), expected.state().SerializeAsString());
    EXPECT_EQ(OutputIndex(response, "states"), -1);

    // The schema as JSON on the features output, entry for entry.
    const int features_index = OutputIndex(response, "features");
    const nlohmann::json schema = nlohmann::json::parse(
        response.outputs(features_index).parameters().at("schema").string_param());
    ASSERT_EQ(schema.size(), static_cast<size_t>(expected.schema_size()));
    for (int i = 0; i < expected.schema_size(); ++i) {
      EXPECT_EQ(schema[i]["block"], expected.schema(i).block());
      EXPECT_EQ(schema[i]["offset"], expected.schema(i).offset());
      EXPECT_EQ(schema[i]["width"], expected.schema(i).width());
      EXPECT_EQ(schema[i]["meaning"], expected.schema(i).meaning());
    }
    native_state = expected.state();
    oip_state = states[0];
  }
}

TEST_F(InferenceTest, TemporalPanelMatchesEncodeObservations) {
  // Three series of 3, 0 and 4 rows, long layout, with a time zone each.
  const std::vector<int64_t> offsets = {0, 3, 3, 7};
  std::vector<int64_t> times;
  std::vector<int32_t> channels;
  std::vector<float> values;
  for (int64_t s = 0; s < 3; ++s) {
    for (int64_t r = offsets[s]; r < offsets[s + 1]; ++r) {
      times.push_back(kStart + (r - offsets[s]) * 3600 * kNs + s * 11 * kNs);
      channels.push_back(static_cast<int32_t>(r % 3));
      values.push_back(Value(r));
    }
  }
  v1::EncodeObservationsRequest native;
  native.set_profile("vitals");
  v1::Observations* observations = native.mutable_observations();
  *observations->mutable_event_times() = Int64Values(times);
  v1::Tensor* channel_tensor = observations->mutable_event_channels();
  channel_tensor->add_shape(7);
  channel_tensor->set_dtype(v1::INT32);
  channel_tensor->set_data(Raw(channels));
  *observations->mutable_event_values() = FloatTensor(values, {7});
  *observations->mutable_series_offsets() = Int64Values(offsets);
  observations->set_num_channels(3);
  observations->add_time_zones("America/New_York");
  observations->add_time_zones("Asia/Kolkata");
  v1::Tensor* zone_index = observations->mutable_time_zone_index();
  zone_index->add_shape(3);
  zone_index->set_dtype(v1::INT32);
  zone_index->set_data(Raw(std::vector<int32_t>{1, 0, 1}));
  v1::EncodeObservationsResponse expected;
  ASSERT_TRUE(server_.stub->EncodeObservations(Context().get(), native, &expected).ok());

  ModelInferRequest request;
  request.set_model_name("vitals");
  AddInput(&request, "event_times", observations->event_times());
  AddInput(&request, "event_channels", observations->event_channels());
  AddInput(&request, "event_values", observations->event_values());
  AddInput(&request, "series_offsets", observations->series_offsets());
  AddInput(&request, "time_zone_index", observations->time_zone_index());
  AddBytesInput(&request, "time_zones", {"America/New_York", "Asia/Kolkata"});
  (*request.mutable_parameters())["num_channels"].set_int64_param(3);
  const ModelInferResponse response = InferOk(request);
  ExpectSameTensor(response, "features", expected.features());
  ExpectSameTensor(response, "series_offsets", expected.series_offsets());
  const int states_index = OutputIndex(response, "states");
  ASSERT_GE(states_index, 0);
  EXPECT_THAT(response.outputs(states_index).shape(), ElementsAre(3));
  const std::vector<std::string> states = DecodeBytes(response.raw_output_contents(states_index));
  ASSERT_EQ(states.size(), 3u);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(StateOf(states[s]).SerializeAsString(), expected.states(s).SerializeAsString());
  }
  EXPECT_EQ(OutputIndex(response, "state"), -1);

  // Requested outputs without `states` skip computing them: the same
  // features; with `states` named, the same states.
  for (const bool with_states : {false, true}) {
    ModelInferRequest named = request;
    named.add_outputs()->set_name("features");
    if (with_states) named.add_outputs()->set_name("states");
    const ModelInferResponse reply = InferOk(named);
    ASSERT_EQ(reply.outputs_size(), with_states ? 2 : 1);
    ExpectSameTensor(reply, "features", expected.features());
    if (with_states) {
      EXPECT_EQ(DecodeBytes(reply.raw_output_contents(OutputIndex(reply, "states"))), states);
    }
  }

  // The states go back in as they came out, and the next chunk matches too.
  v1::EncodeObservationsRequest next = native;
  for (int s = 0; s < 3; ++s) *next.add_states() = expected.states(s);
  std::vector<int64_t> later = times;
  for (int64_t& t : later) t += 86400 * kNs;
  *next.mutable_observations()->mutable_event_times() = Int64Values(later);
  v1::EncodeObservationsResponse expected_next;
  ASSERT_TRUE(server_.stub->EncodeObservations(Context().get(), next, &expected_next).ok());
  ModelInferRequest request_next;
  request_next.set_model_name("vitals");
  AddInput(&request_next, "event_times", next.observations().event_times());
  AddInput(&request_next, "event_channels", observations->event_channels());
  AddInput(&request_next, "event_values", observations->event_values());
  AddInput(&request_next, "series_offsets", observations->series_offsets());
  AddInput(&request_next, "time_zone_index", observations->time_zone_index());
  AddBytesInput(&request_next, "time_zones", {"America/New_York", "Asia/Kolkata"});
  AddBytesInput(&request_next, "states", states);
  (*request_next.mutable_parameters())["num_channels"].set_int64_param(3);
  const ModelInferResponse response_next = InferOk(request_next);
  ExpectSameTensor(response_next, "features", expected_next.features());
}

TEST_F(InferenceTest, TemporalFixedWidthModelAndFloatTimes) {
  v1::EncodeObservationsRequest native;
  native.set_profile("clock");
  *native.mutable_observations()->mutable_timestamps() =
      Float64Tensor({1.7e9, 1.7e9 + 61.5, 1.7e9 + 7200.25}, {3});
  native.set_output_dtype(v1::BFLOAT16);
  v1::EncodeObservationsResponse expected;
  ASSERT_TRUE(server_.stub->EncodeObservations(Context().get(), native, &expected).ok());
  ModelInferRequest request;
  request.set_model_name("clock");
  AddInput(&request, "timestamps", native.observations().timestamps());
  (*request.mutable_parameters())["output_dtype"].set_string_param("BF16");
  const ModelInferResponse response = InferOk(request);
  ExpectSameTensor(response, "features", expected.features());
  EXPECT_THAT(response.outputs(0).shape(), ElementsAre(3, 8));
}

TEST_F(InferenceTest, RelativeBiasMatchesRelativeBias) {
  const std::vector<int64_t> queries = {5, 6, 7};
  const std::vector<int64_t> keys = {0, 1, 2, 3, 4, 5, 6, 7, 200};
  for (const bool with_ids : {false, true}) {
    for (const v1::DType table_dtype : {v1::DTYPE_UNSPECIFIED, v1::FLOAT16, v1::FLOAT64}) {
      SCOPED_TRACE(absl::StrCat("ids ", with_ids, " table ", Datatype(table_dtype)));
      v1::RelativeBiasRequest native;
      native.set_profile("t5");
      *native.mutable_query_positions()->mutable_values() = Int64Values(queries);
      *native.mutable_key_positions()->mutable_values() = Int64Values(keys);
      if (table_dtype != v1::DTYPE_UNSPECIFIED) {
        *native.mutable_table() = FloatValues(table_dtype, {kBuckets, kHeads});
      }
      native.set_include_bucket_ids(with_ids);
      native.set_output_dtype(v1::FLOAT64);
      v1::RelativeBiasResponse expected;
      ASSERT_TRUE(server_.stub->RelativeBias(Context().get(), native, &expected).ok());

      ModelInferRequest request;
      request.set_model_name("t5");
      AddInput(&request, "query_positions", native.query_positions().values());
      AddInput(&request, "key_positions", native.key_positions().values());
      if (native.has_table()) AddInput(&request, "table", native.table());
      (*request.mutable_parameters())["output_dtype"].set_string_param("FP64");
      (*request.mutable_parameters())["include_bucket_ids"].set_bool_param(with_ids);
      const ModelInferResponse response = InferOk(request);
      ExpectSameTensor(response, "bias", expected.bias());
      if (with_ids) {
        ExpectSameTensor(response, "bucket_ids", expected.bucket_ids());
      } else {
        EXPECT_EQ(OutputIndex(response, "bucket_ids"), -1);
      }
      EXPECT_EQ(response.parameters().at("num_buckets").int64_param(), kBuckets);
    }
  }
  // Asking for bucket_ids asks for the ids; a table-less model has only them.
  v1::RelativeBiasRequest native;
  native.set_profile("shaw");
  *native.mutable_query_positions()->mutable_values() = Int64Values(queries);
  *native.mutable_key_positions()->mutable_values() = Int64Values(keys);
  v1::RelativeBiasResponse expected;
  ASSERT_TRUE(server_.stub->RelativeBias(Context().get(), native, &expected).ok());
  ModelInferRequest request;
  request.set_model_name("shaw");
  AddInput(&request, "query_positions", native.query_positions().values());
  AddInput(&request, "key_positions", native.key_positions().values());
  const ModelInferResponse response = InferOk(request);
  ASSERT_EQ(response.outputs_size(), 1);
  ExpectSameTensor(response, "bucket_ids", expected.bucket_ids());
  request.add_outputs()->set_name("bias");
  InferFails(request, grpc::StatusCode::INVALID_ARGUMENT, "outputs[bias]");

  ModelInferRequest ids_only;
  ids_only.set_model_name("t5");
  AddInput(&ids_only, "query_positions", native.query_positions().values());
  AddInput(&ids_only, "key_positions", native.key_positions().values());
  ids_only.add_outputs()->set_name("bucket_ids");
  const ModelInferResponse ids = InferOk(ids_only);
  ASSERT_EQ(ids.outputs_size(), 1);
  EXPECT_EQ(ids.outputs(0).name(), "bucket_ids");
  EXPECT_EQ(ids.outputs(0).datatype(), "INT32");
}
// --- Typed contents ------------------------------------------------------------------


TEST_F(InferenceTest, TypedContentsGiveTheRawResultForEveryTypedDatatype) {
  std::vector<ModelInferRequest> requests;
  {
    ModelInferRequest positions;
    positions.set_model_name("sin");
    AddInput(&positions, "positions", Int64Values({3, 1, 4, 1, 5}));
    AddInput(&positions, "content", FloatValues(v1::FLOAT32, {5, 8}));
    requests.push_back(positions);
    ModelInferRequest real = positions;
    real.clear_inputs();
    real.clear_raw_input_contents();
    AddInput(&real, "positions", Float64Tensor({0.5, 2.5}, {2}));
    AddInput(&real, "content", FloatValues(v1::FLOAT64, {2, 8}));
    requests.push_back(real);
  }
  {
    ModelInferRequest wide;
    wide.set_model_name("vitals");
    AddInput(&wide, "timestamps", Int64Values({kStart, kStart + kNs, kStart + 90 * kNs}));
    AddInput(&wide, "values", FloatValues(v1::FLOAT32, {3, 2}));
    v1::Tensor mask;
    mask.add_shape(3);
    mask.add_shape(2);
    mask.set_dtype(v1::UINT8);
    mask.set_data(Raw(std::vector<uint8_t>{1, 0, 1, 1, 0, 1}));
    AddInput(&wide, "mask", mask);
    AddBytesInput(&wide, "channel_names", {"a", "\xce\xb2"});  // "β"
    requests.push_back(wide);
    ModelInferRequest bool_mask = wide;
    bool_mask.mutable_inputs(2)->set_datatype("BOOL");
    requests.push_back(bool_mask);
  }
  {
    ModelInferRequest events;
    events.set_model_name("vitals");
    AddInput(&events, "event_times", Int64Values({kStart, kStart + 5 * kNs}));
    v1::Tensor channels;
    channels.add_shape(2);
    channels.set_dtype(v1::INT32);
    channels.set_data(Raw(std::vector<int32_t>{1, 0}));
    AddInput(&events, "event_channels", channels);
    AddInput(&events, "event_values", Float64Tensor({0.25, -4.0}, {2}));
    requests.push_back(events);
  }
  for (const ModelInferRequest& raw : requests) {
    SCOPED_TRACE(raw.ShortDebugString().substr(0, 200));
    const ModelInferResponse from_raw = InferOk(raw);
    const ModelInferResponse from_typed = InferOk(ToTyped(raw));
    ASSERT_EQ(from_typed.outputs_size(), from_raw.outputs_size());
    for (int i = 0; i < from_raw.outputs_size(); ++i) {
      EXPECT_EQ(from_typed.outputs(i).ShortDebugString(), from_raw.outputs(i).ShortDebugString());
      EXPECT_TRUE(from_typed.raw_output_contents(i) == from_raw.raw_output_contents(i));
    }
  }
}

}  // namespace
}  // namespace phasor::server::testing
