// -----------------------------------------------------------------------------
// File: core/io/tensor_file.h
// -----------------------------------------------------------------------------
//
// Readers for the two array file formats profiles use: NumPy .npy and
// Hugging Face .safetensors.
//
// These are the only readers of either format in Phasor: the server's
// profiles and phasor-client (client/tensor_io.h) both go through them.
//
// .npy (numpy/lib/format.py, versions 1.0–3.0): magic "\x93NUMPY", version,
// little-endian header length (2 bytes in 1.0, 4 in 2.0/3.0), a Python dict
// literal {'descr': '<f4', 'fortran_order': False, 'shape': (R, C), } padded
// with spaces, then the raw data. The literal is parsed as what it is (a
// dict of exactly those three keys, as NumPy's own reader demands), not
// searched for substrings. Accepted: C order, little-endian descr
// <f2 <f4 <f8 <i4 <i8 |u1 |b1.
//
// .safetensors (huggingface/safetensors, "Format"): an 8-byte little-endian
// header size N (at most 100,000,000, the reference implementation's cap), N
// bytes of JSON {"name": {"dtype": "F32", "shape": [R, C], "data_offsets":
// [begin, end]}, "__metadata__": {...}}, then the data buffer (offsets
// relative to it). The JSON goes through nlohmann::json without exceptions;
// repeated keys, nesting deeper than 16 and tensors that do not tile the
// buffer exactly (gaps, overlaps, a short or padded end) are rejected.
// Readable dtypes: F16, BF16, F32, F64.
//
// Every malformed input is an error Status naming the file and what is wrong
// (quoting at most a few dozen bytes of it); no input crashes, over-reads or
// throws (tests feed every truncated prefix; tests/fuzz fuzzes both).
// Thread-safety: pure functions.
//
// Example:
//
//   absl::StatusOr<HostArray> table = ReadArrayFile("model.safetensors", "wpe");
//   // table->shape == {rows, dim}; table->values in row-major order.
#ifndef PHASOR_CORE_IO_TENSOR_FILE_H_
#define PHASOR_CORE_IO_TENSOR_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/adapters/dtype.h"

namespace phasor {

// A dense row-major array. Values are widened to double, which holds every
// f16/bf16/f32/f64 value exactly.
struct HostArray {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

// A .npy file's checked header and a view of its data.
struct NpyArray {
  // kFloat16/32/64, kInt32/64, kUInt8 or kBool.
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;  // () gives rank 0, one element.
  int64_t num_elements = 0;
  // Exactly num_elements * DTypeSize(dtype) bytes, pointing into the input.
  absl::string_view data;
};

// `bytes` is the file content; `name` labels errors (usually the path).
// Any accepted dtype; the data size must match the shape exactly.
absl::StatusOr<NpyArray> ParseNpyArray(absl::string_view bytes,
                                       absl::string_view name);

// ParseNpyArray for floating-point files, widened to double.
absl::StatusOr<HostArray> ParseNpy(absl::string_view bytes,
                                   absl::string_view name);
// Returns the tensor called `tensor_name`; when empty, the file must hold
// exactly one tensor and that one is returned.
absl::StatusOr<HostArray> ParseSafetensors(absl::string_view bytes,
                                           absl::string_view tensor_name,
                                           absl::string_view name);

// Reads `path` and dispatches on its extension (.npy or .safetensors).
// A missing file is NOT_FOUND; a malformed one INVALID_ARGUMENT.
absl::StatusOr<HostArray> ReadArrayFile(const std::string& path,
                                        absl::string_view tensor_name = "");

}  // namespace phasor

#endif  // PHASOR_CORE_IO_TENSOR_FILE_H_
