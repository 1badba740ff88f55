// Prometheus metrics of phasor-server, exported in the text format on their
// own HTTP port (prometheus-cpp's pull Exposer).
//
// RPC metrics follow go-grpc-prometheus names and labels, so the usual
// dashboards work unchanged:
//   grpc_server_started_total{grpc_service,grpc_method,grpc_type}
//   grpc_server_handled_total{grpc_service,grpc_method,grpc_type,grpc_code}
//   grpc_server_handling_seconds{grpc_service,grpc_method,grpc_type} histogram
//   grpc_server_msg_received_total / grpc_server_msg_sent_total
// Domain metrics, in base units:
//   phasor_encoded_values_total{kind}       output values computed
//   phasor_request_bytes_total{grpc_method} serialized request bytes of
//                                           every call, failed ones too
//   phasor_response_bytes_total{grpc_method} serialized bytes of the
//                                           responses sent (OK calls; each
//                                           stream message)
//   phasor_in_flight_requests               calls started and not finished
//   phasor_memory_budget_bytes              the memory budget of calls in
//                                           flight (server/memory_budget.h)
//   phasor_memory_in_use_bytes              bytes of it calls hold now
//   phasor_memory_refused_total{grpc_method,reason}
//                                           calls refused memory: reason
//                                           "busy" (the budget was in use
//                                           by other calls until the wait
//                                           ended) or "too_large" (more
//                                           than the whole budget)
//   phasor_calls_refused_total{grpc_method,reason}
//                                           Encoder calls answered
//                                           UNAVAILABLE without being run:
//                                           reason "shutdown" (the call
//                                           reached the service after the
//                                           drain began, docs/DEPLOY.md)
//   phasor_build_info{version,revision,grpc_version} 1
// Process metrics (server/process_metrics.h): process_cpu_seconds_total,
// process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds, process_start_time_seconds.
// Label values are bounded: methods come from a fixed table (anything else is
// "unknown"), codes from the 17 gRPC codes, kinds from an enum.
//
// RPC metrics are recorded by a server interceptor, so every method of every
// service (health, reflection) is counted the same way.
//
// Thread-safety: all Record* methods and the interceptor may be used from any
// thread concurrently. Counters for known methods are created up front, so
// the per-call path does no label lookups under a lock.
#ifndef PHASOR_SERVER_METRICS_H_
#define PHASOR_SERVER_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/support/server_interceptor.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/memory_budget.h"
#include "server/process_metrics.h"

namespace phasor::server {

// What phasor_encoded_values_total counts, by encoder family.
enum class EncodedKind {
  kSinusoidal,
  kLearned,
  kRope,
  kRopeTables,
  kAlibi,
  kObservations,
  kDescribe,
  kRelativeBias,
};
inline constexpr int kNumEncodedKinds = 8;

class ServerMetrics final {
 public:
  ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;
  ~ServerMetrics();

  // Serves GET /metrics on `address` (host:port; port 0 picks one).
  absl::Status Expose(const std::string& address);
  // The port /metrics listens on, or 0 when not exposed.
  int port() const { return port_; }

  // For ServerBuilder::experimental().SetInterceptorCreators(). The factory
  // refers to this object, which must outlive the server.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
  NewInterceptorFactory();

  void RecordEncodedValues(EncodedKind kind, int64_t count);
  // `method` is the short Encoder or inference.GRPCInferenceService method
  // name ("ApplyRope", "ModelInfer"); other names are ignored, so label
  // values stay those services' methods.
  // `response_bytes` is 0 when no response was sent.
  void RecordPayloadBytes(absl::string_view method, int64_t request_bytes,
                          int64_t response_bytes);
  void SetMemoryBudget(int64_t bytes) { memory_budget_->Set(static_cast<double>(bytes)); }
  void SetMemoryInUse(int64_t bytes) { memory_in_use_->Set(static_cast<double>(bytes)); }
  // `method` as for RecordPayloadBytes.
  void RecordMemoryRefusal(absl::string_view method, MemoryRefusal refusal);
  // `method` as for RecordPayloadBytes: a call answered UNAVAILABLE, not
  // run, because the server is shutting down.
  void RecordShutdownRefusal(absl::string_view method);

  // The RPC counters summed over every method, for the record that ends a
  // drain (RunServer): what the calls came to between two snapshots.
  struct CallTotals {
    int64_t started = 0;
    std::array<int64_t, 17> handled{};  // Indexed by grpc code.
    int64_t refused_shutdown = 0;
  };
  CallTotals Totals() const;

  // Calls the server holds now: created (a method matched) and not yet
  // destroyed, which gRPC does only after the call's last operation, its
  // status included, has completed. Zero means no connection carries
  // anything the server still owes (PhasorServer::Shutdown relies on it).
  int64_t calls_alive() const { return calls_alive_.load(std::memory_order_acquire); }
  void CallCreated() { calls_alive_.fetch_add(1, std::memory_order_acq_rel); }
  void CallDestroyed() { calls_alive_.fetch_sub(1, std::memory_order_acq_rel); }

  prometheus::Registry& registry() { return *registry_; }

  // Per-method counters, created once (public for the interceptor).
  struct MethodMetrics {
    prometheus::Counter* started = nullptr;
    std::array<prometheus::Counter*, 17> handled{};  // Indexed by grpc code.
    prometheus::Histogram* handling_seconds = nullptr;
    prometheus::Counter* msg_received = nullptr;
    prometheus::Counter* msg_sent = nullptr;
    prometheus::Counter* request_bytes = nullptr;
    prometheus::Counter* response_bytes = nullptr;
    // Indexed by MemoryRefusal; Encoder methods only.
    std::array<prometheus::Counter*, 2> memory_refused{};
    // phasor_calls_refused_total{reason="shutdown"}; Encoder methods only.
    prometheus::Counter* refused_shutdown = nullptr;
  };
  // Metrics for a full method name ("/phasor.v1.Encoder/ApplyRope").
  MethodMetrics& ForMethod(absl::string_view full_method);
  prometheus::Gauge& in_flight() { return *in_flight_; }

 private:
  void AddMethod(absl::string_view service, absl::string_view method,
                 absl::string_view type);

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<ProcessCollector> process_ = std::make_shared<ProcessCollector>();
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;

  prometheus::Family<prometheus::Counter>* started_family_;
  prometheus::Family<prometheus::Counter>* handled_family_;
  prometheus::Family<prometheus::Histogram>* handling_family_;
  prometheus::Family<prometheus::Counter>* received_family_;
  prometheus::Family<prometheus::Counter>* sent_family_;
  prometheus::Family<prometheus::Counter>* request_bytes_family_;
  prometheus::Family<prometheus::Counter>* response_bytes_family_;
  prometheus::Family<prometheus::Counter>* memory_refused_family_;
  prometheus::Family<prometheus::Counter>* refused_family_;

  // Keyed by the full method name; "" holds the "unknown" bucket. Filled in
  // the constructor and never modified afterwards.
  absl::flat_hash_map<std::string, std::unique_ptr<MethodMetrics>> methods_;
  // Keyed by the short Encoder (and inference) method name; points into
  // methods_.
  absl::flat_hash_map<std::string, MethodMetrics*> encoder_methods_;
  std::array<prometheus::Counter*, kNumEncodedKinds> encoded_values_{};
  prometheus::Gauge* in_flight_;
  std::atomic<int64_t> calls_alive_{0};
  prometheus::Gauge* memory_budget_;
  prometheus::Gauge* memory_in_use_;
};

}  // namespace phasor::server

#endif  // PHASOR_SERVER_METRICS_H_
