#include "server/log_limit.h"

#include <grpc/support/log.h>

#include <algorithm>
#include <string>

#include "google/protobuf/stubs/logging.h"

namespace phasor::server {

LogRateLimiter::LogRateLimiter(int burst, absl::Duration interval)
    : burst_(std::max(1, burst)), interval_(interval), tokens_(burst_) {}

bool LogRateLimiter::Allow(absl::Time now, int64_t* suppressed) {
  absl::MutexLock lock(&mu_);
  if (last_refill_ != absl::InfinitePast() && interval_ > absl::ZeroDuration()) {
    tokens_ = std::min(burst_, tokens_ + absl::FDivDuration(now - last_refill_, interval_));
  }
  last_refill_ = now;
  if (tokens_ < 1.0) {
    ++suppressed_;
    return false;
  }
  tokens_ -= 1.0;
  *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

namespace {

// Set once by InstallLibraryLogLimits and never freed: the log callbacks may
// run on any thread until the process exits.
LogRateLimiter* g_limiter = nullptr;
LogFormat g_format = LogFormat::kText;

void WriteLine(bool always, const char* library, char severity, const char* file,
               int line, const char* message) {
  int64_t suppressed = 0;
  if (!g_limiter->Allow(absl::Now(), &suppressed) && !always) return;
  const LogLevel level = severity == 'I' || severity == 'D' ? LogLevel::kInfo
                         : severity == 'W'                  ? LogLevel::kWarning
                                                            : LogLevel::kError;
  LogRecord record(level, "library");
  record.Add("library", library)
      .Add("severity", std::string(1, severity))
      .Add("file", file == nullptr ? "" : file)
      .Add("line", line)
      .Add("message", CutForLog(message == nullptr ? "" : message, kMaxLibraryMessageBytes))
      .Add("suppressed", suppressed);
  WriteLog(g_format, record);
}

void GrpcLog(gpr_log_func_args* args) {
  const char severity = args->severity == GPR_LOG_SEVERITY_ERROR   ? 'E'
                        : args->severity == GPR_LOG_SEVERITY_INFO ? 'I'
                                                                  : 'D';
  WriteLine(/*always=*/false, "grpc", severity, args->file, args->line, args->message);
}

void ProtobufLog(google::protobuf::LogLevel level, const char* file, int line,
                 const std::string& message) {
  const bool fatal = level == google::protobuf::LOGLEVEL_FATAL;
  const char severity = fatal                                          ? 'F'
                        : level == google::protobuf::LOGLEVEL_ERROR   ? 'E'
                        : level == google::protobuf::LOGLEVEL_WARNING ? 'W'
                                                                      : 'I';
  WriteLine(/*always=*/fatal, "protobuf", severity, file, line, message.c_str());
}

}  // namespace

void InstallLibraryLogLimits(LogFormat format, int burst, absl::Duration interval) {
  if (g_limiter != nullptr) return;
  g_format = format;
  g_limiter = new LogRateLimiter(burst, interval);
  gpr_set_log_function(GrpcLog);
  google::protobuf::SetLogHandler(ProtobufLog);
}

}  // namespace phasor::server
