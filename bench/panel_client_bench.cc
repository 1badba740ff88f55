// panel_client_bench: workload P (bench/workload_p.h: 10,000 series x 100
// rows x 3 channels, F = 21) through one client, two ways, side by side in
// one run against one phasor-server:
//   BM_PanelSplitting      one EncodeObservationsPanel call: the client cuts
//                          the panel to fit the message limit and keeps up to
//                          4 sub-calls in flight
//   BM_SingleSeriesCalls   10,000 blocking single-series EncodeObservations
//                          calls, one after another (the loop a user writes
//                          without panels)
//   BM_SingleSeriesCalls4Threads  the same 10,000 calls from 4 threads (the
//                          panel's concurrency, for a like-for-like figure)
// and prints the ratios single-series time / panel time at the end.
// Requests are built once, before timing; timing covers the calls and, for
// the panel, the client's cutting and joining. At start-up the features of
// the 10,000 single calls, concatenated, are checked bytewise against the
// panel's.
//
// The server: PHASOR_BENCH_TARGET=host:port uses a running one; otherwise
// the phasor-server built next to this program is started on a free
// loopback port (--metrics_address= --threads=PHASOR_BENCH_SERVER_THREADS,
// default 0 = all cores) and stopped by pid at exit.
//
//   build/bench/panel_client_bench --benchmark_min_time=2
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/workload_p_request.h"
#include "benchmark/benchmark.h"
#include "client/encoder_client.h"

