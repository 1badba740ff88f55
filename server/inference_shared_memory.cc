#include "server/inference_shared_memory.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/uninitialized_string.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "server/inference_convert.h"

namespace phasor::server {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

constexpr absl::string_view kRegionKey = "shared_memory_region";
constexpr absl::string_view kOffsetKey = "shared_memory_offset";
constexpr absl::string_view kByteSizeKey = "shared_memory_byte_size";

// The shared-memory parameters of an input or requested output, removed
// from `parameters` (the model sees a tensor without them); nullopt when it
// names no region. `prefix` is the tensor's path plus ".".
absl::StatusOr<std::optional<SharedMemoryReference>> TakeSharedMemoryReference(
    InferParameterMap* parameters, absl::string_view prefix) {
  const auto at = [&](const absl::Status& status, absl::string_view key) {
    return ReplaceFieldPath(status, ParameterPath(prefix, key));
  };
  const absl::StatusOr<std::optional<std::string>> region =
      StringParameter(*parameters, kRegionKey);
  if (!region.ok()) return at(region.status(), kRegionKey);
  if (!region->has_value()) {
    for (const absl::string_view key : {kOffsetKey, kByteSizeKey}) {
      if (parameters->contains(std::string(key))) {
        return InvalidField(ParameterPath(prefix, key),
                            "is only meaningful with shared_memory_region");
      }
    }
    return std::nullopt;
  }
  SharedMemoryReference reference;
  reference.region = **region;
  const absl::StatusOr<std::optional<int64_t>> offset = IntParameter(*parameters, kOffsetKey);
  if (!offset.ok()) return at(offset.status(), kOffsetKey);
  reference.offset = offset->value_or(0);
  const absl::StatusOr<std::optional<int64_t>> byte_size = IntParameter(*parameters, kByteSizeKey);
  if (!byte_size.ok()) return at(byte_size.status(), kByteSizeKey);
  if (!byte_size->has_value()) {
    return InvalidField(ParameterPath(prefix, kByteSizeKey),
                        "is required with shared_memory_region");
  }
  reference.byte_size = **byte_size;
  for (const absl::string_view key : {kRegionKey, kOffsetKey, kByteSizeKey}) {
    parameters->erase(std::string(key));
  }
  return reference;
}

// Bytes of an input of this datatype and shape, when the datatype has a
// fixed element size and the count does not overflow; nullopt otherwise
// (TakeInputTensor reports those).
std::optional<int64_t> FixedInputBytes(const ModelInferRequest::InferInputTensor& input) {
  const v1::DType dtype = DTypeFromDatatype(input.datatype());
  const absl::StatusOr<DType> core = DTypeFromProto(dtype, "datatype");
  if (!core.ok()) return std::nullopt;
  int64_t bytes = static_cast<int64_t>(DTypeSize(*core));
  for (const int64_t extent : input.shape()) {
    if (!CheckedMultiply(bytes, extent, &bytes)) return std::nullopt;
  }
  return bytes;
}

// Bytes of an output of fixed-size elements from its datatype and shape.
int64_t WrittenBytes(const ModelInferResponse::InferOutputTensor& output) {
  const absl::StatusOr<DType> dtype =
      DTypeFromProto(DTypeFromDatatype(output.datatype()), "datatype");
  if (!dtype.ok()) return 0;
  int64_t bytes = static_cast<int64_t>(DTypeSize(*dtype));
  for (const int64_t extent : output.shape()) bytes *= extent;
  return bytes;
}

// The inputs read where they lie: float tensors of values (RoPE's query
// and key, observations' values and event values, content), which the
// kernels only compute with, so a caller writing the region during the
// call can change nothing but its own results. Everything else (times,
// positions, offsets, indices, masks, BYTES) is copied first: the server
// checks those (sorted, finite, in range) before it relies on them, and a
// check must hold for what is used.
bool ReadInPlace(const ModelInferRequest::InferInputTensor& input) {
  const absl::string_view datatype = input.datatype();
  const absl::string_view name = input.name();
  const bool float_type =
      datatype == "FP32" || datatype == "FP64" || datatype == "FP16" || datatype == "BF16";
  const bool values = name == "query" || name == "key" || name == "values" ||
                      name == "event_values" || name == "content";
  return float_type && values;
}

}  // namespace

