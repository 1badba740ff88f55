// Readers for the two array file formats profiles use: NumPy .npy and
// Hugging Face .safetensors.
//
// .npy (numpy.lib.format, versions 1.0–3.0): magic "\x93NUMPY", version,
// little-endian header length (2 bytes in 1.0, 4 in 2.0/3.0), a Python dict
// literal {'descr': '<f4', 'fortran_order': False, 'shape': (R, C), } padded
// with spaces, then the raw data. Accepted: little-endian f2/f4/f8, C order.
//
// .safetensors: an 8-byte little-endian header size N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [R, C], "data_offsets": [begin, end]},
//  "__metadata__": {...}}, then the data buffer (offsets relative to it).
// Accepted dtypes: F16, BF16, F32, F64.
//
// Every malformed input is an error Status naming the file and what is wrong;
// no input crashes or over-reads (tests feed every truncated prefix).
// Thread-safety: pure functions.
#ifndef PHASOR_CORE_TENSOR_FILE_H_
#define PHASOR_CORE_TENSOR_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace phasor {

// A dense row-major array. Values are widened to double, which holds every
// f16/bf16/f32/f64 value exactly.
struct HostArray {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

// `bytes` is the file content; `name` labels errors (usually the path).
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

#endif  // PHASOR_CORE_TENSOR_FILE_H_
