#include "client/cli/common.h"

#include <cstdint>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/tensor_io.h"
#include "core/base/status_macros.h"

ABSL_FLAG(std::string, target, "localhost:50051",
          "Server address: host:port, dns:///host:port (with "
          "--load_balancing_policy=round_robin for a headless Service), or "
          "unix:/path");
ABSL_FLAG(int64_t, deadline_ms, 30000,
          "Deadline of each call in milliseconds (of the whole stream for "
          "encode-observations --stream)");
ABSL_FLAG(int64_t, max_message_bytes, int64_t{64} << 20,
          "Largest message sent or received, bytes; phasor-server's default "
          "too. Environment: PHASOR_MAX_MESSAGE_BYTES (the flag wins)");
ABSL_FLAG(bool, tls, false,
          "Use TLS with the system roots (implied by --tls_ca, --tls_cert)");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA bundle that signed the server's certificate (turns on TLS)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate chain, for servers that require mTLS");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_server_name, "",
          "Server name to verify when it differs from the --target host");
ABSL_FLAG(std::string, token_file, "",
          "File whose first line is the bearer token the server expects");
ABSL_FLAG(std::string, load_balancing_policy, "",
          "gRPC load-balancing policy, e.g. round_robin (default pick_first)");

ABSL_FLAG(std::string, out, "",
          "Write the main result to this file (.npy, otherwise CSV) instead "
          "of printing a table");
ABSL_FLAG(int32_t, max_rows, 16, "Rows shown in printed tables");
ABSL_FLAG(int32_t, max_columns, 8, "Columns shown in printed tables");
ABSL_FLAG(int32_t, precision, 6, "Significant digits in printed tables");

namespace phasor::cli {

absl::StatusOr<ClientOptions> ClientOptionsFromFlags() {
  ClientOptions options;
  options.target = absl::GetFlag(FLAGS_target);
  const int64_t deadline_ms = absl::GetFlag(FLAGS_deadline_ms);
  if (deadline_ms <= 0) {
    return absl::InvalidArgumentError("--deadline_ms: must be positive");
  }
  options.deadline = absl::Milliseconds(deadline_ms);
  const int64_t max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  if (max_message_bytes <= 0 || max_message_bytes > INT32_MAX) {
    return absl::InvalidArgumentError(
        "--max_message_bytes: must be in [1, 2147483647]");
  }
  options.max_message_bytes = static_cast<int>(max_message_bytes);
  options.use_tls = absl::GetFlag(FLAGS_tls);
  options.tls_ca_file = absl::GetFlag(FLAGS_tls_ca);
  options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  options.load_balancing_policy = absl::GetFlag(FLAGS_load_balancing_policy);
  const std::string token_file = absl::GetFlag(FLAGS_token_file);
  if (!token_file.empty()) {
    PHASOR_ASSIGN_OR_RETURN(options.bearer_token, ReadTokenFile(token_file));
  }
  return options;
}

absl::StatusOr<v1::Tensor> ReadInput(absl::string_view flag,
                                     const std::string& path) {
  auto tensor = ReadTensorFile(path);
  if (!tensor.ok()) {
    return absl::Status(tensor.status().code(),
                        absl::StrCat("--", flag, ": ",
                                     tensor.status().message()));
  }
  return tensor;
}

std::string OutFlag() { return absl::GetFlag(FLAGS_out); }

absl::Status Emit(const v1::Tensor& tensor, absl::string_view title,
                  const std::string& path) {
  if (!path.empty()) {
    PHASOR_RETURN_IF_ERROR(WriteTensorFile(tensor, path));
    std::cerr << "wrote " << title << " " << DTypeString(tensor.dtype())
              << " " << ShapeString(tensor) << " to " << path << "\n";
    return absl::OkStatus();
  }
  TableOptions table;
  table.max_rows = absl::GetFlag(FLAGS_max_rows);
  table.max_columns = absl::GetFlag(FLAGS_max_columns);
  table.precision = absl::GetFlag(FLAGS_precision);
  std::cout << title << ": " << FormatTensorTable(tensor, table);
  return absl::OkStatus();
}

std::string DescribeError(const absl::Status& status) {
  std::string text = absl::StrCat(absl::StatusCodeToString(status.code()),
                                  ": ", status.message());
  for (const FieldViolation& violation : FieldViolationsOf(status)) {
    if (absl::StrContains(status.message(), violation.field)) continue;
    absl::StrAppend(&text, "\n  ", violation.field, ": ",
                    violation.description);
  }
  return text;
}

}  // namespace phasor::cli
