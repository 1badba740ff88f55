// File: server/inference_shared_memory.h
//
// The Open Inference Protocol side of Triton's system shared-memory
// extension (server/shared_memory.h holds the regions): the tensor
// parameters "shared_memory_region" (string_param), "shared_memory_offset"
// (int64_param, optional, default 0) and "shared_memory_byte_size"
// (int64_param), read off the inputs and requested outputs of a
// ModelInferRequest, and what HandleModelInfer
// (server/inference_models.h) does with them.
//
// Inputs: ReadSharedMemoryInputs copies each region's bytes once into the
// input's raw_input_contents entry (the copy gRPC makes of
// raw_input_contents off the socket, made here from the region instead; the
// model then sees the bytes of one moment even if the caller writes the
// region during the call). As in Triton, the request's raw_input_contents
// lists only the inputs NOT in shared memory, in order; afterwards it holds
// one entry per input.
//
// Outputs: SharedMemoryOutputs acquires each output's block before the
// model runs, hands the native handler an OutputDestination
// (server/handler_context.h) so that its kernel writes FP32/FP64 results
// straight into the region, copies in what the kernel did not write there
// (BYTES, 16-bit or unaligned outputs), and gives the reply Triton's form:
// the output's datatype and shape, the region's three parameters
// (byte_size = the bytes written) and an empty raw_output_contents entry.
//
// Thread-safety: per call; the registry is shared (thread-safe).
#ifndef PHASOR_SERVER_INFERENCE_SHARED_MEMORY_H_
#define PHASOR_SERVER_INFERENCE_SHARED_MEMORY_H_

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "inference/grpc_service.pb.h"
#include "phasor/v1/encoder.pb.h"
#include "server/handler_context.h"
#include "server/shared_memory.h"

namespace phasor::server {

// Where one tensor lives in shared memory, as its parameters say.
struct SharedMemoryReference {
  std::string region;
  int64_t offset = 0;
  int64_t byte_size = 0;
};

// See the file comment. Errors name the input's parameter
// ("inputs[query].parameters[shared_memory_byte_size]"): a byte_size other
// than the tensor's bytes, an offset or size outside the region, an unknown
// region, typed contents next to a region, a raw_input_contents count that
// does not match the other inputs.
absl::Status ReadSharedMemoryInputs(const SharedMemoryRegistry& registry,
                                    inference::ModelInferRequest* request);

class SharedMemoryOutputs final {
 public:
  // Takes the shared-memory parameters off the requested outputs and
  // acquires their blocks. `registry` null: nothing (the extension is off).
  absl::Status Take(const SharedMemoryRegistry* registry, inference::ModelInferRequest* request);

  // One output of a native response: its name and its tensor, fetched
  // only when it goes to shared memory (a mutable_* accessor creates the
  // field, and an absent optional output must stay absent).
  using NamedTensor = std::pair<absl::string_view, absl::FunctionRef<v1::Tensor*()>>;

  // `context` with a destination for each of `tensors` that goes to shared
  // memory, and a message limit raised by the bytes of those destinations
  // (what goes to a region does not travel in the reply). The returned
  // context refers to this object.
  HandlerContext Bind(const HandlerContext& context, std::initializer_list<NamedTensor> tensors);

  // After the reply's outputs are final: copies in what the kernels did
  // not write, checks each object again, and sets the outputs' parameters
  // and empty raw entries (the file comment).
  absl::Status Finish(inference::ModelInferResponse* response);

 private:
  struct Target {
    std::string name;
    std::string path;
    SharedMemoryReference reference;
    SharedMemoryBlock block;
    std::string field = {};
  };

  std::vector<Target> targets_;
  std::vector<OutputDestination> destinations_;
};

}  // namespace phasor::server

#endif  // PHASOR_SERVER_INFERENCE_SHARED_MEMORY_H_