absl::Status SharedMemoryTensors::TakeInputs(const SharedMemoryRegistry& registry,
                                            ModelInferRequest* request) {
  std::vector<std::optional<std::string>> from_regions(static_cast<size_t>(request->inputs_size()));
  bool any = false;
  for (int i = 0; i < request->inputs_size(); ++i) {
    ModelInferRequest::InferInputTensor* input = request->mutable_inputs(i);
    const std::string prefix = absl::StrCat(InputPath(*request, i), ".");
    PHASOR_ASSIGN_OR_RETURN(const std::optional<SharedMemoryReference> reference,
                            TakeSharedMemoryReference(input->mutable_parameters(), prefix));
    if (!reference) continue;
    if (input->has_contents()) {
      return InvalidField(absl::StrCat(prefix, "contents"),
                          "must be empty for an input in shared memory");
    }
    const std::optional<int64_t> expected = FixedInputBytes(*input);
    if (expected && *expected != reference->byte_size) {
      return InvalidField(
          ParameterPath(prefix, kByteSizeKey),
          absl::StrCat(reference->byte_size, " bytes; shape ", ShapeString(input->shape()), " ",
                       input->datatype(), " needs ", *expected));
    }
    PHASOR_ASSIGN_OR_RETURN(
        SharedMemoryBlock block,
        registry.Acquire(reference->region, reference->offset, reference->byte_size, prefix));
    any = true;
    if (ReadInPlace(*input)) {
      // Its raw entry stays empty; TakeInput hands the kernel the region.
      from_regions[static_cast<size_t>(i)] = std::string();
      in_place_.emplace(i, std::move(block));
      continue;
    }
    std::string bytes;
    ResizeUninitialized(&bytes, block.bytes().size());
    if (!bytes.empty()) std::memcpy(bytes.data(), block.bytes().data(), bytes.size());
    from_regions[static_cast<size_t>(i)] = std::move(bytes);
  }
  if (!any) return absl::OkStatus();
  auto& raw = *request->mutable_raw_input_contents();
  int others = 0;
  for (const auto& entry : from_regions) others += entry ? 0 : 1;
  if (raw.size() != others) {
    return InvalidField("raw_input_contents",
                        absl::StrCat("holds ", raw.size(),
                                     " entries; with inputs in shared "
                                     "memory it must hold one for each of the ",
                                     others, " other inputs, in order"));
  }
  google::protobuf::RepeatedPtrField<std::string> joined;
  joined.Reserve(request->inputs_size());
  int next = 0;
  for (auto& entry : from_regions) {
    std::string* slot = joined.Add();
    if (entry) {
      slot->swap(*entry);
    } else {
      slot->swap(raw[next++]);  // The buffer moves; no copy.
    }
  }
  raw.Swap(&joined);
  return absl::OkStatus();
}

absl::Status SharedMemoryTensors::TakeInput(ModelInferRequest* request, int index,
                                            absl::Span<const v1::DType> allowed,
                                            const RequestLimits& limits, v1::Tensor* out) {
  const auto found = in_place_.find(index);
  if (found == in_place_.end()) return TakeInputTensor(request, index, allowed, limits, out);
  const absl::string_view bytes(found->second.bytes().data(), found->second.bytes().size());
  PHASOR_RETURN_IF_ERROR(TakeInputTensor(request, index, allowed, limits, out, &bytes));
  in_place_bytes_.Add(out, bytes);
  return absl::OkStatus();
}

