#include "core/tensor_file.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>
#include <map>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/dtype.h"
#include "core/file.h"
#include "core/status_macros.h"

namespace phasor {
namespace {

absl::Status Malformed(absl::string_view name, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(name, ": ", what));
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

enum class FileDType { kF16, kBF16, kF32, kF64 };

size_t FileDTypeSize(FileDType t) {
  switch (t) {
    case FileDType::kF16:
    case FileDType::kBF16:
      return 2;
    case FileDType::kF32:
      return 4;
    case FileDType::kF64:
      return 8;
  }
  return 0;
}

// Widens little-endian elements to double. REQUIRES: data holds n elements.
std::vector<double> Widen(const char* data, int64_t n, FileDType t) {
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) {
    const unsigned char* p =
        reinterpret_cast<const unsigned char*>(data) + i * FileDTypeSize(t);
    switch (t) {
      case FileDType::kF16:
        out[i] = HalfToFloat(static_cast<uint16_t>(p[0] | (p[1] << 8)));
        break;
      case FileDType::kBF16:
        out[i] = BFloat16ToFloat(static_cast<uint16_t>(p[0] | (p[1] << 8)));
        break;
      case FileDType::kF32: {
        uint32_t bits = 0;
        for (int b = 3; b >= 0; --b) bits = (bits << 8) | p[b];
        float f;
        std::memcpy(&f, &bits, sizeof(f));
        out[i] = f;
        break;
      }
      case FileDType::kF64: {
        uint64_t bits = 0;
        for (int b = 7; b >= 0; --b) bits = (bits << 8) | p[b];
        double d;
        std::memcpy(&d, &bits, sizeof(d));
        out[i] = d;
        break;
      }
    }
  }
  return out;
}

// ---- .npy ------------------------------------------------------------------

// Extracts the value text of 'key' from the header dict literal.
absl::StatusOr<std::string> NpyHeaderValue(absl::string_view header,
                                           absl::string_view key,
                                           absl::string_view name) {
  const std::string quoted = absl::StrCat("'", key, "'");
  const size_t at = header.find(quoted);
  if (at == absl::string_view::npos) {
    return Malformed(name, absl::StrCat("npy header has no ", quoted));
  }
  size_t pos = header.find(':', at + quoted.size());
  if (pos == absl::string_view::npos) {
    return Malformed(name, absl::StrCat("npy header: no value for ", quoted));
  }
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(header.substr(pos + 1));
  if (absl::StartsWith(rest, "(")) {
    const size_t close = rest.find(')');
    if (close == absl::string_view::npos) return Malformed(name, "npy header: unclosed shape tuple");
    return std::string(rest.substr(0, close + 1));
  }
  if (absl::StartsWith(rest, "'")) {
    const size_t close = rest.find('\'', 1);
    if (close == absl::string_view::npos) return Malformed(name, "npy header: unclosed string");
    return std::string(rest.substr(1, close - 1));
  }
  const size_t end = rest.find_first_of(",}");
  return std::string(absl::StripAsciiWhitespace(rest.substr(0, end)));
}

}  // namespace

absl::StatusOr<HostArray> ParseNpy(absl::string_view bytes,
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
  const absl::string_view header = bytes.substr(header_start, header_len);
  PHASOR_ASSIGN_OR_RETURN(const std::string descr,
                          NpyHeaderValue(header, "descr", name));
  PHASOR_ASSIGN_OR_RETURN(const std::string fortran,
                          NpyHeaderValue(header, "fortran_order", name));
  PHASOR_ASSIGN_OR_RETURN(const std::string shape_text,
                          NpyHeaderValue(header, "shape", name));
  FileDType dtype;
  if (descr == "<f4") {
    dtype = FileDType::kF32;
  } else if (descr == "<f8") {
    dtype = FileDType::kF64;
  } else if (descr == "<f2") {
    dtype = FileDType::kF16;
  } else {
    return Malformed(name, absl::StrCat("unsupported .npy dtype '", descr,
                                        "' (need <f2, <f4 or <f8)"));
  }
  if (fortran != "False") {
    return Malformed(name, "Fortran-order .npy arrays are not supported; save in C order");
  }
  HostArray array;
  absl::string_view dims = shape_text;
  dims = absl::StripPrefix(absl::StripSuffix(dims, ")"), "(");
  for (absl::string_view part : absl::StrSplit(dims, ',', absl::SkipWhitespace())) {
    int64_t d;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &d) || d < 0) {
      return Malformed(name, absl::StrCat("bad .npy shape ", shape_text));
    }
    array.shape.push_back(d);
  }
  PHASOR_ASSIGN_OR_RETURN(const int64_t count, ElementCount(array.shape, name));
  const size_t data_start = header_start + header_len;
  const size_t available = bytes.size() - data_start;
  const size_t elem = FileDTypeSize(dtype);
  if (static_cast<uint64_t>(count) > available / elem ||
      static_cast<uint64_t>(count) * elem != available) {
    return Malformed(name, absl::StrCat("shape ", shape_text, " needs ",
                                        static_cast<uint64_t>(count) * elem,
                                        " data bytes, file has ", available));
  }
  array.values = Widen(bytes.data() + data_start, count, dtype);
  return array;
}

