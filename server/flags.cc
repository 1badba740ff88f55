#include "server/flags.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/binary_info.h"

ABSL_FLAG(std::string, grpc_address, "0.0.0.0:50051",
          "host:port the gRPC server listens on.");
ABSL_FLAG(std::string, metrics_address, "0.0.0.0:9464",
          "host:port of the Prometheus /metrics endpoint; empty disables it.");
ABSL_FLAG(int64_t, max_message_bytes, int64_t{64} << 20,
          "Largest request/response message in bytes. Phasor's clients default "
          "to the same 64 MiB; other gRPC clients default to 4 MiB and must "
          "raise theirs to match.");
ABSL_FLAG(int64_t, max_elements_per_request, int64_t{1} << 24,
          "Largest number of tensor elements one request may send or produce; "
          "above it the call fails with RESOURCE_EXHAUSTED.");
ABSL_FLAG(int64_t, memory_budget_bytes, 0,
          "Bytes that calls in flight may hold together (request, response "
          "and scratch); a call that does not fit waits up to "
          "--memory_wait_seconds, then gets RESOURCE_EXHAUSTED. 0 = 0.6 of the "
          "container's cgroup memory limit, or of physical memory without one.");
ABSL_FLAG(double, memory_wait_seconds, 5.0,
          "Seconds a call may wait for the memory budget (never past its "
          "deadline); 0 = refuse at once.");
ABSL_FLAG(int, threads, 0,
          "OpenMP threads one large request may use; 0 = all cores. Small "
          "requests always run on one thread.");
ABSL_FLAG(std::string, profiles, "",
          "Text-format phasor.v1.ProfileSet file naming encoder configurations.");
ABSL_FLAG(std::string, builtin_holidays, "",
          "Built-in holiday calendars file (text-format "
          "phasor.v1.BuiltinHolidayCalendars, generated at build time); empty "
          "= builtin_holidays.textpb beside the binary, else "
          "../share/phasor/builtin_holidays.textpb from it, else none.");
ABSL_FLAG(std::string, tls_cert, "", "PEM server certificate chain (enables TLS).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle; when set, clients must present a certificate it "
          "signed (mTLS).");
ABSL_FLAG(std::string, auth_token_file, "",
          "File with a bearer token; when set, Encoder calls need "
          "\"authorization: Bearer <token>\" (health checks stay open).");
ABSL_FLAG(double, shutdown_grace_seconds, 10.0,
          "On SIGTERM/SIGINT, seconds in-flight calls get to finish.");
ABSL_FLAG(double, max_connection_age_seconds, 300.0,
          "Connections older than this are recycled (GOAWAY) so clients "
          "re-resolve and spread over new replicas; 0 = never.");
ABSL_FLAG(double, max_connection_age_grace_seconds, 0.0,
          "Seconds calls still open on a recycled connection may run before "
          "it is closed; 0 = no limit (streams run until their client ends "
          "them).");
ABSL_FLAG(bool, enable_echo, false,
          "Serve the Echo RPC, a transport baseline for benchmarks.");
ABSL_FLAG(bool, enable_inference_protocol, true,
          "Serve the Open Inference Protocol (KServe v2 / Triton gRPC, "
          "inference.GRPCInferenceService) on the gRPC port, each profile a "
          "model; false serves phasor.v1.Encoder only.");
ABSL_FLAG(bool, system_shared_memory, false,
          "Serve Triton's system shared-memory extension on the Open Inference "
          "Protocol: same-host callers register POSIX shared-memory regions and "
          "pass tensors through them (docs/SECURITY.md, \"Shared memory\").");
ABSL_FLAG(std::string, shared_memory_key_prefix, "/phasor",
          "Shared-memory keys (shm_open names) the server agrees to map must "
          "start with this.");
ABSL_FLAG(int, shared_memory_max_regions, 64, "Shared-memory regions registered at once.");
ABSL_FLAG(int64_t, shared_memory_max_bytes, int64_t{4} << 30,
          "Bytes of all registered shared-memory regions together.");
ABSL_FLAG(std::string, log_format, "text",
          "Format of every log line on stderr: text (logfmt key=value) or json "
          "(one JSON object per line).");
ABSL_FLAG(bool, access_log, false,
          "Log every call (method, code, peer, duration), not only failed "
          "ones; no rate limit applies.");
ABSL_FLAG(int, failed_call_log_burst, 20,
          "Failed calls logged in a row before --failed_call_logs_per_second "
          "applies.");
