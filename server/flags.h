// phasor-server's command-line flags (server/flags.cc; `phasor-server
// --help` lists them with their defaults). Every flag defined in flags.cc has
// an environment twin, PHASOR_<FLAG NAME IN CAPITALS> (e.g.
// PHASOR_GRPC_ADDRESS, PHASOR_LOG_FORMAT); the command line wins over the
// environment, which wins over the default. --version prints the version
// line of common/binary_info.h.
//
// Only the phasor-server binary links this file; the library takes
// ServerOptions and has no flags of its own.
#ifndef PHASOR_SERVER_FLAGS_H_
#define PHASOR_SERVER_FLAGS_H_

#include "server/options.h"

namespace phasor::server {

// Answers --help and --version (and exits 0), applies PHASOR_* environment
// variables to the flags, then parses argv. Exits 2 with a message, as
// absl::ParseCommandLine does, on a bad value.
void ParseFlagsAndEnvironment(int argc, char** argv);

ServerOptions ServerOptionsFromFlags();

}  // namespace phasor::server

#endif  // PHASOR_SERVER_FLAGS_H_
