#include "server/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <exception>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/binary_info.h"
#include "google/protobuf/descriptor.h"
#include "inference/grpc_service.pb.h"
#include "phasor/v1/encoder.pb.h"


namespace phasor::server {
namespace {

// gRPC code names as go-grpc-prometheus spells them (Go's codes.Code.String()).
constexpr std::array<const char*, 17> kCodeNames = {
    "OK",         "Canceled",          "Unknown",
    "InvalidArgument", "DeadlineExceeded", "NotFound",
    "AlreadyExists",   "PermissionDenied", "ResourceExhausted",
    "FailedPrecondition", "Aborted",     "OutOfRange",
    "Unimplemented",   "Internal",         "Unavailable",
    "DataLoss",        "Unauthenticated"};

constexpr std::array<const char*, kNumEncodedKinds> kKindNames = {
    "sinusoidal", "learned", "rope", "rope_tables",
    "alibi",      "observations", "describe",    "relative_bias"};

// Latency buckets in seconds: 100 µs (a tiny call on loopback) to 10 s (a
// full-size message on a slow link).
prometheus::Histogram::BucketBoundaries HandlingBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   5.0,  10.0};
}

const char* RpcTypeName(bool client_streaming, bool server_streaming) {
  if (client_streaming && server_streaming) return "bidi_stream";
  if (client_streaming) return "client_stream";
  if (server_streaming) return "server_stream";
  return "unary";
}

// One call's view: records start, messages, and the final code.
class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(ServerMetrics* metrics,
                     ServerMetrics::MethodMetrics* method)
      : metrics_(metrics), method_(method) {
    metrics_->CallCreated();
  }

  ~MetricsInterceptor() override {
    // A call torn down without sending a status (e.g. the server shut down
    // under it) still ends; count it as cancelled so in-flight returns to 0.
    if (started_ && !finished_) Finish(grpc::StatusCode::CANCELLED);
    metrics_->CallDestroyed();
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      started_ = true;
      start_ = std::chrono::steady_clock::now();
      method_->started->Increment();
      metrics_->in_flight().Increment();
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_MESSAGE)) {
      method_->msg_received->Increment();
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      method_->msg_sent->Increment();
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS) &&
        started_ && !finished_) {
      Finish(methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  void Finish(grpc::StatusCode code) {
    finished_ = true;
    const int index = static_cast<int>(code);
    if (index >= 0 && index < static_cast<int>(method_->handled.size())) {
      method_->handled[index]->Increment();
    }
    const std::chrono::duration<double> elapsed =
        std::chrono::steady_clock::now() - start_;
    method_->handling_seconds->Observe(elapsed.count());
    metrics_->in_flight().Decrement();
  }

  ServerMetrics* metrics_;
  ServerMetrics::MethodMetrics* method_;
  bool started_ = false;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
};

class MetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(ServerMetrics* metrics)
      : metrics_(metrics) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MetricsInterceptor(metrics_, &metrics_->ForMethod(info->method()));
  }

 private:
  ServerMetrics* metrics_;
};

}  // namespace

