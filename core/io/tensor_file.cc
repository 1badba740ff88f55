#include "core/io/tensor_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/adapters/dtype.h"
#include "core/base/errors.h"
#include "core/base/file.h"
#include "core/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace phasor {
namespace {

absl::Status Malformed(absl::string_view name, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(name, ": ", what));
}

// Text from the file quoted for an error: at most 40 bytes of it
// (core/base/errors.h), so that an error never carries a megabyte of it.
std::string Quote(absl::string_view text, absl::string_view quote = "\"") {
  return QuoteForError(text, /*max_bytes=*/40, quote);
}

// count * element_bytes for an error message, or "more than <available>"
// where the product would not fit in 64 bits.
std::string NeededBytes(uint64_t count, uint64_t element_bytes,
                        uint64_t available) {
  if (count > std::numeric_limits<uint64_t>::max() / element_bytes) {
    return absl::StrCat("more than ", available);
  }
  return absl::StrCat(count * element_bytes);
}

// "(5, 4)", as NumPy prints a shape.
std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", shape[i]);
  }
  return absl::StrCat(out, shape.size() == 1 ? ",)" : ")");
}

// Product of dims with overflow and sign checks.
absl::StatusOr<int64_t> ElementCount(const std::vector<int64_t>& shape,
                                     absl::string_view name) {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) return Malformed(name, "negative dimension in shape");
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / d) {
      return Malformed(name, "shape overflows int64");
    }
    count *= d;
  }
  return count;
}

// Widens little-endian elements to double. REQUIRES: t is kFloat16,
// kBFloat16, kFloat32 or kFloat64, and data holds n elements.
std::vector<double> Widen(const char* data, int64_t n, DType t) {
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) {
    const unsigned char* p =
        reinterpret_cast<const unsigned char*>(data) + i * DTypeSize(t);
    switch (t) {
      case DType::kFloat16:
        out[i] = HalfToFloat(static_cast<uint16_t>(p[0] | (p[1] << 8)));
        break;
      case DType::kBFloat16:
        out[i] = BFloat16ToFloat(static_cast<uint16_t>(p[0] | (p[1] << 8)));
        break;
      case DType::kFloat32: {
        uint32_t bits = 0;
        for (int b = 3; b >= 0; --b) bits = (bits << 8) | p[b];
        float f;
        std::memcpy(&f, &bits, sizeof(f));
        out[i] = f;
        break;
      }
      case DType::kFloat64: {
        uint64_t bits = 0;
        for (int b = 7; b >= 0; --b) bits = (bits << 8) | p[b];
        double d;
        std::memcpy(&d, &bits, sizeof(d));
        out[i] = d;
        break;
      }
      default:  // Excluded by the REQUIRES.
        break;
    }
  }
  return out;
}

// ---- .npy ------------------------------------------------------------------

// The header dict literal, e.g. {'descr': '<f4', 'fortran_order': False,
// 'shape': (5, 4), }: the subset of Python literal syntax numpy.lib.format
// writes (and ast.literal_eval reads): single- or double-quoted strings
// without escapes, True/False, tuples of non-negative integers (a Python 2
// "4L" suffix allowed), trailing commas, whitespace.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  // Which keys were present.
  bool has_descr = false;
  bool has_fortran_order = false;
  bool has_shape = false;
};

class NpyHeaderParser final {
 public:
  NpyHeaderParser(absl::string_view text, absl::string_view name)
      : text_(text), name_(name) {}

