#include "server/inference_convert.h"

#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/uninitialized_string.h"
#include "core/adapters/dtype.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "raw contents are little-endian; a big-endian host would need "
              "byte swapping in server/inference_convert.cc");

namespace phasor::server {
namespace {

// A name short and plain enough to stand in a field path as it is.
bool IsPlainKey(absl::string_view key) {
  if (key.empty() || key.size() > 64) return false;
  for (const char c : key) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!plain) return false;
  }
  return true;
}

std::string DatatypeList(absl::Span<const v1::DType> allowed) {
  return absl::StrJoin(allowed, ", ", [](std::string* out, v1::DType dtype) {
    absl::StrAppend(out, DatatypeName(dtype));
  });
}

// A client's datatype string, quoted and bounded for a message.
std::string QuoteDatatype(absl::string_view datatype) {
  return QuoteForError(datatype, /*max_bytes=*/32);
}

// product(shape), checked: every dimension >= 0, no overflow, within the
// element limit. Errors at `path`.shape.
absl::StatusOr<int64_t> CountElements(const google::protobuf::RepeatedField<int64_t>& shape,
                                      absl::FunctionRef<std::string()> path,
                                      const RequestLimits& limits) {
  int64_t elements = 1;
  for (int i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return InvalidField(absl::StrCat(path(), ".shape"),
                          absl::StrCat("dimension ", i, " is negative in ",
                                       ShapeString(shape)));
    }
    if (!CheckedMultiply(elements, shape[i], &elements) || elements > limits.max_elements) {
      return FieldError(absl::StatusCode::kResourceExhausted, absl::StrCat(path(), ".shape"),
                        absl::StrCat(ShapeString(shape),
                                     " has more elements than the server's limit of ",
                                     limits.max_elements,
                                     " per request (phasor-server "
                                     "--max_elements_per_request raises it)"));
    }
  }
  return elements;
}

// The typed fields of InferTensorContents, by name and element count.
struct TypedField {
  absl::string_view name;
  int size;
};

std::vector<TypedField> TypedFields(const inference::InferTensorContents& contents) {
  return {{"bool_contents", contents.bool_contents_size()},
          {"int_contents", contents.int_contents_size()},
          {"int64_contents", contents.int64_contents_size()},
          {"uint_contents", contents.uint_contents_size()},
          {"uint64_contents", contents.uint64_contents_size()},
          {"fp32_contents", contents.fp32_contents_size()},
          {"fp64_contents", contents.fp64_contents_size()},
          {"bytes_contents", contents.bytes_contents_size()}};
}

// The typed field a datatype's elements travel in ("" for FP16 and BF16,
// which the protocol sends raw only). The protocol puts every signed type
// up to 32 bits in int_contents and every unsigned one in uint_contents.
absl::string_view TypedFieldOf(v1::DType dtype) {
  switch (dtype) {
    case v1::BOOL: return "bool_contents";
    case v1::UINT8: return "uint_contents";
    case v1::INT32: return "int_contents";
    case v1::INT64: return "int64_contents";
    case v1::FLOAT32: return "fp32_contents";
    case v1::FLOAT64: return "fp64_contents";
    default: break;
  }
  return "";
}

// Checks that `contents` holds its elements in `expected` (a field name)
// and nowhere else, exactly `elements` of them. `datatype` names the type
// in messages.
absl::Status CheckTypedContents(const inference::InferTensorContents& contents,
                                absl::string_view expected, absl::string_view datatype,
                                int64_t elements, absl::FunctionRef<std::string()> path,
                                const google::protobuf::RepeatedField<int64_t>& shape) {
  const auto contents_path = [&] { return absl::StrCat(path(), ".contents"); };
  int expected_size = 0;
  for (const TypedField& field : TypedFields(contents)) {
    if (field.name == expected) {
      expected_size = field.size;
    } else if (field.size > 0) {
      return InvalidField(
          contents_path(),
          expected.empty()
              ? absl::StrCat("holds ", field.name, ", but ", datatype,
                             " has no typed contents: send its bytes in "
                             "raw_input_contents")
              : absl::StrCat("holds ", field.name, ", but datatype ", datatype,
                             " takes ", expected));
    }
  }
  if (expected_size == elements) return absl::OkStatus();
  if (expected_size == 0) {
    return InvalidField(
        path(), expected.empty()
                  ? absl::StrCat("has no data: send its ", datatype,
                                 " bytes in raw_input_contents (", datatype,
                                 " has no typed contents)")
                  : absl::StrCat("has no data: send contents.", expected,
                                 " or raw_input_contents"));
  }
  return InvalidField(contents_path(),
                      absl::StrCat(expected, " has ", expected_size, " elements; shape ",
                                   ShapeString(shape), " needs ", elements));
}

