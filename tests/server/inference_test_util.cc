#include "tests/server/inference_test_util.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/adapters/dtype.h"
#include "gmock/gmock.h"

namespace phasor::server::testing {

float Value(int64_t i) {
  return static_cast<float>(static_cast<double>((i * 2654435761u) & 0xffff) / 32768.0 - 1.0);
}

v1::Tensor FloatValues(v1::DType dtype, std::vector<int64_t> shape) {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  v1::Tensor tensor;
  for (int64_t extent : shape) tensor.add_shape(extent);
  tensor.set_dtype(dtype);
  std::string& data = *tensor.mutable_data();
  for (int64_t i = 0; i < count; ++i) {
    const float value = Value(i);
    if (dtype == v1::FLOAT32) {
      data.append(reinterpret_cast<const char*>(&value), 4);
    } else if (dtype == v1::FLOAT64) {
      const double wide = value;
      data.append(reinterpret_cast<const char*>(&wide), 8);
    } else {
      const uint16_t half = dtype == v1::FLOAT16 ? FloatToHalf(value) : FloatToBFloat16(value);
      data.append(reinterpret_cast<const char*>(&half), 2);
    }
  }
  return tensor;
}

const char* Datatype(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32: return "FP32";
    case v1::FLOAT16: return "FP16";
    case v1::BFLOAT16: return "BF16";
    case v1::FLOAT64: return "FP64";
    case v1::INT64: return "INT64";
    case v1::INT32: return "INT32";
    case v1::UINT8: return "UINT8";
    case v1::BOOL: return "BOOL";
    default: return "?";
  }
}

void AddInput(ModelInferRequest* request, const std::string& name, const v1::Tensor& tensor) {
  ModelInferRequest::InferInputTensor* input = request->add_inputs();
  input->set_name(name);
  input->set_datatype(Datatype(tensor.dtype()));
  input->mutable_shape()->CopyFrom(tensor.shape());
  *request->add_raw_input_contents() = tensor.data();
}

std::string BytesRaw(const std::vector<std::string>& elements) {
  std::string raw;
  for (const std::string& element : elements) {
    const uint32_t length = static_cast<uint32_t>(element.size());
    raw.append(reinterpret_cast<const char*>(&length), 4);
    raw.append(element);
  }
  return raw;
}

void AddBytesInput(ModelInferRequest* request, const std::string& name,
                   const std::vector<std::string>& elements) {
  ModelInferRequest::InferInputTensor* input = request->add_inputs();
  input->set_name(name);
  input->set_datatype("BYTES");
  input->add_shape(static_cast<int64_t>(elements.size()));
  *request->add_raw_input_contents() = BytesRaw(elements);
}

std::vector<std::string> DecodeBytes(const std::string& raw) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at + 4 <= raw.size()) {
    uint32_t length = 0;
    std::memcpy(&length, raw.data() + at, 4);
    out.push_back(raw.substr(at + 4, length));
    at += 4 + length;
  }
  return out;
}

int OutputIndex(const ModelInferResponse& response, const std::string& name) {
  for (int i = 0; i < response.outputs_size(); ++i) {
    if (response.outputs(i).name() == name) return i;
  }
  return -1;
}

void ExpectSameTensor(const ModelInferResponse& response, const std::string& name,
                      const v1::Tensor& native) {
  const int i = OutputIndex(response, name);
  ASSERT_GE(i, 0) << "no output " << name;
  ASSERT_EQ(response.raw_output_contents_size(), response.outputs_size());
  EXPECT_EQ(response.outputs(i).datatype(), Datatype(native.dtype())) << name;
  EXPECT_THAT(response.outputs(i).shape(), ::testing::ElementsAreArray(native.shape())) << name;
  EXPECT_FALSE(response.outputs(i).has_contents()) << name;
  EXPECT_TRUE(response.raw_output_contents(i) == native.data())
      << name << ": " << response.raw_output_contents(i).size() << " bytes vs "
      << native.data().size();
}

v1::SeriesState StateOf(const std::string& bytes) {
  v1::SeriesState state;
  EXPECT_TRUE(state.ParseFromString(bytes));
  return state;
}

std::string FieldOf(const grpc::Status& status) {
  const google::rpc::BadRequest bad = BadRequestOf(status);
  return bad.field_violations_size() > 0 ? bad.field_violations(0).field() : "";
}

std::vector<float> Table(int rows, int cols) {
  std::vector<float> table;
  for (int i = 0; i < rows * cols; ++i) table.push_back(0.5f * static_cast<float>(i) - 3.0f);
  return table;
}

v1::Tensor Int64Values(const std::vector<int64_t>& values) {
  return Int64Tensor(values, {static_cast<int64_t>(values.size())});
}

namespace {

// A callback taking elements of type T.
template <typename T>
struct Adder {
  using Element = T;
  std::function<void(T)> add;
  void operator()(T value) const { add(value); }
};

}  // namespace

ModelInferRequest ToTyped(ModelInferRequest request) {
  for (int i = 0; i < request.inputs_size(); ++i) {
    ModelInferRequest::InferInputTensor* input = request.mutable_inputs(i);
    const std::string& raw = request.raw_input_contents(i);
    inference::InferTensorContents* contents = input->mutable_contents();
    const std::string& datatype = input->datatype();
    // Calls add(value) for each element of type T in the raw bytes.
    const auto each = [&raw](auto typed_add) {
      using T = typename decltype(typed_add)::Element;
      for (size_t at = 0; at + sizeof(T) <= raw.size(); at += sizeof(T)) {
        T value;
        std::memcpy(&value, raw.data() + at, sizeof(T));
        typed_add(value);
      }
    };
    if (datatype == "INT64") {
      each(Adder<int64_t>{[&](int64_t v) { contents->add_int64_contents(v); }});
    } else if (datatype == "INT32") {
      each(Adder<int32_t>{[&](int32_t v) { contents->add_int_contents(v); }});
    } else if (datatype == "FP32") {
      each(Adder<float>{[&](float v) { contents->add_fp32_contents(v); }});
    } else if (datatype == "FP64") {
      each(Adder<double>{[&](double v) { contents->add_fp64_contents(v); }});
    } else if (datatype == "BOOL") {
      each(Adder<uint8_t>{[&](uint8_t v) { contents->add_bool_contents(v != 0); }});
    } else if (datatype == "UINT8") {
      each(Adder<uint8_t>{[&](uint8_t v) { contents->add_uint_contents(v); }});
    } else if (datatype == "BYTES") {
      for (const std::string& element : DecodeBytes(raw)) contents->add_bytes_contents(element);
    } else {
      ADD_FAILURE() << "no typed contents for " << datatype;
    }
  }
  request.clear_raw_input_contents();
  return request;
}

ModelInferRequest RopeRequest() {
  ModelInferRequest request;
  request.set_model_name("rope");
  AddInput(&request, "query", FloatValues(v1::FLOAT32, {2, 1, 8}));
  AddInput(&request, "positions", Int64Values({0, 1}));
  return request;
}

}  // namespace phasor::server::testing