  absl::StatusOr<NpyHeader> Parse() {
    NpyHeader header;
    if (!Consume('{')) return Error("npy header is not a dict literal");
    while (!Consume('}')) {
      std::string key;
      if (!String(&key)) return Error("npy header: expected a quoted key");
      if (!Consume(':')) {
        return Error(absl::StrCat("npy header: no value for ", Quote(key, "'")));
      }
      bool repeated = false;
      if (key == "descr") {
        repeated = header.has_descr;
        header.has_descr = true;
        if (!String(&header.descr)) {
          return Error("npy header: 'descr' is not a string (structured "
                       "arrays are not supported)");
        }
      } else if (key == "fortran_order") {
        repeated = header.has_fortran_order;
        header.has_fortran_order = true;
        if (ConsumeWord("True")) {
          header.fortran_order = true;
        } else if (ConsumeWord("False")) {
          header.fortran_order = false;
        } else {
          return Error("npy header: 'fortran_order' is not True or False");
        }
      } else if (key == "shape") {
        repeated = header.has_shape;
        header.has_shape = true;
        header.shape.clear();
        PHASOR_RETURN_IF_ERROR(Tuple(&header.shape));
      } else {
        return Error(absl::StrCat("npy header has an unknown key ",
                                  Quote(key, "'")));
      }
      if (repeated) {
        return Error(absl::StrCat("npy header repeats '", key, "'"));
      }
      if (!Consume(',')) {
        if (!Consume('}')) return Error("npy header: expected ',' or '}'");
        break;
      }
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("npy header: text after the dict");
    if (!header.has_descr) return Error("npy header has no 'descr'");
    if (!header.has_fortran_order) return Error("npy header has no 'fortran_order'");
    if (!header.has_shape) return Error("npy header has no 'shape'");
    return header;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return Malformed(name_, what);
  }
  void SkipSpace() {
    while (pos_ < text_.size() &&
           absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool ConsumeWord(absl::string_view word) {
    SkipSpace();
    if (!absl::StartsWith(text_.substr(pos_), word)) return false;
    pos_ += word.size();
    return true;
  }
  bool String(std::string* out) {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      return false;
    }
    const char quote = text_[pos_];
    const size_t close = text_.find(quote, pos_ + 1);
    if (close == absl::string_view::npos) return false;
    const absl::string_view body = text_.substr(pos_ + 1, close - pos_ - 1);
    // NumPy never writes escapes or line breaks inside these strings.
    if (body.find_first_of("\\\n") != absl::string_view::npos) return false;
    out->assign(body.data(), body.size());
    pos_ = close + 1;
    return true;
  }
  absl::Status Tuple(std::vector<int64_t>* out) {
    if (!Consume('(')) return Error("npy header: 'shape' is not a tuple");
    if (Consume(')')) return absl::OkStatus();  // () is a scalar.
    while (true) {
      SkipSpace();
      const size_t start = pos_;
      while (pos_ < text_.size() && absl::ascii_isdigit(
                                        static_cast<unsigned char>(text_[pos_]))) {
        ++pos_;
      }
      int64_t dim;
      if (pos_ == start ||
          !absl::SimpleAtoi(text_.substr(start, pos_ - start), &dim)) {
        return Error("npy header: bad 'shape' entry (need non-negative integers)");
      }
      if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2 long.
      out->push_back(dim);
      const bool comma = Consume(',');
      if (Consume(')')) break;
      if (!comma) return Error("npy header: 'shape' is not a tuple of integers");
    }
    // "(5)" is accepted as (5,): numpy always writes the comma, and reading
    // it either way cannot misplace data (the byte count is checked).
    return absl::OkStatus();
  }

  absl::string_view text_;
  absl::string_view name_;
  size_t pos_ = 0;
};

struct NpyDescr {
  absl::string_view text;
  DType dtype;
};
// Little-endian ('<') or byte-order-free ('|') descrs NumPy writes for the
// dtypes Phasor tensors have; bfloat16 has no NumPy descr.
constexpr NpyDescr kNpyDescrs[] = {
    {"<f4", DType::kFloat32}, {"<f8", DType::kFloat64},
    {"<f2", DType::kFloat16}, {"<i8", DType::kInt64},
    {"<i4", DType::kInt32},   {"|u1", DType::kUInt8},
    {"<u1", DType::kUInt8},   {"|b1", DType::kBool},
};

}  // namespace

absl::StatusOr<NpyArray> ParseNpyArray(absl::string_view bytes,
                                       absl::string_view name) {
  static constexpr char kMagic[] = "\x93NUMPY";
  if (bytes.size() < 10 || bytes.substr(0, 6) != absl::string_view(kMagic, 6)) {
    return Malformed(name, "not a .npy file (bad magic)");
  }
  const unsigned char major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, header_start = 0;
  const auto byte_at = [&](size_t i) {
    return static_cast<size_t>(static_cast<unsigned char>(bytes[i]));
  };
  if (major == 1) {
    header_len = byte_at(8) | (byte_at(9) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return Malformed(name, "truncated .npy preamble");
    header_len = byte_at(8) | (byte_at(9) << 8) | (byte_at(10) << 16) |
                 (byte_at(11) << 24);
    header_start = 12;
  } else {
    return Malformed(name, absl::StrCat("unsupported .npy version ", major));
  }
  if (header_len > bytes.size() - header_start) {
    return Malformed(name, "truncated .npy header");
  }
  PHASOR_ASSIGN_OR_RETURN(
      NpyHeader header,
      NpyHeaderParser(bytes.substr(header_start, header_len), name).Parse());
  NpyArray array;
  const NpyDescr* descr = nullptr;
  for (const NpyDescr& known : kNpyDescrs) {
    if (header.descr == known.text) descr = &known;
  }
  if (descr == nullptr) {
    return Malformed(name, absl::StrCat("unsupported .npy dtype ",
                                        Quote(header.descr, "'"),
                                        " (little-endian f2/f4/f8/i4/i8/u1/b1 "
                                        "are supported)"));
  }
  array.dtype = descr->dtype;
  if (header.fortran_order) {
    return Malformed(name, "Fortran-order .npy arrays are not supported; save "
                           "in C order (np.ascontiguousarray)");
  }
  array.shape = std::move(header.shape);
  PHASOR_ASSIGN_OR_RETURN(array.num_elements, ElementCount(array.shape, name));
  const size_t data_start = header_start + header_len;
  const size_t available = bytes.size() - data_start;
  const size_t elem = DTypeSize(array.dtype);
  const uint64_t count = static_cast<uint64_t>(array.num_elements);
  if (count > available / elem || count * elem != available) {
    return Malformed(name, absl::StrCat("shape ", ShapeText(array.shape), " ",
                                        DTypeName(array.dtype), " needs ",
                                        NeededBytes(count, elem, available),
                                        " data bytes, file has ", available));
  }
  array.data = bytes.substr(data_start);
  return array;
}

absl::StatusOr<HostArray> ParseNpy(absl::string_view bytes,
                                   absl::string_view name) {
  PHASOR_ASSIGN_OR_RETURN(NpyArray npy, ParseNpyArray(bytes, name));
  if (npy.dtype != DType::kFloat16 && npy.dtype != DType::kFloat32 &&
      npy.dtype != DType::kFloat64) {
    return Malformed(name, absl::StrCat("unsupported .npy dtype ", DTypeName(npy.dtype),
                                        " for a table (need <f2, <f4 or <f8)"));
  }
  HostArray array;
  array.shape = std::move(npy.shape);
  array.values = Widen(npy.data.data(), npy.num_elements, npy.dtype);
  return array;
}

// ---- .safetensors ------------------------------------------------------------

namespace {

using Json = nlohmann::json;

// The reference implementation (safetensors/src/tensor.rs) refuses larger
// headers; a profile's tables need a few hundred bytes each.
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
// Tensor entries nest two deep and __metadata__ is a flat string map; deeper
// JSON only costs memory.
constexpr int kMaxJsonDepth = 16;

// Non-negative integral JSON number, up to 2^53 when written as a float.
bool AsNonNegativeInt(const Json& j, int64_t* out) {
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(v);
    return true;
  }
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    *out = v;
    return true;
  }
  if (j.is_number_float()) {
    const double v = j.get<double>();
    if (!(v >= 0 && v <= 9.0e15) || v != std::floor(v)) return false;
    *out = static_cast<int64_t>(v);
    return true;
  }
  return false;
}

// The parsed header, or why it is not a JSON object with unique keys.
absl::StatusOr<Json> ParseSafetensorsHeader(absl::string_view text,
                                            absl::string_view name) {
  // The callback sees every key before it is stored: nlohmann::json keeps
  // the last of repeated keys silently, and a header that names one tensor
  // twice is ambiguous, so keys are tracked per open object.
  std::vector<std::set<std::string, std::less<>>> open_objects;
  bool repeated_key = false;
  bool too_deep = false;
  const Json::parser_callback_t watch =
      [&](int depth, Json::parse_event_t event, Json& parsed) {
        switch (event) {
          case Json::parse_event_t::object_start:
            if (depth >= kMaxJsonDepth) too_deep = true;
            open_objects.emplace_back();
            break;
          case Json::parse_event_t::array_start:
            if (depth >= kMaxJsonDepth) too_deep = true;
            break;
          case Json::parse_event_t::object_end:
            if (!open_objects.empty()) open_objects.pop_back();
            break;
          case Json::parse_event_t::key:
            if (!open_objects.empty() && parsed.is_string() &&
                !open_objects.back().insert(parsed.get<std::string>()).second) {
              repeated_key = true;
            }
            break;
          default:
            break;
        }
        // Keep parsing (and building) only while nothing is wrong: a bad
        // header stops costing memory at the first problem.
        return !repeated_key && !too_deep;
      };
  Json header = Json::parse(text.begin(), text.end(), watch,
                            /*allow_exceptions=*/false);
  if (repeated_key) return Malformed(name, "header repeats a JSON key");
  if (too_deep) {
    return Malformed(name, absl::StrCat("header nests deeper than ",
                                        kMaxJsonDepth, " levels"));
  }
  if (header.is_discarded() || !header.is_object()) {
    return Malformed(name, "header is not a valid JSON object");
  }
  return header;
}

}  // namespace

