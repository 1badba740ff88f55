// File: client/inference_wire.h
//
// The Open Inference Protocol's wire conventions the C++ clients share
// (phasor-client's `infer` command, SharedMemorySession): the protocol's
// datatype names ("Tensor Data Types": "FP32", "BF16", "INT64", ...) for
// Phasor's dtypes, and raw BYTES contents, where each element follows its
// 4-byte little-endian length (Triton's layout for raw and shared-memory
// BYTES tensors).
//
// Thread-safety: pure functions.
#ifndef PHASOR_CLIENT_INFERENCE_WIRE_H_
#define PHASOR_CLIENT_INFERENCE_WIRE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "phasor/v1/encoder.pb.h"

namespace phasor {

// The protocol's name of `dtype`, or "" for one it has none for.
absl::string_view InferenceDatatype(v1::DType dtype);
// The inverse; DTYPE_UNSPECIFIED for a name Phasor has no dtype for
// (BYTES among them).
v1::DType DTypeOfInferenceDatatype(absl::string_view datatype);

// `elements` as raw BYTES contents.
std::string EncodeBytesElements(absl::Span<const std::string> elements);
// The elements of raw BYTES contents, as views of `raw`; DATA_LOSS naming
// `field` when an element or its length is cut short.
absl::StatusOr<std::vector<absl::string_view>> DecodeBytesElements(absl::string_view raw,
                                                                   absl::string_view field);

}  // namespace phasor

#endif  // PHASOR_CLIENT_INFERENCE_WIRE_H_
