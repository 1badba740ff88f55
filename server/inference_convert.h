// File: server/inference_convert.h
//
// The Open Inference Protocol's tensors and parameters (package inference,
// proto/inference/grpc_service.proto) to and from phasor.v1's: the pieces
// every model kind of server/inference_models.h uses to turn a
// ModelInferRequest into a native request and a native response into a
// ModelInferResponse.
//
// Tensors. An input's elements come either as raw_input_contents[i] (the
// row-major little-endian bytes a phasor.v1.Tensor carries, moved into the
// native tensor without a copy) or as the typed list of
// InferTensorContents that matches its datatype (converted once). Outputs
// always go out as raw_output_contents, the tensor's bytes moved in.
// Datatype names are the protocol's ("Tensor Data Types" table of its
// documentation): FP32 FP16 BF16 FP64 INT64 INT32 UINT8 BOOL, and BYTES
// for strings (serialized states, names).
//
// BYTES as raw contents: each element is a 4-byte little-endian length
// followed by that many bytes, elements back to back, as Triton Inference
// Server's clients send and read them (Triton's protocol documentation,
// "Binary Tensor Data Extension": "BYTES ... each element preceded by its
// 4-byte length"). Typed BYTES use bytes_contents, one entry per element.
//
// Errors name the wire field as a client wrote it: "inputs[query]",
// "inputs[query].shape", "parameters[output_dtype]", "outputs[bias]". A
// name that is not a short plain identifier is replaced by its index
// ("inputs[3]"), so a path never carries arbitrary client text.
//
// Thread-safety: pure functions.
#ifndef PHASOR_SERVER_INFERENCE_CONVERT_H_
#define PHASOR_SERVER_INFERENCE_CONVERT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "inference/grpc_service.pb.h"
#include "phasor/v1/encoder.pb.h"
#include "server/convert.h"

