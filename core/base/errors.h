// -----------------------------------------------------------------------------
// File: core/base/errors.h
// -----------------------------------------------------------------------------
//
// Field-path errors: how core/ tells a caller which input was wrong.
//
// An error about an input is an absl::Status that carries two payloads: the
// field path of the offending input as structured segments (a name and, for
// an element of a repeated field or a tensor, its index), and the
// description of what is wrong with it. Its message is rendered from the
// two by RenderFieldMessage alone, "<path>: <description>". Code that
// re-addresses an error -- the server mapping core's names onto the wire's,
// a client renumbering the series of a panel it cut into calls -- edits the
// segments and re-renders (EditFieldPath and the operations built on it);
// nothing parses or rewrites the text of a message.
//
// Field paths use the proto field names of phasor.v1, so a client sees the
// name it sent. Their wire form is google.rpc.BadRequest's: dot-separated
// names, each optionally followed by [i] indices,
// "observations.series[3].values[5]". ParseFieldPath reads that form into
// segments and FormatFieldPath writes it back; the two are inverses for
// every string (what is not of that form is kept whole as a name), as are
// the Python client's errors.parse_field_path and format_field_path.
//
// Example:
//   absl::Status s = InvalidField("positions[3]", "must be finite, got nan");
//   // s.message() == "positions[3]: must be finite, got nan"
//   s = RenameFieldPath(s, "positions", "positions.values");
//   // s.message() == "positions.values[3]: must be finite, got nan"
//   s = PrefixFieldPath(s, "request");
//   // FieldPathOf(s) == "request.positions.values[3]"
//
// Thread-safety: pure functions on values.
#ifndef PHASOR_CORE_BASE_ERRORS_H_
#define PHASOR_CORE_BASE_ERRORS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace phasor {

// One step of a field path. "values[5]" is {"values", 5}, "spec" is
// {"spec", nullopt}; a further index of the same field has an empty name
// ("a[1][2]" is {"a", 1}, {"", 2}).
struct FieldPathSegment {
  std::string name;
  std::optional<int64_t> index;

  friend bool operator==(const FieldPathSegment& a, const FieldPathSegment& b) {
    return a.name == b.name && a.index == b.index;
  }
  friend bool operator!=(const FieldPathSegment& a, const FieldPathSegment& b) {
    return !(a == b);
  }
};
using FieldPath = std::vector<FieldPathSegment>;

// Payload type URLs: the serialized segments (SerializeFieldPath) and the
// description, as plain text.
inline constexpr absl::string_view kFieldPathPayload = "phasor.dev/field-path-segments";
inline constexpr absl::string_view kFieldDescriptionPayload = "phasor.dev/field-description";

namespace errors_internal {

// An index as the wire writes it: ASCII digits, no sign, no leading zero,
// within int64.
inline std::optional<int64_t> WireIndex(absl::string_view text) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return std::nullopt;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) return std::nullopt;
  return value;
}

inline void AppendFixed(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}

inline bool ConsumeFixed(absl::string_view* in, int bytes, uint64_t* value) {
  if (in->size() < static_cast<size_t>(bytes)) return false;
  *value = 0;
  for (int i = 0; i < bytes; ++i) {
    *value |= uint64_t{static_cast<unsigned char>((*in)[i])} << (8 * i);
  }
  in->remove_prefix(bytes);
  return true;
}

}  // namespace errors_internal

// The segments of a field path in its wire form (see the file comment). A
// component that is not a name followed by wire indices ("a[-1]", "[3]", a
// capped path's "...(12 more bytes)") is one segment with that text as its
// name and no index.
inline FieldPath ParseFieldPath(absl::string_view path) {
  FieldPath segments;
  for (const absl::string_view component : absl::StrSplit(path, '.')) {
    const size_t open = component.find('[');
    bool parsed = open != absl::string_view::npos && open > 0 && component.back() == ']';
    std::vector<int64_t> indices;
    if (parsed) {
      const absl::string_view inside =
          component.substr(open + 1, component.size() - open - 2);
      for (const absl::string_view text : absl::StrSplit(inside, "][")) {
        const std::optional<int64_t> index = errors_internal::WireIndex(text);
        if (!index) {
          parsed = false;
          break;
        }
        indices.push_back(*index);
      }
    }
    if (!parsed) {
      segments.push_back({std::string(component), std::nullopt});
      continue;
    }
    segments.push_back({std::string(component.substr(0, open)), indices[0]});
    for (size_t i = 1; i < indices.size(); ++i) segments.push_back({"", indices[i]});
  }
  return segments;
}

