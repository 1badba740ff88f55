// The call log: a server interceptor that writes one "call" record
// (server/logging.h) per failed call, rate-limited, and optionally one per
// call (the access log).
//
//   level=warning event=call method=/phasor.v1.Encoder/EncodePositions
//     code=INVALID_ARGUMENT peer=ipv4:127.0.0.1:41234 duration_seconds=0.000113
//     message="spec.positional.sinusoidal.dim: must be even and > 0, got 7"
//     suppressed=0
//
// Failed calls (any code but OK) pass through one token bucket: `burst`
// records in a row, then `per_second`; the record that passes after a gap
// carries in `suppressed` how many were dropped since the previous one, so a
// client that fails on purpose cannot flood the log, and the count is not
// lost. Codes a client causes log at level warning; UNKNOWN, INTERNAL and
// DATA_LOSS (the server's fault) at error.
//
// With the access log on, every call is written (OK ones at info) and none
// is dropped: an operator who asks for it gets one line per call.
//
// Messages and peers are cut to kMaxLoggedBytes (a client chooses the bytes
// of both: error messages may quote its input).
//
// Thread-safety: the interceptors run on gRPC's threads concurrently; the
// only shared state is the rate limiter, which has its own mutex.
#ifndef PHASOR_SERVER_CALL_LOG_H_
#define PHASOR_SERVER_CALL_LOG_H_

#include <memory>
#include <optional>

#include <grpcpp/support/server_interceptor.h>
#include <grpcpp/support/status.h>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/log_limit.h"
#include "server/logging.h"

namespace phasor::server {

struct CallLogOptions {
  LogFormat format = LogFormat::kText;
  // Log every call, not only failed ones, without a rate limit.
  bool access_log = false;
  // Failed-call records in a row before the rate limit applies.
  int failed_call_burst = 20;
  // Failed-call records per second after the burst; <= 0 logs none.
  double failed_calls_per_second = 1.0;
};

class CallLog final {
 public:
  static constexpr size_t kMaxLoggedBytes = 256;

  explicit CallLog(const CallLogOptions& options);
  CallLog(const CallLog&) = delete;
  CallLog& operator=(const CallLog&) = delete;

  // For ServerBuilder::experimental().SetInterceptorCreators(); this object
  // must outlive the server. The factory creates no interceptor when there
  // is nothing to log.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
  NewInterceptorFactory();

  bool access_log() const { return options_.access_log; }
  bool logs_anything() const { return options_.access_log || limiter_ != nullptr; }

  // Writes the record for one finished call, if it is to be written.
  void Record(absl::string_view method, grpc::StatusCode code, absl::string_view peer,
              absl::Duration duration, absl::string_view message);

 private:
  const CallLogOptions options_;
  // Null when failed calls are not logged.
  std::unique_ptr<LogRateLimiter> limiter_;
};

// "INVALID_ARGUMENT" for grpc::StatusCode::INVALID_ARGUMENT.
absl::string_view StatusCodeName(grpc::StatusCode code);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_CALL_LOG_H_
