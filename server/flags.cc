#include "server/flags.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

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
ABSL_FLAG(int, threads, 0,
          "OpenMP threads one large request may use; 0 = all cores. Small "
          "requests always run on one thread.");
ABSL_FLAG(std::string, profiles, "",
          "Text-format phasor.v1.ProfileSet file naming encoder configurations.");
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

namespace phasor::server {
namespace {

constexpr const char* kFlagNames[] = {
    "grpc_address",  "metrics_address", "max_message_bytes",
    "max_elements_per_request", "threads", "profiles",
    "tls_cert",      "tls_key",         "tls_client_ca",
    "auth_token_file", "shutdown_grace_seconds", "max_connection_age_seconds",
    "max_connection_age_grace_seconds", "enable_echo",
};

}  // namespace

void ParseFlagsAndEnvironment(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "phasor-server: positional and temporal encodings over gRPC.\n"
      "Every flag can also be set with PHASOR_<FLAG_NAME> in the environment.");
  for (const char* name : kFlagNames) {
    const std::string variable = absl::StrCat("PHASOR_", absl::AsciiStrToUpper(name));
    const char* value = std::getenv(variable.c_str());
    if (value == nullptr) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    std::string error;
    if (flag == nullptr || !flag->ParseFrom(value, &error)) {
      std::fprintf(stderr, "phasor-server: %s=%s: %s\n", variable.c_str(), value,
                   error.c_str());
      std::exit(2);
    }
  }
  absl::ParseCommandLine(argc, argv);
}

ServerOptions ServerOptionsFromFlags() {
  ServerOptions options;
  options.grpc_address = absl::GetFlag(FLAGS_grpc_address);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.max_elements_per_request = absl::GetFlag(FLAGS_max_elements_per_request);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.profiles_path = absl::GetFlag(FLAGS_profiles);
  options.tls_cert_path = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_path = absl::GetFlag(FLAGS_tls_key);
  options.tls_client_ca_path = absl::GetFlag(FLAGS_tls_client_ca);
  options.auth_token_path = absl::GetFlag(FLAGS_auth_token_file);
  options.shutdown_grace = absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds));
  options.max_connection_age = absl::Seconds(absl::GetFlag(FLAGS_max_connection_age_seconds));
  options.max_connection_age_grace =
      absl::Seconds(absl::GetFlag(FLAGS_max_connection_age_grace_seconds));
  options.enable_echo = absl::GetFlag(FLAGS_enable_echo);
  return options;
}

}  // namespace phasor::server