// The wire form of `path` (ParseFieldPath's inverse).
inline std::string FormatFieldPath(absl::Span<const FieldPathSegment> path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    const FieldPathSegment& segment = path[i];
    // A nameless index continues the previous component: "a[1][2]".
    if (i > 0 && !(segment.name.empty() && segment.index.has_value())) out.push_back('.');
    out.append(segment.name);
    if (segment.index) absl::StrAppend(&out, "[", *segment.index, "]");
  }
  return out;
}

// The message of a field error: "<path>: <description>". The one place that
// text is put together.
inline std::string RenderFieldMessage(absl::string_view path,
                                      absl::string_view description) {
  return absl::StrCat(path, ": ", description);
}

// `path` as a payload: per segment, the name's length (4 bytes), the name,
// whether an index follows (1 byte) and the index (8 bytes), little-endian.
inline std::string SerializeFieldPath(absl::Span<const FieldPathSegment> path) {
  std::string out;
  for (const FieldPathSegment& segment : path) {
    errors_internal::AppendFixed(segment.name.size(), 4, &out);
    out.append(segment.name);
    out.push_back(segment.index ? 1 : 0);
    if (segment.index) {
      errors_internal::AppendFixed(static_cast<uint64_t>(*segment.index), 8, &out);
    }
  }
  return out;
}

// SerializeFieldPath's inverse; nullopt for bytes it did not write.
inline std::optional<FieldPath> DeserializeFieldPath(absl::string_view bytes) {
  FieldPath path;
  while (!bytes.empty()) {
    uint64_t size = 0;
    uint64_t has_index = 0;
    if (!errors_internal::ConsumeFixed(&bytes, 4, &size) || size > bytes.size()) {
      return std::nullopt;
    }
    FieldPathSegment segment{std::string(bytes.substr(0, size)), std::nullopt};
    bytes.remove_prefix(size);
    if (!errors_internal::ConsumeFixed(&bytes, 1, &has_index) || has_index > 1) {
      return std::nullopt;
    }
    if (has_index == 1) {
      uint64_t index = 0;
      if (!errors_internal::ConsumeFixed(&bytes, 8, &index)) return std::nullopt;
      segment.index = static_cast<int64_t>(index);
    }
    path.push_back(std::move(segment));
  }
  return path;
}

// An error with `code` about the input at `path` (segments, or the wire
// form, which is parsed): both travel as payloads and the message is
// RenderFieldMessage(path, description).
inline absl::Status FieldError(absl::StatusCode code, const FieldPath& path,
                               absl::string_view description) {
  absl::Status status(code, RenderFieldMessage(FormatFieldPath(path), description));
  status.SetPayload(kFieldPathPayload, absl::Cord(SerializeFieldPath(path)));
  status.SetPayload(kFieldDescriptionPayload, absl::Cord(description));
  return status;
}
inline absl::Status FieldError(absl::StatusCode code, absl::string_view field,
                               absl::string_view description) {
  return FieldError(code, ParseFieldPath(field), description);
}

inline absl::Status InvalidField(const FieldPath& path, absl::string_view description) {
  return FieldError(absl::StatusCode::kInvalidArgument, path, description);
}
inline absl::Status InvalidField(absl::string_view field,
                                 absl::string_view description) {
  return FieldError(absl::StatusCode::kInvalidArgument, field, description);
}

// The segments of the field path `status` carries, if any.
inline std::optional<FieldPath> FieldPathSegmentsOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kFieldPathPayload);  // absl::optional here
  if (!payload) return std::nullopt;
  return DeserializeFieldPath(std::string(*payload));
}

// The field path `status` carries, in its wire form, if any.
inline std::optional<std::string> FieldPathOf(const absl::Status& status) {
  const std::optional<FieldPath> path = FieldPathSegmentsOf(status);
  if (!path) return std::nullopt;
  return FormatFieldPath(*path);
}

// The description of a field error (its message without the path), if any.
inline std::optional<std::string> FieldDescriptionOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kFieldDescriptionPayload);
  if (!payload) return std::nullopt;
  return std::string(*payload);
}

// `status` about `path` instead, with `description` when given (else its
// own): same code and other payloads, the message rendered again. A status
// without a field path (or OK) is returned unchanged.
inline absl::Status WithFieldPath(const absl::Status& status, const FieldPath& path,
                                  std::optional<absl::string_view> description =
                                      std::nullopt) {
  const std::optional<std::string> own = FieldDescriptionOf(status);
  if (status.ok() || !FieldPathSegmentsOf(status) || !own) return status;
  const absl::string_view text = description ? *description : absl::string_view(*own);
  absl::Status out = FieldError(status.code(), path, text);
  status.ForEachPayload([&out](absl::string_view url, const absl::Cord& payload) {
    if (url != kFieldPathPayload && url != kFieldDescriptionPayload) {
      out.SetPayload(url, payload);
    }
  });
  return out;
}

