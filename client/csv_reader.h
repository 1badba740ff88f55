// A small RFC 4180 CSV reader, for the series tables phasor-client reads
// (`encode-observations --observations_csv`).
//
// Grammar (RFC 4180 §2, with the usual relaxations):
//   - records end at LF or CRLF (a lone CR inside an unquoted field is data);
//     a final record needs no line break;
//   - fields are separated by ','; a field that starts with '"' is quoted: it
//     runs to the next '"' not followed by another '"', may hold commas and
//     line breaks, and "" inside it is one '"';
//   - after a closing quote only ',' or the end of the record may follow;
//   - blank lines (no characters at all) are skipped; a leading UTF-8 BOM is
//     dropped.
// Errors are INVALID_ARGUMENT naming the 1-based line and column where the
// problem is: an unterminated quote, text after a closing quote, a '"'
// inside an unquoted field.
//
// Not a numeric reader: every field stays text (tensor_io.h reads numeric
// CSV into tensors). Records may have different lengths; the caller checks.
//
// Thread-safety: pure functions.
#ifndef PHASOR_CLIENT_CSV_READER_H_
#define PHASOR_CLIENT_CSV_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace phasor {

struct CsvRecord {
  // 1-based line where the record starts (for error messages).
  int64_t line = 0;
  std::vector<std::string> fields;
};

// Every record of `text`; `name` (a file name) prefixes error messages.
absl::StatusOr<std::vector<CsvRecord>> ParseCsv(absl::string_view text,
                                                absl::string_view name);

}  // namespace phasor

#endif  // PHASOR_CLIENT_CSV_READER_H_
