#include "server/grpc_status.h"

#include <optional>
#include <string>

#include "core/errors.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace phasor::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const auto code = static_cast<grpc::StatusCode>(status.code());
  std::string message(status.message());
  const std::optional<std::string> field = FieldPathOf(status);
  if (!field) return grpc::Status(code, message);

  google::rpc::BadRequest bad_request;
  google::rpc::BadRequest::FieldViolation* violation =
      bad_request.add_field_violations();
  violation->set_field(*field);
  // The message already reads "<field>: <description>"; the violation keeps
  // only the description.
  absl::string_view description = status.message();
  const std::string prefix = *field + ": ";
  if (description.substr(0, prefix.size()) == prefix) {
    description.remove_prefix(prefix.size());
  }
  violation->set_description(std::string(description));

  google::rpc::Status rpc_status;
  rpc_status.set_code(static_cast<int>(status.code()));
  rpc_status.set_message(message);
  rpc_status.add_details()->PackFrom(bad_request);
  return grpc::Status(code, message, rpc_status.SerializeAsString());
}

}  // namespace phasor::server
