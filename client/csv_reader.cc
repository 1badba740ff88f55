#include "client/csv_reader.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace phasor {

absl::StatusOr<std::vector<CsvRecord>> ParseCsv(absl::string_view text,
                                                absl::string_view name) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::vector<CsvRecord> records;
  int64_t line = 1;
  size_t line_start = 0;  // Offset of the current line, for columns.
  size_t at = 0;
  auto error = [&](size_t where, absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": line ", line, " column ", where - line_start + 1,
                     ": ", what));
  };
  while (at < text.size()) {
    // A blank line is not a record.
    if (text[at] == '\n' || (text[at] == '\r' && at + 1 < text.size() &&
                             text[at + 1] == '\n')) {
      at += text[at] == '\r' ? 2 : 1;
      ++line;
      line_start = at;
      continue;
    }
    CsvRecord record;
    record.line = line;
    while (true) {  // One field per turn.
      std::string field;
      if (at < text.size() && text[at] == '"') {
        const size_t open = at++;
        const int64_t open_line = line;
        const size_t open_line_start = line_start;
        while (true) {
          if (at >= text.size()) {
            line = open_line;
            line_start = open_line_start;
            return error(open, "unterminated quoted field");
          }
          const char c = text[at];
          if (c == '"') {
            if (at + 1 < text.size() && text[at + 1] == '"') {
              field.push_back('"');
              at += 2;
              continue;
            }
            ++at;
            break;
          }
          if (c == '\n') {
            ++line;
            line_start = at + 1;
          }
          field.push_back(c);
          ++at;
        }
        const bool at_end = at >= text.size() || text[at] == ',' ||
                            text[at] == '\n' ||
                            (text[at] == '\r' && at + 1 < text.size() &&
                             text[at + 1] == '\n');
        if (!at_end) return error(at, "text after a closing quote");
      } else {
        while (at < text.size() && text[at] != ',' && text[at] != '\n' &&
               !(text[at] == '\r' && at + 1 < text.size() &&
                 text[at + 1] == '\n')) {
          if (text[at] == '"') {
            return error(at, "'\"' inside an unquoted field (quote the field)");
          }
          field.push_back(text[at]);
          ++at;
        }
      }
      record.fields.push_back(std::move(field));
      if (at < text.size() && text[at] == ',') {
        ++at;
        continue;
      }
      break;  // End of record: a line break or the end of the text.
    }
    records.push_back(std::move(record));
    if (at < text.size()) {
      at += text[at] == '\r' ? 2 : 1;
      ++line;
      line_start = at;
    }
  }
  return records;
}

}  // namespace phasor
