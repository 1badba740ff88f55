#include "client/cli/infer_command.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/cli/common.h"
#include "client/inference_wire.h"
#include "core/base/file.h"
#include "core/base/status_macros.h"
#include "inference/grpc_service.grpc.pb.h"

ABSL_FLAG(std::string, model, "",
          "infer: Open Inference Protocol model (a server profile)");
ABSL_FLAG(std::string, model_version, "", "infer: model version (empty or 1)");
ABSL_FLAG(std::string, inputs, "",
          "infer: comma-separated name=file; .npy/CSV files are tensors, any "
          "other file one BYTES element (e.g. a state)");
ABSL_FLAG(std::string, outputs, "",
          "infer: comma-separated name=file: the outputs to return, written "
          "there (default: every output, printed)");
ABSL_FLAG(std::string, parameters, "",
          "infer: comma-separated key=value request parameters (true/false, "
          "integers, decimals, else strings), e.g. output_dtype=FP16");

namespace phasor::cli {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

struct NamedFile {
  std::string name;
  std::string path;
};

// "a=x.npy,b=y.npy" as pairs; `flag` names the flag in errors.
absl::StatusOr<std::vector<NamedFile>> ParsePairs(absl::string_view flag,
                                                  absl::string_view text) {
  std::vector<NamedFile> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    const std::vector<absl::string_view> parts = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": \"", item, "\" is not name=value"));
    }
    out.push_back({std::string(parts[0]), std::string(parts[1])});
  }
  return out;
}

bool IsTensorFile(absl::string_view path) {
  const std::string lower = absl::AsciiStrToLower(path);
  return absl::EndsWith(lower, ".npy") || absl::EndsWith(lower, ".csv");
}

void SetParameter(absl::string_view value, inference::InferParameter* parameter) {
  int64_t integer = 0;
  double real = 0;
  if (value == "true" || value == "false") {
    parameter->set_bool_param(value == "true");
  } else if (absl::SimpleAtoi(value, &integer)) {
    parameter->set_int64_param(integer);
  } else if (absl::SimpleAtod(value, &real) &&
             value.find_first_of("0123456789") != absl::string_view::npos) {
    parameter->set_double_param(real);
  } else {
    parameter->set_string_param(std::string(value));
  }
}

absl::Status WriteBytes(const std::string& bytes, const std::string& path) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file.good()) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  std::cerr << "wrote " << bytes.size() << " bytes to " << path << "\n";
  return absl::OkStatus();
}

std::string ParameterText(const inference::InferParameter& parameter) {
  switch (parameter.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam:
      return parameter.bool_param() ? "true" : "false";
    case inference::InferParameter::kInt64Param:
      return absl::StrCat(parameter.int64_param());
    case inference::InferParameter::kUint64Param:
      return absl::StrCat(parameter.uint64_param());
    case inference::InferParameter::kDoubleParam:
      return absl::StrCat(parameter.double_param());
    case inference::InferParameter::kStringParam:
      return parameter.string_param();
    default:
      return "";
  }
}

// The call's grpc::Status as the absl::Status DescribeError reads, field
// violations included.
absl::Status FromGrpc(const grpc::Status& status) {
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()),
                   status.error_message());
  if (!status.error_details().empty()) {
    out.SetPayload(kGrpcStatusDetailsPayload, absl::Cord(status.error_details()));
  }
  return out;
}

}  // namespace

