// phasor-server's own log lines: one record per line on stderr, either
// logfmt-style text or one JSON object per line (--log_format=json), with
// the same keys in both:
//
//   time=2026-12-01T06:30:00.123456Z level=info event=serving grpc_port=50051
//   {"time":"2026-12-01T06:30:00.123456Z","level":"info","event":"serving",...}
//
// Every record has time (RFC 3339, UTC, microseconds), level (info, warning,
// error) and event (what happened: config, serving, call, draining, stopped,
// start_failed, library); the other keys depend on the event and are listed
// in docs/DEPLOY.md. Values a client chose (status messages, peers) are cut
// to a bound by CutForLog before they are added, so a client cannot make a
// line long; JSON replaces invalid UTF-8 with U+FFFD and text escapes
// control characters and non-ASCII bytes, so a line is always one line.
//
// Thread-safety: a LogRecord belongs to one thread; WriteLog may be called
// from any thread (one fwrite per line, and stdio locks the stream, so lines
// never interleave).
#ifndef PHASOR_SERVER_LOGGING_H_
#define PHASOR_SERVER_LOGGING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace phasor::server {

enum class LogFormat { kText, kJson };
enum class LogLevel { kInfo, kWarning, kError };

// "text" or "json"; false for anything else.
bool ParseLogFormat(absl::string_view text, LogFormat* format);
absl::string_view LogFormatName(LogFormat format);

class LogRecord final {
 public:
  LogRecord(LogLevel level, absl::string_view event);

  LogRecord& Add(absl::string_view key, absl::string_view value);
  LogRecord& Add(absl::string_view key, const char* value);
  LogRecord& Add(absl::string_view key, const std::string& value);
  LogRecord& Add(absl::string_view key, int64_t value);
  LogRecord& Add(absl::string_view key, int value);
  LogRecord& Add(absl::string_view key, double value);
  LogRecord& Add(absl::string_view key, bool value);
  LogRecord& Add(absl::string_view key, const std::vector<std::string>& values);

  // The line without its newline.
  std::string Format(LogFormat format, absl::Time now) const;

 private:
  // Insertion-ordered, so time, level and event come first and the other
  // keys in the order they were added.
  nlohmann::ordered_json fields_;
};

// Writes record.Format(format, absl::Now()) and a newline to stderr.
void WriteLog(LogFormat format, const LogRecord& record);

// `text` if it is at most `max_bytes` long; otherwise its first bytes (never
// splitting a UTF-8 sequence) and "...(N more bytes)".
std::string CutForLog(absl::string_view text, size_t max_bytes);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_LOGGING_H_
