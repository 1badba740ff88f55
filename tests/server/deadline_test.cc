// Deadlines and cancellation inside a running call. A heavy
// EncodeObservations whose deadline passes (or whose client cancels) while the
// kernel runs must stop there, not finish the work nobody will read; the
// server keeps serving afterwards.
//
// The work is measured as this process's CPU time (the server runs in it),
// not wall time: ctest runs other tests beside this one, and on a loaded
// machine a call's wall time says little about how much of the kernel ran.
// The test first measures the uninterrupted request, so the bounds scale with
// the machine, then ends the same request after 20% of the handler's wall
// time in it. The handler is mostly the kernel (one thread); the process's
// CPU for the whole call is about three times the handler's wall time, the
// rest being the 64 MB response's serialization, transport and parse on both
// sides. So a server that stops at the next poll uses a small part of the
// full call's CPU, and one that finishes the work uses 100%. The end must
// fall inside the kernel's rows, where only core/'s own polling
// (ExecutionOptions::stop_requested) can stop it.
//
// The server's own count of finished calls is read from /metrics
// (grpc_server_handling_seconds), so the test sees when the handler
// finished, not just when the client gave up.
#include <chrono>
#include <cmath>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace phasor::server::testing {
namespace {

// CPU seconds this process (server and client threads) has used so far.
double ProcessCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

constexpr char kLabels[] =
    R"(grpc_method="EncodeObservations",grpc_service="phasor.v1.Encoder",grpc_type="unary")";

class DeadlineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options = TestOptions();
    options.metrics_address = "127.0.0.1:0";
    options.threads = 1;  // One kernel thread: the slowest honest run.
    options.max_elements_per_request = int64_t{1} << 24;
    options.max_message_bytes = 64 << 20;
    server_ = StartTestServer(options);
    ASSERT_NE(server_.server, nullptr);
  }

  // Time2Vec with 1024 terms over 15625 rows: 16M outputs (64 MB, just under
  // the element and message limits), each an exact phase reduction and a
  // sine, about 0.08 s of handler on one quiet core from a 125 KB request
  // (0.24 s of the process's CPU for the whole call).
  static constexpr int64_t kRows = 15625;
  static v1::EncodeObservationsRequest HeavyRequest() {
    constexpr int kTerms = 1024;
    std::vector<int64_t> times(kRows);
    for (int64_t r = 0; r < kRows; ++r) {
      times[r] = int64_t{1700000000} * 1000000000 + r * int64_t{37} * 1000000000;
    }
    v1::EncodeObservationsRequest request;
    *request.mutable_observations()->mutable_timestamps() = Int64Tensor(times, {kRows});
    v1::Time2VecBlock* t2v = request.mutable_spec()->mutable_temporal()->mutable_time2vec();
    for (int i = 0; i < kTerms; ++i) {
      t2v->add_omega(2 * M_PI / (60.0 * (i + 1)));
      t2v->add_phi(0.001 * i);
    }
    return request;
  }

  double Metric(const std::string& series) const {
    return MetricValue(HttpGet(server_.server->metrics_port(), "/metrics"), series);
  }
  double Handled(const std::string& code) const {
    return Metric(absl::StrCat(R"(grpc_server_handled_total{grpc_code=")", code,
                               R"(",)", kLabels, "}"));
  }
  double HandlingSecondsSum() const {
    return Metric(absl::StrCat("grpc_server_handling_seconds_sum{", kLabels, "}"));
  }
  // Waits (up to a minute) until the server has finished `calls` calls of
  // the method, whatever their codes.
  void WaitForHandledCalls(double calls) const {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (Metric(absl::StrCat("grpc_server_handling_seconds_count{", kLabels, "}")) <
               calls &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // What one call cost: the process's CPU seconds and the server's
  // handling (wall) seconds.
  struct Cost {
    double cpu_seconds = 0;
    double wall_seconds = 0;
  };

  // The uninterrupted call: OK, the full output, and its cost.
  Cost MeasureFullCall() {
    const double cpu_before = ProcessCpuSeconds();
    v1::EncodeObservationsResponse response;
    const grpc::Status status = server_.stub->EncodeObservations(
        Context().get(), HeavyRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.features().data().size(), size_t{kRows} * 1024 * 4);
    WaitForHandledCalls(1);
    return {ProcessCpuSeconds() - cpu_before, HandlingSecondsSum()};
  }

  // The cost of the interrupted call that started at `cpu_before`, once the
  // server has finished it (the second call of the method).
  Cost CutCallCost(double cpu_before, const Cost& full) const {
    WaitForHandledCalls(2);
    return {ProcessCpuSeconds() - cpu_before, HandlingSecondsSum() - full.wall_seconds};
  }

  // When to end the interrupted call: after 20% of the uninterrupted
  // handler's wall time, inside its kernel.
  static std::chrono::microseconds EndAfter(const Cost& full) {
    return std::chrono::microseconds(static_cast<int64_t>(0.2 * full.wall_seconds * 1e6));
  }

  void ExpectStillServing() { ExpectServing(*server_.stub); }

  TestServer server_;
};

TEST_F(DeadlineTest, DeadlinePassingMidKernelStopsTheWork) {
  const Cost full = MeasureFullCall();
  // Below this the workload is too light to tell stopping from finishing.
  ASSERT_GT(full.cpu_seconds, 0.2) << "the heavy request used " << full.cpu_seconds << " s";

  const double cpu_before = ProcessCpuSeconds();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + EndAfter(full));
  v1::EncodeObservationsResponse response;
  const grpc::Status status =
      server_.stub->EncodeObservations(&context, HeavyRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);

  const Cost cut = CutCallCost(cpu_before, full);
  // The handler answers DEADLINE_EXCEEDED; when gRPC's own deadline timer
  // tears the call down first, no status is sent and the call counts as
  // cancelled. Either way it ended unfinished, once.
  EXPECT_EQ(Handled("DeadlineExceeded") + Handled("Canceled"), 1);
  // Finishing the work costs the full call's CPU; stopping costs what ran
  // until the deadline plus one poll interval (64 rows here, under 1%).
  EXPECT_LT(cut.cpu_seconds, 0.65 * full.cpu_seconds)
      << "full call " << full.cpu_seconds << " s CPU (" << full.wall_seconds
      << " s wall), call with a deadline " << cut.cpu_seconds << " s CPU ("
      << cut.wall_seconds << " s wall)";
  ExpectStillServing();
}

TEST_F(DeadlineTest, ClientCancellingMidKernelStopsTheWork) {
  const Cost full = MeasureFullCall();
  ASSERT_GT(full.cpu_seconds, 0.2) << "the heavy request used " << full.cpu_seconds << " s";

  const double cpu_before = ProcessCpuSeconds();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  std::thread canceller([&context, &full] {
    std::this_thread::sleep_for(EndAfter(full));
    context.TryCancel();
  });
  v1::EncodeObservationsResponse response;
  const grpc::Status status =
      server_.stub->EncodeObservations(&context, HeavyRequest(), &response);
  canceller.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);

  const Cost cut = CutCallCost(cpu_before, full);
  EXPECT_EQ(Handled("Canceled"), 1);  // go-grpc-prometheus spelling.
  EXPECT_LT(cut.cpu_seconds, 0.65 * full.cpu_seconds)
      << "full call " << full.cpu_seconds << " s CPU (" << full.wall_seconds
      << " s wall), cancelled call " << cut.cpu_seconds << " s CPU (" << cut.wall_seconds
      << " s wall)";
  ExpectStillServing();
}

}  // namespace
}  // namespace phasor::server::testing
