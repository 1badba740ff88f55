// File: server/inference_models.h
//
// Phasor's profiles as Open Inference Protocol models: every profile of the
// server is a model of the same name with one version, "1", whose inputs
// and outputs are named after the native request and response fields of
// the RPC its spec kind serves (docs/API.md, "Open Inference Protocol", has
// the tables):
//
//   spec kind      native RPC          inputs                      outputs
//   positional     EncodePositions     positions, content          encodings
//   rope           ApplyRope           query, key, positions       query, key
//   temporal       EncodeObservations  timestamps, values, mask,   features,
//                                      event_*, content,           state |
//                                      series_offsets, ...,        states +
//                                      state | states              series_offsets
//   relative_bias  RelativeBias        query_positions,            bias,
//                                      key_positions, table        bucket_ids
//
// ModelInfer translates the request into the native request message (the
// profile as its `profile`, raw input bytes moved into its tensors), runs
// the SAME handler the Encoder service runs (server/handlers.h), and moves
// the native response's tensors into raw_output_contents, so the outputs
// are byte for byte the native RPC's. Per-call options travel as request
// parameters (output_dtype, content_scale, tensor_layout, num_channels,
// include_bucket_ids); what the native response carries besides tensors
// travels as parameters (attention_factor, num_buckets, the feature schema
// as JSON on the `features` output) or BYTES outputs (each series' state,
// a serialized phasor.v1.SeriesState, to send back as input
// `state`/`states` with the next chunk).
//
// Errors carry the ModelInferRequest's field paths ("inputs[query].shape",
// "parameters[output_dtype]", "model_name"), also for what the native
// handler reports (inference_convert.h ToInferPaths).
//
// Thread-safety: reentrant, as server/handlers.h.
#ifndef PHASOR_SERVER_INFERENCE_MODELS_H_
#define PHASOR_SERVER_INFERENCE_MODELS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "inference/grpc_service.pb.h"
#include "phasor/v1/encoder.pb.h"
#include "server/handlers.h"
#include "server/profiles.h"
#include "server/shared_memory.h"

namespace phasor::server {

// The one version every model has.
inline constexpr absl::string_view kModelVersion = "1";

// The profile serving model `name` at `version` ("" or "1"). An unknown
// name is NOT_FOUND at `name_field` naming the model, another version
// NOT_FOUND at `version_field`.
absl::StatusOr<const v1::Profile*> FindModel(const ProfileRegistry& profiles,
                                             absl::string_view name,
                                             absl::string_view version,
                                             absl::string_view name_field,
                                             absl::string_view version_field);

// ModelMetadata of `profile`'s model: versions ["1"], platform
// "phasor_<kind>", every input and output with its default datatype and
// its shape from the spec, -1 where the extent varies per request (e.g.
// encodings [-1, dim]).
void FillModelMetadata(const ProfileRegistry& profiles, const v1::Profile& profile,
                       inference::ModelMetadataResponse* response);

// ModelInfer (see the file comment). `request`'s raw contents are moved
// out; `response` gets model_name, model_version, id, the outputs (all the
// model produced for these inputs, or the requested ones in the requested
// order) and their raw contents. Errors as the file comment says.
//
// Shared memory (Triton's system shared-memory extension, on when
// `shared_memory` is non-null and enabled): an input whose parameters name
// a region ("shared_memory_region", "shared_memory_offset" default 0,
// "shared_memory_byte_size", which must equal the tensor's bytes) is read
// from it -- in place for float value tensors, copied first for the others
// (server/inference_shared_memory.h says why) -- and raw_input_contents
// then lists only the other inputs, in order, as in Triton; a requested
// output whose
// parameters name one is written into it — by the kernel itself for FP32
// and FP64 outputs at an aligned offset, copied in otherwise — and the
// reply carries that output's datatype, shape and the region's parameters
// (byte_size: the bytes written) with an empty raw_output_contents entry.
// An output larger than its shared_memory_byte_size is INVALID_ARGUMENT at
// that parameter. Regions are checked against the object's size before and
// after the model runs (server/shared_memory.h). Without the extension the
// parameters are INVALID_ARGUMENT at their path, saying it is off.
absl::Status HandleModelInfer(const HandlerContext& context, inference::ModelInferRequest* request,
                              inference::ModelInferResponse* response,
                              const SharedMemoryRegistry* shared_memory = nullptr);

// The protocol extensions ServerMetadata lists: "parameters" (per-request
// options as InferParameter, Triton's "parameters" extension), and
// "system_shared_memory" when that extension is on. Never
// "cuda_shared_memory": Phasor has no GPU memory to share.
std::vector<absl::string_view> InferenceExtensions(bool system_shared_memory = false);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_INFERENCE_MODELS_H_