namespace phasor::bench {
namespace {

constexpr int kThreads = 4;

struct Setup {
  pid_t server_pid = -1;
  std::unique_ptr<EncoderClient> client;
  v1::EncodeObservationsRequest panel;
  std::vector<v1::EncodeObservationsRequest> singles;
  int64_t rows = 0;
};
Setup* setup = nullptr;
// Mean seconds per iteration of each benchmark, for the ratio line.
std::map<std::string, double>* seconds_per_iteration = nullptr;

// Starts phasor-server with a free port; returns "127.0.0.1:port".
std::string StartServer(pid_t* pid) {
  const char* threads_env = std::getenv("PHASOR_BENCH_SERVER_THREADS");
  const std::string threads =
      absl::StrCat("--threads=", threads_env != nullptr ? threads_env : "0");
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  *pid = fork();
  if (*pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl(PHASOR_SERVER_BINARY, PHASOR_SERVER_BINARY,
          "--grpc_address=127.0.0.1:0", "--metrics_address=", threads.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  FILE* stream = fdopen(fds[0], "r");
  char line[4096];
  while (std::fgets(line, sizeof(line), stream) != nullptr) {
    // The "serving" log record: "... event=serving grpc_port=N ...".
    const char* port =
        std::strstr(line, " event=serving ") != nullptr ? std::strstr(line, " grpc_port=") : nullptr;
    if (port != nullptr) {
      // The server keeps writing to stderr; a thread drains the pipe.
      std::thread([stream] {
        char rest[4096];
        while (std::fgets(rest, sizeof(rest), stream) != nullptr) {
        }
      }).detach();
      return absl::StrCat("127.0.0.1:", std::atoi(port + 11));
    }
  }
  std::fprintf(stderr, "panel_client_bench: %s did not start\n",
               PHASOR_SERVER_BINARY);
  std::exit(1);
}

void CheckSameFeatures() {
  auto panel = setup->client->EncodeObservationsPanel(setup->panel);
  if (!panel.ok()) {
    std::fprintf(stderr, "panel call failed: %s\n",
                 panel.status().ToString().c_str());
    std::exit(1);
  }
  std::string joined;
  for (const auto& request : setup->singles) {
    auto single = setup->client->EncodeObservations(request);
    if (!single.ok()) {
      std::fprintf(stderr, "single call failed: %s\n",
                   single.status().ToString().c_str());
      std::exit(1);
    }
    joined += single->features().data();
  }
  const v1::Tensor& features = panel->features();
  if (features.shape_size() != 2 || features.shape(0) != setup->rows ||
      features.shape(1) != 21 || features.data() != joined) {
    std::fprintf(stderr,
                 "panel features (%lld rows) differ from the single calls'\n",
                 static_cast<long long>(features.shape(0)));
    std::exit(1);
  }
}

void Record(benchmark::State& state, const char* name, double seconds) {
  (*seconds_per_iteration)[name] =
      seconds / static_cast<double>(state.iterations());
  state.counters["rows_per_s"] =
      benchmark::Counter(static_cast<double>(setup->rows) *
                             static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void BM_PanelSplitting(benchmark::State& state) {
  PanelStats stats;
  PanelOptions options;
  // PHASOR_BENCH_CALL_MIB=N: sub-calls of at most N MiB (PanelOptions).
  if (const char* mib = std::getenv("PHASOR_BENCH_CALL_MIB")) {
    options.max_call_bytes = std::atoll(mib) << 20;
  }
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    auto response = setup->client->EncodeObservationsPanel(
        setup->panel, options, &stats);
    if (!response.ok()) {
      state.SkipWithError(response.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(response->features().data().data());
  }
  Record(state, "BM_PanelSplitting",
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
             .count());
  state.counters["calls"] = static_cast<double>(stats.calls);
}

void BM_SingleSeriesCalls(benchmark::State& state) {
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (const auto& request : setup->singles) {
      auto response = setup->client->EncodeObservations(request);
      if (!response.ok()) {
        state.SkipWithError(response.status().ToString().c_str());
        return;
      }
      benchmark::DoNotOptimize(response->features().data().data());
    }
  }
  Record(state, "BM_SingleSeriesCalls",
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
             .count());
}

void BM_SingleSeriesCalls4Threads(benchmark::State& state) {
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (size_t i = next++; i < setup->singles.size(); i = next++) {
          auto response = setup->client->EncodeObservations(setup->singles[i]);
          if (!response.ok()) failed = true;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    if (failed) {
      state.SkipWithError("a single-series call failed");
      return;
    }
  }
  Record(state, "BM_SingleSeriesCalls4Threads",
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
             .count());
}

BENCHMARK(BM_PanelSplitting)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SingleSeriesCalls)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SingleSeriesCalls4Threads)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

int Main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  setup = new Setup;
  seconds_per_iteration = new std::map<std::string, double>;
  const char* target = std::getenv("PHASOR_BENCH_TARGET");
  ClientOptions options;
  options.target =
      target != nullptr ? std::string(target) : StartServer(&setup->server_pid);
  options.deadline = absl::Seconds(120);
  auto client = EncoderClient::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  setup->client = *std::move(client);

  const WorkloadP workload = MakeWorkloadP();
  setup->rows = workload.series_offsets.back();
  setup->panel = WorkloadPPanelRequest(workload);
  for (int64_t s = 0; s < workload.shape.series; ++s) {
    setup->singles.push_back(WorkloadPRequest(workload, s, s + 1,
                                              /*as_panel=*/false));
  }
  // Up to 30 s for the server to answer.
  for (int attempt = 0;; ++attempt) {
    if (setup->client->CheckHealth("").ok()) break;
    if (attempt == 300) {
      std::fprintf(stderr, "server at %s does not answer\n",
                   options.target.c_str());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CheckSameFeatures();

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  const auto& times = *seconds_per_iteration;
  const auto panel = times.find("BM_PanelSplitting");
  if (panel != times.end()) {
    for (const auto& [name, seconds] : times) {
      if (name == panel->first) continue;
      std::printf("ratio %s / BM_PanelSplitting: %.2f (%.3f s vs %.3f s)\n",
                  name.c_str(), seconds / panel->second, seconds,
                  panel->second);
    }
  }
  if (setup->server_pid > 0) {
    kill(setup->server_pid, SIGTERM);
    waitpid(setup->server_pid, nullptr, 0);
  }
  return 0;
}

}  // namespace
}  // namespace phasor::bench

int main(int argc, char** argv) { return phasor::bench::Main(argc, argv); }