ABSL_FLAG(double, failed_call_logs_per_second, 1.0,
          "Failed-call log lines per second after the burst; the next line "
          "logged counts the ones dropped. 0 = do not log failed calls.");

namespace phasor::server {
namespace {

// Every flag this file defines, and only those, has an environment twin.
const std::vector<FlagGroup>& FlagGroups() {
  static const auto* groups =
      new std::vector<FlagGroup>{{"flags", {"server/flags.cc"}}};
  return *groups;
}

bool IsServerFlag(const absl::CommandLineFlag& flag) {
  return absl::EndsWith(flag.Filename(), "server/flags.cc");
}

std::string EnvTwinOf(absl::string_view name) {
  return absl::StrCat("PHASOR_", absl::AsciiStrToUpper(name));
}

constexpr const char* kUsage =
    "phasor-server: positional and temporal encodings over gRPC.\n\n"
    "usage: phasor-server [--flag=value ...]\n\n"
    "Every flag can also be set in the environment as PHASOR_<FLAG NAME IN\n"
    "CAPITALS>; the command line wins over the environment, which wins over\n"
    "the default. --version prints the version.";

}  // namespace

void ParseFlagsAndEnvironment(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  ConfigureAbslUsage("phasor-server", FlagGroups());
  if (WantsHelp(argc, argv)) {
    std::printf("%s\n\n%s\n%s", VersionLine("phasor-server").c_str(), kUsage,
                FlagsHelp(FlagGroups(), EnvTwinOf).c_str());
    std::exit(0);
  }
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!IsServerFlag(*flag)) continue;
    const std::string variable = EnvTwinOf(name);
    const char* value = std::getenv(variable.c_str());
    if (value == nullptr) continue;
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      std::fprintf(stderr, "phasor-server: %s=%s: %s\n", variable.c_str(), value,
                   error.c_str());
      std::exit(2);
    }
  }
  absl::ParseCommandLine(argc, argv);
  LogFormat format;
  if (!ParseLogFormat(absl::GetFlag(FLAGS_log_format), &format)) {
    std::fprintf(stderr, "phasor-server: --log_format: must be text or json, got \"%s\"\n",
                 absl::GetFlag(FLAGS_log_format).c_str());
    std::exit(2);
  }
}

ServerOptions ServerOptionsFromFlags() {
  ServerOptions options;
  options.grpc_address = absl::GetFlag(FLAGS_grpc_address);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.max_elements_per_request = absl::GetFlag(FLAGS_max_elements_per_request);
  options.memory_budget_bytes = absl::GetFlag(FLAGS_memory_budget_bytes);
  options.memory_wait = absl::Seconds(absl::GetFlag(FLAGS_memory_wait_seconds));
  options.threads = absl::GetFlag(FLAGS_threads);
  options.profiles_path = absl::GetFlag(FLAGS_profiles);
  options.builtin_holidays_path = absl::GetFlag(FLAGS_builtin_holidays);
  options.tls_cert_path = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_path = absl::GetFlag(FLAGS_tls_key);
  options.tls_client_ca_path = absl::GetFlag(FLAGS_tls_client_ca);
  options.auth_token_path = absl::GetFlag(FLAGS_auth_token_file);
  options.shutdown_grace = absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds));
  options.max_connection_age = absl::Seconds(absl::GetFlag(FLAGS_max_connection_age_seconds));
  options.max_connection_age_grace =
      absl::Seconds(absl::GetFlag(FLAGS_max_connection_age_grace_seconds));
  options.enable_echo = absl::GetFlag(FLAGS_enable_echo);
  options.enable_inference_protocol = absl::GetFlag(FLAGS_enable_inference_protocol);
  options.shared_memory.enabled = absl::GetFlag(FLAGS_system_shared_memory);
  options.shared_memory.key_prefix = absl::GetFlag(FLAGS_shared_memory_key_prefix);
  options.shared_memory.max_regions = absl::GetFlag(FLAGS_shared_memory_max_regions);
  options.shared_memory.max_bytes = absl::GetFlag(FLAGS_shared_memory_max_bytes);
  // Checked by ParseFlagsAndEnvironment.
  ParseLogFormat(absl::GetFlag(FLAGS_log_format), &options.log_format);
  options.access_log = absl::GetFlag(FLAGS_access_log);
  options.failed_call_log_burst = absl::GetFlag(FLAGS_failed_call_log_burst);
  options.failed_call_logs_per_second = absl::GetFlag(FLAGS_failed_call_logs_per_second);
  return options;
}

}  // namespace phasor::server
