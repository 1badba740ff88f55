// phasor-client: calls a running phasor-server from the command line.
//
//   phasor-client [flags] <command> [flags]
//
// Flags may come before or after the command. `phasor-client --help` lists
// the commands and every flag; `phasor-client <command> --help` (or `help
// <command>`) what one command does and the flags it reads. Exit status: 0
// on success, 1 when the call (or reading/writing a file) fails, 2 on a
// usage error.
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "client/cli/commands.h"
#include "client/cli/infer_command.h"
#include "client/cli/common.h"
#include "client/encoder_client.h"
#include "common/binary_info.h"

namespace phasor::cli {
namespace {

struct Command {
  absl::string_view name;
  absl::string_view summary;
  absl::Status (*run)(const EncoderClient& client);
  // The flags of commands.cc and the output flags of common.cc that `run`
  // reads; `phasor-client <name> --help` lists them, then the connection
  // flags every command shares.
  absl::Span<const absl::string_view> flags;
};

// Each command's flags, as its Run* function reads them: inputs, the
// encoder (--profile, --spec or the shortcut flags), outputs.
constexpr absl::string_view kEncodePositionsFlags[] = {
    "positions", "start", "count", "step", "content", "content_scale",
    "profile", "spec", "dim", "base", "layout", "frequencies",
    "learned_table", "output_dtype", "out", "max_rows", "max_columns",
    "precision"};
constexpr absl::string_view kApplyRopeFlags[] = {
    "query", "key", "num_heads", "num_kv_heads", "positions", "start",
    "count", "step", "profile", "spec", "rotary_dim", "base", "layout",
    "scaling", "factor", "max_position_embeddings",
    "original_max_position_embeddings", "seq_len", "fold_attention_factor",
    "out", "key_out", "max_rows", "max_columns", "precision"};
constexpr absl::string_view kRopeTablesFlags[] = {
    "positions", "start", "count", "step", "profile", "spec", "rotary_dim",
    "base", "layout", "scaling", "factor", "max_position_embeddings",
    "original_max_position_embeddings", "seq_len", "fold_attention_factor",
    "output_dtype", "cos_out", "sin_out", "max_rows", "max_columns",
    "precision"};
constexpr absl::string_view kAlibiFlags[] = {
    "num_heads", "q_len", "k_len", "causal", "output_dtype", "out",
    "slopes_out", "max_rows", "max_columns", "precision"};
constexpr absl::string_view kEncodeObservationsFlags[] = {
    // One series from tensor files.
    "timestamps", "values", "mask", "event_times", "event_channels",
    "event_values", "num_channels", "channel_names", "content", "state",
    "state_out", "stream", "chunk_rows",
    // A panel from one CSV table.
    "observations_csv", "csv_layout", "series_column", "time_column",
    "time_zone_column", "series_offsets_out", "max_in_flight",
    "max_call_bytes",
    // Both.
    "time_unit", "profile", "spec", "output_dtype", "out", "max_rows",
    "max_columns", "precision"};
constexpr absl::string_view kDescribeFlags[] = {
    "profile", "spec", "dim", "base", "layout", "frequencies",
    "learned_table", "rotary_dim", "scaling", "factor",
    "max_position_embeddings", "original_max_position_embeddings", "seq_len",
    "fold_attention_factor", "num_offsets", "offset_step", "show_similarity",
    "out"};
constexpr absl::string_view kHealthFlags[] = {"service"};
constexpr absl::string_view kInferFlags[] = {"model", "model_version", "inputs", "outputs",
                                             "parameters", "max_rows", "max_columns",
                                             "precision"};

// One entry per subcommand; new subcommands (e.g. a load generator) add a
// line here and a Run* function of their own.
constexpr Command kCommands[] = {
    {"encode-positions",
     "sinusoidal or learned encodings [N, dim] (--count/--positions, --dim)",
     &RunEncodePositions, kEncodePositionsFlags},
    {"apply-rope", "rotate --query (and --key) [T, H, D] with RoPE",
     &RunApplyRope, kApplyRopeFlags},
    {"rope-tables", "RoPE cos/sin tables [N, rotary_dim/2] (--rotary_dim)",
     &RunRopeTables, kRopeTablesFlags},
    {"alibi", "ALiBi slopes, and the bias with --q_len/--k_len",
     &RunAlibi, kAlibiFlags},
    {"encode-observations",
     "time features of irregular observations (--stream to chunk)",
     &RunEncodeObservations, kEncodeObservationsFlags},
    {"describe", "frequency ladder, unambiguous range, similarity curve",
     &RunDescribe, kDescribeFlags},
    {"list-profiles", "the server's named encoder configurations",
     &RunListProfiles, {}},
    {"health", "grpc.health.v1 status of the server or --service",
     &RunHealth, kHealthFlags},
    {"infer", "Open Inference Protocol ModelInfer of --model, inputs from files",
     &RunInfer, kInferFlags},
};

// The connection flags a command's --help shows in full; the rest of
// common.cc's are named in one line.
constexpr absl::string_view kCommonFlags[] = {"target", "deadline_ms",
                                              "max_message_bytes"};

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
      "--tls_cert, --tls_key, --token_file. A command's flags: "
      "phasor-client <command> --help. All flags: --help. Version: "
      "--version.");
  return usage;
}