// ---- .safetensors ------------------------------------------------------------

namespace {

// A minimal JSON value, enough for the safetensors header.
struct Json {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = Kind::kNull;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::map<std::string, Json> fields;
};

class JsonParser final {
 public:
  explicit JsonParser(absl::string_view in) : in_(in) {}

  bool Parse(Json* out) {
    if (!Value(out, 0)) return false;
    SkipSpace();
    return pos_ == in_.size();
  }

 private:
  static constexpr int kMaxDepth = 16;

  void SkipSpace() {
    while (pos_ < in_.size() && std::isspace(static_cast<unsigned char>(in_[pos_]))) ++pos_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < in_.size() && in_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool String(std::string* out) {
    if (!Consume('"')) return false;
    while (pos_ < in_.size()) {
      const char c = in_[pos_++];
      if (c == '"') return true;
      if (c == '\\') {
        if (pos_ >= in_.size()) return false;
        const char e = in_[pos_++];
        switch (e) {
          case '"': case '\\': case '/': out->push_back(e); break;
          case 'n': out->push_back('\n'); break;
          case 't': out->push_back('\t'); break;
          case 'r': out->push_back('\r'); break;
          case 'b': out->push_back('\b'); break;
          case 'f': out->push_back('\f'); break;
          case 'u':  // Kept verbatim: tensor names here are ASCII.
            if (in_.size() - pos_ < 4) return false;
            out->append("\\u");
            out->append(in_.data() + pos_, 4);
            pos_ += 4;
            break;
          default: return false;
        }
      } else {
        out->push_back(c);
      }
    }
    return false;
  }
  bool Value(Json* out, int depth) {
    if (depth > kMaxDepth) return false;
    SkipSpace();
    if (pos_ >= in_.size()) return false;
    const char c = in_[pos_];
    if (c == '{') {
      ++pos_;
      out->kind = Json::Kind::kObject;
      if (Consume('}')) return true;
      do {
        std::string key;
        SkipSpace();
        if (!String(&key) || !Consume(':')) return false;
        Json value;
        if (!Value(&value, depth + 1)) return false;
        out->fields[key] = std::move(value);
      } while (Consume(','));
      return Consume('}');
    }
    if (c == '[') {
      ++pos_;
      out->kind = Json::Kind::kArray;
      if (Consume(']')) return true;
      do {
        Json value;
        if (!Value(&value, depth + 1)) return false;
        out->items.push_back(std::move(value));
      } while (Consume(','));
      return Consume(']');
    }
    if (c == '"') {
      out->kind = Json::Kind::kString;
      return String(&out->text);
    }
    for (absl::string_view word : {"true", "false", "null"}) {
      if (in_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        out->kind = word == "null" ? Json::Kind::kNull : Json::Kind::kBool;
        out->number = word == "true";
        return true;
      }
    }
    const size_t start = pos_;
    while (pos_ < in_.size() &&
           (std::isdigit(static_cast<unsigned char>(in_[pos_])) ||
            std::strchr("+-.eE", in_[pos_]) != nullptr)) {
      ++pos_;
    }
    out->kind = Json::Kind::kNumber;
    return pos_ > start &&
           absl::SimpleAtod(in_.substr(start, pos_ - start), &out->number);
  }

  absl::string_view in_;
  size_t pos_ = 0;
};

bool AsNonNegativeInt(const Json& j, int64_t* out) {
  if (j.kind != Json::Kind::kNumber || j.number < 0 || j.number > 9.0e15 ||
      j.number != static_cast<double>(static_cast<int64_t>(j.number))) {
    return false;
  }
  *out = static_cast<int64_t>(j.number);
  return true;
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
  if (header_size > bytes.size() - 8) {
    return Malformed(name, absl::StrCat("header size ", header_size,
                                        " exceeds the file (", bytes.size(), " bytes)"));
  }
  Json header;
  if (!JsonParser(bytes.substr(8, header_size)).Parse(&header) ||
      header.kind != Json::Kind::kObject) {
    return Malformed(name, "header is not a valid JSON object");
  }
  const absl::string_view buffer = bytes.substr(8 + header_size);

  // The spec requires the tensors to tile the buffer exactly: a file whose
  // last tensor ends before (or after) the buffer's end is truncated or padded.
  int64_t buffer_end = 0;
  for (const auto& [key, value] : header.fields) {
    if (key == "__metadata__") continue;
    auto it = value.fields.find("data_offsets");
    int64_t end = 0;
    if (value.kind != Json::Kind::kObject || it == value.fields.end() ||
        it->second.kind != Json::Kind::kArray || it->second.items.size() != 2 ||
        !AsNonNegativeInt(it->second.items[1], &end)) {
      return Malformed(name, absl::StrCat("tensor \"", key, "\" has no valid data_offsets"));
    }
    buffer_end = std::max(buffer_end, end);
  }
  if (static_cast<uint64_t>(buffer_end) != buffer.size()) {
    return Malformed(name, absl::StrCat("tensors end at byte ", buffer_end,
                                        " of a ", buffer.size(), "-byte data buffer"));
  }

  const Json* entry = nullptr;
  std::string chosen;
  if (tensor_name.empty()) {
    for (const auto& [key, value] : header.fields) {
      if (key == "__metadata__") continue;
      if (entry != nullptr) {
        return Malformed(name, "holds several tensors; name the one to use");
      }
      entry = &value;
      chosen = key;
    }
    if (entry == nullptr) return Malformed(name, "holds no tensor");
  } else {
    auto it = header.fields.find(std::string(tensor_name));
    if (it == header.fields.end()) {
      return absl::NotFoundError(
          absl::StrCat(name, ": no tensor named \"", tensor_name, "\""));
    }
    entry = &it->second;
    chosen = std::string(tensor_name);
  }
  const auto field = [&](const char* key) -> const Json* {
    auto it = entry->fields.find(key);
    return it == entry->fields.end() ? nullptr : &it->second;
  };
  const Json* dtype_json = field("dtype");
  const Json* shape_json = field("shape");
  const Json* offsets_json = field("data_offsets");
  if (entry->kind != Json::Kind::kObject || dtype_json == nullptr ||
      dtype_json->kind != Json::Kind::kString || shape_json == nullptr ||
      shape_json->kind != Json::Kind::kArray || offsets_json == nullptr ||
      offsets_json->kind != Json::Kind::kArray || offsets_json->items.size() != 2) {
    return Malformed(name, absl::StrCat("tensor \"", chosen,
                                        "\" lacks dtype, shape or data_offsets"));
  }
  FileDType dtype;
  const std::string& d = dtype_json->text;
  if (d == "F32") {
    dtype = FileDType::kF32;
  } else if (d == "F64") {
    dtype = FileDType::kF64;
  } else if (d == "F16") {
    dtype = FileDType::kF16;
  } else if (d == "BF16") {
    dtype = FileDType::kBF16;
  } else {
    return Malformed(name, absl::StrCat("tensor \"", chosen, "\" has dtype ", d,
                                        "; need F16, BF16, F32 or F64"));
  }
  HostArray array;
  for (const Json& dim : shape_json->items) {
    int64_t v;
    if (!AsNonNegativeInt(dim, &v)) return Malformed(name, "bad shape entry");
    array.shape.push_back(v);
  }
  int64_t begin, end;
  if (!AsNonNegativeInt(offsets_json->items[0], &begin) ||
      !AsNonNegativeInt(offsets_json->items[1], &end) || begin > end ||
      static_cast<uint64_t>(end) > buffer.size()) {
    return Malformed(name, absl::StrCat("tensor \"", chosen,
                                        "\" has data_offsets outside the buffer"));
  }
  PHASOR_ASSIGN_OR_RETURN(const int64_t count, ElementCount(array.shape, name));
  const uint64_t need = static_cast<uint64_t>(count) * FileDTypeSize(dtype);
  if (static_cast<uint64_t>(count) > buffer.size() ||
      need != static_cast<uint64_t>(end - begin)) {
    return Malformed(name, absl::StrCat("tensor \"", chosen, "\": shape needs ",
                                        need, " bytes, data_offsets give ",
                                        end - begin));
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
