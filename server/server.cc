#include "server/server.h"

#include <grpc/grpc.h>
#include <grpc/support/alloc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/security/server_credentials.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include <thread>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/binary_info.h"
#include "core/base/file.h"
#include "core/base/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/handlers.h"
#include "server/log_limit.h"
#include "server/logging.h"
#include "server/memory_limit.h"

namespace phasor::server {
namespace {

// gRPC only reports a key that does not fit its certificate as a failure to
// listen; OpenSSL says what is wrong before anything binds.
absl::Status CheckKeyMatchesCertificate(const std::string& key_pem,
                                        const std::string& cert_pem,
                                        const ServerOptions& options) {
  const auto read_bio = [](const std::string& pem) {
    return std::unique_ptr<BIO, decltype(&BIO_free)>(
        BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  };
  auto cert_bio = read_bio(cert_pem);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr), &X509_free);
  if (cert == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tls_cert: ", options.tls_cert_path, " holds no PEM certificate"));
  }
  auto key_bio = read_bio(key_pem);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr),
      &EVP_PKEY_free);
  if (key == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        "tls_key: ", options.tls_key_path,
        " holds no unencrypted PEM private key"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("tls_key: ", options.tls_key_path,
                     " is not the private key of the certificate in tls_cert ",
                     options.tls_cert_path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeCredentials(
    const ServerOptions& options) {
  const bool tls = !options.tls_cert_path.empty() || !options.tls_key_path.empty();
  if (!tls) {
    if (!options.tls_client_ca_path.empty()) {
      return absl::InvalidArgumentError(
          "tls_client_ca: mTLS needs --tls_cert and --tls_key too");
    }
    return grpc::InsecureServerCredentials();
  }
  if (options.tls_cert_path.empty() || options.tls_key_path.empty()) {
    return absl::InvalidArgumentError("tls_cert, tls_key: TLS needs both");
  }
  absl::StatusOr<std::string> cert = ReadFileToString(options.tls_cert_path, "tls_cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFileToString(options.tls_key_path, "tls_key");
  if (!key.ok()) return key.status();
  PHASOR_RETURN_IF_ERROR(CheckKeyMatchesCertificate(*key, *cert, options));
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!options.tls_client_ca_path.empty()) {
    absl::StatusOr<std::string> ca =
        ReadFileToString(options.tls_client_ca_path, "tls_client_ca");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<std::string> ReadToken(const ServerOptions& options) {
  if (options.auth_token_path.empty()) return std::string();
  absl::StatusOr<std::string> token = ReadFileToString(options.auth_token_path, "auth_token_file");
  if (!token.ok()) return token.status();
  std::string stripped(absl::StripAsciiWhitespace(*token));
  if (stripped.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("auth_token_file: ", options.auth_token_path, " is empty"));
  }
  return stripped;
}

// Calls gRPC's core has received on the servers of this process
// (phasor-server runs one), whether or not a thread ever took them to a
// handler: channelz's callsStarted, read through gRPC's C API. -1 when
// channelz cannot say (it is on unless GRPC_ARG_ENABLE_CHANNELZ turns it
// off).
int64_t CallsReceivedByGrpc() {
  char* text = grpc_channelz_get_servers(/*start_server_id=*/0);
  if (text == nullptr) return -1;
  const nlohmann::json servers =
      nlohmann::json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  gpr_free(text);
  if (!servers.is_object()) return -1;
  int64_t total = 0;
  const auto list = servers.find("server");
  if (list == servers.end() || !list->is_array()) return total;
  for (const nlohmann::json& server : *list) {
    const auto data = server.find("data");
    if (data == server.end() || !data->is_object()) continue;
    // Channelz speaks proto3 JSON: an int64 is a string, and a zero is left
    // out.
    const auto calls = data->find("callsStarted");
    if (calls == data->end()) continue;
    int64_t count = 0;
    if (calls->is_string() && absl::SimpleAtoi(calls->get<std::string>(), &count)) {
      total += count;
    } else if (calls->is_number_integer()) {
      total += calls->get<int64_t>();
    } else {
      return -1;
    }
  }
  return total;
}

// The "stopped" record: what became of the calls between the signal
// (`at_signal`) and the end of the drain (`at_stop`), as the RPC metrics
// count them, plus the calls gRPC received that never reached a handler.
LogRecord StoppedRecord(const ServerMetrics::CallTotals& at_signal,
                        const ServerMetrics::CallTotals& at_stop,
                        int64_t received_by_grpc, absl::Duration drain) {
  const auto ended = [](const ServerMetrics::CallTotals& totals) {
    int64_t sum = 0;
    for (const int64_t count : totals.handled) sum += count;
    return sum;
  };
  const auto ended_with = [&](grpc::StatusCode code) {
    return at_stop.handled[code] - at_signal.handled[code];
  };
  LogRecord record(LogLevel::kInfo, "stopped");
  record.Add("drain_seconds", absl::ToDoubleSeconds(drain))
      .Add("calls_in_flight", at_signal.started - ended(at_signal))
      .Add("calls_ended", ended(at_stop) - ended(at_signal))
      .Add("calls_ok", ended_with(grpc::StatusCode::OK))
      .Add("calls_unavailable", ended_with(grpc::StatusCode::UNAVAILABLE))
      .Add("calls_refused", at_stop.refused_shutdown - at_signal.refused_shutdown)
      .Add("calls_cancelled", ended_with(grpc::StatusCode::CANCELLED))
      .Add("calls_not_dispatched",
           received_by_grpc < 0 ? int64_t{-1} : received_by_grpc - at_stop.started);
  return record;
}

// gRPC takes durations as int milliseconds.
int ClampedMilliseconds(absl::Duration duration) {
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(duration), INT32_MAX));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PhasorServer>> PhasorServer::Start(
    const ServerOptions& options) {
  if (options.max_message_bytes <= 0 || options.max_message_bytes > INT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_message_bytes: must be in [1, 2^31), got ",
                     options.max_message_bytes));
  }
  if (options.max_elements_per_request <= 0) {
    return absl::InvalidArgumentError("max_elements_per_request: must be > 0");
  }
  if (options.memory_budget_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory_budget_bytes: must be >= 0 (0 = automatic), got ",
        options.memory_budget_bytes));
  }
  if (options.memory_wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("memory_wait_seconds: must be >= 0");
  }
  std::unique_ptr<PhasorServer> server(new PhasorServer());

  if (options.profiles_path.empty()) {
    server->profiles_ = std::make_unique<ProfileRegistry>();
  } else {
    absl::StatusOr<std::unique_ptr<ProfileRegistry>> profiles =
        ProfileRegistry::Load(options.profiles_path);
    if (!profiles.ok()) return profiles.status();
    server->profiles_ = *std::move(profiles);
  }
  {
    // Before the profiles are checked: they may name a built-in calendar.
    const std::string builtin = options.builtin_holidays_path.empty()
                                    ? DefaultBuiltinHolidaysPath()
                                    : options.builtin_holidays_path;
    if (!builtin.empty()) {
      const absl::Status loaded =
          server->profiles_->LoadBuiltinHolidayCalendars(builtin);
      if (!loaded.ok()) return loaded;
    }
  }
  if (!options.profiles_path.empty()) {
    const absl::Status valid = ValidateProfiles(*server->profiles_);
    if (!valid.ok()) {
      return absl::Status(valid.code(), absl::StrCat("profiles: ", options.profiles_path,
                                                     ": ", valid.message()));
    }
  }
  absl::StatusOr<std::string> token = ReadToken(options);
  if (!token.ok()) return token.status();
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      MakeCredentials(options);
  if (!credentials.ok()) return credentials.status();

  server->metrics_ = std::make_unique<ServerMetrics>();
  if (!options.metrics_address.empty()) {
    const absl::Status exposed = server->metrics_->Expose(options.metrics_address);
    if (!exposed.ok()) return exposed;
  }
  const MemoryBudgetSize budget = ChooseMemoryBudget(options.memory_budget_bytes);
  ServerMetrics* metrics = server->metrics_.get();
  metrics->SetMemoryBudget(budget.bytes);
  server->memory_budget_ = std::make_unique<MemoryBudget>(
      budget.bytes, [metrics](int64_t in_use_bytes) { metrics->SetMemoryInUse(in_use_bytes); });
  server->memory_budget_source_ = budget.source;
  server->memory_releaser_ = std::make_unique<IdleMemoryReleaser>(
      server->memory_budget_.get(), IdleMemoryReleaserOptions{});
  // Enough threads that several large calls wait for memory at once and
  // each runs as soon as its bytes come back; they block rather than spin.
  server->memory_wait_pool_ = std::make_unique<BlockingPool>(
      std::max(4, 2 * static_cast<int>(std::thread::hardware_concurrency())));
  server->service_ = std::make_unique<EncoderService>(
      options, server->profiles_.get(), server->metrics_.get(), *std::move(token),
      server->memory_budget_.get(), server->memory_wait_pool_.get());
  server->shared_memory_ = std::make_unique<SharedMemoryRegistry>(options.shared_memory);
  if (options.enable_inference_protocol) {
    server->inference_ = std::make_unique<InferenceService>(
        server->service_.get(), server->memory_wait_pool_.get(), server->shared_memory_.get());
  }

  // A process-wide registration that every later server picks up; gRPC
  // documents it as not thread-safe, hence the once.
  static std::once_flag global_setup;
  std::call_once(global_setup,
                 [] { grpc::reflection::InitProtoReflectionServerBuilderPlugin(); });
  server->health_ = std::make_unique<HealthService>();

  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.grpc_address, *credentials, &server->grpc_port_);
  builder.RegisterService(server->service_.get());
  builder.RegisterService(server->health_.get());
  if (server->inference_ != nullptr) builder.RegisterService(server->inference_.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  // Clients behind a headless Service keep long-lived round_robin channels;
  // let them send keepalive pings every 10 s or more without being cut off.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             10 * 1000 /*10 s*/);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Recycle connections (GOAWAY after max_connection_age) so clients
  // re-resolve and spread over replicas added by the autoscaler. Calls open
  // on a recycled connection keep it until they end, or until the grace
  // when one is set: with none (the default) a long-lived
  // EncodeObservationsStream is never cut by recycling.
  if (options.max_connection_age > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               ClampedMilliseconds(options.max_connection_age));
    if (options.max_connection_age_grace > absl::ZeroDuration()) {
      builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                                 ClampedMilliseconds(options.max_connection_age_grace));
    }
  }
  CallLogOptions call_log;
  call_log.format = options.log_format;
  call_log.access_log = options.access_log;
  call_log.failed_call_burst = options.failed_call_log_burst;
  call_log.failed_calls_per_second = options.failed_call_logs_per_second;
  server->call_log_ = std::make_unique<CallLog>(call_log);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(server->metrics_->NewInterceptorFactory());
  interceptors.push_back(server->call_log_->NewInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));

  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->grpc_port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("grpc_address: cannot listen on ", options.grpc_address));
  }
  server->health_->SetServingStatus("", true);
  server->health_->SetServingStatus(v1::Encoder::service_full_name(), true);
  if (server->inference_ != nullptr) {
    server->health_->SetServingStatus(inference::GRPCInferenceService::service_full_name(),
                                      true);
  }
  return server;
}

