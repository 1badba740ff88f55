// phasor-server: see server/server.h for what it serves and server/flags.h
// for its flags and their PHASOR_* environment twins.
#include "absl/synchronization/mutex.h"
#include "server/flags.h"
#include "server/server.h"

int main(int argc, char** argv) {
  // Debian's Abseil is built with the mutex deadlock graph on: every
  // absl::Mutex lock (gRPC takes several per call) then updates a global
  // cycle-detection graph, about 5% of server CPU on small calls. The server
  // has no lock ordering that relies on that check, so it is switched off
  // before any thread starts.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  phasor::server::ParseFlagsAndEnvironment(argc, argv);
  return phasor::server::RunServer(phasor::server::ServerOptionsFromFlags());
}
