// phasor-client: calls a running phasor-server from the command line.
//
//   phasor-client [flags] <command> [flags]
//
// Flags may come before or after the command. Exit status: 0 on success,
// 1 when the call (or reading/writing a file) fails, 2 on a usage error.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "client/cli/commands.h"
#include "client/cli/common.h"
#include "client/encoder_client.h"
#include "server/binary_info.h"

namespace phasor::cli {
namespace {

struct Command {
  absl::string_view name;
  absl::string_view summary;
  absl::Status (*run)(const EncoderClient& client);
};

// One entry per subcommand; new subcommands (e.g. a load generator) add a
// line here and a Run* function of their own.
constexpr Command kCommands[] = {
    {"encode-positions",
     "sinusoidal or learned encodings [N, dim] (--count/--positions, --dim)",
     &RunEncodePositions},
    {"apply-rope", "rotate --query (and --key) [T, H, D] with RoPE",
     &RunApplyRope},
    {"rope-tables", "RoPE cos/sin tables [N, rotary_dim/2] (--rotary_dim)",
     &RunRopeTables},
    {"alibi", "ALiBi slopes, and the bias with --q_len/--k_len",
     &RunAlibi},
    {"encode-observations",
     "time features of irregular observations (--stream to chunk)",
     &RunEncodeObservations},
    {"describe", "frequency ladder, unambiguous range, similarity curve",
     &RunDescribe},
    {"list-profiles", "the server's named encoder configurations",
     &RunListProfiles},
    {"health", "grpc.health.v1 status of the server or --service",
     &RunHealth},
};

std::string Usage() {
  std::string usage =
      "Calls a phasor-server.\n\n"
      "usage: phasor-client [flags] <command> [flags]\n\ncommands:\n";
  for (const Command& command : kCommands) {
    absl::StrAppend(&usage, absl::StrFormat("  %-20s %s\n", command.name,
                                            command.summary));
  }
  absl::StrAppend(
      &usage,
      "\nexamples:\n"
      "  phasor-client encode-positions --count 8 --dim 16\n"
      "  phasor-client encode-positions --count 4096 --dim 512 --out pe.npy\n"
      "  phasor-client apply-rope --query q.npy --key k.npy --out q_rot.npy "
      "--key_out k_rot.npy\n"
      "  phasor-client describe --dim 64\n"
      "  phasor-client health --service phasor.v1.Encoder\n"
      "\nConnection: --target, --deadline_ms, --max_message_bytes, --tls_ca, "
      "--tls_cert, --tls_key, --token_file. All flags: --help. Version: "
      "--version.");
  return usage;
}

// --help lists these files' flags; each command reads the command flags it
// needs (their help says which).
const std::vector<FlagGroup>& FlagGroups() {
  static const auto* groups = new std::vector<FlagGroup>{
      {"connection and output flags", {"client/cli/common.cc"}},
      {"command flags", {"client/cli/commands.cc"}}};
  return *groups;
}

// The one flag with an environment twin (see ApplyEnvironment).
std::string EnvTwinOf(absl::string_view name) {
  return name == "max_message_bytes" ? "PHASOR_MAX_MESSAGE_BYTES" : "";
}

// PHASOR_MAX_MESSAGE_BYTES, the variable that sets phasor-server's limit,
// sets the client's too unless --max_message_bytes is given: one setting for
// both ends of a shell or a pod.
bool ApplyEnvironment() {
  const char* value = std::getenv("PHASOR_MAX_MESSAGE_BYTES");
  if (value == nullptr) return true;
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag("max_message_bytes");
  std::string error;
  if (flag == nullptr || !flag->ParseFrom(value, &error)) {
    std::cerr << "phasor-client: PHASOR_MAX_MESSAGE_BYTES=" << value << ": " << error
              << "\n";
    return false;
  }
  return true;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(Usage());
  ConfigureAbslUsage("phasor-client", FlagGroups());
  if (WantsHelp(argc, argv)) {
    std::cout << VersionLine("phasor-client") << "\n\n"
              << Usage() << "\n" << FlagsHelp(FlagGroups(), EnvTwinOf);
    return 0;
  }
  if (!ApplyEnvironment()) return 2;
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() != 2) {
    std::cerr << Usage() << "\n";
    return 2;
  }
  const absl::string_view name = positional[1];
  if (name == "help") {
    std::cout << Usage() << "\n";
    return 0;
  }
  const Command* command = nullptr;
  for (const Command& candidate : kCommands) {
    if (candidate.name == name) command = &candidate;
  }
  if (command == nullptr) {
    std::cerr << "phasor-client: unknown command '" << name << "'\n\n"
              << Usage() << "\n";
    return 2;
  }

  auto options = ClientOptionsFromFlags();
  if (!options.ok()) {
    std::cerr << "phasor-client: " << DescribeError(options.status()) << "\n";
    return 2;
  }
  auto client = EncoderClient::Create(*options);
  if (!client.ok()) {
    std::cerr << "phasor-client: " << DescribeError(client.status()) << "\n";
    return 2;
  }
  const absl::Status status = command->run(**client);
  if (!status.ok()) {
    std::cerr << "phasor-client " << command->name << ": "
              << DescribeError(status) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace phasor::cli

int main(int argc, char** argv) { return phasor::cli::Main(argc, argv); }
