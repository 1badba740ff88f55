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
// Inputs: float tensors of values (query, key, values, event_values,
// content) are read where they lie: the native request's tensor gets its
// dtype and shape and no data, and TensorBytes takes its bytes from the
// region (ScopedTensorBytes, server/convert.h, over in_place_bytes() while
// the model runs). Other inputs (times, positions, offsets, indices, masks,
// BYTES), which the server checks before relying on them, are copied once
// into their
// raw_input_contents entry, so a check holds for what is used. As in
// Triton, the request's raw_input_contents lists only the inputs NOT in
// shared memory, in order; afterwards it holds one entry per input.
//
// Outputs: SharedMemoryTensors acquires each output's block before the
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

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "inference/grpc_service.pb.h"
#include "phasor/v1/encoder.pb.h"
#include "server/convert.h"
#include "server/handler_context.h"
#include "server/shared_memory.h"

namespace phasor::server {

// Where one tensor lives in shared memory, as its parameters say.
struct SharedMemoryReference {
  std::string region;
  int64_t offset = 0;
  int64_t byte_size = 0;
};

class SharedMemoryTensors final {
 public:
  // Takes the shared-memory parameters off the inputs and requested outputs
  // and acquires their blocks; inputs that are not read in place join
  // raw_input_contents (the file comment). `registry` null: nothing (the
  // extension is off). Errors name the tensor's parameter
  // ("inputs[query].parameters[shared_memory_byte_size]"): a byte_size other
  // than the tensor's bytes, an offset or size outside the region, an
  // unknown region, typed contents next to a region, a raw_input_contents
  // count that does not match the other inputs.
  absl::Status Take(const SharedMemoryRegistry* registry, inference::ModelInferRequest* request);

  // TakeInputTensor (server/inference_convert.h) for input `index`; one read
  // in place leaves `out` without data and lists it in in_place_bytes().
  absl::Status TakeInput(inference::ModelInferRequest* request, int index,
                         absl::Span<const v1::DType> allowed, const RequestLimits& limits,
                         v1::Tensor* out);
  // The native tensors read in place and their bytes in the regions.
  const TensorBytesList& in_place_bytes() const { return in_place_bytes_; }

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

  absl::Status TakeInputs(const SharedMemoryRegistry& registry,
                          inference::ModelInferRequest* request);

  std::vector<Target> targets_;
  std::vector<OutputDestination> destinations_;
  // Inputs read in place, by index, holding their regions mapped.
  absl::flat_hash_map<int, SharedMemoryBlock> in_place_;
  TensorBytesList in_place_bytes_;
};

}  // namespace phasor::server

#endif  // PHASOR_SERVER_INFERENCE_SHARED_MEMORY_H_
