#include "server/convert.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/uninitialized_string.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "Tensor bytes are little-endian; a big-endian host would need "
              "byte swapping in server/convert.cc");

namespace phasor::server {
namespace {

std::string DTypeList(absl::Span<const DType> allowed) {
  return absl::StrJoin(allowed, ", ", [](std::string* out, DType dtype) {
    absl::StrAppend(out, v1::DType_Name(DTypeToProto(dtype)));
  });
}

template <typename T>
bool IsAligned(const char* data) {
  return reinterpret_cast<uintptr_t>(data) % alignof(T) == 0;
}

}  // namespace

bool CheckedMultiply(int64_t a, int64_t b, int64_t* product) {
  if (a < 0 || b < 0) return false;
  return !__builtin_mul_overflow(a, b, product);
}

absl::StatusOr<DType> DTypeFromProto(v1::DType dtype, absl::string_view field) {
  switch (dtype) {
    case v1::FLOAT32: return DType::kFloat32;
    case v1::FLOAT16: return DType::kFloat16;
    case v1::BFLOAT16: return DType::kBFloat16;
    case v1::FLOAT64: return DType::kFloat64;
    case v1::INT64: return DType::kInt64;
    case v1::INT32: return DType::kInt32;
    case v1::UINT8: return DType::kUInt8;
    case v1::BOOL: return DType::kBool;
    default: break;
  }
  return InvalidField(field, dtype == v1::DTYPE_UNSPECIFIED
                                 ? std::string("must be set")
                                 : absl::StrCat("unknown dtype ",
                                                static_cast<int>(dtype)));
}

v1::DType DTypeToProto(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return v1::FLOAT32;
    case DType::kFloat16: return v1::FLOAT16;
    case DType::kBFloat16: return v1::BFLOAT16;
    case DType::kFloat64: return v1::FLOAT64;
    case DType::kInt64: return v1::INT64;
    case DType::kInt32: return v1::INT32;
    case DType::kUInt8: return v1::UINT8;
    case DType::kBool: return v1::BOOL;
  }
  return v1::DTYPE_UNSPECIFIED;
}

std::string ShapeString(absl::Span<const int64_t> shape) {
  // Shapes come from clients and may have any number of entries; a message
  // quotes at most kMaxShownDims of them (each at most 20 characters).
  constexpr size_t kMaxShownDims = 8;
  if (shape.size() <= kMaxShownDims) {
    return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
  }
  return absl::StrCat("[", absl::StrJoin(shape.subspan(0, kMaxShownDims), ","),
                      ",...(", shape.size(), " dims)]");
}

namespace {
// The innermost ScopedTensorBytes's list on this thread, or null.
thread_local const TensorBytesList* tensor_bytes_in_scope = nullptr;
}  // namespace

const absl::string_view* TensorBytesList::Find(const v1::Tensor* tensor) const {
  for (const Entry& entry : entries_) {
    if (entry.tensor == tensor) return &entry.bytes;
  }
  return nullptr;
}

ScopedTensorBytes::ScopedTensorBytes(const TensorBytesList* list)
    : outer_(tensor_bytes_in_scope) {
  tensor_bytes_in_scope = list;
}

ScopedTensorBytes::~ScopedTensorBytes() { tensor_bytes_in_scope = outer_; }

absl::string_view TensorBytes(const v1::Tensor& tensor) {
  const absl::string_view* listed =
      tensor_bytes_in_scope != nullptr ? tensor_bytes_in_scope->Find(&tensor) : nullptr;
  return listed != nullptr ? *listed : absl::string_view(tensor.data());
}

