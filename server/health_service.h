// HealthService: grpc.health.v1.Health (Check and Watch) as the gRPC health
// checking protocol specifies it (grpc/doc/health-checking.md), with one
// thing gRPC's built-in service lacks: Shutdown() ends every open Watch.
//
// Client-side health checking keeps one Watch open per subchannel for as long
// as the channel lives. With the built-in service such a call only ends when
// Server::Shutdown's grace runs out, so one idle watcher stretched every
// drain to the full grace. Here Shutdown() sends NOT_SERVING to every
// watcher, then finishes each Watch with UNAVAILABLE ("draining"), which the
// protocol tells clients to retry with backoff, against another replica.
//
// Check on an unknown service is NOT_FOUND; Watch on one sends
// SERVICE_UNKNOWN and stays open, as the protocol says. Service names are
// never stored from requests: the set of known names is the server's own, so
// a client cannot grow it.
//
// Thread-safety: all methods may be called from any thread.
#ifndef PHASOR_SERVER_HEALTH_SERVICE_H_
#define PHASOR_SERVER_HEALTH_SERVICE_H_

#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace phasor::server {

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  HealthService() = default;
  HealthService(const HealthService&) = delete;
  HealthService& operator=(const HealthService&) = delete;

  // Sets `service`'s status ("" is the server as a whole) and tells its
  // watchers. Ignored after Shutdown.
  void SetServingStatus(const std::string& service, bool serving);

  // Every known service becomes NOT_SERVING, and every Watch, open now or
  // started later, ends with UNAVAILABLE once that has been sent.
  // Idempotent.
  void Shutdown();

  grpc::ServerUnaryReactor* Check(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request,
      grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class WatchReactor;

  ServingStatus StatusOf(const std::string& service) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OnDone of a watcher: it is about to delete itself.
  void Unregister(WatchReactor* watcher) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, ServingStatus> statuses_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<WatchReactor*> watchers_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace phasor::server

#endif  // PHASOR_SERVER_HEALTH_SERVICE_H_