PhasorServer::~PhasorServer() { Shutdown(absl::ZeroDuration()); }

void PhasorServer::Shutdown(absl::Duration grace) {
  std::call_once(shutdown_once_, [this, grace] {
    if (server_ == nullptr) return;
    // Probes see NOT_SERVING first, so load balancers stop sending new calls;
    // open health watches and idle streams end now rather than holding the
    // drain open for the whole grace.
    health_->Shutdown();
    service_->Drain();
    if (inference_ != nullptr) inference_->Drain();
    // grpc::Server::Shutdown sends GOAWAY and returns once every call has
    // ended AND every connection has closed. A graceful GOAWAY closes a
    // connection only after the client answers its PING, and a client with
    // no call open need not read its socket meanwhile: a synchronous Python
    // channel whose health Watch had just ended left it unanswered for
    // seconds, and gRPC waits up to 20 s (or the grace) for it. Once the
    // server has held no call for kIdleBeforeClose, nothing on those
    // connections is owed to anyone, so the closer ends them
    // (grpc_server_cancel_all_calls disconnects every connection); a
    // shutdown that finishes sooner never needs it. The pause lets the last
    // reply's bytes and the client's answers cross before the close.
    constexpr absl::Duration kIdleBeforeClose = absl::Milliseconds(100);
    absl::Notification stopped;
    std::thread closer([this, &stopped, kIdleBeforeClose] {
      absl::Time idle_since = absl::InfiniteFuture();
      while (!stopped.WaitForNotificationWithTimeout(absl::Milliseconds(5))) {
        if (metrics_->calls_alive() != 0) {
          idle_since = absl::InfiniteFuture();
        } else if (idle_since == absl::InfiniteFuture()) {
          idle_since = absl::Now();
        } else if (absl::Now() - idle_since >= kIdleBeforeClose) {
          grpc_server_cancel_all_calls(server_->c_server());
          idle_since = absl::InfiniteFuture();
        }
      }
    });
    server_->Shutdown(std::chrono::system_clock::now() +
                      absl::ToChronoMilliseconds(grace));
    server_->Wait();
    stopped.Notify();
    closer.join();
  });
}

void PhasorServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

LogRecord ConfigurationRecord(const ServerOptions& options, const PhasorServer& server) {
  const bool tls = !options.tls_cert_path.empty();
  const char* tls_mode = !tls ? "off" : options.tls_client_ca_path.empty() ? "tls" : "mtls";
  std::vector<std::string> profile_names;
  for (const v1::Profile* profile : server.profiles().profiles()) {
    profile_names.push_back(profile->name());
  }
  LogRecord record(LogLevel::kInfo, "config");
  record.Add("version", ProjectVersion())
      .Add("revision", GitRevision().empty() ? absl::string_view("unknown") : GitRevision())
      .Add("build_type", BuildType())
      .Add("grpc_address", options.grpc_address)
      .Add("grpc_port", server.grpc_port())
      .Add("metrics_address", options.metrics_address)
      .Add("metrics_port", server.metrics_port())
      .Add("max_message_bytes", options.max_message_bytes)
      .Add("memory_budget_bytes", server.memory_budget().capacity_bytes())
      .Add("memory_budget_source", server.memory_budget_source())
      .Add("memory_wait_seconds", absl::ToDoubleSeconds(options.memory_wait))
      .Add("memory_release", MemoryReleaseMechanism())
      .Add("max_elements_per_request", options.max_elements_per_request)
      .Add("threads", options.threads)
      .Add("hardware_threads", static_cast<int>(std::thread::hardware_concurrency()))
      .Add("tls", tls_mode)
      .Add("tls_cert", options.tls_cert_path)
      .Add("tls_client_ca", options.tls_client_ca_path)
      .Add("auth_token_required", !options.auth_token_path.empty())
      .Add("profiles_file", options.profiles_path)
      .Add("profiles", profile_names)
      .Add("builtin_holidays", server.profiles().builtin_holidays_source())
      .Add("shutdown_grace_seconds", absl::ToDoubleSeconds(options.shutdown_grace))
      .Add("max_connection_age_seconds", absl::ToDoubleSeconds(options.max_connection_age))
      .Add("max_connection_age_grace_seconds",
           absl::ToDoubleSeconds(options.max_connection_age_grace))
      .Add("enable_echo", options.enable_echo)
      .Add("enable_inference_protocol", options.enable_inference_protocol)
      .Add("system_shared_memory", options.shared_memory.enabled)
      .Add("log_format", LogFormatName(options.log_format))
      .Add("access_log", options.access_log)
      .Add("failed_call_log_burst", options.failed_call_log_burst)
      .Add("failed_call_logs_per_second", options.failed_call_logs_per_second);
  return record;
}

