// What a Phasor binary says about itself: its version line (--version) and
// its flags with their defaults and environment twins (--help). Shared by
// phasor-server and phasor-client; it knows Abseil flags only (no gRPC, no
// protobuf), so the client links it without the server.
//
// The version is the project version from CMake's project(VERSION), the git
// revision of the checkout CMake configured (re-read whenever HEAD moves;
// empty when the source is not a git checkout, e.g. a Docker build context
// without .git, unless -DPHASOR_GIT_REVISION= names one) and the build type.
//
// Thread-safety: everything here is meant for main() before any thread
// starts; the accessors are safe from any thread.
#ifndef PHASOR_COMMON_BINARY_INFO_H_
#define PHASOR_COMMON_BINARY_INFO_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace phasor {

// "0.1.0".
absl::string_view ProjectVersion();
// 12 hex digits of the configured commit, or "" when unknown.
absl::string_view GitRevision();
// CMAKE_BUILD_TYPE at configure time ("Release", "Debug", ...).
absl::string_view BuildType();

// "phasor-server 0.1.0 (git 0123456789ab, Release build)"; "(git revision
// unknown, ...)" when not built from a checkout.
std::string VersionLine(absl::string_view program);

// A section of --help: the flags defined in source files whose path ends in
// one of `files` (e.g. "server/flags.cc"), under `title`; when `names` is
// not empty, only the flags named there (e.g. one subcommand's).
struct FlagGroup {
  std::string title;
  std::vector<std::string> files;
  std::vector<std::string> names = {};
};
// The environment variable that sets flag `name`, or "" for none.
using EnvTwin = std::function<std::string(absl::string_view name)>;

// Every flag of `groups`, sorted by name within its group:
//
//   --max_message_bytes=67108864  (env PHASOR_MAX_MESSAGE_BYTES)
//       Largest request/response message in bytes. ...
//
// The value shown is the flag's default (strings quoted).
std::string FlagsHelp(const std::vector<FlagGroup>& groups, const EnvTwin& env_twin);

// Makes absl's own usage flags agree with the above: --version prints
// VersionLine(program), and --helpshort/--helpfull list the files of
// `groups`. Call before absl::ParseCommandLine.
void ConfigureAbslUsage(absl::string_view program, const std::vector<FlagGroup>& groups);

// True when argv asks for help (--help, -help, -h, --help=true) before any
// "--". absl's --help lists only flags defined in a file named after the
// program (phasor-server.cc, main.cc), which none of Phasor's are, so the
// binaries answer it themselves with FlagsHelp.
bool WantsHelp(int argc, char** argv);

}  // namespace phasor

#endif  // PHASOR_COMMON_BINARY_INFO_H_