namespace phasor::server {

using InferParameterMap = google::protobuf::Map<std::string, inference::InferParameter>;

// The protocol's name for BYTES elements (no phasor.v1 dtype).
inline constexpr absl::string_view kBytesDatatype = "BYTES";

// The protocol's name of a phasor.v1 dtype: FLOAT32 "FP32", FLOAT16 "FP16",
// BFLOAT16 "BF16", FLOAT64 "FP64", INT64, INT32, UINT8, BOOL as they are;
// "" for DTYPE_UNSPECIFIED.
absl::string_view DatatypeName(v1::DType dtype);
// The phasor.v1 dtype a datatype name stands for; DTYPE_UNSPECIFIED for
// every other name (BYTES, INT8, UINT16, ..., or a misspelling).
v1::DType DTypeFromDatatype(absl::string_view datatype);

// "<field>[<key>]" when `key` is a plain identifier ([A-Za-z0-9_.-], 1 to
// 64 bytes), else "<field>[<index>]".
std::string IndexedPath(absl::string_view field, absl::string_view key, int index);
// The path of request input `index`: "inputs[query]" (IndexedPath).
std::string InputPath(const inference::ModelInferRequest& request, int index);
// "<prefix>parameters[<key>]"; a key that is not a plain identifier goes in
// C-escaped and cut to 32 bytes ("parameters[a\nb...]").
std::string ParameterPath(absl::string_view prefix, absl::string_view key);

// What holds for every model: raw_input_contents is empty or has one entry
// per input; with raw contents no input sets `contents` (the error names
// the input); no two inputs, and no two requested outputs, share a name.
absl::Status CheckInferRequestForm(const inference::ModelInferRequest& request);

// Input `index` as a phasor.v1.Tensor of one of `allowed` dtypes. Checks,
// each an error at the input's path: the datatype is one of `allowed`
// (".datatype", naming the ones allowed); every dimension >= 0 and the
// element count within limits.max_elements (".shape",
// RESOURCE_EXHAUSTED over the limit); the elements are exactly
// product(shape): raw bytes of that size, or a typed list of that length in
// the datatype's field and no other (".contents"; FP16 and BF16 have no
// typed field and must be raw); UINT8 values fit a byte. Raw bytes are
// moved out of `request` (its raw_input_contents[index] is left empty).
// With `in_place` (an input whose elements are read where they lie, e.g. in
// shared memory), `out` gets the dtype and shape and no data, and
// `in_place` must hold exactly the input's bytes.
absl::Status TakeInputTensor(inference::ModelInferRequest* request, int index,
                             absl::Span<const v1::DType> allowed,
                             const RequestLimits& limits, v1::Tensor* out,
                             const absl::string_view* in_place = nullptr);

// A BYTES input `index`: its elements, raw (length-prefixed, see the file
// comment) or bytes_contents, exactly product(shape) of them, with the
// checks of TakeInputTensor; `shape` receives the input's shape.
absl::Status TakeInputStrings(inference::ModelInferRequest* request, int index,
                              const RequestLimits& limits, std::vector<std::string>* out,
                              std::vector<int64_t>* shape);

// Length-prefixed BYTES raw contents of `elements`.
std::string EncodeBytesElements(absl::Span<const std::string> elements);
// The inverse: exactly `count` elements filling all of `raw`; an error at
// `path` otherwise (truncated length or element, bytes left over).
absl::Status DecodeBytesElements(absl::string_view raw, int64_t count,
                                 absl::string_view path, std::vector<std::string>* out);

// Appends output `name` to `response`: datatype and shape of `tensor`, and
// its bytes moved into raw_output_contents (`tensor` is left without data).
// Returns the output so callers can add parameters.
inference::ModelInferResponse::InferOutputTensor* AddTensorOutput(
    absl::string_view name, v1::Tensor* tensor, inference::ModelInferResponse* response);
// Appends a BYTES output of `shape` holding `elements` (raw, length-prefixed).
inference::ModelInferResponse::InferOutputTensor* AddBytesOutput(
    absl::string_view name, absl::Span<const std::string> elements,
    absl::Span<const int64_t> shape, inference::ModelInferResponse* response);

// Every key of `parameters` is one of `known`; otherwise INVALID_ARGUMENT at
// "<prefix>parameters[<key>]" listing the ones this model takes (`what`,
// e.g. "this model's requests").
absl::Status CheckParameterKeys(const InferParameterMap& parameters,
                                absl::string_view prefix,
                                absl::Span<const absl::string_view> known,
                                absl::string_view what);

// Typed reads of parameter `key` (absent: nullopt). A value of another kind
// is INVALID_ARGUMENT at "parameters[<key>]" saying which kinds it takes.
// Integers come as int64_param or uint64_param (within int64); doubles as
// double_param or an integer that a double holds exactly.
absl::StatusOr<std::optional<std::string>> StringParameter(
    const InferParameterMap& parameters, absl::string_view key);
absl::StatusOr<std::optional<int64_t>> IntParameter(const InferParameterMap& parameters,
                                                    absl::string_view key);
absl::StatusOr<std::optional<double>> DoubleParameter(const InferParameterMap& parameters,
                                                      absl::string_view key);
absl::StatusOr<std::optional<bool>> BoolParameter(const InferParameterMap& parameters,
                                                  absl::string_view key);
// Parameter "output_dtype": FP32, FP16, BF16 or FP64 (DTYPE_UNSPECIFIED, the
// native default, when absent).
absl::StatusOr<v1::DType> OutputDTypeParameter(const InferParameterMap& parameters);

// One renaming of a native field path prefix to its wire path.
struct PathRename {
  absl::string_view native;  // "positions.values", "query", "profile", ...
  absl::string_view wire;    // "inputs[positions]", "model_name", ...
};
// `status` re-addressed from the native request's field paths to the
// ModelInferRequest's: the first rename whose `native` is the whole path or
// a prefix of it followed by '.' or '[' applies, and in what follows a
// tensor's ".dtype" reads ".datatype" and its ".data" (the bytes) is the
// input itself. A status without a path, or with none of the prefixes, is
// returned unchanged. The description is kept (server/convert.h
// ReplaceFieldPath).
absl::Status ToInferPaths(const absl::Status& status, absl::Span<const PathRename> renames);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_INFERENCE_CONVERT_H_
