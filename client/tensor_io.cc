#include "client/tensor_io.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/base/config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/adapters/dtype.h"
#include "core/base/file.h"
#include "core/base/status_macros.h"
#include "core/io/tensor_file.h"

#ifndef ABSL_IS_LITTLE_ENDIAN
#error "Tensor bytes are little-endian; this code reads them as native values."
#endif

namespace phasor {
namespace {

constexpr absl::string_view kNpyMagic("\x93NUMPY", 6);

template <typename T>
T Load(const std::string& data, int64_t index) {
  T value;
  std::memcpy(&value, data.data() + index * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
void Store(std::string* data, int64_t index, T value) {
  std::memcpy(&(*data)[index * sizeof(T)], &value, sizeof(T));
}

// core's element types are phasor.v1's, one for one.
v1::DType DTypeToProto(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return v1::FLOAT32;
    case DType::kFloat16:
      return v1::FLOAT16;
    case DType::kBFloat16:
      return v1::BFLOAT16;
    case DType::kFloat64:
      return v1::FLOAT64;
    case DType::kInt64:
      return v1::INT64;
    case DType::kInt32:
      return v1::INT32;
    case DType::kUInt8:
      return v1::UINT8;
    case DType::kBool:
      return v1::BOOL;
  }
  return v1::DTYPE_UNSPECIFIED;
}

bool IsIntegral(v1::DType dtype) {
  return dtype == v1::INT64 || dtype == v1::INT32 || dtype == v1::UINT8 ||
         dtype == v1::BOOL;
}

// REQUIRES: index < element count, dtype known.
double LoadAsDouble(const v1::Tensor& tensor, int64_t index) {
  const std::string& data = tensor.data();
  switch (tensor.dtype()) {
    case v1::FLOAT32:
      return Load<float>(data, index);
    case v1::FLOAT64:
      return Load<double>(data, index);
    case v1::FLOAT16:
      return HalfToFloat(Load<uint16_t>(data, index));
    case v1::BFLOAT16:
      return BFloat16ToFloat(Load<uint16_t>(data, index));
    case v1::INT64:
      return static_cast<double>(Load<int64_t>(data, index));
    case v1::INT32:
      return Load<int32_t>(data, index);
    case v1::UINT8:
      return Load<uint8_t>(data, index);
    case v1::BOOL:
      return Load<uint8_t>(data, index) != 0 ? 1.0 : 0.0;
    default:
      return 0;
  }
}

// REQUIRES: IsIntegral(tensor.dtype()).
int64_t LoadAsInt64(const v1::Tensor& tensor, int64_t index) {
  const std::string& data = tensor.data();
  switch (tensor.dtype()) {
    case v1::INT64:
      return Load<int64_t>(data, index);
    case v1::INT32:
      return Load<int32_t>(data, index);
    case v1::UINT8:
      return Load<uint8_t>(data, index);
    case v1::BOOL:
      return Load<uint8_t>(data, index) != 0 ? 1 : 0;
    default:
      return 0;
  }
}

void StoreFloating(v1::DType dtype, int64_t index, double value,
                   std::string* data) {
  switch (dtype) {
    case v1::FLOAT32:
      Store(data, index, static_cast<float>(value));
      break;
    case v1::FLOAT64:
      Store(data, index, value);
      break;
    case v1::FLOAT16:
      Store(data, index, FloatToHalf(static_cast<float>(value)));
      break;
    case v1::BFLOAT16:
      Store(data, index, FloatToBFloat16(static_cast<float>(value)));
      break;
    default:
      break;
  }
}

absl::Status StoreIntegral(v1::DType dtype, int64_t index, int64_t value,
                           absl::string_view field, std::string* data) {
  switch (dtype) {
    case v1::INT64:
      Store(data, index, value);
      return absl::OkStatus();
    case v1::INT32:
      if (value < std::numeric_limits<int32_t>::min() ||
          value > std::numeric_limits<int32_t>::max()) {
        break;
      }
      Store(data, index, static_cast<int32_t>(value));
      return absl::OkStatus();
    case v1::UINT8:
      if (value < 0 || value > 255) break;
      Store(data, index, static_cast<uint8_t>(value));
      return absl::OkStatus();
    case v1::BOOL:
      Store(data, index, static_cast<uint8_t>(value != 0));
      return absl::OkStatus();
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, "[", index, "]: ", value, " does not fit in ",
                   DTypeString(dtype)));
}

absl::string_view DescrFromDType(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32:
      return "<f4";
    case v1::FLOAT64:
      return "<f8";
    case v1::FLOAT16:
      return "<f2";
    case v1::INT64:
      return "<i8";
    case v1::INT32:
      return "<i4";
    case v1::UINT8:
      return "|u1";
    case v1::BOOL:
      return "|b1";
    default:
      return "<f4";
  }
}

std::string FormatCell(const v1::Tensor& tensor, int64_t index,
                       int precision) {
  if (IsIntegral(tensor.dtype())) {
    return absl::StrCat(LoadAsInt64(tensor, index));
  }
  return absl::StrFormat("%.*g", precision, LoadAsDouble(tensor, index));
}

// A table cell: like FormatCell, but −0 shows as 0 (a sign on zero only
// distracts a reader; files keep it).
std::string FormatTableCell(const v1::Tensor& tensor, int64_t index,
                            int precision) {
  if (!IsIntegral(tensor.dtype()) && LoadAsDouble(tensor, index) == 0.0) {
    return "0";
  }
  return FormatCell(tensor, index, precision);
}

// Digits that make a printed value parse back to the same float.
int RoundTripDigits(v1::DType dtype) {
  return dtype == v1::FLOAT64 ? 17 : 9;
}

// Which of `count` indices to show when at most `limit` fit; -1 marks the
// elided middle.
std::vector<int64_t> VisibleIndices(int64_t count, int limit) {
  std::vector<int64_t> indices;
  if (limit < 2) limit = 2;
  if (count <= limit) {
    for (int64_t i = 0; i < count; ++i) indices.push_back(i);
    return indices;
  }
  const int64_t head = (limit + 1) / 2;
  const int64_t tail = limit / 2;
  for (int64_t i = 0; i < head; ++i) indices.push_back(i);
  indices.push_back(-1);
  for (int64_t i = count - tail; i < count; ++i) indices.push_back(i);
  return indices;
}

// Row label: the index of every dimension but the last.
std::string RowLabel(const v1::Tensor& tensor, int64_t row) {
  const int rank = tensor.shape_size();
  if (rank <= 1) return "";  // A single row needs no label.
  if (rank == 2) return absl::StrCat(row);
  std::vector<int64_t> index(rank - 1);
  for (int d = rank - 2; d >= 0; --d) {
    index[d] = row % tensor.shape(d);
    row /= tensor.shape(d);
  }
  return absl::StrJoin(index, ",");
}

}  // namespace

