// Rate limits for the log lines of the libraries the server links.
//
// gRPC (gpr_log) and protobuf (GOOGLE_LOG) log at ERROR level about things a
// client causes: a request whose string field holds invalid UTF-8, a
// malformed HTTP/2 frame. Printed one line per event, a client could fill the
// disk or the log pipeline at will. InstallLibraryLogLimits() routes both
// through one token bucket: bursts of up to `burst` lines pass, then one line
// per `interval`; lines dropped in between are counted, and the next line
// that passes carries their count in its "suppressed" field. FATAL lines
// always pass (the process ends after them). Lines are "library" records of
// server/logging.h, in the server's --log_format, their message cut to
// kMaxLibraryMessageBytes.
//
// Thread-safety: Install once, before serving (protobuf's SetLogHandler is
// not thread-safe); the sinks themselves are safe from any thread.
#ifndef PHASOR_SERVER_LOG_LIMIT_H_
#define PHASOR_SERVER_LOG_LIMIT_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/logging.h"

namespace phasor::server {

// A token bucket: Allow() is true for at most `burst` calls in a row, then
// refills one call per `interval`. Counts what it refused since the last
// allowed call.
class LogRateLimiter final {
 public:
  LogRateLimiter(int burst, absl::Duration interval);

  // True when a line may be written now; `*suppressed` is then the number of
  // lines refused since the previous allowed one.
  bool Allow(absl::Time now, int64_t* suppressed) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const double burst_;
  const absl::Duration interval_;
  absl::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time last_refill_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t suppressed_ ABSL_GUARDED_BY(mu_) = 0;
};

inline constexpr size_t kMaxLibraryMessageBytes = 1024;

// Routes gRPC's and protobuf's log lines to stderr, as `format` records,
// through one LogRateLimiter(burst, interval). Defaults: 20 lines, then one
// per second.
void InstallLibraryLogLimits(LogFormat format, int burst = 20,
                             absl::Duration interval = absl::Seconds(1));

}  // namespace phasor::server

#endif  // PHASOR_SERVER_LOG_LIMIT_H_
