// phasor.v1.Tensor to and from files, numbers and readable tables.
//
// A Tensor is raw little-endian row-major bytes plus shape and dtype, the
// same layout as a NumPy .npy body, so .npy files map onto it without
// conversion:
//   .npy read: core's reader (core/tensor_file.h, ParseNpyArray), format
//     versions 1.0–3.0, C order, little-endian descr <f4 <f8 <f2 <i8 <i4
//     |u1 |b1 (FLOAT32 FLOAT64 FLOAT16 INT64 INT32 UINT8 BOOL). Fortran order
//     and big-endian data are rejected, not reordered.
//   .npy write: version 1.0, C order, the tensor's own dtype; BFLOAT16, which
//     NumPy has no type for, is widened to float32 (exactly).
//   .csv read: one row per line, comma-separated; blank lines and lines
//     starting with '#' are skipped, as is a first line that is not numeric
//     (a header). Empty cells and "nan" are NaN. All-integer files become
//     INT64 (exact, for nanosecond timestamps), anything else FLOAT64. One
//     column gives shape [rows]; more give [rows, columns].
//   .csv write: rank <= 2 as is; higher ranks as [shape[0], rest]. Floats
//     print with enough digits to round-trip (9 for float32, 17 for float64).
// (NumPy format: numpy/lib/format.py, "Format Version 1.0".)
//
// Host byte order is little-endian on every platform Phasor builds for
// (checked at compile time), so tensor bytes are used as native values.
//
// Thread-safety: pure functions.
#ifndef PHASOR_CLIENT_TENSOR_IO_H_
#define PHASOR_CLIENT_TENSOR_IO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "phasor/v1/encoder.pb.h"

namespace phasor {

// Bytes per element; 0 for DTYPE_UNSPECIFIED and unknown values.
int64_t DTypeBytes(v1::DType dtype);
// "float32", "int64", ...
std::string DTypeString(v1::DType dtype);
// "[2,4,128]".
std::string ShapeString(const v1::Tensor& tensor);

// product(shape); INVALID_ARGUMENT naming `field` on a negative dimension,
// overflow, or a byte count that does not match the data.
absl::StatusOr<int64_t> CheckedElementCount(const v1::Tensor& tensor,
                                            absl::string_view field);

// Builds a tensor from values, stored as `dtype` (floats are rounded once,
// integer dtypes need integral values).
absl::StatusOr<v1::Tensor> TensorFromDoubles(absl::Span<const double> values,
                                             std::vector<int64_t> shape,
                                             v1::DType dtype);
v1::Tensor TensorFromInt64s(absl::Span<const int64_t> values,
                            std::vector<int64_t> shape);

// Every element widened to double (int64 beyond 2^53 rounds).
absl::StatusOr<std::vector<double>> TensorToDoubles(const v1::Tensor& tensor);

// The tensor's values stored as `dtype` (the tensor itself, moved, when it
// already is). Converting a non-integral or out of range value to an integer
// dtype is INVALID_ARGUMENT naming `field`. Integer to integer conversions
// are exact.
absl::StatusOr<v1::Tensor> CastTensor(v1::Tensor tensor, v1::DType dtype,
                                      absl::string_view field);

// Same data, new shape; the element counts must agree.
absl::StatusOr<v1::Tensor> ReshapeTensor(v1::Tensor tensor,
                                         std::vector<int64_t> shape,
                                         absl::string_view field);

absl::StatusOr<v1::Tensor> NpyToTensor(absl::string_view bytes,
                                       absl::string_view name);
std::string TensorToNpy(const v1::Tensor& tensor);

absl::StatusOr<v1::Tensor> CsvToTensor(absl::string_view text,
                                       absl::string_view name);
std::string TensorToCsv(const v1::Tensor& tensor);

// By extension: ".npy", else CSV. A missing file is NOT_FOUND.
absl::StatusOr<v1::Tensor> ReadTensorFile(const std::string& path);
absl::Status WriteTensorFile(const v1::Tensor& tensor, const std::string& path);

struct TableOptions {
  // Rows and columns shown; the middle of a longer axis is elided as "...".
  int max_rows = 16;
  int max_columns = 8;
  // Significant digits of floating-point cells.
  int precision = 6;
};
// A title line "<dtype> [shape]" and the values as an aligned table: one row
// per index of all but the last dimension, labelled with that index.
std::string FormatTensorTable(const v1::Tensor& tensor,
                              const TableOptions& options = TableOptions());

}  // namespace phasor

#endif  // PHASOR_CLIENT_TENSOR_IO_H_