int64_t DTypeBytes(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32:
    case v1::INT32:
      return 4;
    case v1::FLOAT16:
    case v1::BFLOAT16:
      return 2;
    case v1::FLOAT64:
    case v1::INT64:
      return 8;
    case v1::UINT8:
    case v1::BOOL:
      return 1;
    default:
      return 0;
  }
}

std::string DTypeString(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32:
      return "float32";
    case v1::FLOAT16:
      return "float16";
    case v1::BFLOAT16:
      return "bfloat16";
    case v1::FLOAT64:
      return "float64";
    case v1::INT64:
      return "int64";
    case v1::INT32:
      return "int32";
    case v1::UINT8:
      return "uint8";
    case v1::BOOL:
      return "bool";
    default:
      return "unspecified";
  }
}

std::string ShapeString(const v1::Tensor& tensor) {
  return absl::StrCat("[", absl::StrJoin(tensor.shape(), ","), "]");
}

absl::StatusOr<int64_t> CheckedElementCount(const v1::Tensor& tensor,
                                            absl::string_view field) {
  const int64_t element_bytes = DTypeBytes(tensor.dtype());
  if (element_bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".dtype: unspecified or unknown"));
  }
  int64_t count = 1;
  for (const int64_t dim : tensor.shape()) {
    if (dim < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".shape: negative dimension in ", ShapeString(tensor)));
    }
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() /
                                element_bytes / dim) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".shape: ", ShapeString(tensor), " overflows"));
    }
    count *= dim;
  }
  if (static_cast<int64_t>(tensor.data().size()) != count * element_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".data: expected ", count * element_bytes, " bytes for shape ",
        ShapeString(tensor), " ", DTypeString(tensor.dtype()), ", got ",
        tensor.data().size()));
  }
  return count;
}

absl::StatusOr<v1::Tensor> TensorFromDoubles(absl::Span<const double> values,
                                             std::vector<int64_t> shape,
                                             v1::DType dtype) {
  v1::Tensor wide;
  wide.set_dtype(v1::FLOAT64);
  for (const int64_t dim : shape) wide.add_shape(dim);
  wide.set_data(reinterpret_cast<const char*>(values.data()),
                values.size() * sizeof(double));
  PHASOR_RETURN_IF_ERROR(CheckedElementCount(wide, "values").status());
  return CastTensor(std::move(wide), dtype, "values");
}

v1::Tensor TensorFromInt64s(absl::Span<const int64_t> values,
                            std::vector<int64_t> shape) {
  v1::Tensor tensor;
  tensor.set_dtype(v1::INT64);
  for (const int64_t dim : shape) tensor.add_shape(dim);
  tensor.set_data(reinterpret_cast<const char*>(values.data()),
                  values.size() * sizeof(int64_t));
  return tensor;
}