absl::StatusOr<TensorView> CheckTensor(const v1::Tensor& tensor,
                                       absl::string_view field,
                                       absl::Span<const DType> allowed,
                                       int rank, const RequestLimits& limits) {
  TensorView view;
  if (tensor.dtype() == v1::DTYPE_UNSPECIFIED) {
    return InvalidField(absl::StrCat(field, ".dtype"),
                        absl::StrCat("must be set (one of ", DTypeList(allowed), ")"));
  }
  absl::StatusOr<DType> dtype =
      DTypeFromProto(tensor.dtype(), absl::StrCat(field, ".dtype"));
  if (!dtype.ok()) return dtype.status();
  bool dtype_allowed = false;
  for (DType candidate : allowed) dtype_allowed |= candidate == *dtype;
  if (!dtype_allowed) {
    return InvalidField(absl::StrCat(field, ".dtype"),
                        absl::StrCat("must be one of ", DTypeList(allowed),
                                     ", got ", v1::DType_Name(tensor.dtype())));
  }
  view.dtype = *dtype;
  if (rank >= 0 && tensor.shape_size() != rank) {
    return InvalidField(absl::StrCat(field, ".shape"),
                        absl::StrCat("must have ", rank, " dimensions, got ",
                                     ShapeString(tensor.shape())));
  }
  int64_t elements = 1;
  for (int i = 0; i < tensor.shape_size(); ++i) {
    const int64_t extent = tensor.shape(i);
    if (extent < 0) {
      return InvalidField(absl::StrCat(field, ".shape"),
                          absl::StrCat("dimension ", i, " is negative in ",
                                       ShapeString(tensor.shape())));
    }
    if (!CheckedMultiply(elements, extent, &elements) ||
        elements > limits.max_elements) {
      return FieldError(
          absl::StatusCode::kResourceExhausted, absl::StrCat(field, ".shape"),
          absl::StrCat(ShapeString(tensor.shape()),
                       " has more elements than the server's limit of ",
                       limits.max_elements, " per request"));
    }
    view.shape.push_back(extent);
  }
  view.num_elements = elements;
  const int64_t expected_bytes =
      elements * static_cast<int64_t>(DTypeSize(view.dtype));
  const absl::string_view data = TensorBytes(tensor);
  if (static_cast<int64_t>(data.size()) != expected_bytes) {
    return InvalidField(
        absl::StrCat(field, ".data"),
        absl::StrCat("expected ", expected_bytes, " bytes for shape ",
                     ShapeString(tensor.shape()), " ", DTypeName(view.dtype),
                     ", got ", data.size()));
  }
  view.bytes = data;
  return view;
}

FloatInput::FloatInput(const TensorView& view) {
  const char* data = view.bytes.data();
  const int64_t n = view.num_elements;
  switch (view.dtype) {
    case DType::kFloat32:
      if (IsAligned<float>(data)) {
        span_ = absl::MakeConstSpan(reinterpret_cast<const float*>(data), n);
        return;
      }
      storage_.resize(n);
      std::memcpy(storage_.data(), data, n * sizeof(float));
      break;
    case DType::kFloat16:
    case DType::kBFloat16: {
      storage_.resize(n);
      const bool half = view.dtype == DType::kFloat16;
      for (int64_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, data + 2 * i, sizeof(bits));
        storage_[i] = half ? HalfToFloat(bits) : BFloat16ToFloat(bits);
      }
      break;
    }
    case DType::kFloat64:
      storage_.resize(n);
      for (int64_t i = 0; i < n; ++i) {
        double value;
        std::memcpy(&value, data + 8 * i, sizeof(value));
        storage_[i] = static_cast<float>(value);
      }
      break;
    default:
      // REQUIRES: a float dtype; CheckTensor's allowed list guarantees it.
      break;
  }
  span_ = storage_;
}

DoubleInput::DoubleInput(const TensorView& view) {
  const char* data = view.bytes.data();
  const int64_t n = view.num_elements;
  if (view.dtype == DType::kFloat64 && IsAligned<double>(data)) {
    span_ = absl::MakeConstSpan(reinterpret_cast<const double*>(data), n);
    return;
  }
  storage_.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (view.dtype) {
      case DType::kFloat64:
        std::memcpy(&storage_[i], data + 8 * i, sizeof(double));
        break;
      case DType::kFloat32: {
        float value;
        std::memcpy(&value, data + 4 * i, sizeof(value));
        storage_[i] = value;
        break;
      }
      case DType::kFloat16:
      case DType::kBFloat16: {
        uint16_t bits;
        std::memcpy(&bits, data + 2 * i, sizeof(bits));
        storage_[i] = view.dtype == DType::kFloat16 ? HalfToFloat(bits)
                                                    : BFloat16ToFloat(bits);
        break;
      }
      default:
        assert(false && "DoubleInput takes float tensors only");
        break;
    }
  }
  span_ = storage_;
}