ServerMetrics::ServerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()) {
  started_family_ = &prometheus::BuildCounter()
                         .Name("grpc_server_started_total")
                         .Help("Total number of RPCs started on the server.")
                         .Register(*registry_);
  handled_family_ = &prometheus::BuildCounter()
                         .Name("grpc_server_handled_total")
                         .Help("Total number of RPCs completed on the server, "
                               "regardless of success or failure.")
                         .Register(*registry_);
  handling_family_ = &prometheus::BuildHistogram()
                          .Name("grpc_server_handling_seconds")
                          .Help("Histogram of response latency (seconds) of "
                                "gRPC calls handled by the server.")
                          .Register(*registry_);
  received_family_ = &prometheus::BuildCounter()
                          .Name("grpc_server_msg_received_total")
                          .Help("Total number of RPC stream messages received "
                                "on the server.")
                          .Register(*registry_);
  sent_family_ = &prometheus::BuildCounter()
                      .Name("grpc_server_msg_sent_total")
                      .Help("Total number of gRPC stream messages sent by the "
                            "server.")
                      .Register(*registry_);
  request_bytes_family_ = &prometheus::BuildCounter()
                               .Name("phasor_request_bytes_total")
                               .Help("Serialized request bytes received by "
                                     "Encoder methods.")
                               .Register(*registry_);
  response_bytes_family_ = &prometheus::BuildCounter()
                                .Name("phasor_response_bytes_total")
                                .Help("Serialized response bytes sent by "
                                      "Encoder methods.")
                                .Register(*registry_);
  memory_refused_family_ = &prometheus::BuildCounter()
                                .Name("phasor_memory_refused_total")
                                .Help("Encoder calls refused memory: reason busy (the "
                                      "memory budget was in use by other calls) or "
                                      "too_large (more than the whole budget).")
                                .Register(*registry_);
  refused_family_ = &prometheus::BuildCounter()
                         .Name("phasor_calls_refused_total")
                         .Help("Encoder calls answered UNAVAILABLE without being run: "
                               "reason shutdown (the call reached the service after "
                               "the drain began).")
                         .Register(*registry_);
  auto& encoded = prometheus::BuildCounter()
                      .Name("phasor_encoded_values_total")
                      .Help("Output values computed, by encoder family.")
                      .Register(*registry_);
  for (int i = 0; i < kNumEncodedKinds; ++i) {
    encoded_values_[i] = &encoded.Add({{"kind", kKindNames[i]}});
  }
  in_flight_ = &prometheus::BuildGauge()
                    .Name("phasor_in_flight_requests")
                    .Help("RPCs started and not yet finished.")
                    .Register(*registry_)
                    .Add({});
  memory_budget_ = &prometheus::BuildGauge()
                        .Name("phasor_memory_budget_bytes")
                        .Help("Bytes that calls in flight may hold together "
                              "(request, response and scratch).")
                        .Register(*registry_)
                        .Add({});
  memory_in_use_ = &prometheus::BuildGauge()
                        .Name("phasor_memory_in_use_bytes")
                        .Help("Bytes of the memory budget that calls in flight hold.")
                        .Register(*registry_)
                        .Add({});
  prometheus::BuildGauge()
      .Name("phasor_build_info")
      .Help("Build information; the value is always 1.")
      .Register(*registry_)
      .Add({{"version", std::string(ProjectVersion())},
            {"revision", GitRevision().empty() ? "unknown" : std::string(GitRevision())},
            {"grpc_version", grpc::Version()}})
      .Set(1);

  // The Encoder's methods, and the Open Inference Protocol's
  // (server/inference_service.h), come from their descriptors, so the table
  // cannot drift from the protos. No short name is in both services, so one
  // map holds both.
  const google::protobuf::ServiceDescriptor* encoder =
      phasor::v1::EncodePositionsRequest::descriptor()->file()->FindServiceByName(
          "Encoder");
  const google::protobuf::ServiceDescriptor* inference =
      inference::ModelInferRequest::descriptor()->file()->FindServiceByName(
          "GRPCInferenceService");
  for (const google::protobuf::ServiceDescriptor* service : {encoder, inference}) {
    for (int i = 0; i < service->method_count(); ++i) {
      const google::protobuf::MethodDescriptor* method = service->method(i);
      AddMethod(service->full_name(), method->name(),
                RpcTypeName(method->client_streaming(), method->server_streaming()));
      encoder_methods_[method->name()] =
          methods_[absl::StrCat("/", service->full_name(), "/", method->name())].get();
    }
  }
  AddMethod("grpc.health.v1.Health", "Check", "unary");
  AddMethod("grpc.health.v1.Health", "Watch", "server_stream");
  AddMethod("grpc.reflection.v1alpha.ServerReflection", "ServerReflectionInfo",
            "bidi_stream");
  AddMethod("", "", "unknown");
}

namespace {

// One TCP connection to 127.0.0.1:port, closed at once; failures ignored.
void Knock(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  close(fd);
}

}  // namespace