absl::StatusOr<std::vector<double>> TensorToDoubles(const v1::Tensor& tensor) {
  PHASOR_ASSIGN_OR_RETURN(const int64_t count,
                          CheckedElementCount(tensor, "tensor"));
  std::vector<double> values(count);
  for (int64_t i = 0; i < count; ++i) values[i] = LoadAsDouble(tensor, i);
  return values;
}

absl::StatusOr<v1::Tensor> CastTensor(v1::Tensor tensor, v1::DType dtype,
                                      absl::string_view field) {
  PHASOR_ASSIGN_OR_RETURN(const int64_t count,
                          CheckedElementCount(tensor, field));
  if (tensor.dtype() == dtype) return tensor;
  if (DTypeBytes(dtype) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": cannot convert to ", DTypeString(dtype)));
  }
  v1::Tensor out;
  *out.mutable_shape() = tensor.shape();
  out.set_dtype(dtype);
  std::string* data = out.mutable_data();
  data->resize(count * DTypeBytes(dtype));
  for (int64_t i = 0; i < count; ++i) {
    if (!IsIntegral(dtype)) {
      StoreFloating(dtype, i, LoadAsDouble(tensor, i), data);
      continue;
    }
    int64_t value;
    if (IsIntegral(tensor.dtype())) {
      value = LoadAsInt64(tensor, i);
    } else {
      const double real = LoadAsDouble(tensor, i);
      // 2^63 is exact in double; every integral double below it fits.
      if (!(real == std::floor(real)) || real < -0x1p63 || real >= 0x1p63) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, "[", i, "]: ", real, " is not an integer"));
      }
      value = static_cast<int64_t>(real);
    }
    PHASOR_RETURN_IF_ERROR(StoreIntegral(dtype, i, value, field, data));
  }
  return out;
}

absl::StatusOr<v1::Tensor> ReshapeTensor(v1::Tensor tensor,
                                         std::vector<int64_t> shape,
                                         absl::string_view field) {
  PHASOR_ASSIGN_OR_RETURN(const int64_t count,
                          CheckedElementCount(tensor, field));
  const std::string old_shape = ShapeString(tensor);
  tensor.clear_shape();
  for (const int64_t dim : shape) tensor.add_shape(dim);
  auto reshaped = CheckedElementCount(tensor, field);
  if (!reshaped.ok() || *reshaped != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": cannot reshape ", old_shape, " to ",
                     ShapeString(tensor)));
  }
  return tensor;
}

absl::StatusOr<v1::Tensor> NpyToTensor(absl::string_view bytes,
                                       absl::string_view name) {
  // The one .npy reader is core's; the bytes map onto a Tensor unchanged.
  PHASOR_ASSIGN_OR_RETURN(const NpyArray npy, ParseNpyArray(bytes, name));
  v1::Tensor tensor;
  tensor.set_dtype(DTypeToProto(npy.dtype));
  for (const int64_t dim : npy.shape) tensor.add_shape(dim);
  tensor.set_data(npy.data.data(), npy.data.size());
  PHASOR_RETURN_IF_ERROR(CheckedElementCount(tensor, name).status());
  return tensor;
}

std::string TensorToNpy(const v1::Tensor& tensor) {
  if (tensor.dtype() == v1::BFLOAT16) {
    // Widening bf16 to f32 is exact and cannot fail.
    auto wide = CastTensor(tensor, v1::FLOAT32, "tensor");
    if (wide.ok()) return TensorToNpy(*wide);
  }
  std::string shape = absl::StrJoin(tensor.shape(), ", ");
  if (tensor.shape_size() == 1) shape += ",";  // Python's 1-tuple.
  std::string header = absl::StrCat(
      "{'descr': '", DescrFromDType(tensor.dtype()),
      "', 'fortran_order': False, 'shape': (", shape, "), }");
  // NumPy pads the header with spaces to a multiple of 64 bytes, counting the
  // 10-byte preamble and the closing newline, so the data starts aligned.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');

  std::string out(kNpyMagic);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>((header.size() >> 8) & 0xff));
  out += header;
  out += tensor.data();
  return out;
}

