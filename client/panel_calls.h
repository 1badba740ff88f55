// File: client/panel_calls.h
//
// EncoderClient::EncodeObservationsPanel's engine: a panel of any size in
// sub-calls that fit the message limits, sent concurrently over one
// channel and joined into the response of one EncodeObservations call with
// the whole panel, bytewise (the plan and its invariants:
// client/panel_split.h; the bytes: client/panel_wire.h; errors in the
// panel's numbering: client/panel_errors.h).
//
// One attempt: a zero-row call learns the feature width F and dtype and the
// response's fixed part; a panel that fits one call goes as one call;
// otherwise the plan's pieces go with at most PanelOptions::max_in_flight
// in flight, a continuing chunk once its predecessor has returned the state
// it continues from, each piece's features written into its rows of the
// joined tensor as it arrives. When the server refuses a piece as too large
// (RESOURCE_EXHAUSTED: its limits are below the client's), the panel is sent
// again in pieces of half the size, down to kMinCallBytes.
//
// Thread-safety: EncodePanel may be called from many threads at once with
// the same PanelChannel; each call waits for its own sub-calls.
#ifndef PHASOR_CLIENT_PANEL_CALLS_H_
#define PHASOR_CLIENT_PANEL_CALLS_H_

#include <cstdint>
#include <functional>
#include <memory>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "phasor/v1/encoder.pb.h"

namespace phasor {

// PanelOptions::max_call_bytes when it is 0: max_message_bytes / 2.
int64_t DefaultCallBytes(int64_t max_message_bytes);

// How EncoderClient::EncodeObservationsPanel splits a panel.
struct PanelOptions {
  // Sub-calls in flight at once on the client's channel. More overlap the
  // server's work with the transfers; each holds one sub-request and its
  // response in memory (at most max_call_bytes each). Default 4.
  int max_in_flight = 4;
  // Largest request or response one sub-call may carry, bytes; 0 = half
  // the client's max_message_bytes (DefaultCallBytes). Lower values split
  // more finely (more calls in flight for a panel that would fit in one
  // call). Keep it at or below
  // the server's --max_message_bytes too: the client cannot see that limit
  // (a panel the server refuses as too large, RESOURCE_EXHAUSTED, is sent
  // again in calls of half the size, down to 64 KiB).
  int64_t max_call_bytes = 0;
  // Largest feature tensor one sub-call may return, elements: the server's
  // default --max_elements_per_request. Matters for 16-bit outputs, whose
  // messages hold twice the elements of float32 ones.
  int64_t max_call_elements = int64_t{1} << 24;
};

// What EncodeObservationsPanel did, for tests and logs.
struct PanelStats {
  // Calls that carried rows (1 when the panel went in one piece), in the
  // last attempt.
  int64_t calls = 0;
  // Attempts the server refused as too large before the last one.
  int64_t retries = 0;
  // Series cut into consecutive chunks joined by their state.
  int64_t series_split = 0;
  // The zero-row call that learnt the feature width F (0 or 1).
  int64_t probe_calls = 0;
};

namespace panel {

// The smallest sub-call size tried when the server's limits are below the
// client's, bytes.
inline constexpr int64_t kMinCallBytes = int64_t{64} << 10;

// How sub-calls reach the server: the client's channel and its per-call
// setup. Every function must be safe to call from several threads at once.
struct PanelChannel {
  std::shared_ptr<grpc::Channel> channel;
  // The client's message limit, bytes (for DefaultCallBytes).
  int64_t max_message_bytes = 0;
  // Sets one call's deadline and credentials.
  std::function<void(grpc::ClientContext*)> prepare_context;
  // A failed call's status as the client reports it.
  std::function<absl::Status(const grpc::Status&)> from_grpc_status;
  // One EncodeObservations call with the whole request: for a panel that
  // fits one call or that the client cannot cut.
  std::function<absl::StatusOr<v1::EncodeObservationsResponse>(
      const v1::EncodeObservationsRequest&)>
      encode_whole;
};

// EncoderClient::EncodeObservationsPanel (see its comment in
// client/encoder_client.h). `stats` may be null.
absl::StatusOr<v1::EncodeObservationsResponse> EncodePanel(
    const PanelChannel& channel, const v1::EncodeObservationsRequest& request,
    const PanelOptions& options, PanelStats* stats);

}  // namespace panel
}  // namespace phasor

#endif  // PHASOR_CLIENT_PANEL_CALLS_H_
