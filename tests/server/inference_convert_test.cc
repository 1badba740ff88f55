// server/inference_convert.h without a server: datatype names, BYTES round
// trips (every truncation rejected), raw and typed inputs, parameters, and
// the re-addressing of native field paths.
#include "server/inference_convert.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phasor::server {
namespace {

using inference::ModelInferRequest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string PathOf(const absl::Status& status) {
  return FieldPathOf(status).value_or("");
}

TEST(InferenceConvertTest, DatatypeNamesRoundTripAndAreCaseSensitive) {
  for (const v1::DType dtype : {v1::FLOAT32, v1::FLOAT16, v1::BFLOAT16, v1::FLOAT64, v1::INT64,
                                v1::INT32, v1::UINT8, v1::BOOL}) {
    EXPECT_EQ(DTypeFromDatatype(DatatypeName(dtype)), dtype) << DatatypeName(dtype);
  }
  EXPECT_EQ(DatatypeName(v1::FLOAT32), "FP32");
  EXPECT_EQ(DatatypeName(v1::BFLOAT16), "BF16");
  EXPECT_EQ(DTypeFromDatatype("fp32"), v1::DTYPE_UNSPECIFIED);
  EXPECT_EQ(DTypeFromDatatype("BYTES"), v1::DTYPE_UNSPECIFIED);
  EXPECT_EQ(DTypeFromDatatype("INT8"), v1::DTYPE_UNSPECIFIED);
  EXPECT_EQ(DTypeFromDatatype(""), v1::DTYPE_UNSPECIFIED);
}

TEST(InferenceConvertTest, PathsCarryPlainNamesOnly) {
  EXPECT_EQ(IndexedPath("inputs", "query", 3), "inputs[query]");
  EXPECT_EQ(IndexedPath("inputs", "a b", 3), "inputs[3]");
  EXPECT_EQ(IndexedPath("inputs", "", 0), "inputs[0]");
  EXPECT_EQ(IndexedPath("inputs", std::string(65, 'x'), 2), "inputs[2]");
  EXPECT_EQ(ParameterPath("", "output_dtype"), "parameters[output_dtype]");
  EXPECT_EQ(ParameterPath("inputs[q].", "a\nb"), "inputs[q].parameters[a\\nb]");
  EXPECT_EQ(ParameterPath("", std::string(100, '!')),
            "parameters[" + std::string(32, '!') + "...]");
}

TEST(InferenceConvertTest, BytesElementsRoundTripAndEveryTruncationFails) {
  const std::vector<std::string> elements = {"", "a", std::string("\0\xff", 2), "state"};
  const std::string raw = EncodeBytesElements(elements);
  EXPECT_EQ(raw.size(), 4 * 4 + 0 + 1 + 2 + 5);
  std::vector<std::string> decoded;
  ASSERT_TRUE(DecodeBytesElements(raw, 4, "inputs[x]", &decoded).ok());
  EXPECT_EQ(decoded, elements);
  for (size_t cut = 0; cut < raw.size(); ++cut) {
    const absl::Status status = DecodeBytesElements(raw.substr(0, cut), 4, "inputs[x]", &decoded);
    EXPECT_FALSE(status.ok()) << cut;
    EXPECT_EQ(PathOf(status), "inputs[x]");
  }
  EXPECT_FALSE(DecodeBytesElements(raw + "z", 4, "inputs[x]", &decoded).ok());
  EXPECT_FALSE(DecodeBytesElements(raw, 3, "inputs[x]", &decoded).ok());
  // A huge count against a few bytes fails before reserving anything.
  EXPECT_FALSE(DecodeBytesElements(raw, int64_t{1} << 40, "inputs[x]", &decoded).ok());
  // A length that claims more than there is.
  std::string liar(4, '\0');
  const uint32_t claim = 0xffffffffu;
  std::memcpy(liar.data(), &claim, 4);
  EXPECT_FALSE(DecodeBytesElements(liar, 1, "inputs[x]", &decoded).ok());
  ASSERT_TRUE(DecodeBytesElements("", 0, "inputs[x]", &decoded).ok());
  EXPECT_TRUE(decoded.empty());
}

ModelInferRequest OneInput(const std::string& datatype, std::vector<int64_t> shape) {
  ModelInferRequest request;
  ModelInferRequest::InferInputTensor* input = request.add_inputs();
  input->set_name("x");
  input->set_datatype(datatype);
  for (int64_t extent : shape) input->add_shape(extent);
  return request;
}

constexpr v1::DType kAll[] = {v1::FLOAT32, v1::FLOAT16, v1::BFLOAT16, v1::FLOAT64,
                              v1::INT64,   v1::INT32,   v1::UINT8,    v1::BOOL};

TEST(InferenceConvertTest, RawInputMovesIntoTheTensor) {
  ModelInferRequest request = OneInput("FP32", {2, 2});
  const std::string bytes(16, '\x7f');
  *request.add_raw_input_contents() = bytes;
  v1::Tensor tensor;
  ASSERT_TRUE(TakeInputTensor(&request, 0, kAll, RequestLimits{}, &tensor).ok());
  EXPECT_EQ(tensor.dtype(), v1::FLOAT32);
  EXPECT_THAT(tensor.shape(), ElementsAre(2, 2));
  EXPECT_EQ(tensor.data(), bytes);
  EXPECT_TRUE(request.raw_input_contents(0).empty());
}

TEST(InferenceConvertTest, TypedInputsBecomeLittleEndianBytes) {
  v1::Tensor tensor;
  ModelInferRequest request = OneInput("INT64", {3});
  for (int64_t v : {int64_t{-1}, int64_t{0}, std::numeric_limits<int64_t>::max()}) {
    request.mutable_inputs(0)->mutable_contents()->add_int64_contents(v);
  }
  ASSERT_TRUE(TakeInputTensor(&request, 0, kAll, RequestLimits{}, &tensor).ok());
  std::vector<int64_t> ints(3);
  std::memcpy(ints.data(), tensor.data().data(), 24);
  EXPECT_THAT(ints, ElementsAre(-1, 0, std::numeric_limits<int64_t>::max()));

  request = OneInput("BOOL", {2});
  request.mutable_inputs(0)->mutable_contents()->add_bool_contents(true);
  request.mutable_inputs(0)->mutable_contents()->add_bool_contents(false);
  ASSERT_TRUE(TakeInputTensor(&request, 0, kAll, RequestLimits{}, &tensor).ok());
  EXPECT_EQ(tensor.data(), std::string("\1\0", 2));

  request = OneInput("UINT8", {1});
  request.mutable_inputs(0)->mutable_contents()->add_uint_contents(255);
  ASSERT_TRUE(TakeInputTensor(&request, 0, kAll, RequestLimits{}, &tensor).ok());
  EXPECT_EQ(tensor.data(), "\xff");

  // Empty tensors need no contents at all, FP16 included.
  request = OneInput("FP16", {0, 4});
  ASSERT_TRUE(TakeInputTensor(&request, 0, kAll, RequestLimits{}, &tensor).ok());
  EXPECT_TRUE(tensor.data().empty());
}

TEST(InferenceConvertTest, InputChecksNameTheInput) {
  v1::Tensor tensor;
  const v1::DType floats[] = {v1::FLOAT32};
  ModelInferRequest request = OneInput("FP64", {1});
  absl::Status status = TakeInputTensor(&request, 0, floats, RequestLimits{}, &tensor);
  EXPECT_EQ(PathOf(status), "inputs[x].datatype");
  EXPECT_THAT(status.message(), HasSubstr("must be FP32, got \"FP64\""));

  RequestLimits limits;
  limits.max_elements = 10;
  request = OneInput("FP32", {4, 3});
  status = TakeInputTensor(&request, 0, floats, limits, &tensor);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(PathOf(status), "inputs[x].shape");
  request = OneInput("FP32", {int64_t{1} << 62, 4});
  status = TakeInputTensor(&request, 0, floats, RequestLimits{}, &tensor);
  EXPECT_EQ(PathOf(status), "inputs[x].shape");

  std::vector<std::string> strings;
  std::vector<int64_t> shape;
  request = OneInput("FP32", {1});
  EXPECT_EQ(PathOf(TakeInputStrings(&request, 0, RequestLimits{}, &strings, &shape)),
            "inputs[x].datatype");
  request = OneInput("BYTES", {2});
  request.mutable_inputs(0)->mutable_contents()->add_bytes_contents("one");
  EXPECT_EQ(PathOf(TakeInputStrings(&request, 0, RequestLimits{}, &strings, &shape)),
            "inputs[x].contents");
  request.mutable_inputs(0)->mutable_contents()->add_bytes_contents("two");
  ASSERT_TRUE(TakeInputStrings(&request, 0, RequestLimits{}, &strings, &shape).ok());
  EXPECT_THAT(strings, ElementsAre("one", "two"));
  EXPECT_THAT(shape, ElementsAre(2));
}

TEST(InferenceConvertTest, RequestFormChecks) {
  ModelInferRequest request = OneInput("FP32", {1});
  EXPECT_TRUE(CheckInferRequestForm(request).ok());
  request.add_raw_input_contents();
  request.add_raw_input_contents();
  EXPECT_EQ(PathOf(CheckInferRequestForm(request)), "raw_input_contents");
  request.mutable_raw_input_contents()->RemoveLast();
  request.mutable_inputs(0)->mutable_contents();
  EXPECT_EQ(PathOf(CheckInferRequestForm(request)), "inputs[x].contents");
  request.mutable_inputs(0)->clear_contents();
  *request.add_inputs() = request.inputs(0);
  request.add_raw_input_contents();
  EXPECT_EQ(PathOf(CheckInferRequestForm(request)), "inputs[x]");
}

TEST(InferenceConvertTest, ParametersAreTyped) {
  InferParameterMap parameters;
  parameters["s"].set_string_param("FP16");
  parameters["i"].set_int64_param(-3);
  parameters["u"].set_uint64_param(uint64_t{1} << 63);
  parameters["d"].set_double_param(0.5);
  parameters["b"].set_bool_param(true);
  parameters["big"].set_int64_param((int64_t{1} << 53) + 1);
  EXPECT_EQ(*StringParameter(parameters, "s").value(), "FP16");
  EXPECT_FALSE(StringParameter(parameters, "missing").value().has_value());
  EXPECT_EQ(PathOf(StringParameter(parameters, "i").status()), "parameters[i]");
  EXPECT_EQ(*IntParameter(parameters, "i").value(), -3);
  EXPECT_EQ(PathOf(IntParameter(parameters, "u").status()), "parameters[u]");
  EXPECT_EQ(PathOf(IntParameter(parameters, "d").status()), "parameters[d]");
  EXPECT_EQ(*DoubleParameter(parameters, "d").value(), 0.5);
  EXPECT_EQ(*DoubleParameter(parameters, "i").value(), -3.0);
  EXPECT_EQ(PathOf(DoubleParameter(parameters, "big").status()), "parameters[big]");
  EXPECT_EQ(PathOf(DoubleParameter(parameters, "b").status()), "parameters[b]");
  EXPECT_TRUE(*BoolParameter(parameters, "b").value());
  EXPECT_EQ(PathOf(BoolParameter(parameters, "s").status()), "parameters[s]");
  EXPECT_EQ(OutputDTypeParameter(parameters).value(), v1::DTYPE_UNSPECIFIED);
  parameters["output_dtype"].set_string_param("BF16");
  EXPECT_EQ(OutputDTypeParameter(parameters).value(), v1::BFLOAT16);
  parameters["output_dtype"].set_string_param("INT32");
  EXPECT_EQ(PathOf(OutputDTypeParameter(parameters).status()), "parameters[output_dtype]");

  const absl::string_view known[] = {"s", "i", "u", "d", "b", "big", "output_dtype"};
  EXPECT_TRUE(CheckParameterKeys(parameters, "", known, "requests").ok());
  parameters["zzz"].set_bool_param(false);
  const absl::Status status = CheckParameterKeys(parameters, "", known, "requests");
  EXPECT_EQ(PathOf(status), "parameters[zzz]");
  EXPECT_THAT(status.message(), HasSubstr("requests take s, i, u"));
}

TEST(InferenceConvertTest, NativePathsMapToTheWire) {
  const PathRename renames[] = {
      {"positions.values", "inputs[positions]"},
      {"positions", "inputs[positions]"},
      {"query", "inputs[query]"},
      {"profile", "model_name"},
  };
  const auto mapped = [&](const std::string& path) {
    return PathOf(ToInferPaths(InvalidField(path, "bad"), renames));
  };
  EXPECT_EQ(mapped("positions.values[3]"), "inputs[positions][3]");
  EXPECT_EQ(mapped("positions.values.shape"), "inputs[positions].shape");
  EXPECT_EQ(mapped("positions"), "inputs[positions]");
  EXPECT_EQ(mapped("query.dtype"), "inputs[query].datatype");
  EXPECT_EQ(mapped("query.data"), "inputs[query]");
  EXPECT_EQ(mapped("query.shape"), "inputs[query].shape");
  EXPECT_EQ(mapped("profile"), "model_name");
  // Only whole segments match.
  EXPECT_EQ(mapped("query_positions"), "query_positions");
  EXPECT_EQ(mapped("profiles"), "profiles");
  // The description survives; a status without a path is unchanged.
  const absl::Status status = ToInferPaths(InvalidField("query.shape", "must be 3-D"), renames);
  EXPECT_EQ(status.message(), "inputs[query].shape: must be 3-D");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  const absl::Status plain = absl::InternalError("x");
  EXPECT_EQ(ToInferPaths(plain, renames), plain);
}

TEST(InferenceConvertTest, OutputsMoveTheirBytes) {
  inference::ModelInferResponse response;
  v1::Tensor tensor;
  tensor.add_shape(2);
  tensor.set_dtype(v1::FLOAT64);
  tensor.set_data(std::string(16, 'a'));
  AddTensorOutput("out", &tensor, &response);
  const int64_t shape[] = {2};
  AddBytesOutput("names", {"p", "qq"}, shape, &response);
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_EQ(response.outputs(0).datatype(), "FP64");
  EXPECT_THAT(response.outputs(0).shape(), ElementsAre(2));
  EXPECT_EQ(response.raw_output_contents(0), std::string(16, 'a'));
  EXPECT_TRUE(tensor.data().empty());
  EXPECT_EQ(response.outputs(1).datatype(), "BYTES");
  EXPECT_EQ(response.raw_output_contents(1), EncodeBytesElements({"p", "qq"}));
}

}  // namespace
}  // namespace phasor::server