absl::Status SharedMemoryTensors::Take(const SharedMemoryRegistry* registry,
                                       ModelInferRequest* request) {
  if (registry == nullptr) return absl::OkStatus();  // MatchInputs and
  // CheckRequestedOutputs reject shared-memory parameters then.
  PHASOR_RETURN_IF_ERROR(TakeInputs(*registry, request));
  for (int i = 0; i < request->outputs_size(); ++i) {
    ModelInferRequest::InferRequestedOutputTensor* output = request->mutable_outputs(i);
    const std::string path = IndexedPath("outputs", output->name(), i);
    const std::string prefix = absl::StrCat(path, ".");
    PHASOR_ASSIGN_OR_RETURN(const std::optional<SharedMemoryReference> reference,
                            TakeSharedMemoryReference(output->mutable_parameters(), prefix));
    if (!reference) continue;
    PHASOR_ASSIGN_OR_RETURN(
        SharedMemoryBlock block,
        registry->Acquire(reference->region, reference->offset, reference->byte_size, prefix));
    targets_.push_back(Target{output->name(), path, *reference, std::move(block)});
  }
  return absl::OkStatus();
}

HandlerContext SharedMemoryTensors::Bind(const HandlerContext& context,
                                         std::initializer_list<NamedTensor> tensors) {
  destinations_.clear();
  for (const auto& [name, tensor] : tensors) {
    for (Target& target : targets_) {
      if (target.name != name) continue;
      target.field = absl::StrCat(target.path, ".parameters[", kByteSizeKey, "]");
      destinations_.push_back(OutputDestination{tensor(), target.block.bytes(), target.field});
    }
  }
  HandlerContext bound = context;
  bound.output_destinations = destinations_;
  // The message limit bounds what travels in the reply; outputs written
  // into regions do not, so the room they take there is added to it.
  int64_t in_regions = 0;
  for (const OutputDestination& destination : destinations_) {
    in_regions += static_cast<int64_t>(destination.bytes.size());
  }
  bound.limits.max_message_bytes =
      in_regions > std::numeric_limits<int64_t>::max() - bound.limits.max_message_bytes
          ? std::numeric_limits<int64_t>::max()
          : bound.limits.max_message_bytes + in_regions;
  return bound;
}

absl::Status SharedMemoryTensors::Finish(ModelInferResponse* response) {
  if (targets_.empty()) return absl::OkStatus();
  for (int j = 0; j < response->outputs_size(); ++j) {
    ModelInferResponse::InferOutputTensor* output = response->mutable_outputs(j);
    Target* target = nullptr;
    for (Target& candidate : targets_) {
      if (candidate.name == output->name()) target = &candidate;
    }
    if (target == nullptr) continue;
    // Bind fetched the native field of every output bound to a region, which
    // creates it; an output this call does not produce (a RoPE "key" without
    // a key input, a "bias" without a table) then arrives here as a tensor
    // without a datatype. Refused as SelectOutputs refuses it in raw form.
    if (output->datatype().empty()) {
      return InvalidField(target->path,
                          "is not produced for these inputs (docs/API.md, \"Open "
                          "Inference Protocol\", says when each output is)");
    }
    std::string* raw = response->mutable_raw_output_contents(j);
    int64_t written = 0;
    if (raw->empty()) {
      written = WrittenBytes(*output);
    } else {
      written = static_cast<int64_t>(raw->size());
      if (raw->size() > target->block.bytes().size()) {
        return InvalidField(
            absl::StrCat(target->path, ".parameters[", kByteSizeKey, "]"),
            absl::StrCat("shared_memory_byte_size is ", target->block.bytes().size(),
                         " bytes; the output needs ", raw->size()));
      }
    }
    const std::string region_field = absl::StrCat(target->path, ".parameters[", kRegionKey, "]");
    PHASOR_RETURN_IF_ERROR(target->block.Recheck(region_field));
    if (!raw->empty()) {
      std::memcpy(target->block.bytes().data(), raw->data(), raw->size());
      std::string().swap(*raw);
    }
    auto& parameters = *output->mutable_parameters();
    parameters[std::string(kRegionKey)].set_string_param(target->reference.region);
    parameters[std::string(kOffsetKey)].set_int64_param(target->reference.offset);
    parameters[std::string(kByteSizeKey)].set_int64_param(written);
  }
  return absl::OkStatus();
}

}  // namespace phasor::server