// --help lists these files' flags; each command reads the command flags its
// kCommands entry names (`<command> --help`).
const std::vector<FlagGroup>& FlagGroups() {
  static const auto* groups = new std::vector<FlagGroup>{
      {"connection and output flags", {"client/cli/common.cc"}},
      {"command flags", {"client/cli/commands.cc", "client/cli/infer_command.cc"}}};
  return *groups;
}

// The one flag with an environment twin (see ApplyEnvironment).
std::string EnvTwinOf(absl::string_view name) {
  return name == "max_message_bytes" ? "PHASOR_MAX_MESSAGE_BYTES" : "";
}

const Command* FindCommand(absl::string_view name) {
  for (const Command& command : kCommands) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

// The command named on a command line that asks for help: the first
// argument that is neither a flag nor the value of a flag given as
// "--name value" (bool flags take no separate value). nullptr for none.
const Command* CommandInArgs(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") return nullptr;
    if (!absl::ConsumePrefix(&arg, "-")) {
      if (const Command* command = FindCommand(arg)) return command;
      continue;
    }
    absl::ConsumePrefix(&arg, "-");
    if (arg.find('=') != absl::string_view::npos) continue;
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(arg);
    if (flag != nullptr && !flag->IsOfType<bool>()) ++i;  // Its value.
  }
  return nullptr;
}

// `phasor-client <command> --help`: what the command does, its flags, and
// the connection flags. 70 (EX_SOFTWARE) when the command table names a flag
// this binary does not define, which the end-to-end tests would catch.
int PrintCommandHelp(const Command& command) {
  std::vector<std::string> names;
  for (const absl::string_view name : command.flags) {
    if (absl::FindCommandLineFlag(name) == nullptr) {
      std::cerr << "phasor-client: the command table names --" << name
                << ", which is not a flag\n";
      return 70;
    }
    names.emplace_back(name);
  }
  const std::vector<std::string> files = {"client/cli/commands.cc",
                                          "client/cli/infer_command.cc",
                                          "client/cli/common.cc"};
  std::vector<FlagGroup> groups;
  if (!names.empty()) {
    groups.push_back({absl::StrCat(command.name, " flags"), files, names});
  }
  groups.push_back({"connection flags", files,
                    std::vector<std::string>(std::begin(kCommonFlags),
                                             std::end(kCommonFlags))});
  std::cout << VersionLine("phasor-client") << "\n\n"
            << "phasor-client " << command.name << ": " << command.summary
            << "\n\nusage: phasor-client [flags] " << command.name
            << " [flags]\n";
  if (names.empty()) {
    std::cout << "\n" << command.name << " takes no flags of its own.\n";
  }
  std::cout << FlagsHelp(groups, EnvTwinOf)
            << "\nAlso --tls, --tls_ca, --tls_cert, --tls_key, --tls_server_name,\n"
               "--token_file, --load_balancing_policy: phasor-client --help lists\n"
               "every flag.\n";
  return 0;
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
    if (const Command* command = CommandInArgs(argc, argv)) {
      return PrintCommandHelp(*command);
    }
    std::cout << VersionLine("phasor-client") << "\n\n"
              << Usage() << "\n" << FlagsHelp(FlagGroups(), EnvTwinOf);
    return 0;
  }
  if (!ApplyEnvironment()) return 2;
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() == 3 && absl::string_view(positional[1]) == "help") {
    if (const Command* command = FindCommand(positional[2])) {
      return PrintCommandHelp(*command);
    }
  }
  if (positional.size() != 2) {
    std::cerr << Usage() << "\n";
    return 2;
  }
  const absl::string_view name = positional[1];
  if (name == "help") {
    std::cout << Usage() << "\n";
    return 0;
  }
  const Command* command = FindCommand(name);
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
