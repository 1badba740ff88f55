// Pieces every phasor-client subcommand shares: the client built from the
// connection flags, input tensors from files, and output to a file or a
// readable table.
//
// Connection flags (defined in common.cc): --target, --deadline_ms,
// --max_message_bytes, --tls, --tls_ca, --tls_cert, --tls_key,
// --tls_server_name, --token_file, --load_balancing_policy.
// Output flags: --out, --max_rows, --max_columns, --precision.
#ifndef PHASOR_CLIENT_CLI_COMMON_H_
#define PHASOR_CLIENT_CLI_COMMON_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/encoder_client.h"
#include "phasor/v1/encoder.pb.h"

namespace phasor::cli {

// ClientOptions from the connection flags (reads --token_file).
absl::StatusOr<ClientOptions> ClientOptionsFromFlags();

// The tensor in `path` (.npy or CSV); `flag` names the flag in errors.
absl::StatusOr<v1::Tensor> ReadInput(absl::string_view flag,
                                     const std::string& path);

// Writes `tensor` to `path` (.npy, otherwise CSV) and says so on stderr, or,
// when `path` is empty, prints `title` and the tensor as a table on stdout.
absl::Status Emit(const v1::Tensor& tensor, absl::string_view title,
                  const std::string& path);
// The --out flag's value.
std::string OutFlag();

// "INVALID_ARGUMENT: spec.positional.sinusoidal.dim: must be even", plus
// one line per BadRequest violation the message does not already name.
std::string DescribeError(const absl::Status& status);

}  // namespace phasor::cli

#endif  // PHASOR_CLIENT_CLI_COMMON_H_