absl::Status RunInfer(const EncoderClient& client) {
  const std::string model = absl::GetFlag(FLAGS_model);
  if (model.empty()) {
    return absl::InvalidArgumentError(
        "--model: name the model (a server profile; list-profiles lists them)");
  }
  ModelInferRequest request;
  request.set_model_name(model);
  request.set_model_version(absl::GetFlag(FLAGS_model_version));
  PHASOR_ASSIGN_OR_RETURN(const std::vector<NamedFile> inputs,
                          ParsePairs("inputs", absl::GetFlag(FLAGS_inputs)));
  for (const NamedFile& input : inputs) {
    ModelInferRequest::InferInputTensor* tensor = request.add_inputs();
    tensor->set_name(input.name);
    if (!IsTensorFile(input.path)) {
      PHASOR_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(input.path, "inputs"));
      tensor->set_datatype("BYTES");
      tensor->add_shape(1);
      *request.add_raw_input_contents() = EncodeBytesElements({bytes});
      continue;
    }
    PHASOR_ASSIGN_OR_RETURN(v1::Tensor values, ReadInput("inputs", input.path));
    tensor->set_datatype(std::string(InferenceDatatype(values.dtype())));
    tensor->mutable_shape()->CopyFrom(values.shape());
    request.add_raw_input_contents()->swap(*values.mutable_data());
  }
  PHASOR_ASSIGN_OR_RETURN(const std::vector<NamedFile> parameters,
                          ParsePairs("parameters", absl::GetFlag(FLAGS_parameters)));
  for (const NamedFile& parameter : parameters) {
    SetParameter(parameter.path, &(*request.mutable_parameters())[parameter.name]);
  }
  PHASOR_ASSIGN_OR_RETURN(const std::vector<NamedFile> outputs,
                          ParsePairs("outputs", absl::GetFlag(FLAGS_outputs)));
  for (const NamedFile& output : outputs) request.add_outputs()->set_name(output.name);

  // The connection flags' deadline and token, as the Encoder commands use.
  PHASOR_ASSIGN_OR_RETURN(const ClientOptions options, ClientOptionsFromFlags());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoMilliseconds(options.deadline));
  if (!options.bearer_token.empty()) {
    context.AddMetadata("authorization", absl::StrCat("Bearer ", options.bearer_token));
  }
  const std::unique_ptr<inference::GRPCInferenceService::Stub> stub =
      inference::GRPCInferenceService::NewStub(client.channel());
  ModelInferResponse response;
  const grpc::Status status = stub->ModelInfer(&context, request, &response);
  if (!status.ok()) return FromGrpc(status);
  if (response.raw_output_contents_size() != response.outputs_size()) {
    return absl::DataLossError("the response has no raw contents for some outputs");
  }

  for (int i = 0; i < response.outputs_size(); ++i) {
    const ModelInferResponse::InferOutputTensor& output = response.outputs(i);
    std::string path;
    for (const NamedFile& named : outputs) {
      if (named.name == output.name()) path = named.path;
    }
    std::string& raw = *response.mutable_raw_output_contents(i);
    if (output.datatype() == "BYTES") {
      absl::StatusOr<std::vector<absl::string_view>> elements =
          DecodeBytesElements(raw, absl::StrCat("output ", output.name()));
      if (!elements.ok()) return elements.status();
      if (!path.empty()) {
        if (elements->size() != 1) {
          return absl::InvalidArgumentError(absl::StrCat(
              "--outputs: ", output.name(), " holds ", elements->size(),
              " BYTES elements; only a one-element output can be written to a file"));
        }
        PHASOR_RETURN_IF_ERROR(WriteBytes(std::string((*elements)[0]), path));
        continue;
      }
      std::cout << output.name() << ": BYTES, " << elements->size() << " elements, "
                << raw.size() << " bytes\n";
      continue;
    }
    v1::Tensor tensor;
    tensor.set_dtype(DTypeOfInferenceDatatype(output.datatype()));
    if (tensor.dtype() == v1::DTYPE_UNSPECIFIED) {
      return absl::DataLossError(
          absl::StrCat("output ", output.name(), ": unknown datatype ", output.datatype()));
    }
    tensor.mutable_shape()->CopyFrom(output.shape());
    tensor.mutable_data()->swap(raw);
    PHASOR_RETURN_IF_ERROR(Emit(tensor, output.name(), path));
  }
  for (const ModelInferResponse::InferOutputTensor& output : response.outputs()) {
    for (const auto& [key, value] : output.parameters()) {
      std::cout << output.name() << "." << key << " = " << ParameterText(value) << "\n";
    }
  }
  for (const auto& [key, value] : response.parameters()) {
    std::cout << key << " = " << ParameterText(value) << "\n";
  }
  return absl::OkStatus();
}

}  // namespace phasor::cli
