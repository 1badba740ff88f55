// EncoderClient: a small typed C++ client for phasor.v1.Encoder.
//
// One method per RPC, each bounded by a deadline (ClientOptions::deadline,
// 30 s by default; a call that overruns it fails with DEADLINE_EXCEEDED, and
// the server stops work on it). Errors come back as absl::Status with the
// gRPC code unchanged (absl's codes are gRPC's) and the server's message,
// which names the offending field ("spec.rope.rotary_dim: must be even").
// When the server attached a google.rpc.BadRequest, the serialized
// google.rpc.Status rides along as the payload kGrpcStatusDetailsPayload;
// FieldViolationsOf() decodes it.
//
// Channel: plaintext by default; TLS when any TLS option is set (server
// roots from tls_ca_file, else the system roots); mutual TLS when
// tls_cert_file and tls_key_file are set too. A bearer token is sent as the
// "authorization: Bearer <token>" header on every Encoder call — also over
// plaintext, which only makes sense on loopback or inside a trusted network.
// Message limits apply to both directions and default to 64 MiB, as the
// server's --max_message_bytes does. A call refused by a message limit says
// whose limit it was (this client's or the server's) and what raises it.
//
// For a Kubernetes headless Service use a "dns:///" target with
// load_balancing_policy = "round_robin": the channel then spreads calls over
// every pod address instead of pinning one connection.
//
// Losing a replica loses no call: the channel's default service config
// (kDefaultServiceConfig) retries a phasor.v1.Encoder call that fails with
// UNAVAILABLE or CANCELLED — a replica draining or gone — up to 5 attempts with
// exponential backoff, and round_robin sends the retry to another replica.
// Every Encoder RPC is a pure function of its request, so a retry is safe.
// On top of that gRPC's transparent retries (on by default since gRPC 1.40;
// Debian 12 ships 1.51) resend calls that never reached a server's handler.
//
// Thread-safety: an EncoderClient is safe to use from many threads at once;
// calls share one channel (HTTP/2 multiplexes them).
#ifndef PHASOR_CLIENT_ENCODER_CLIENT_H_
#define PHASOR_CLIENT_ENCODER_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
// PanelOptions, PanelStats and DefaultCallBytes (EncodeObservationsPanel).
#include "client/panel_calls.h"
// kGrpcStatusDetailsPayload (FieldViolationsOf).
#include "client/status_details.h"
// generated::kServiceConfigJson: client/service_config.json, embedded.
#include "phasor/service_config_json.h"
#include "phasor/v1/encoder.grpc.pb.h"
#include "phasor/v1/encoder.pb.h"

namespace phasor {

// client/shared_memory_session.h.
class SharedMemorySession;
struct SharedMemorySessionOptions;

// The default service config of Phasor's clients: client/service_config.json,
// which the Python and Node clients load too, embedded at build time
// (client/CMakeLists.txt; tests/e2e/test_service_config.py checks that all
// three see the file):
//  - retryPolicy on every phasor.v1.Encoder method: up to 5 attempts,
//    backoff 0.1 s doubling to at most 1 s (±jitter, gRPC's A6), on
//    UNAVAILABLE — a replica that is shutting down, gone, or unreachable —
//    CANCELLED: a server that is shutting down cancels the calls its
//    transport had received but no handler had started (docs/DEPLOY.md,
//    Shutdown). A call this client cancels is never retried, so CANCELLED
//    from the server means exactly that. And RESOURCE_EXHAUSTED, for a
//    server whose memory budget is in use by other calls
//    (server/memory_budget.h): the server marks every other
//    RESOURCE_EXHAUSTED — a limit a retry cannot fix — with
//    grpc-retry-pushback-ms -1, which stops gRPC from retrying it. Other
//    codes are answers and are not retried. Health calls are not retried:
//    they report on the replica they reach. Like any gRPC retry, only a
//    request within the channel's retry buffer (256 KiB by default) is
//    sent again.
//  - retryThrottling: retries stop while more than half of a 100-token
//    budget is spent on failures (each failure costs 1, each success gives
//    0.1 back), so a fleet-wide outage does not multiply the load by 5.
//  - healthCheckConfig: with round_robin, each connection watches
//    grpc.health.v1 for "phasor.v1.Encoder", so a draining replica (which
//    turns NOT_SERVING at SIGTERM) stops receiving calls at once. A server
//    without the health service is treated as healthy.
// gRPC's service config format: github.com/grpc/grpc/blob/master/doc/service_config.md;
// retries: gRFC A6 (client-side retries).
inline constexpr absl::string_view kDefaultServiceConfig =
    generated::kServiceConfigJson;

struct ClientOptions {
  // gRPC target: "host:port", "dns:///name:port", "unix:/path".
  std::string target = "localhost:50051";
  // Time limit of every call; for EncodeObservationsStream, of the whole
  // stream. Must be positive.
  absl::Duration deadline = absl::Seconds(30);
  // Largest message sent or received, bytes; phasor-server's default too.
  // (gRPC's own default is 4 MiB.)
  int max_message_bytes = 64 << 20;

  // TLS. Setting any of these switches the channel to TLS.
  bool use_tls = false;
  // PEM CA bundle that signed the server certificate; empty = system roots.
  std::string tls_ca_file;
  // PEM client certificate chain and key, for servers that require mTLS.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Expected server name when it differs from the target host (tests, IPs).
  std::string tls_server_name;

