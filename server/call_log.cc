#include "server/call_log.h"

#include <chrono>
#include <cstdint>
#include <string>

#include <grpcpp/server_context.h>

namespace phasor::server {
namespace {

class CallLogInterceptor final : public grpc::experimental::Interceptor {
 public:
  CallLogInterceptor(CallLog* log, grpc::experimental::ServerRpcInfo* info)
      : log_(log),
        info_(info),
        method_(info->method() != nullptr ? info->method() : "unknown") {}

  ~CallLogInterceptor() override {
    // Torn down without a status (the server stopped under the call): the
    // context may be gone already, so no peer.
    if (started_ && !finished_) {
      log_->Record(method_, grpc::StatusCode::CANCELLED, "unknown", Elapsed(),
                   "call ended without a status (server shutting down)");
    }
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      started_ = true;
      start_ = std::chrono::steady_clock::now();
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        started_ && !finished_) {
      finished_ = true;
      const grpc::Status status = methods->GetSendStatus();
      // peer() allocates: OK calls pay for it only with the access log on.
      const bool may_log = !status.ok() || log_->access_log();
      log_->Record(method_, status.error_code(),
                   may_log ? info_->server_context()->peer() : std::string(), Elapsed(),
                   status.error_message());
    }
    methods->Proceed();
  }

 private:
  absl::Duration Elapsed() const {
    return absl::FromChrono(std::chrono::steady_clock::now() - start_);
  }

  CallLog* log_;
  grpc::experimental::ServerRpcInfo* info_;
  // The registered method's name, which outlives the call (the destructor
  // runs while ServerRpcInfo itself is being destroyed).
  const char* method_;
  bool started_ = false;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
};

class CallLogInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CallLogInterceptorFactory(CallLog* log) : log_(log) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return log_->logs_anything() ? new CallLogInterceptor(log_, info) : nullptr;
  }

 private:
  CallLog* log_;
};

LogLevel LevelOf(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return LogLevel::kInfo;
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::DATA_LOSS:
      return LogLevel::kError;
    default:
      return LogLevel::kWarning;
  }
}

}  // namespace

absl::string_view StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

CallLog::CallLog(const CallLogOptions& options) : options_(options) {
  if (options.failed_calls_per_second > 0) {
    limiter_ = std::make_unique<LogRateLimiter>(
        options.failed_call_burst, absl::Seconds(1.0 / options.failed_calls_per_second));
  }
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
CallLog::NewInterceptorFactory() {
  return std::make_unique<CallLogInterceptorFactory>(this);
}

void CallLog::Record(absl::string_view method, grpc::StatusCode code,
                     absl::string_view peer, absl::Duration duration,
                     absl::string_view message) {
  const bool failed = code != grpc::StatusCode::OK;
  int64_t suppressed = 0;
  if (options_.access_log) {
    // Every call, none dropped.
  } else if (!failed || limiter_ == nullptr || !limiter_->Allow(absl::Now(), &suppressed)) {
    return;
  }
  LogRecord record(LevelOf(code), "call");
  record.Add("method", CutForLog(method, kMaxLoggedBytes))
      .Add("code", StatusCodeName(code))
      .Add("peer", CutForLog(peer, kMaxLoggedBytes))
      .Add("duration_seconds", absl::ToDoubleSeconds(duration));
  if (failed) record.Add("message", CutForLog(message, kMaxLoggedBytes));
  if (!options_.access_log) record.Add("suppressed", suppressed);
  WriteLog(options_.format, record);
}

}  // namespace phasor::server