absl::StatusOr<v1::Tensor> CsvToTensor(absl::string_view text,
                                       absl::string_view name) {
  std::vector<double> reals;
  std::vector<int64_t> integers;
  bool all_integers = true;
  int64_t rows = 0;
  int64_t columns = -1;
  bool first_line = true;
  int64_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
    std::vector<double> row_reals;
    std::vector<int64_t> row_integers;
    bool numeric = true;
    bool row_integral = true;
    for (absl::string_view cell : cells) {
      cell = absl::StripAsciiWhitespace(cell);
      int64_t integer;
      double real;
      if (cell.empty() || absl::EqualsIgnoreCase(cell, "nan")) {
        row_reals.push_back(std::numeric_limits<double>::quiet_NaN());
        row_integral = false;
      } else if (absl::SimpleAtoi(cell, &integer)) {
        row_integers.push_back(integer);
        row_reals.push_back(static_cast<double>(integer));
      } else if (absl::SimpleAtod(cell, &real)) {
        row_reals.push_back(real);
        row_integral = false;
      } else {
        numeric = false;
        break;
      }
    }
    if (!numeric) {
      if (first_line) {  // A header row.
        first_line = false;
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          name, ":", line_number, ": not a number in '", line, "'"));
    }
    first_line = false;
    const int64_t width = static_cast<int64_t>(row_reals.size());
    if (columns >= 0 && width != columns) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ":", line_number, ": ", width,
                       " columns, expected ", columns));
    }
    columns = width;
    ++rows;
    all_integers = all_integers && row_integral;
    reals.insert(reals.end(), row_reals.begin(), row_reals.end());
    if (all_integers) {
      integers.insert(integers.end(), row_integers.begin(),
                      row_integers.end());
    }
  }
  if (columns < 0) columns = 0;
  std::vector<int64_t> shape = {rows};
  if (columns != 1) shape.push_back(columns);
  if (all_integers && rows > 0) return TensorFromInt64s(integers, shape);
  return TensorFromDoubles(reals, shape, v1::FLOAT64);
}

std::string TensorToCsv(const v1::Tensor& tensor) {
  auto count = CheckedElementCount(tensor, "tensor");
  if (!count.ok()) return "";
  const int rank = tensor.shape_size();
  const int64_t rows = rank == 0 ? 1 : tensor.shape(0);
  const int64_t columns = rows == 0 ? 0 : *count / rows;
  const int digits = RoundTripDigits(tensor.dtype());
  std::string out;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < columns; ++c) {
      if (c > 0) out.push_back(',');
      out += FormatCell(tensor, r * columns + c, digits);
    }
    out.push_back('\n');
  }
  return out;
}

absl::StatusOr<v1::Tensor> ReadTensorFile(const std::string& path) {
  PHASOR_ASSIGN_OR_RETURN(const std::string contents, ReadFileToString(path));
  if (absl::EndsWithIgnoreCase(path, ".npy")) return NpyToTensor(contents, path);
  return CsvToTensor(contents, path);
}

absl::Status WriteTensorFile(const v1::Tensor& tensor,
                             const std::string& path) {
  PHASOR_RETURN_IF_ERROR(CheckedElementCount(tensor, path).status());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot open for writing"));
  }
  if (absl::EndsWithIgnoreCase(path, ".npy")) {
    out << TensorToNpy(tensor);
  } else {
    out << TensorToCsv(tensor);
  }
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

std::string FormatTensorTable(const v1::Tensor& tensor,
                              const TableOptions& options) {
  std::string out = absl::StrCat(DTypeString(tensor.dtype()), " ",
                                 ShapeString(tensor), "\n");
  auto count = CheckedElementCount(tensor, "tensor");
  if (!count.ok()) return absl::StrCat(out, count.status().message(), "\n");
  const int rank = tensor.shape_size();
  const int64_t columns = rank == 0 ? 1 : tensor.shape(rank - 1);
  const int64_t rows = columns == 0 ? 0 : *count / columns;
  if (*count == 0) return absl::StrCat(out, "(empty)\n");

  const std::vector<int64_t> shown_rows = VisibleIndices(rows, options.max_rows);
  const std::vector<int64_t> shown_columns =
      VisibleIndices(columns, options.max_columns);

  // cells[0] is the header; column 0 of each line is the row label.
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> header = {""};
  for (const int64_t c : shown_columns) {
    header.push_back(c < 0 ? "..." : absl::StrCat(c));
  }
  cells.push_back(std::move(header));
  for (const int64_t r : shown_rows) {
    std::vector<std::string> line;
    line.push_back(r < 0 ? "..." : RowLabel(tensor, r));
    for (const int64_t c : shown_columns) {
      if (r < 0 || c < 0) {
        line.push_back("...");
      } else {
        line.push_back(
            FormatTableCell(tensor, r * columns + c, options.precision));
      }
    }
    cells.push_back(std::move(line));
  }
  std::vector<size_t> widths(cells[0].size(), 0);
  for (const auto& line : cells) {
    for (size_t i = 0; i < line.size(); ++i) {
      widths[i] = std::max(widths[i], line[i].size());
    }
  }
  for (const auto& line : cells) {
    for (size_t i = 0; i < line.size(); ++i) {
      if (i > 0) out += "  ";
      out.append(widths[i] - line[i].size(), ' ');
      out += line[i];
    }
    out.push_back('\n');
  }
  return out;
}

}  // namespace phasor