  // Bearer token for servers started with --auth_token_file; empty = none.
  std::string bearer_token;
  // gRPC load-balancing policy, e.g. "round_robin"; empty = pick_first.
  std::string load_balancing_policy;
  // The channel's default service config (JSON, gRPC's service config
  // format), used unless the name resolver supplies one. The default
  // retries UNAVAILABLE; empty = none (no retry policy, no client-side
  // health checking).
  std::string service_config_json = std::string(kDefaultServiceConfig);
};

// grpc.health.v1 serving states, numbered as in the health protocol.
enum class ServingStatus {
  kUnknown = 0,
  kServing = 1,
  kNotServing = 2,
  kServiceUnknown = 3,
};
absl::string_view ServingStatusName(ServingStatus status);

// One google.rpc.BadRequest field violation.
struct FieldViolation {
  std::string field;
  std::string description;
};
// The BadRequest violations carried by `status`, if any.
std::vector<FieldViolation> FieldViolationsOf(const absl::Status& status);

// The first line of the file, without surrounding whitespace. An empty
// token is INVALID_ARGUMENT; a missing file NOT_FOUND.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

class EncoderClient final {
 public:
  // Builds the channel described by `options` (reads the TLS files). The
  // channel connects lazily: an unreachable server shows up as UNAVAILABLE
  // on the first call.
  static absl::StatusOr<std::unique_ptr<EncoderClient>> Create(
      const ClientOptions& options);
  // Uses an existing channel; only `deadline` and `bearer_token` of
  // `options` apply.
  EncoderClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options);

  EncoderClient(const EncoderClient&) = delete;
  EncoderClient& operator=(const EncoderClient&) = delete;

  absl::StatusOr<v1::EncodePositionsResponse> EncodePositions(
      const v1::EncodePositionsRequest& request) const;
  absl::StatusOr<v1::ApplyRopeResponse> ApplyRope(
      const v1::ApplyRopeRequest& request) const;
  absl::StatusOr<v1::RopeTablesResponse> RopeTables(
      const v1::RopeTablesRequest& request) const;
  absl::StatusOr<v1::AlibiBiasResponse> AlibiBias(
      const v1::AlibiBiasRequest& request) const;
  absl::StatusOr<v1::EncodeObservationsResponse> EncodeObservations(
      const v1::EncodeObservationsRequest& request) const;
  // EncodeObservations for a panel of any size: the same response as one
  // EncodeObservations call with the whole panel, bytewise, without the
  // message limit. When the request or its response would exceed
  // max_call_bytes, the panel is cut at series boundaries into sub-panels
  // (a series too large for one call alone is cut into consecutive chunks,
  // each continued from the state the previous chunk returned), sent
  // concurrently over this client's channel with at most max_in_flight in
  // flight, and the features (in row order), states and series offsets are
  // joined. The feature width F is learnt from one zero-row call first.
  //
  // `request` is a panel (observations.series_offsets set) or a single
  // series; for a single series the response carries `state`, as
  // EncodeObservations' does. A request the client cannot cut (malformed
  // offsets or row tensors) is sent as it is, so the server's error names
  // the field. The first failing sub-call's error is returned, its message
  // prefixed with the series range it covered and its field violations
  // (FieldViolationsOf) in the whole panel's numbering: series, and rows
  // within a series cut into chunks. Calls still in flight are cancelled.
  // Every sub-call has the client's deadline.
  absl::StatusOr<v1::EncodeObservationsResponse> EncodeObservationsPanel(
      const v1::EncodeObservationsRequest& request,
      const PanelOptions& panel = PanelOptions(),
      PanelStats* stats = nullptr) const;
  // Sends `chunks` over one EncodeObservationsStream and hands each response
  // to `on_response`, in order, as it arrives. A non-OK return from
  // `on_response` cancels the stream and is returned. Requests are written
  // from a second thread while this one reads, so a long series never
  // stalls on flow control.
  absl::Status EncodeObservationsStream(
      absl::Span<const v1::EncodeObservationsRequest> chunks,
      const std::function<absl::Status(const v1::EncodeObservationsResponse&)>&
          on_response) const;
  absl::StatusOr<v1::DescribeResponse> Describe(
      const v1::DescribeRequest& request) const;
  absl::StatusOr<v1::ListProfilesResponse> ListProfiles() const;
  // UNIMPLEMENTED unless the server runs with --enable_echo.
  absl::StatusOr<v1::EchoResponse> Echo(const v1::EchoRequest& request) const;

  // grpc.health.v1.Health/Check. `service` "" asks about the server as a
  // whole, "phasor.v1.Encoder" about the encoder. A service the server does
  // not know comes back as NOT_FOUND.
  absl::StatusOr<ServingStatus> CheckHealth(absl::string_view service) const;

  // A SharedMemorySession (client/shared_memory_session.h) on this
  // client's channel, deadline and bearer token: ApplyRope and panels of a
  // profile with their tensors in POSIX shared memory, for a client on the
  // server's host. INVALID_ARGUMENT naming the option when `options` is
  // malformed; the server is first called by the session's first call.
  absl::StatusOr<std::unique_ptr<SharedMemorySession>> SharedMemory() const;
  absl::StatusOr<std::unique_ptr<SharedMemorySession>> SharedMemory(
      const SharedMemorySessionOptions& options) const;

  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  // Deadline and credentials for one call.
  void PrepareContext(grpc::ClientContext* context) const;

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Encoder::Stub> stub_;
  ClientOptions options_;
};

}  // namespace phasor

#endif  // PHASOR_CLIENT_ENCODER_CLIENT_H_