template <typename T, typename Source>
void CopyElements(const Source& source, std::string* raw) {
  static_assert(sizeof(T) == sizeof(typename Source::value_type));
  ResizeUninitialized(raw, static_cast<size_t>(source.size()) * sizeof(T));
  if (source.size() > 0) {
    std::memcpy(raw->data(), source.data(), raw->size());
  }
}

// Typed contents of `dtype` as raw little-endian bytes.
absl::Status TypedToRaw(const inference::InferTensorContents& contents, v1::DType dtype,
                        absl::FunctionRef<std::string()> path, std::string* raw) {
  switch (dtype) {
    case v1::INT64:
      CopyElements<int64_t>(contents.int64_contents(), raw);
      return absl::OkStatus();
    case v1::INT32:
      CopyElements<int32_t>(contents.int_contents(), raw);
      return absl::OkStatus();
    case v1::FLOAT32:
      CopyElements<float>(contents.fp32_contents(), raw);
      return absl::OkStatus();
    case v1::FLOAT64:
      CopyElements<double>(contents.fp64_contents(), raw);
      return absl::OkStatus();
    case v1::BOOL: {
      ResizeUninitialized(raw, static_cast<size_t>(contents.bool_contents_size()));
      for (int i = 0; i < contents.bool_contents_size(); ++i) {
        (*raw)[static_cast<size_t>(i)] = contents.bool_contents(i) ? 1 : 0;
      }
      return absl::OkStatus();
    }
    case v1::UINT8: {
      ResizeUninitialized(raw, static_cast<size_t>(contents.uint_contents_size()));
      for (int i = 0; i < contents.uint_contents_size(); ++i) {
        const uint32_t value = contents.uint_contents(i);
        if (value > 255) {
          return InvalidField(absl::StrCat(path(), ".contents.uint_contents[", i, "]"),
                              absl::StrCat(value, " does not fit UINT8 (0 to 255)"));
        }
        (*raw)[static_cast<size_t>(i)] = static_cast<char>(value);
      }
      return absl::OkStatus();
    }
    default:
      break;
  }
  // CheckTypedContents let no other dtype through with elements.
  raw->clear();
  return absl::OkStatus();
}

// The first pair (i < j) of equal names, by j. A request names a handful of
// tensors, compared pairwise without allocating; a hash set takes over for
// a hostile request with thousands.
std::optional<std::pair<int, int>> FindDuplicate(absl::Span<const absl::string_view> names) {
  constexpr size_t kPairwise = 32;
  if (names.size() <= kPairwise) {
    for (size_t j = 1; j < names.size(); ++j) {
      for (size_t i = 0; i < j; ++i) {
        if (names[i] == names[j]) {
          return std::make_pair(static_cast<int>(i), static_cast<int>(j));
        }
      }
    }
    return std::nullopt;
  }
  absl::flat_hash_map<absl::string_view, int> seen;
  for (size_t j = 0; j < names.size(); ++j) {
    const auto [it, added] = seen.emplace(names[j], static_cast<int>(j));
    if (!added) return std::make_pair(it->second, static_cast<int>(j));
  }
  return std::nullopt;
}

const inference::InferParameter* FindParameter(const InferParameterMap& parameters,
                                               absl::string_view key) {
  const auto it = parameters.find(std::string(key));
  return it == parameters.end() ? nullptr : &it->second;
}

