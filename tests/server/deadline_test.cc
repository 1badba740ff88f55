// Deadlines and cancellation inside a running call. A heavy
// EncodeObservations whose deadline passes (or whose client cancels) while the
// kernel runs must stop there, not finish the work nobody will read; the
// server keeps serving afterwards.
//
// The server's own timing is read from /metrics
// (grpc_server_handling_seconds), so the test sees when the handler finished,
// not just when the client gave up. It first measures the same request
// uninterrupted, so the bounds scale with the machine. The call is ended at
// 30% of that time: the first ~10% goes to allocating the 32 MiB response
// (page faults), and the end must fall inside the kernel's rows, where only
// core/'s own polling (ExecutionOptions::stop_requested) can stop it.
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace phasor::server::testing {
namespace {

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
  // sine, about 0.35 s of kernel on one quiet core from a 125 KB request.
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

  // The uninterrupted call: OK, the full output, and its server time.
  double MeasureFullCall() {
    v1::EncodeObservationsResponse response;
    const grpc::Status status = server_.stub->EncodeObservations(
        Context().get(), HeavyRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.features().data().size(), size_t{kRows} * 1024 * 4);
    return HandlingSecondsSum();
  }

  // When to end the interrupted call: 30% into the uninterrupted run time.
  static std::chrono::microseconds EndAfter(double full_seconds) {
    return std::chrono::microseconds(static_cast<int64_t>(0.3 * full_seconds * 1e6));
  }

  void ExpectStillServing() { ExpectServing(*server_.stub); }

  TestServer server_;
};

TEST_F(DeadlineTest, DeadlinePassingMidKernelStopsTheWork) {
  const double full_seconds = MeasureFullCall();
  // Below this the workload is too light to tell stopping from finishing.
  ASSERT_GT(full_seconds, 0.2) << "the heavy request ran in " << full_seconds << " s";

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + EndAfter(full_seconds));
  v1::EncodeObservationsResponse response;
  const grpc::Status status =
      server_.stub->EncodeObservations(&context, HeavyRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);

  WaitForHandledCalls(2);
  // The handler answers DEADLINE_EXCEEDED; when gRPC's own deadline timer
  // tears the call down first, no status is sent and the call counts as
  // cancelled. Either way it ended unfinished, once.
  EXPECT_EQ(Handled("DeadlineExceeded") + Handled("Canceled"), 1);
  const double cut_seconds = HandlingSecondsSum() - full_seconds;
  // Finishing the work takes full_seconds; stopping takes the deadline (30%
  // of it) plus one poll interval (64 rows here, under 1%).
  EXPECT_LT(cut_seconds, 0.65 * full_seconds)
      << "full call " << full_seconds << " s, call with a deadline " << cut_seconds << " s";
  ExpectStillServing();
}

TEST_F(DeadlineTest, ClientCancellingMidKernelStopsTheWork) {
  const double full_seconds = MeasureFullCall();
  ASSERT_GT(full_seconds, 0.2) << "the heavy request ran in " << full_seconds << " s";

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  std::thread canceller([&context, full_seconds] {
    std::this_thread::sleep_for(EndAfter(full_seconds));
    context.TryCancel();
  });
  v1::EncodeObservationsResponse response;
  const grpc::Status status =
      server_.stub->EncodeObservations(&context, HeavyRequest(), &response);
  canceller.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);

  WaitForHandledCalls(2);
  EXPECT_EQ(Handled("Canceled"), 1);  // go-grpc-prometheus spelling.
  const double cut_seconds = HandlingSecondsSum() - full_seconds;
  EXPECT_LT(cut_seconds, 0.65 * full_seconds)
      << "full call " << full_seconds << " s, cancelled call " << cut_seconds << " s";
  ExpectStillServing();
}

}  // namespace
}  // namespace phasor::server::testing
