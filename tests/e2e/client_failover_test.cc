// Scale-out under failure with the C++ EncoderClient's default service
// config: three phasor-server processes on loopback behind one round_robin
// channel over a static address list ("ipv4:127.0.0.1:p1,...:p2,...:p3");
// one gets SIGTERM while calls are in flight. Every call must be answered OK
// (the draining replica's refusals are retried on the others), the replica
// must exit 0, and round_robin must spread the calls within 10% across the
// live replicas, counted by each replica's grpc_server_handled_total.
// tests/e2e/test_failover.py does the same with the Python client.

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/encoder_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/test_util.h"

namespace phasor {
namespace {

using server::testing::Child;
using server::testing::HttpGet;
using server::testing::Spawn;

constexpr int kReplicas = 3;
constexpr int kThreads = 4;
constexpr int kPhaseCalls = 600;   // calls per measured phase
constexpr double kSpread = 0.10;   // allowed |calls_i / mean - 1|

// A port that was free a moment ago.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(address.sin_port);
}

struct Replica {
  Child child;
  int port = 0;
  int metrics_port = 0;
  bool exited = false;
  std::string target() const { return absl::StrCat("127.0.0.1:", port); }
};

// grpc_server_handled_total of EncodePositions with code OK, from /metrics.
int64_t HandledOk(const Replica& replica) {
  const std::string text = HttpGet(replica.metrics_port, "/metrics");
  double total = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "grpc_server_handled_total{") &&
        absl::StrContains(line, "grpc_method=\"EncodePositions\"") &&
        absl::StrContains(line, "grpc_code=\"OK\"")) {
      total += std::stod(std::string(line.substr(line.rfind(' ') + 1)));
    }
  }
  return static_cast<int64_t>(total);
}

v1::EncodePositionsRequest SmallRequest() {
  v1::EncodePositionsRequest request;
  request.mutable_positions()->mutable_range()->set_count(64);
  request.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(32);
  return request;
}

// kThreads threads calling EncodePositions until Stop().
class Load final {
 public:
  Load(EncoderClient* client, std::string expected)
      : client_(client), expected_(std::move(expected)) {
    for (int i = 0; i < kThreads; ++i) threads_.emplace_back([this] { Run(); });
  }
  ~Load() { Stop(); }

  int64_t calls() const { return ok_ + failed_; }
  int64_t ok() const { return ok_; }
  std::vector<std::string> failures() {
    std::lock_guard<std::mutex> lock(mutex_);
    return failures_;
  }
  bool WaitFor(int64_t calls, absl::Duration timeout = absl::Seconds(120)) const {
    const absl::Time deadline = absl::Now() + timeout;
    while (this->calls() < calls) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return true;
  }
  void Stop() {
    stopping_ = true;
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
  }

 private:
  void Run() {
    const v1::EncodePositionsRequest request = SmallRequest();
    while (!stopping_) {
      absl::StatusOr<v1::EncodePositionsResponse> response =
          client_->EncodePositions(request);
      if (response.ok() && response->encodings().data() == expected_) {
        ++ok_;
        continue;
      }
      ++failed_;
      std::lock_guard<std::mutex> lock(mutex_);
      failures_.push_back(response.ok() ? "wrong encodings"
                                        : response.status().ToString());
    }
  }

  EncoderClient* client_;
  const std::string expected_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> ok_{0};
  std::atomic<int64_t> failed_{0};
  std::mutex mutex_;
  std::vector<std::string> failures_;
  std::vector<std::thread> threads_;
};

class FailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < kReplicas; ++i) {
      Replica& replica = replicas_.emplace_back();
      replica.port = FreePort();
      replica.metrics_port = FreePort();
      replica.child = Spawn({absl::StrCat("--grpc_address=", replica.target()),
                             absl::StrCat("--metrics_address=127.0.0.1:",
                                          replica.metrics_port),
                             "--shutdown_grace_seconds=10", "--threads=1"},
                            {"OMP_NUM_THREADS=1"});
    }
    for (Replica& replica : replicas_) WaitServing(replica);
  }

  void TearDown() override {
    for (Replica& replica : replicas_) {
      if (replica.exited || replica.child.pid <= 0) continue;
      kill(replica.child.pid, SIGTERM);  // drains in well under 10 s
      EXPECT_EQ(server::testing::WaitExit(replica.child), 0);
    }
  }

  // Polls health on the replica alone (no retries there: a health call is
  // not in the retry policy) for at most 30 s.
  static void WaitServing(const Replica& replica) {
    ClientOptions options;
    options.target = replica.target();
    options.deadline = absl::Seconds(2);
    auto client = EncoderClient::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      absl::StatusOr<ServingStatus> status = (*client)->CheckHealth("");
      if (status.ok() && *status == ServingStatus::kServing) return;
      absl::SleepFor(absl::Milliseconds(50));
    }
    FAIL() << "replica on " << replica.target() << " never SERVING";
  }

  static void ExpectSpread(const std::vector<int64_t>& counts, const char* what) {
    double mean = 0;
    for (int64_t c : counts) mean += static_cast<double>(c) / counts.size();
    ASSERT_GT(mean, 0) << what;
    for (int64_t c : counts) {
      EXPECT_LE(std::abs(c / mean - 1), kSpread)
          << what << ": calls per replica " << absl::StrJoin(counts, ", ");
    }
  }

  std::vector<Replica> replicas_;
};

TEST_F(FailoverTest, SigtermOneReplicaUnderLoadLosesNoCall) {
  ClientOptions options;
  std::vector<std::string> addresses;
  for (const Replica& replica : replicas_) addresses.push_back(replica.target());
  options.target = absl::StrCat("ipv4:", absl::StrJoin(addresses, ","));
  options.load_balancing_policy = "round_robin";
  // The default service config, as every user gets it.
  ASSERT_EQ(options.service_config_json, kDefaultServiceConfig);
  auto client = EncoderClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();

  auto first = (*client)->EncodePositions(SmallRequest());
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string expected = first->encodings().data();
  // Until round_robin has connected to every address.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (std::min({HandledOk(replicas_[0]), HandledOk(replicas_[1]),
                   HandledOk(replicas_[2])}) == 0) {
    ASSERT_LT(absl::Now(), deadline) << "round_robin never reached every replica";
    ASSERT_TRUE((*client)->EncodePositions(SmallRequest()).ok());
  }

  // Phase 1: three live replicas share the load.
  std::vector<int64_t> before, after;
  for (const Replica& r : replicas_) before.push_back(HandledOk(r));
  {
    Load load(client->get(), expected);
    ASSERT_TRUE(load.WaitFor(kPhaseCalls));
    load.Stop();
    EXPECT_THAT(load.failures(), ::testing::IsEmpty());
  }
  for (const Replica& r : replicas_) after.push_back(HandledOk(r));
  std::vector<int64_t> served;
  for (int i = 0; i < kReplicas; ++i) served.push_back(after[i] - before[i]);
  ExpectSpread(served, "three replicas");

  // Phase 2: SIGTERM replica 2 mid-load; the load goes on.
  Replica& victim = replicas_[2];
  const std::vector<int64_t> survivors_before = {HandledOk(replicas_[0]),
                                                 HandledOk(replicas_[1])};
  Load load(client->get(), expected);
  ASSERT_TRUE(load.WaitFor(kPhaseCalls / 4));
  const int64_t victim_before_signal = HandledOk(victim);
  const int64_t calls_at_signal = load.calls();
  ASSERT_EQ(kill(victim.child.pid, SIGTERM), 0);
  const int exit_code = server::testing::WaitExit(victim.child);
  victim.exited = true;
  EXPECT_EQ(exit_code, 0);
  ASSERT_TRUE(load.WaitFor(calls_at_signal + kPhaseCalls));
  load.Stop();
  const std::vector<std::string> failures = load.failures();
  EXPECT_THAT(failures, ::testing::IsEmpty())
      << failures.size() << " of " << load.calls() << " calls failed";
  // The signal did land mid-load: the victim had served calls of this
  // phase, and the load carried on after it.
  EXPECT_GT(victim_before_signal, after[2]);
  EXPECT_GE(load.ok(), calls_at_signal + kPhaseCalls);
  ExpectSpread({HandledOk(replicas_[0]) - survivors_before[0],
                HandledOk(replicas_[1]) - survivors_before[1]},
               "two survivors");
}

}  // namespace
}  // namespace phasor