absl::Status WrongKind(absl::string_view key, absl::string_view wanted) {
  return InvalidField(ParameterPath("", key), absl::StrCat("must be ", wanted));
}

}  // namespace

absl::string_view DatatypeName(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32: return "FP32";
    case v1::FLOAT16: return "FP16";
    case v1::BFLOAT16: return "BF16";
    case v1::FLOAT64: return "FP64";
    case v1::INT64: return "INT64";
    case v1::INT32: return "INT32";
    case v1::UINT8: return "UINT8";
    case v1::BOOL: return "BOOL";
    default: break;
  }
  return "";
}

v1::DType DTypeFromDatatype(absl::string_view datatype) {
  // The protocol's names are case-sensitive ("All strings in all contexts
  // are case-sensitive"). Compared in a chain: every ModelInfer input comes
  // through here, and this is cheaper than hashing the name.
  if (datatype == "FP32") return v1::FLOAT32;
  if (datatype == "INT64") return v1::INT64;
  if (datatype == "FP16") return v1::FLOAT16;
  if (datatype == "BF16") return v1::BFLOAT16;
  if (datatype == "FP64") return v1::FLOAT64;
  if (datatype == "INT32") return v1::INT32;
  if (datatype == "UINT8") return v1::UINT8;
  if (datatype == "BOOL") return v1::BOOL;
  return v1::DTYPE_UNSPECIFIED;
}

std::string IndexedPath(absl::string_view field, absl::string_view key, int index) {
  return IsPlainKey(key) ? absl::StrCat(field, "[", key, "]")
                         : absl::StrCat(field, "[", index, "]");
}

std::string InputPath(const inference::ModelInferRequest& request, int index) {
  return IndexedPath("inputs", request.inputs(index).name(), index);
}

std::string ParameterPath(absl::string_view prefix, absl::string_view key) {
  if (IsPlainKey(key)) return absl::StrCat(prefix, "parameters[", key, "]");
  const absl::string_view kept = Utf8Prefix(key, 32);
  return absl::StrCat(prefix, "parameters[", absl::CHexEscape(kept),
                      kept.size() < key.size() ? "..." : "", "]");
}

absl::Status CheckInferRequestForm(const inference::ModelInferRequest& request) {
  const int raw_count = request.raw_input_contents_size();
  if (raw_count != 0 && raw_count != request.inputs_size()) {
    return InvalidField("raw_input_contents",
                        absl::StrCat("has ", raw_count, " entries; the request has ",
                                     request.inputs_size(),
                                     " inputs (one entry per input, in their order)"));
  }
  for (int i = 0; i < request.inputs_size(); ++i) {
    if (raw_count != 0 && request.inputs(i).has_contents()) {
      return InvalidField(absl::StrCat(InputPath(request, i), ".contents"),
                          "set together with raw_input_contents: send each input's "
                          "elements one way, raw for all inputs or typed for all");
    }
  }
  const auto names = [](const auto& tensors) {
    absl::InlinedVector<absl::string_view, 16> out;
    for (const auto& tensor : tensors) out.push_back(tensor.name());
    return out;
  };
  if (const std::optional<std::pair<int, int>> twice = FindDuplicate(names(request.inputs()))) {
    return InvalidField(InputPath(request, twice->second),
                        absl::StrCat("appears twice (inputs ", twice->first, " and ",
                                     twice->second, " have the same name)"));
  }
  if (const std::optional<std::pair<int, int>> twice = FindDuplicate(names(request.outputs()))) {
    return InvalidField(
        IndexedPath("outputs", request.outputs(twice->second).name(), twice->second),
        absl::StrCat("requested twice (outputs ", twice->first, " and ", twice->second, ")"));
  }
  return absl::OkStatus();
}

