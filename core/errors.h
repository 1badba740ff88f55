// Field-path errors: how core/ tells a caller which input was wrong.
//
// Every validation failure is an absl::Status whose message starts with the
// dot-separated field path of the offending input ("spec.rope.rotary_dim: must
// be even, got 7") and which carries the path as a payload, so the server can
// attach a google.rpc.BadRequest field violation without parsing messages.
// Field paths use the proto field names of phasor.v1 so a client sees the
// name it sent.
#ifndef PHASOR_CORE_ERRORS_H_
#define PHASOR_CORE_ERRORS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace phasor {

// Payload type URL under which the field path travels.
inline constexpr absl::string_view kFieldPathPayload = "phasor.dev/field-path";

inline absl::Status FieldError(absl::StatusCode code, absl::string_view field,
                               absl::string_view description) {
  absl::Status status(code, absl::StrCat(field, ": ", description));
  status.SetPayload(kFieldPathPayload, absl::Cord(field));
  return status;
}

inline absl::Status InvalidField(absl::string_view field,
                                 absl::string_view description) {
  return FieldError(absl::StatusCode::kInvalidArgument, field, description);
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

// The field path carried by `status`, if any.
inline std::optional<std::string> FieldPathOf(const absl::Status& status) {
  auto payload = status.GetPayload(kFieldPathPayload);  // absl::optional here
  if (!payload) return std::nullopt;
  return std::string(*payload);
}

}  // namespace phasor

#endif  // PHASOR_CORE_ERRORS_H_
