// The one conversion from absl::Status (what core/ and the server's own
// checks return) to grpc::Status (what goes on the wire).
//
// Codes map 1:1 (absl's codes are gRPC's). A status that carries a field path
// (core/errors.h) also gets a google.rpc.BadRequest detail with one field
// violation, serialized into a google.rpc.Status in grpc::Status's
// error_details, which gRPC sends as the "grpc-status-details-bin" trailer.
//
// Size: statuses travel in HTTP/2 trailers, and gRPC clients refuse metadata
// over 8 KiB by default (the call then fails with RESOURCE_EXHAUSTED "received
// initial metadata size exceeds limit", and a multi-megabyte trailer stalls
// the connection). Messages may quote client input, so every string is cut
// here, at a UTF-8 boundary with a note of how much was cut: the message to
// kMaxStatusMessageBytes, the violation's field path to kMaxFieldPathBytes and
// its description to kMaxDescriptionBytes. grpc-message is percent-encoded
// (a non-ASCII byte takes 3) and the details are base64 (4 per 3), so the
// worst case is about 1.5 KiB + 1.8 KiB of trailers.
//
// Thread-safety: pure functions.
#ifndef PHASOR_SERVER_GRPC_STATUS_H_
#define PHASOR_SERVER_GRPC_STATUS_H_

#include <cstddef>
#include <optional>
#include <string>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace phasor::server {

inline constexpr size_t kMaxStatusMessageBytes = 512;
inline constexpr size_t kMaxFieldPathBytes = 200;
inline constexpr size_t kMaxDescriptionBytes = 512;

grpc::Status ToGrpcStatus(const absl::Status& status);

// gRPC's retry pushback for a failed call: the value of the
// "grpc-retry-pushback-ms" trailer (gRFC A6, client-side retries), or none.
// Phasor's clients retry RESOURCE_EXHAUSTED (docs/DEPLOY.md, retries), so
// every RESOURCE_EXHAUSTED that a retry cannot fix — a request over the
// message or element limit, a call larger than the whole memory budget —
// carries "-1", which tells a gRPC client not to retry it. The one that a
// retry can fix, the memory budget in use by other calls
// (server/memory_budget.h, MemoryRefusal::kBusy), carries none, so the
// client's own backoff applies. Other codes carry none.
std::optional<std::string> RetryPushback(const absl::Status& status);
inline constexpr char kRetryPushbackKey[] = "grpc-retry-pushback-ms";

// `text` if it has at most `max_bytes` bytes; otherwise its longest prefix
// that ends on a UTF-8 character boundary and leaves room for a note
// "...(N more bytes)", followed by that note. The result never exceeds
// `max_bytes`. REQUIRES: max_bytes >= 32.
std::string CapUtf8(absl::string_view text, size_t max_bytes);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_GRPC_STATUS_H_
