// ServerOptions: everything phasor-server can be configured with. The binary
// fills it from flags (each with a PHASOR_* environment twin, see flags.h);
// tests and embedders fill it directly.
#ifndef PHASOR_SERVER_OPTIONS_H_
#define PHASOR_SERVER_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "server/logging.h"
#include "server/shared_memory.h"

namespace phasor::server {

struct ServerOptions {
  // host:port for gRPC. Port 0 picks a free port (see PhasorServer::grpc_port).
  std::string grpc_address = "0.0.0.0:50051";
  // host:port for the Prometheus /metrics endpoint; empty disables it. Port
  // 0 picks a free port.
  std::string metrics_address = "0.0.0.0:9464";
  // Largest request and response message, bytes. 64 MiB fits real tensors
  // (a 100,000-row panel of 21 float32 features is 8 MiB); the clients in
  // client/ default to the same. gRPC's own default is 4 MiB: other clients
  // must raise theirs to match.
  int64_t max_message_bytes = int64_t{64} << 20;
  // Largest number of tensor elements one request may send or produce. 16M
  // float32 elements = 64 MiB, far above the default message limit; it
  // bounds the work a single tiny request (e.g. a huge position range) can
  // ask for.
  int64_t max_elements_per_request = int64_t{1} << 24;
  // Bytes that calls in flight may hold together (request, response and
  // scratch; server/memory_budget.h). 0 = automatic: 0.6 of the container's
  // cgroup memory limit, or of physical memory without one
  // (server/memory_limit.h). A call that does not fit waits up to
  // memory_wait for others to finish, then gets RESOURCE_EXHAUSTED.
  int64_t memory_budget_bytes = 0;
  // How long a call may wait for the memory budget (never past its own
  // deadline). Long enough for a burst of large calls to drain through a
  // budget that holds a few of them at once; short enough that a client
  // hears RESOURCE_EXHAUSTED and retries on another replica well within a
  // typical 30 s deadline. Zero: refuse at once.
  absl::Duration memory_wait = absl::Seconds(5);
  // OpenMP thread budget for one large request; 0 = hardware concurrency.
  // Small requests always run serially (core/parallel.h).
  int threads = 0;
  // Text-format phasor.v1.ProfileSet file; empty = no profiles.
  std::string profiles_path;
  // Built-in holiday calendars (phasor.v1.BuiltinHolidayCalendars text
  // file); empty = the build or install location next to the binary
  // (DefaultBuiltinHolidaysPath), or none when that file is absent.
  std::string builtin_holidays_path;
  // PEM files. With cert and key the server speaks TLS; adding a client CA
  // makes it require and verify client certificates (mTLS).
  std::string tls_cert_path;
  std::string tls_key_path;
  std::string tls_client_ca_path;
  // File holding a bearer token; when set, every Encoder call must send
  // "authorization: Bearer <token>". Health checks stay open for probes.
  std::string auth_token_path;
  // On SIGTERM/SIGINT: time in-flight calls get to finish before they are
  // cancelled.
  absl::Duration shutdown_grace = absl::Seconds(10);
  // Connections older than this get a GOAWAY, so clients reconnect and
  // re-resolve (spreading load over replicas the autoscaler added). Zero or
  // less: never.
  absl::Duration max_connection_age = absl::Minutes(5);
  // How long calls still open on such a connection may run before it is
  // closed under them. Zero or less: no limit, so a long-lived
  // EncodeObservationsStream runs until its client ends it (unary calls end
  // by their deadlines).
  absl::Duration max_connection_age_grace = absl::ZeroDuration();
  // Serve the Echo RPC (a transport baseline for benchmarks).
  bool enable_echo = false;
  // Serve the Open Inference Protocol (inference.GRPCInferenceService,
  // server/inference_service.h) on the gRPC port: every profile is a model.
  // On by default so KServe/Triton clients work out of the box; off leaves
  // only phasor.v1.Encoder (and health, reflection) on the port.
  bool enable_inference_protocol = true;
  // Triton's system shared-memory extension on the Open Inference Protocol
  // (server/shared_memory.h): off by default; its key prefix and bounds.
  SharedMemoryOptions shared_memory;

  // Logging (server/logging.h, server/call_log.h): the format of every line
  // phasor-server writes, whether every call is logged (the access log) or
  // only failed ones, and the rate limit on failed-call lines.
  LogFormat log_format = LogFormat::kText;
  bool access_log = false;
  int failed_call_log_burst = 20;
  // <= 0: failed calls are not logged (the access log still logs them).
  double failed_call_logs_per_second = 1.0;
};

}  // namespace phasor::server

#endif  // PHASOR_SERVER_OPTIONS_H_
