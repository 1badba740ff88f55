// phasor-server's command-line flags. Each flag has an environment twin,
// PHASOR_<FLAG NAME IN CAPITALS> (e.g. PHASOR_GRPC_ADDRESS); the command line
// wins over the environment, which wins over the default.
//
//   --grpc_address             PHASOR_GRPC_ADDRESS             0.0.0.0:50051
//   --metrics_address          PHASOR_METRICS_ADDRESS          0.0.0.0:9464 ("" = off)
//   --max_message_bytes        PHASOR_MAX_MESSAGE_BYTES        4194304
//   --max_elements_per_request PHASOR_MAX_ELEMENTS_PER_REQUEST 16777216
//   --threads                  PHASOR_THREADS                  0 (= all cores)
//   --profiles                 PHASOR_PROFILES                 ""
//   --tls_cert / --tls_key     PHASOR_TLS_CERT / PHASOR_TLS_KEY
//   --tls_client_ca            PHASOR_TLS_CLIENT_CA            (mTLS when set)
//   --auth_token_file          PHASOR_AUTH_TOKEN_FILE
//   --shutdown_grace_seconds   PHASOR_SHUTDOWN_GRACE_SECONDS   10
//   --enable_echo              PHASOR_ENABLE_ECHO              false
//
// Only the phasor-server binary links this file; the library takes
// ServerOptions and has no flags of its own.
#ifndef PHASOR_SERVER_FLAGS_H_
#define PHASOR_SERVER_FLAGS_H_

#include "server/options.h"

namespace phasor::server {

// Applies PHASOR_* environment variables to the flags, then parses argv.
// Exits with a message, as absl::ParseCommandLine does, on a bad value.
void ParseFlagsAndEnvironment(int argc, char** argv);

ServerOptions ServerOptionsFromFlags();

}  // namespace phasor::server

#endif  // PHASOR_SERVER_FLAGS_H_