absl::Status TakeInputTensor(inference::ModelInferRequest* request, int index,
                             absl::Span<const v1::DType> allowed,
                             const RequestLimits& limits, v1::Tensor* out,
                             const absl::string_view* in_place) {
  const inference::ModelInferRequest::InferInputTensor& input = request->inputs(index);
  // Built for errors only: the success path allocates no strings.
  const auto path = [&] { return InputPath(*request, index); };
  const v1::DType dtype = DTypeFromDatatype(input.datatype());
  bool allowed_dtype = false;
  for (const v1::DType candidate : allowed) allowed_dtype |= candidate == dtype;
  if (!allowed_dtype) {
    return InvalidField(absl::StrCat(path(), ".datatype"),
                        absl::StrCat("must be ",
                                     allowed.size() == 1 ? "" : "one of ",
                                     DatatypeList(allowed), ", got ",
                                     QuoteDatatype(input.datatype())));
  }
  PHASOR_ASSIGN_OR_RETURN(const int64_t elements, CountElements(input.shape(), path, limits));
  const absl::StatusOr<DType> core_dtype = DTypeFromProto(dtype, "datatype");
  const int64_t element_bytes = static_cast<int64_t>(DTypeSize(*core_dtype));
  out->Clear();
  out->mutable_shape()->CopyFrom(input.shape());
  out->set_dtype(dtype);
  if (in_place != nullptr) {
    // elements <= max_elements (far below 2^60), so this cannot overflow.
    const int64_t expected = elements * element_bytes;
    if (static_cast<int64_t>(in_place->size()) != expected) {
      return InvalidField(path(), absl::StrCat("holds ", in_place->size(), " bytes; shape ",
                                             ShapeString(input.shape()), " ",
                                             input.datatype(), " needs ", expected));
    }
    return absl::OkStatus();
  }
  if (request->raw_input_contents_size() > 0) {
    std::string* raw = request->mutable_raw_input_contents(index);
    // elements <= max_elements (far below 2^60), so this cannot overflow.
    const int64_t expected = elements * element_bytes;
    if (static_cast<int64_t>(raw->size()) != expected) {
      return InvalidField(path(), absl::StrCat("raw_input_contents[", index, "] holds ",
                                             raw->size(), " bytes; shape ",
                                             ShapeString(input.shape()), " ",
                                             input.datatype(), " needs ", expected));
    }
    out->mutable_data()->swap(*raw);
    return absl::OkStatus();
  }
  const absl::string_view field = TypedFieldOf(dtype);
  PHASOR_RETURN_IF_ERROR(CheckTypedContents(input.contents(), field, input.datatype(),
                                            elements, path, input.shape()));
  return TypedToRaw(input.contents(), dtype, path, out->mutable_data());
}

absl::Status TakeInputStrings(inference::ModelInferRequest* request, int index,
                              const RequestLimits& limits, std::vector<std::string>* out,
                              std::vector<int64_t>* shape) {
  const inference::ModelInferRequest::InferInputTensor& input = request->inputs(index);
  const auto path = [&] { return InputPath(*request, index); };
  if (input.datatype() != kBytesDatatype) {
    return InvalidField(absl::StrCat(path(), ".datatype"),
                        absl::StrCat("must be BYTES, got ", QuoteDatatype(input.datatype())));
  }
  PHASOR_ASSIGN_OR_RETURN(const int64_t elements, CountElements(input.shape(), path, limits));
  shape->assign(input.shape().begin(), input.shape().end());
  out->clear();
  if (request->raw_input_contents_size() > 0) {
    const std::string raw = std::move(*request->mutable_raw_input_contents(index));
    return DecodeBytesElements(raw, elements, path(), out);
  }
  PHASOR_RETURN_IF_ERROR(CheckTypedContents(input.contents(), "bytes_contents", "BYTES",
                                            elements, path, input.shape()));
  out->assign(input.contents().bytes_contents().begin(),
              input.contents().bytes_contents().end());
  return absl::OkStatus();
}

std::string EncodeBytesElements(absl::Span<const std::string> elements) {
  size_t size = 0;
  for (const std::string& element : elements) size += 4 + element.size();
  std::string raw;
  raw.reserve(size);
  for (const std::string& element : elements) {
    const uint32_t length = static_cast<uint32_t>(element.size());
    char prefix[4];
    std::memcpy(prefix, &length, sizeof(prefix));
    raw.append(prefix, sizeof(prefix));
    raw.append(element);
  }
  return raw;
}

