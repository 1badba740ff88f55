// phasor-client's subcommands, one function each. Every function builds its
// request from flags and input files, makes one call (or one stream) through
// `client`, and writes the result to --out or prints it as a table. A non-OK
// return is printed by main() and makes the process exit 1.
#ifndef PHASOR_CLIENT_CLI_COMMANDS_H_
#define PHASOR_CLIENT_CLI_COMMANDS_H_

#include "absl/status/status.h"
#include "client/encoder_client.h"

namespace phasor::cli {

absl::Status RunEncodePositions(const EncoderClient& client);
absl::Status RunApplyRope(const EncoderClient& client);
absl::Status RunRopeTables(const EncoderClient& client);
absl::Status RunAlibi(const EncoderClient& client);
absl::Status RunEncodeObservations(const EncoderClient& client);
absl::Status RunDescribe(const EncoderClient& client);
absl::Status RunListProfiles(const EncoderClient& client);
// Exits non-zero unless the server (or --service) is SERVING.
absl::Status RunHealth(const EncoderClient& client);

}  // namespace phasor::cli

#endif  // PHASOR_CLIENT_CLI_COMMANDS_H_
