// libFuzzer target: the Open Inference Protocol's ModelInfer from request
// bytes to response, in process (server/inference_models.h HandleModelInfer,
// which calls the native handlers). The input is a serialized
// inference.ModelInferRequest; the models are the fuzzers' profiles
// (fuzz_util.h: "wpe", "rope", "shaw", "vitals", one of each kind). Seeds are
// in corpus/model_infer/ (gen_corpus.py).
//
// Besides crashes and sanitizer reports, a finding is an OK answer whose
// outputs do not hold what they claim: one raw_output_contents entry per
// output, of exactly product(shape) elements of the output's datatype
// (BYTES: that many length-prefixed elements filling the entry).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/adapters/dtype.h"
#include "inference/grpc_service.pb.h"
#include "server/convert.h"
#include "server/inference_convert.h"
#include "server/inference_models.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

[[noreturn]] void Fail(const char* what, int output) {
  std::fprintf(stderr, "fuzz_model_infer: OK response with a bad output %d: %s\n", output,
               what);
  std::abort();
}

void CheckOutputs(const inference::ModelInferResponse& response) {
  if (response.raw_output_contents_size() != response.outputs_size()) {
    Fail("raw_output_contents count", -1);
  }
  for (int i = 0; i < response.outputs_size(); ++i) {
    const inference::ModelInferResponse::InferOutputTensor& output = response.outputs(i);
    if (output.has_contents()) Fail("typed contents beside raw ones", i);
    uint64_t elements = 1;
    for (const int64_t extent : output.shape()) {
      if (extent < 0 || extent > (int64_t{1} << 32)) Fail("dimension", i);
      elements *= static_cast<uint64_t>(extent);
      if (elements > (uint64_t{1} << 40)) Fail("shape", i);
    }
    const std::string& raw = response.raw_output_contents(i);
    if (output.datatype() == phasor::server::kBytesDatatype) {
      std::vector<std::string> decoded;
      if (!phasor::server::DecodeBytesElements(raw, static_cast<int64_t>(elements), "output",
                                               &decoded)
               .ok()) {
        Fail("BYTES contents for its shape", i);
      }
      continue;
    }
    const phasor::v1::DType dtype = phasor::server::DTypeFromDatatype(output.datatype());
    const absl::StatusOr<phasor::DType> known = phasor::server::DTypeFromProto(dtype, "dtype");
    if (!known.ok()) Fail("datatype", i);
    if (raw.size() != elements * phasor::DTypeSize(*known)) Fail("byte count for its shape", i);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return -1;
  inference::ModelInferResponse response;
  const absl::Status status =
      phasor::fuzz::RunHandler([&](const phasor::server::HandlerContext& context) {
        return phasor::server::HandleModelInfer(context, &request, &response);
      });
  if (status.ok()) CheckOutputs(response);
  return 0;
}