absl::StatusOr<HostArray> ParseSafetensors(absl::string_view bytes,
                                           absl::string_view tensor_name,
                                           absl::string_view name) {
  if (bytes.size() < 8) return Malformed(name, "truncated .safetensors header size");
  uint64_t header_size = 0;
  for (int b = 7; b >= 0; --b) {
    header_size = (header_size << 8) | static_cast<unsigned char>(bytes[b]);
  }
  if (header_size > kMaxSafetensorsHeaderBytes) {
    return Malformed(name, absl::StrCat("header size ", header_size,
                                        " exceeds the format's limit of ",
                                        kMaxSafetensorsHeaderBytes, " bytes"));
  }
  if (header_size > bytes.size() - 8) {
    return Malformed(name, absl::StrCat("header size ", header_size,
                                        " exceeds the file (", bytes.size(), " bytes)"));
  }
  PHASOR_ASSIGN_OR_RETURN(const Json header,
                          ParseSafetensorsHeader(bytes.substr(8, header_size), name));
  const absl::string_view buffer = bytes.substr(8 + header_size);

  // The spec requires the tensors to tile the buffer exactly: sorted by
  // offset, each begins where the previous one ended, and the last ends at
  // the buffer's end (safetensors' own validate() checks the same).
  std::vector<std::pair<int64_t, int64_t>> extents;  // [begin, end)
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") continue;
    int64_t begin = 0, end = 0;
    const Json* offsets = nullptr;
    if (value.is_object()) {
      auto it = value.find("data_offsets");
      if (it != value.end()) offsets = &*it;
    }
    if (offsets == nullptr || !offsets->is_array() || offsets->size() != 2 ||
        !AsNonNegativeInt((*offsets)[0], &begin) ||
        !AsNonNegativeInt((*offsets)[1], &end) || begin > end) {
      return Malformed(name, absl::StrCat("tensor ", Quote(key),
                                          " has no valid data_offsets"));
    }
    extents.emplace_back(begin, end);
  }
  std::sort(extents.begin(), extents.end());
  int64_t buffer_end = 0;
  for (const auto& [begin, end] : extents) {
    if (begin != buffer_end) {
      return Malformed(name, absl::StrCat("tensors do not tile the data buffer: ",
                                          begin < buffer_end ? "overlap" : "gap",
                                          " at byte ", std::min(begin, buffer_end)));
    }
    buffer_end = end;
  }
  if (static_cast<uint64_t>(buffer_end) != buffer.size()) {
    return Malformed(name, absl::StrCat("tensors end at byte ", buffer_end,
                                        " of a ", buffer.size(), "-byte data buffer"));
  }

  const Json* entry = nullptr;
  std::string chosen;
  if (tensor_name.empty()) {
    for (const auto& [key, value] : header.items()) {
      if (key == "__metadata__") continue;
      if (entry != nullptr) {
        return Malformed(name, "holds several tensors; name the one to use");
      }
      entry = &value;
      chosen = key;
    }
    if (entry == nullptr) return Malformed(name, "holds no tensor");
  } else {
    auto it = tensor_name == "__metadata__"
                  ? header.end()
                  : header.find(std::string(tensor_name));
    if (it == header.end()) {
      return absl::NotFoundError(absl::StrCat(
          name, ": no tensor named ", Quote(tensor_name)));
    }
    entry = &*it;
    chosen = std::string(tensor_name);
  }
  chosen = Quote(chosen);
  // The data_offsets check above made `entry` an object with valid offsets.
  const auto field = [&](const char* key) -> const Json* {
    auto it = entry->find(key);
    return it == entry->end() ? nullptr : &*it;
  };
  const Json* dtype_json = field("dtype");
  const Json* shape_json = field("shape");
  const Json* offsets_json = field("data_offsets");
  if (dtype_json == nullptr || !dtype_json->is_string() ||
      shape_json == nullptr || !shape_json->is_array() ||
      offsets_json == nullptr) {
    return Malformed(name, absl::StrCat("tensor ", chosen,
                                        " lacks dtype, shape or data_offsets"));
  }
  DType dtype;
  const std::string& d = dtype_json->get_ref<const std::string&>();
  if (d == "F32") {
    dtype = DType::kFloat32;
  } else if (d == "F64") {
    dtype = DType::kFloat64;
  } else if (d == "F16") {
    dtype = DType::kFloat16;
  } else if (d == "BF16") {
    dtype = DType::kBFloat16;
  } else {
    return Malformed(name, absl::StrCat("tensor ", chosen, " has dtype ",
                                        Quote(d, /*quote=*/""), "; need F16, BF16, F32 or F64"));
  }
  HostArray array;
  for (const Json& dim : *shape_json) {
    int64_t v;
    if (!AsNonNegativeInt(dim, &v)) return Malformed(name, "bad shape entry");
    array.shape.push_back(v);
  }
  int64_t begin = 0, end = 0;
  AsNonNegativeInt((*offsets_json)[0], &begin);
  AsNonNegativeInt((*offsets_json)[1], &end);
  PHASOR_ASSIGN_OR_RETURN(const int64_t count, ElementCount(array.shape, name));
  const uint64_t need = static_cast<uint64_t>(count) * DTypeSize(dtype);
  if (static_cast<uint64_t>(count) > buffer.size() ||
      need != static_cast<uint64_t>(end - begin)) {
    return Malformed(name, absl::StrCat("tensor ", chosen, ": shape needs ",
                                        NeededBytes(count, DTypeSize(dtype),
                                                    buffer.size()),
                                        " bytes, data_offsets give ", end - begin));
  }
  array.values = Widen(buffer.data() + begin, count, dtype);
  return array;
}

absl::StatusOr<HostArray> ReadArrayFile(const std::string& path,
                                        absl::string_view tensor_name) {
  PHASOR_ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(path));
  if (absl::EndsWith(path, ".npy")) return ParseNpy(bytes, path);
  if (absl::EndsWith(path, ".safetensors")) {
    return ParseSafetensors(bytes, tensor_name, path);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": unknown array file type (need .npy or .safetensors)"));
}

}  // namespace phasor