template <typename T>
TypedInput<T>::TypedInput(const TensorView& view) {
  // REQUIRES: DTypeSize(view.dtype) == sizeof(T).
  const char* data = view.bytes.data();
  if (IsAligned<T>(data)) {
    span_ = absl::MakeConstSpan(reinterpret_cast<const T*>(data),
                                view.num_elements);
    return;
  }
  storage_.resize(view.num_elements);
  std::memcpy(storage_.data(), data, view.num_elements * sizeof(T));
  span_ = storage_;
}

template class TypedInput<int64_t>;
template class TypedInput<int32_t>;
template class TypedInput<double>;
template class TypedInput<float>;

Positions PositionsInput::view() const {
  if (is_real_) return Positions::Reals(reals_.span());
  if (!generated_.empty()) return Positions::Integers(generated_);
  return Positions::Integers(integers_.span());
}

absl::StatusOr<int64_t> CountPositions(const v1::Positions& positions,
                                       absl::string_view field,
                                       const RequestLimits& limits, int max_rank) {
  switch (positions.kind_case()) {
    case v1::Positions::kRange: {
      const v1::Positions::Range& range = positions.range();
      const int64_t step = range.has_step() ? range.step() : 1;
      if (range.count() < 0) {
        return InvalidField(absl::StrCat(field, ".range.count"),
                            absl::StrCat("must be >= 0, got ", range.count()));
      }
      if (step == 0) {
        return InvalidField(absl::StrCat(field, ".range.step"), "must not be 0");
      }
      if (range.count() > limits.max_elements) {
        return FieldError(absl::StatusCode::kResourceExhausted,
                          absl::StrCat(field, ".range.count"),
                          absl::StrCat(range.count(),
                                       " positions is over the server's limit of ",
                                       limits.max_elements, " per request"));
      }
      if (range.count() > 0) {
        // The last position start + (count − 1)·step must fit in int64.
        int64_t span = 0;
        int64_t last = 0;
        if (__builtin_mul_overflow(range.count() - 1, step, &span) ||
            __builtin_add_overflow(range.start(), span, &last)) {
          return InvalidField(absl::StrCat(field, ".range"),
                              "start + (count − 1)·step overflows int64");
        }
      }
      return range.count();
    }
    case v1::Positions::kValues: {
      const DType allowed[] = {DType::kInt64, DType::kFloat64};
      PHASOR_ASSIGN_OR_RETURN(
          const TensorView view,
          CheckTensor(positions.values(), absl::StrCat(field, ".values"), allowed,
                      /*rank=*/max_rank == 1 ? 1 : -1, limits));
      if (view.shape.empty() || static_cast<int>(view.shape.size()) > max_rank) {
        return InvalidField(absl::StrCat(field, ".values.shape"),
                            absl::StrCat("must have 1 to ", max_rank,
                                         " dimensions, got ", ShapeString(view.shape)));
      }
      return view.num_elements;
    }
    case v1::Positions::KIND_NOT_SET:
      break;
  }
  return InvalidField(field, "must set range or values");
}

std::vector<int64_t> PositionsShape(const v1::Positions& positions) {
  if (positions.has_range()) return {positions.range().count()};
  return {positions.values().shape().begin(), positions.values().shape().end()};
}

