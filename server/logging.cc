#include "server/logging.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace phasor::server {
namespace {

absl::string_view LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

// logfmt: bare when the value is a plain token, else double-quoted with
// C escapes (so quotes, newlines and non-ASCII bytes stay on one line).
std::string TextToken(absl::string_view value) {
  bool bare = !value.empty();
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= ' ' || byte >= 0x7f || c == '"' || c == '=' || c == '\\') {
      bare = false;
      break;
    }
  }
  if (bare) return std::string(value);
  return absl::StrCat("\"", absl::CHexEscape(value), "\"");
}

std::string TextValue(const nlohmann::ordered_json& value) {
  if (value.is_string()) return TextToken(value.get_ref<const std::string&>());
  if (value.is_array()) {
    std::string joined;
    for (const auto& item : value) {
      absl::StrAppend(&joined, joined.empty() ? "" : ",",
                      item.is_string() ? item.get<std::string>() : item.dump());
    }
    return TextToken(joined);
  }
  return value.dump();
}

}  // namespace

bool ParseLogFormat(absl::string_view text, LogFormat* format) {
  if (text == "text") {
    *format = LogFormat::kText;
    return true;
  }
  if (text == "json") {
    *format = LogFormat::kJson;
    return true;
  }
  return false;
}

absl::string_view LogFormatName(LogFormat format) {
  return format == LogFormat::kJson ? "json" : "text";
}

LogRecord::LogRecord(LogLevel level, absl::string_view event)
    : fields_(nlohmann::ordered_json::object()) {
  fields_["time"] = "";  // Filled by Format, first in the line.
  fields_["level"] = std::string(LevelName(level));
  fields_["event"] = std::string(event);
}

LogRecord& LogRecord::Add(absl::string_view key, absl::string_view value) {
  fields_[std::string(key)] = std::string(value);
  return *this;
}
LogRecord& LogRecord::Add(absl::string_view key, const char* value) {
  return Add(key, absl::string_view(value));
}
LogRecord& LogRecord::Add(absl::string_view key, const std::string& value) {
  return Add(key, absl::string_view(value));
}
LogRecord& LogRecord::Add(absl::string_view key, int64_t value) {
  fields_[std::string(key)] = value;
  return *this;
}
LogRecord& LogRecord::Add(absl::string_view key, int value) {
  return Add(key, static_cast<int64_t>(value));
}
LogRecord& LogRecord::Add(absl::string_view key, double value) {
  // JSON has no NaN or infinity; neither does a duration or a setting.
  fields_[std::string(key)] = std::isfinite(value) ? value : 0.0;
  return *this;
}
LogRecord& LogRecord::Add(absl::string_view key, bool value) {
  fields_[std::string(key)] = value;
  return *this;
}
LogRecord& LogRecord::Add(absl::string_view key, const std::vector<std::string>& values) {
  fields_[std::string(key)] = values;
  return *this;
}

std::string LogRecord::Format(LogFormat format, absl::Time now) const {
  const std::string time =
      absl::FormatTime("%Y-%m-%d%ET%H:%M:%E6SZ", now, absl::UTCTimeZone());
  if (format == LogFormat::kJson) {
    nlohmann::ordered_json line = fields_;
    line["time"] = time;
    // Invalid UTF-8 (a client's bytes in a message) becomes U+FFFD instead
    // of an exception.
    return line.dump(/*indent=*/-1, /*indent_char=*/' ', /*ensure_ascii=*/false,
                     nlohmann::ordered_json::error_handler_t::replace);
  }
  std::string line = absl::StrCat("time=", time);
  for (const auto& [key, value] : fields_.items()) {
    if (key == "time") continue;
    absl::StrAppend(&line, " ", key, "=", TextValue(value));
  }
  return line;
}

void WriteLog(LogFormat format, const LogRecord& record) {
  std::string line = record.Format(format, absl::Now());
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

std::string CutForLog(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  // Back up over UTF-8 continuation bytes (10xxxxxx) so no character is
  // split.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(text.substr(0, cut), "...(", text.size() - cut, " more bytes)");
}

}  // namespace phasor::server
