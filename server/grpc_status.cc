#include "server/grpc_status.h"

#include <cassert>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "server/memory_budget.h"

namespace phasor::server {

std::string CapUtf8(absl::string_view text, size_t max_bytes) {
  assert(max_bytes >= 32);
  if (text.size() <= max_bytes) return std::string(text);
  // "...(" + up to 20 digits + " more bytes)" is at most 36 bytes; reserve
  // the note's exact length for this cut.
  size_t cut = max_bytes;
  std::string note;
  for (;;) {
    note = absl::StrCat("...(", text.size() - cut, " more bytes)");
    if (cut + note.size() <= max_bytes) break;
    cut = max_bytes > note.size() ? max_bytes - note.size() : 0;
  }
  const absl::string_view kept = Utf8Prefix(text, cut);
  return absl::StrCat(kept, "...(", text.size() - kept.size(), " more bytes)");
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const auto code = static_cast<grpc::StatusCode>(status.code());
  const std::string message = CapUtf8(status.message(), kMaxStatusMessageBytes);
  // The violation is built from the error's data (core/errors.h): the
  // path's segments in their wire form and the description.
  const std::optional<FieldPath> path = FieldPathSegmentsOf(status);
  const std::optional<std::string> description = FieldDescriptionOf(status);
  if (!path || !description) return grpc::Status(code, message);

  google::rpc::BadRequest bad_request;
  google::rpc::BadRequest::FieldViolation* violation =
      bad_request.add_field_violations();
  violation->set_field(CapUtf8(FormatFieldPath(*path), kMaxFieldPathBytes));
  violation->set_description(CapUtf8(*description, kMaxDescriptionBytes));

  google::rpc::Status rpc_status;
  rpc_status.set_code(static_cast<int>(status.code()));
  rpc_status.set_message(message);
  rpc_status.add_details()->PackFrom(bad_request);
  return grpc::Status(code, message, rpc_status.SerializeAsString());
}

std::optional<std::string> RetryPushback(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kResourceExhausted) return std::nullopt;
  if (MemoryRefusalOf(status) == MemoryRefusal::kBusy) return std::nullopt;
  return "-1";
}

}  // namespace phasor::server