absl::StatusOr<PositionsInput> DecodePositions(const v1::Positions& positions,
                                               absl::string_view field,
                                               const RequestLimits& limits,
                                               int max_rank) {
  PHASOR_ASSIGN_OR_RETURN(const int64_t count,
                          CountPositions(positions, field, limits, max_rank));
  PositionsInput out;
  out.size_ = count;
  if (positions.has_range()) {
    // 8 bytes per position: at most twice the smallest output a position
    // can have (one fp16 pair), which the caller checked against its limits
    // before decoding.
    const v1::Positions::Range& range = positions.range();
    const int64_t step = range.has_step() ? range.step() : 1;
    out.generated_.resize(count);
    for (int64_t i = 0; i < count; ++i) out.generated_[i] = range.start() + i * step;
    return out;
  }
  // Values: CountPositions checked the tensor; no copy unless unaligned.
  const std::string values_field = absl::StrCat(field, ".values");
  TensorView view;
  view.dtype = positions.values().dtype() == v1::INT64 ? DType::kInt64 : DType::kFloat64;
  view.shape.push_back(count);
  view.num_elements = count;
  view.bytes = TensorBytes(positions.values());
  if (view.dtype == DType::kInt64) {
    out.integers_ = TypedInput<int64_t>(view);
  } else {
    out.is_real_ = true;
    out.reals_ = TypedInput<double>(view);
    const absl::Span<const double> reals = out.reals_.span();
    for (size_t i = 0; i < reals.size(); ++i) {
      if (!std::isfinite(reals[i])) {
        return InvalidField(absl::StrCat(values_field, "[", i, "]"),
                            absl::StrCat("must be finite, got ", reals[i]));
      }
    }
  }
  // Positions::Reals of an empty span reads as integers; both are empty.
  if (out.size_ == 0) out.is_real_ = false;
  return out;
}

absl::Status ReplaceFieldPath(const absl::Status& status, absl::string_view path,
                              absl::string_view note) {
  if (note.empty()) return WithFieldPath(status, ParseFieldPath(path));
  const std::optional<std::string> description = FieldDescriptionOf(status);
  if (!description) return status;
  return WithFieldPath(status, ParseFieldPath(path),
                       absl::StrCat(note, ": ", *description));
}

absl::Status PositionsErrorAtWire(const absl::Status& status,
                                  const v1::Positions& positions,
                                  absl::string_view field) {
  const std::optional<FieldPath> path = FieldPathSegmentsOf(status);
  if (!path || path->empty() || (*path)[0].name != "positions" || !(*path)[0].index) {
    return status;
  }
  if (!positions.has_range()) {
    return RenameFieldPath(status, "positions", absl::StrCat(field, ".values"));
  }
  const std::optional<std::string> description = FieldDescriptionOf(status);
  if (!description || path->size() != 1) return status;
  return WithFieldPath(status, {{std::string(field), std::nullopt}, {"range", std::nullopt}},
                       absl::StrCat("element ", *(*path)[0].index, " of the range: ",
                                    *description));
}

absl::Status CheckOutputSize(absl::Span<const int64_t> shape, DType dtype,
                             absl::string_view field,
                             const RequestLimits& limits, int64_t extra_bytes) {
  int64_t elements = 1;
  bool overflow = false;
  for (int64_t extent : shape) overflow |= !CheckedMultiply(elements, extent, &elements);
  if (overflow || elements > limits.max_elements) {
    return FieldError(
        absl::StatusCode::kResourceExhausted, field,
        absl::StrCat("the output ", ShapeString(shape),
                     " has more elements than the server's limit of ",
                     limits.max_elements, " per request"));
  }
  // elements <= max_elements (< 2^62), so neither product nor sum overflows
  // for any extra_bytes below 2^62.
  const int64_t bytes = elements * static_cast<int64_t>(DTypeSize(dtype)) + extra_bytes;
  if (bytes > limits.max_message_bytes) {
    return FieldError(
        absl::StatusCode::kResourceExhausted, field,
        absl::StrCat("the output ", ShapeString(shape), " ", DTypeName(dtype),
                     extra_bytes > 0 ? " with the rest of the response" : "",
                     " is ", bytes, " bytes, over the server's message limit of ",
                     limits.max_message_bytes,
                     " bytes (phasor-server --max_message_bytes or "
                     "PHASOR_MAX_MESSAGE_BYTES raises it)"));
  }
  return absl::OkStatus();
}

