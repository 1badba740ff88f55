// phasor-server: see server/server.h for what it serves and server/flags.h
// for its flags and their PHASOR_* environment twins.
#include "server/flags.h"
#include "server/server.h"

int main(int argc, char** argv) {
  phasor::server::ParseFlagsAndEnvironment(argc, argv);
  return phasor::server::RunServer(phasor::server::ServerOptionsFromFlags());
}
