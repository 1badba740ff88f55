// PhasorServer: phasor-server as a library. Builds the gRPC server (Encoder
// service, grpc.health.v1, reflection, metrics interceptor), the Prometheus
// endpoint, TLS/mTLS credentials and bearer-token auth from ServerOptions.
// Tests and other programs start it in-process:
//
//   ServerOptions options;
//   options.grpc_address = "127.0.0.1:0";  // any free port
//   options.metrics_address = "";          // no /metrics
//   auto server = PhasorServer::Start(options);
//   ... grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->grpc_port()), ...)
//   (*server)->Shutdown(absl::Seconds(5));
//
// Health: "" and "phasor.v1.Encoder" are SERVING once Start returns; Shutdown
// first marks them NOT_SERVING and ends open health watches and idle
// EncodeObservationsStream calls (server/health_service.h,
// EncoderService::Drain), then stops accepting calls and gives the calls in
// flight `grace` to finish before cancelling them. Unary calls that reach
// the service after that point (they were queued for one of gRPC's threads)
// are answered UNAVAILABLE without being run. An idle server therefore stops
// at once, whatever the grace.
//
// Thread-safety: Shutdown and Wait may be called from any thread; Shutdown
// is idempotent.
#ifndef PHASOR_SERVER_SERVER_H_
#define PHASOR_SERVER_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/blocking_pool.h"
#include "server/call_log.h"
#include "server/encoder_service.h"
#include "server/health_service.h"
#include "server/inference_service.h"
#include "server/memory_budget.h"
#include "server/memory_release.h"
#include "server/metrics.h"
#include "server/options.h"
#include "server/profiles.h"
#include "server/shared_memory.h"

namespace phasor::server {

class PhasorServer final {
 public:
  // Loads profiles and credentials, binds both ports and starts serving.
  // Errors: bad profiles, unreadable TLS/token files, ports in use.
  static absl::StatusOr<std::unique_ptr<PhasorServer>> Start(
      const ServerOptions& options);

  PhasorServer(const PhasorServer&) = delete;
  PhasorServer& operator=(const PhasorServer&) = delete;
  // Shuts down with no grace if still running.
  ~PhasorServer();

  int grpc_port() const { return grpc_port_; }
  // 0 when metrics are disabled.
  int metrics_port() const { return metrics_ != nullptr ? metrics_->port() : 0; }
  // The memory budget of calls in flight (server/memory_budget.h) and where
  // its size came from (server/memory_limit.h ChooseMemoryBudget).
  const MemoryBudget& memory_budget() const { return *memory_budget_; }
  const std::string& memory_budget_source() const { return memory_budget_source_; }
  const ProfileRegistry& profiles() const { return *profiles_; }
  const ServerMetrics& metrics() const { return *metrics_; }
  // Triton's system shared-memory regions (empty and disabled unless
  // ServerOptions::shared_memory.enabled).
  const SharedMemoryRegistry& shared_memory() const { return *shared_memory_; }

  // Marks health NOT_SERVING, stops accepting calls, waits up to `grace` for
  // the calls in flight, cancels what remains, and returns once the server
  // has stopped: every call has ended and every connection is closed.
  void Shutdown(absl::Duration grace);
  // Blocks until the server has shut down.
  void Wait();

 private:
  PhasorServer() = default;

  std::unique_ptr<ServerMetrics> metrics_;
  // Before the service, which takes shares of it; the releaser watches it.
  std::unique_ptr<MemoryBudget> memory_budget_;
  std::string memory_budget_source_;
  std::unique_ptr<IdleMemoryReleaser> memory_releaser_;
  // Runs the calls that wait for the budget (server/blocking_pool.h).
  std::unique_ptr<BlockingPool> memory_wait_pool_;
  std::unique_ptr<CallLog> call_log_;
  std::unique_ptr<ProfileRegistry> profiles_;
  std::unique_ptr<EncoderService> service_;
  // Shared-memory regions (unmapped when the server is destroyed); before
  // the inference service, which refers to it.
  std::unique_ptr<SharedMemoryRegistry> shared_memory_;
  // The Open Inference Protocol; null when disabled.
  std::unique_ptr<InferenceService> inference_;
  std::unique_ptr<HealthService> health_;
  std::unique_ptr<grpc::Server> server_;
  int grpc_port_ = 0;
  std::once_flag shutdown_once_;
};

// The "config" log record: the effective configuration of a started server
// (bound ports, limits, TLS mode, whether a token is required, the profiles
// loaded). File paths are logged, never their contents.
LogRecord ConfigurationRecord(const ServerOptions& options, const PhasorServer& server);

// phasor-server's life: start, log the configuration, serve until SIGTERM or
// SIGINT, then Shutdown(options.shutdown_grace), log the "stopped" record
// (what the drain did with the calls, docs/DEPLOY.md) and end the process
// with status 0 at once, without gRPC's library teardown (see RunServer).
// Returns 1 when the server could not start. The signals are taken with
// sigwait on this thread (blocked in every other thread), so no work happens
// inside a signal handler.
int RunServer(const ServerOptions& options);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_SERVER_H_