absl::Status CheckWidth(int64_t value, absl::string_view field,
                        const RequestLimits& limits) {
  if (value > limits.max_elements) {
    return FieldError(absl::StatusCode::kResourceExhausted, field,
                      absl::StrCat(value, " is over the server's limit of ",
                                   limits.max_elements, " elements per request"));
  }
  // One row of this width, in the narrowest output dtype (2 bytes), must fit
  // a response: a wider spec could never produce a row, yet its per-request
  // tables (a few doubles per column) would still be built.
  if (value > limits.max_message_bytes / 2) {
    return FieldError(
        absl::StatusCode::kResourceExhausted, field,
        absl::StrCat(value, " columns: one row (2 bytes a column at least) "
                            "would exceed the server's message limit of ",
                     limits.max_message_bytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DType> OutputDType(v1::DType requested, absl::string_view field,
                                  absl::Span<const DType> allowed) {
  if (requested == v1::DTYPE_UNSPECIFIED) return DType::kFloat32;
  absl::StatusOr<DType> dtype = DTypeFromProto(requested, field);
  if (!dtype.ok()) return dtype.status();
  for (DType candidate : allowed) {
    if (candidate == *dtype) return *dtype;
  }
  return InvalidField(field, absl::StrCat("must be one of ", DTypeList(allowed),
                                          ", got ", v1::DType_Name(requested)));
}

absl::Span<char> AllocateTensor(absl::Span<const int64_t> shape, DType dtype,
                                v1::Tensor* out) {
  out->clear_shape();
  int64_t elements = 1;
  for (int64_t extent : shape) {
    out->add_shape(extent);
    elements *= extent;
  }
  out->set_dtype(DTypeToProto(dtype));
  std::string* data = out->mutable_data();
  // The callers' kernels write every byte: no zero-fill first.
  data->clear();
  ResizeUninitialized(data, static_cast<size_t>(elements) * DTypeSize(dtype));
  return absl::MakeSpan(data->data(), data->size());
}

absl::Span<double> DoubleData(v1::Tensor* tensor) {
  std::string* data = tensor->mutable_data();
  // REQUIRES: a FLOAT64 tensor; aligned as in FloatData.
  return absl::MakeSpan(reinterpret_cast<double*>(data->data()),
                        data->size() / sizeof(double));
}

absl::Span<float> FloatData(v1::Tensor* tensor) {
  std::string* data = tensor->mutable_data();
  // REQUIRES: a FLOAT32 tensor. std::string's heap buffer is aligned for any
  // scalar (operator new), and an empty one is never dereferenced.
  return absl::MakeSpan(reinterpret_cast<float*>(data->data()),
                        data->size() / sizeof(float));
}

namespace {

template <typename Source>
void StoreValues(absl::Span<const Source> values,
                 absl::Span<const int64_t> shape, DType dtype,
                 v1::Tensor* out) {
  absl::Span<char> bytes = AllocateTensor(shape, dtype, out);
  char* dst = bytes.data();
  const size_t n = values.size();
  switch (dtype) {
    case DType::kFloat32:
      for (size_t i = 0; i < n; ++i) {
        const float value = static_cast<float>(values[i]);
        std::memcpy(dst + 4 * i, &value, 4);
      }
      break;
    case DType::kFloat64:
      for (size_t i = 0; i < n; ++i) {
        const double value = static_cast<double>(values[i]);
        std::memcpy(dst + 8 * i, &value, 8);
      }
      break;
    case DType::kFloat16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t bits = FloatToHalf(static_cast<float>(values[i]));
        std::memcpy(dst + 2 * i, &bits, 2);
      }
      break;
    case DType::kBFloat16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t bits = FloatToBFloat16(static_cast<float>(values[i]));
        std::memcpy(dst + 2 * i, &bits, 2);
      }
      break;
    default:
      // REQUIRES: a float dtype (OutputDType only admits those).
      break;
  }
}

}  // namespace

void StoreFloats(absl::Span<const float> values,
                 absl::Span<const int64_t> shape, DType dtype, v1::Tensor* out) {
  StoreValues(values, shape, dtype, out);
}

void StoreDoubles(absl::Span<const double> values,
                  absl::Span<const int64_t> shape, DType dtype,
                  v1::Tensor* out) {
  StoreValues(values, shape, dtype, out);
}

}  // namespace phasor::server