// `status` with its field path passed through `edit`, which returns whether
// it changed the path; the message is rendered again. Unchanged when `edit`
// returns false or the status has no field path.
inline absl::Status EditFieldPath(const absl::Status& status,
                                  absl::FunctionRef<bool(FieldPath*)> edit) {
  std::optional<FieldPath> path = FieldPathSegmentsOf(status);
  if (!path || !edit(&*path)) return status;
  return WithFieldPath(status, *path);
}

// The path operations, on segments. Each returns whether it changed `path`.

// `prefix` and then `path`: "rope.base" under "spec" is "spec.rope.base".
inline bool PrefixFieldPath(FieldPath* path, absl::Span<const FieldPathSegment> prefix) {
  path->insert(path->begin(), prefix.begin(), prefix.end());
  return !prefix.empty();
}

// When the leading segments of `path` have the names of `from` (whose
// indices are ignored) and none but the last of them carries an index, they
// are replaced by `to`, that index moving to the last segment of `to`:
// a root renamed (positions[3] to position_ids[3]), a field moved
// (spec.rope.scaling.yarn.max_position_embeddings to
// spec.rope.max_position_embeddings), a level added (positions[3] to
// positions.values[3]). REQUIRES: from and to are not empty.
inline bool RenameFieldPath(FieldPath* path, absl::Span<const FieldPathSegment> from,
                            absl::Span<const FieldPathSegment> to) {
  if (from.empty() || to.empty() || path->size() < from.size()) return false;
  for (size_t i = 0; i < from.size(); ++i) {
    const FieldPathSegment& segment = (*path)[i];
    if (segment.name != from[i].name) return false;
    if (segment.index && i + 1 < from.size()) return false;
  }
  const std::optional<int64_t> index = (*path)[from.size() - 1].index;
  FieldPath out(to.begin(), to.end());
  out.back().index = index;
  out.insert(out.end(), path->begin() + static_cast<std::ptrdiff_t>(from.size()),
             path->end());
  if (out == *path) return false;
  *path = std::move(out);
  return true;
}

// When the leading segments of `path` have the names of `at` (indices on
// them are allowed and ignored) and the last of them carries an index, that
// index moves by `delta`: observations.series[2].values[7] at
// "observations.series" by 10 is observations.series[12].values[7]. False,
// and `path` unchanged, when the sum would overflow.
inline bool ShiftFieldIndex(FieldPath* path, absl::Span<const FieldPathSegment> at,
                            int64_t delta) {
  if (at.empty() || path->size() < at.size() || delta == 0) return false;
  for (size_t i = 0; i < at.size(); ++i) {
    if ((*path)[i].name != at[i].name) return false;
  }
  std::optional<int64_t>& index = (*path)[at.size() - 1].index;
  int64_t shifted = 0;
  if (!index || __builtin_add_overflow(*index, delta, &shifted)) return false;
  index = shifted;
  return true;
}

// The same operations on a status's path (EditFieldPath), their path
// arguments in the wire form.
inline absl::Status PrefixFieldPath(const absl::Status& status, absl::string_view prefix) {
  return EditFieldPath(status, [&](FieldPath* path) {
    return PrefixFieldPath(path, ParseFieldPath(prefix));
  });
}
inline absl::Status RenameFieldPath(const absl::Status& status, absl::string_view from,
                                    absl::string_view to) {
  return EditFieldPath(status, [&](FieldPath* path) {
    return RenameFieldPath(path, ParseFieldPath(from), ParseFieldPath(to));
  });
}
inline absl::Status ShiftFieldIndex(const absl::Status& status, absl::string_view at,
                                    int64_t delta) {
  return EditFieldPath(status, [&](FieldPath* path) {
    return ShiftFieldIndex(path, ParseFieldPath(at), delta);
  });
}

// The longest prefix of `text` of at most `max_bytes` bytes that does not
// split a UTF-8 character (continuation bytes are 10xxxxxx).
inline absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut);
}

// Text a client or a file chose, quoted for an error message: between
// `quote`s, C-escaped (UTF-8 kept), and when longer than `max_bytes` cut there
// at a character boundary with its full length noted,
//   "Europe/AAAA...(1048583 bytes)"
// so that a megabyte of input never reaches a message, while the words
// around the quote (what to send instead) survive.
inline std::string QuoteForError(absl::string_view text, size_t max_bytes,
                                 absl::string_view quote = "\"") {
  const absl::string_view kept = Utf8Prefix(text, max_bytes);
  std::string out = absl::StrCat(quote, absl::Utf8SafeCHexEscape(kept));
  if (kept.size() < text.size()) absl::StrAppend(&out, "...(", text.size(), " bytes)");
  absl::StrAppend(&out, quote);
  return out;
}

}  // namespace phasor

#endif  // PHASOR_CORE_BASE_ERRORS_H_