absl::Status DecodeBytesElements(absl::string_view raw, int64_t count,
                                 absl::string_view path, std::vector<std::string>* out) {
  out->clear();
  // Each element takes at least its 4-byte length, so a count beyond that
  // cannot be met; checking first keeps `reserve` bounded by the bytes sent.
  if (count > static_cast<int64_t>(raw.size() / 4)) {
    return InvalidField(path, absl::StrCat("raw BYTES contents of ", raw.size(),
                                           " bytes cannot hold ", count,
                                           " elements (each starts with a 4-byte length)"));
  }
  out->reserve(static_cast<size_t>(count));
  size_t at = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (raw.size() - at < 4) {
      return InvalidField(path, absl::StrCat("raw BYTES contents end inside the length "
                                             "of element ", i));
    }
    uint32_t length = 0;
    std::memcpy(&length, raw.data() + at, sizeof(length));
    at += 4;
    if (raw.size() - at < length) {
      return InvalidField(path, absl::StrCat("raw BYTES element ", i, " claims ", length,
                                             " bytes; ", raw.size() - at, " remain"));
    }
    out->emplace_back(raw.substr(at, length));
    at += length;
  }
  if (at != raw.size()) {
    return InvalidField(path, absl::StrCat(raw.size() - at,
                                           " bytes follow the last of the ", count,
                                           " BYTES elements its shape holds"));
  }
  return absl::OkStatus();
}

inference::ModelInferResponse::InferOutputTensor* AddTensorOutput(
    absl::string_view name, v1::Tensor* tensor, inference::ModelInferResponse* response) {
  inference::ModelInferResponse::InferOutputTensor* output = response->add_outputs();
  output->set_name(std::string(name));
  output->set_datatype(std::string(DatatypeName(tensor->dtype())));
  output->mutable_shape()->CopyFrom(tensor->shape());
  response->add_raw_output_contents()->swap(*tensor->mutable_data());
  return output;
}

inference::ModelInferResponse::InferOutputTensor* AddBytesOutput(
    absl::string_view name, absl::Span<const std::string> elements,
    absl::Span<const int64_t> shape, inference::ModelInferResponse* response) {
  inference::ModelInferResponse::InferOutputTensor* output = response->add_outputs();
  output->set_name(std::string(name));
  output->set_datatype(std::string(kBytesDatatype));
  for (const int64_t extent : shape) output->add_shape(extent);
  *response->add_raw_output_contents() = EncodeBytesElements(elements);
  return output;
}