int RunServer(const ServerOptions& options) {
  // Blocked before any thread exists, so every thread inherits the mask and
  // only the sigwait below ever sees the signals.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // Clients must not control log volume (see server/log_limit.h).
  InstallLibraryLogLimits(options.log_format);

  // Lifecycle records are written whatever GRPC_VERBOSITY says: gRPC's own
  // logger hides INFO by default, and these lines matter.
  absl::StatusOr<std::unique_ptr<PhasorServer>> server = PhasorServer::Start(options);
  if (!server.ok()) {
    WriteLog(options.log_format, LogRecord(LogLevel::kError, "start_failed")
                                     .Add("error", server.status().ToString()));
    return 1;
  }
  WriteLog(options.log_format, ConfigurationRecord(options, **server));
  WriteLog(options.log_format, LogRecord(LogLevel::kInfo, "serving")
                                   .Add("grpc_port", (*server)->grpc_port())
                                   .Add("metrics_port", (*server)->metrics_port()));
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  WriteLog(options.log_format,
           LogRecord(LogLevel::kInfo, "draining")
               .Add("signal", strsignal(signal_number))
               .Add("grace_seconds", absl::ToDoubleSeconds(options.shutdown_grace)));
  const ServerMetrics::CallTotals at_signal = (*server)->metrics().Totals();
  const absl::Time drain_start = absl::Now();
  (*server)->Shutdown(options.shutdown_grace);
  WriteLog(options.log_format,
           StoppedRecord(at_signal, (*server)->metrics().Totals(), CallsReceivedByGrpc(),
                         absl::Now() - drain_start));
  // Every call has ended and every connection is closed (Shutdown returns
  // only then). What is left is gRPC's library teardown (~grpc::Server ends
  // in grpc_shutdown), which joins gRPC's executor threads; in gRPC 1.51
  // one of them may be the TCP backup poller, which polls for sockets whose
  // writes met a full buffer and sleeps up to 10 s in one poll that nothing
  // wakes once the sockets are gone, so the process would linger up to 10 s
  // after "stopped", whatever the grace. The teardown only frees memory and
  // closes descriptors, which the kernel does at exit anyway, so the process
  // ends here, with the log flushed.
  std::fflush(nullptr);
  std::_Exit(0);
}

}  // namespace phasor::server
