#include "client/inference_wire.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace phasor {

absl::string_view InferenceDatatype(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32: return "FP32";
    case v1::FLOAT16: return "FP16";
    case v1::BFLOAT16: return "BF16";
    case v1::FLOAT64: return "FP64";
    case v1::INT64: return "INT64";
    case v1::INT32: return "INT32";
    case v1::UINT8: return "UINT8";
    case v1::BOOL: return "BOOL";
    default: return "";
  }
}

v1::DType DTypeOfInferenceDatatype(absl::string_view datatype) {
  for (const v1::DType dtype : {v1::FLOAT32, v1::FLOAT16, v1::BFLOAT16, v1::FLOAT64,
                                v1::INT64, v1::INT32, v1::UINT8, v1::BOOL}) {
    if (datatype == InferenceDatatype(dtype)) return dtype;
  }
  return v1::DTYPE_UNSPECIFIED;
}

std::string EncodeBytesElements(absl::Span<const std::string> elements) {
  size_t size = 0;
  for (const std::string& element : elements) size += 4 + element.size();
  std::string out;
  out.reserve(size);
  for (const std::string& element : elements) {
    const uint32_t length = static_cast<uint32_t>(element.size());
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(length >> (8 * i)));
    out += element;
  }
  return out;
}

absl::StatusOr<std::vector<absl::string_view>> DecodeBytesElements(absl::string_view raw,
                                                                   absl::string_view field) {
  std::vector<absl::string_view> elements;
  while (!raw.empty()) {
    if (raw.size() < 4) {
      return absl::DataLossError(
          absl::StrCat(field, ": a BYTES element is cut inside its length"));
    }
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) {
      length |= static_cast<uint32_t>(static_cast<unsigned char>(raw[i])) << (8 * i);
    }
    raw.remove_prefix(4);
    if (length > raw.size()) {
      return absl::DataLossError(absl::StrCat(field, ": a BYTES element of ", length,
                                              " bytes with ", raw.size(), " left"));
    }
    elements.push_back(raw.substr(0, length));
    raw.remove_prefix(length);
  }
  return elements;
}

}  // namespace phasor