ServerMetrics::~ServerMetrics() {
  if (exposer_ == nullptr) return;
  // civetweb's listener thread polls in 2-second quanta and sees the stop
  // flag only between them, so stopping the exposer took up to 2 s of every
  // shutdown. A connection arriving while it stops ends the poll at once.
  std::atomic<bool> stopped{false};
  std::thread waker([this, &stopped] {
    while (!stopped.load()) {
      Knock(port_);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  exposer_.reset();
  stopped.store(true);
  waker.join();
}

void ServerMetrics::AddMethod(absl::string_view service,
                              absl::string_view method,
                              absl::string_view type) {
  const std::string service_label = service.empty() ? "unknown" : std::string(service);
  const std::string method_label = method.empty() ? "unknown" : std::string(method);
  const prometheus::Labels labels = {{"grpc_service", service_label},
                                     {"grpc_method", method_label},
                                     {"grpc_type", std::string(type)}};
  auto metrics = std::make_unique<MethodMetrics>();
  metrics->started = &started_family_->Add(labels);
  for (size_t code = 0; code < kCodeNames.size(); ++code) {
    prometheus::Labels with_code = labels;
    with_code["grpc_code"] = kCodeNames[code];
    metrics->handled[code] = &handled_family_->Add(with_code);
  }
  metrics->handling_seconds = &handling_family_->Add(labels, HandlingBuckets());
  metrics->msg_received = &received_family_->Add(labels);
  metrics->msg_sent = &sent_family_->Add(labels);
  if (service.rfind("phasor.", 0) == 0 || service.rfind("inference.", 0) == 0) {
    metrics->request_bytes =
        &request_bytes_family_->Add({{"grpc_method", method_label}});
    metrics->response_bytes =
        &response_bytes_family_->Add({{"grpc_method", method_label}});
    for (const MemoryRefusal refusal : {MemoryRefusal::kBusy, MemoryRefusal::kTooLarge}) {
      metrics->memory_refused[static_cast<int>(refusal)] = &memory_refused_family_->Add(
          {{"grpc_method", method_label},
           {"reason", std::string(MemoryRefusalName(refusal))}});
    }
    metrics->refused_shutdown =
        &refused_family_->Add({{"grpc_method", method_label}, {"reason", "shutdown"}});
  }
  const std::string key =
      service.empty() ? std::string() : absl::StrCat("/", service, "/", method);
  methods_[key] = std::move(metrics);
}

absl::Status ServerMetrics::Expose(const std::string& address) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("metrics_address: cannot listen on ", address, ": ", e.what()));
  }
  exposer_->RegisterCollectable(registry_);
  exposer_->RegisterCollectable(process_);
  const std::vector<int> ports = exposer_->GetListeningPorts();
  port_ = ports.empty() ? 0 : ports.front();
  return absl::OkStatus();
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
ServerMetrics::NewInterceptorFactory() {
  return std::make_unique<MetricsInterceptorFactory>(this);
}

ServerMetrics::MethodMetrics& ServerMetrics::ForMethod(
    absl::string_view full_method) {
  auto it = methods_.find(full_method);
  if (it == methods_.end()) it = methods_.find("");
  return *it->second;
}

void ServerMetrics::RecordEncodedValues(EncodedKind kind, int64_t count) {
  encoded_values_[static_cast<int>(kind)]->Increment(static_cast<double>(count));
}

void ServerMetrics::RecordPayloadBytes(absl::string_view method,
                                       int64_t request_bytes,
                                       int64_t response_bytes) {
  auto it = encoder_methods_.find(method);
  if (it == encoder_methods_.end()) return;
  it->second->request_bytes->Increment(static_cast<double>(request_bytes));
  it->second->response_bytes->Increment(static_cast<double>(response_bytes));
}

void ServerMetrics::RecordMemoryRefusal(absl::string_view method, MemoryRefusal refusal) {
  auto it = encoder_methods_.find(method);
  if (it == encoder_methods_.end()) return;
  prometheus::Counter* counter = it->second->memory_refused[static_cast<int>(refusal)];
  if (counter != nullptr) counter->Increment();
}

void ServerMetrics::RecordShutdownRefusal(absl::string_view method) {
  auto it = encoder_methods_.find(method);
  if (it == encoder_methods_.end()) return;
  it->second->refused_shutdown->Increment();
}

ServerMetrics::CallTotals ServerMetrics::Totals() const {
  // Counters hold doubles; every RPC counter counts whole calls.
  const auto count = [](const prometheus::Counter* counter) {
    return counter == nullptr ? int64_t{0} : static_cast<int64_t>(counter->Value());
  };
  CallTotals totals;
  for (const auto& [name, method] : methods_) {
    totals.started += count(method->started);
    for (size_t code = 0; code < totals.handled.size(); ++code) {
      totals.handled[code] += count(method->handled[code]);
    }
    totals.refused_shutdown += count(method->refused_shutdown);
  }
  return totals;
}

}  // namespace phasor::server