absl::Status CheckParameterKeys(const InferParameterMap& parameters,
                                absl::string_view prefix,
                                absl::Span<const absl::string_view> known,
                                absl::string_view what) {
  for (const auto& [key, value] : parameters) {
    bool is_known = false;
    for (const absl::string_view name : known) is_known |= key == name;
    if (is_known) continue;
    return InvalidField(
        ParameterPath(prefix, key),
        known.empty()
            ? absl::StrCat("unknown parameter; ", what, " take no parameters")
            : absl::StrCat("unknown parameter; ", what, " take ",
                           absl::StrJoin(known, ", ")));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> StringParameter(
    const InferParameterMap& parameters, absl::string_view key) {
  const inference::InferParameter* parameter = FindParameter(parameters, key);
  if (parameter == nullptr) return std::nullopt;
  if (parameter->parameter_choice_case() != inference::InferParameter::kStringParam) {
    return WrongKind(key, "a string_param");
  }
  return parameter->string_param();
}

absl::StatusOr<std::optional<int64_t>> IntParameter(const InferParameterMap& parameters,
                                                    absl::string_view key) {
  const inference::InferParameter* parameter = FindParameter(parameters, key);
  if (parameter == nullptr) return std::nullopt;
  switch (parameter->parameter_choice_case()) {
    case inference::InferParameter::kInt64Param:
      return parameter->int64_param();
    case inference::InferParameter::kUint64Param:
      if (parameter->uint64_param() <=
          static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return static_cast<int64_t>(parameter->uint64_param());
      }
      return InvalidField(ParameterPath("", key),
                          absl::StrCat(parameter->uint64_param(), " is beyond int64"));
    default:
      break;
  }
  return WrongKind(key, "an int64_param or uint64_param");
}

absl::StatusOr<std::optional<double>> DoubleParameter(const InferParameterMap& parameters,
                                                      absl::string_view key) {
  const inference::InferParameter* parameter = FindParameter(parameters, key);
  if (parameter == nullptr) return std::nullopt;
  // Integers up to 2^53 in magnitude convert to double exactly.
  constexpr uint64_t kExact = uint64_t{1} << 53;
  switch (parameter->parameter_choice_case()) {
    case inference::InferParameter::kDoubleParam:
      return parameter->double_param();
    case inference::InferParameter::kInt64Param: {
      const int64_t value = parameter->int64_param();
      const uint64_t magnitude = value < 0 ? 0 - static_cast<uint64_t>(value)
                                           : static_cast<uint64_t>(value);
      if (magnitude <= kExact) return static_cast<double>(value);
      break;
    }
    case inference::InferParameter::kUint64Param:
      if (parameter->uint64_param() <= kExact) {
        return static_cast<double>(parameter->uint64_param());
      }
      break;
    default:
      return WrongKind(key, "a double_param (or an integer)");
  }
  return InvalidField(ParameterPath("", key),
                      "is an integer beyond 2^53, which a double cannot hold "
                      "exactly; send a double_param");
}

absl::StatusOr<std::optional<bool>> BoolParameter(const InferParameterMap& parameters,
                                                  absl::string_view key) {
  const inference::InferParameter* parameter = FindParameter(parameters, key);
  if (parameter == nullptr) return std::nullopt;
  if (parameter->parameter_choice_case() != inference::InferParameter::kBoolParam) {
    return WrongKind(key, "a bool_param");
  }
  return parameter->bool_param();
}

absl::StatusOr<v1::DType> OutputDTypeParameter(const InferParameterMap& parameters) {
  PHASOR_ASSIGN_OR_RETURN(const std::optional<std::string> name,
                          StringParameter(parameters, "output_dtype"));
  if (!name) return v1::DTYPE_UNSPECIFIED;
  const v1::DType dtype = DTypeFromDatatype(*name);
  if (dtype == v1::FLOAT32 || dtype == v1::FLOAT16 || dtype == v1::BFLOAT16 ||
      dtype == v1::FLOAT64) {
    return dtype;
  }
  return InvalidField(ParameterPath("", "output_dtype"),
                      absl::StrCat("must be FP32, FP16, BF16 or FP64, got ",
                                   QuoteDatatype(*name)));
}

absl::Status ToInferPaths(const absl::Status& status,
                          absl::Span<const PathRename> renames) {
  const std::optional<std::string> path = FieldPathOf(status);
  if (!path) return status;
  for (const PathRename& rename : renames) {
    if (!absl::StartsWith(*path, rename.native)) continue;
    absl::string_view rest = absl::string_view(*path).substr(rename.native.size());
    if (!rest.empty() && rest[0] != '.' && rest[0] != '[') continue;
    std::string wire(rename.wire);
    // A tensor's parts as the protocol names them.
    const auto part_is = [&rest](absl::string_view part) {
      return absl::StartsWith(rest, part) &&
             (rest.size() == part.size() || rest[part.size()] == '.' ||
              rest[part.size()] == '[');
    };
    if (part_is(".dtype")) {
      absl::StrAppend(&wire, ".datatype", rest.substr(6));
    } else if (part_is(".data")) {
      absl::StrAppend(&wire, rest.substr(5));
    } else {
      absl::StrAppend(&wire, rest);
    }
    return ReplaceFieldPath(status, wire);
  }
  return status;
}

}  // namespace phasor::server
