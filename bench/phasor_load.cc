// phasor_load: the transport limit. Drives a running phasor-server (started
// with --enable_echo) with EncodePositions, ApplyRope and EncodeObservations
// calls and with Echo calls carrying the same number of bytes, and reports
// throughput and latency percentiles of each as Google Benchmark-style JSON.
//
// Payload S (bytes) is the size of the encoded tensor each call returns:
//   echo                 payload of S bytes, returned unchanged (S up, S down)
//   encode_positions     sinusoidal dim 256 over range 0..N−1 with content
//                        [N, 256] float32 fused (S up, S down), N = S/1024
//   apply_rope           query [T, 2, 128] float32, positions 0..T−1, plain
//                        RoPE HALF (S up, S down), T = S/1024
//   encode_observations  wide [T, 8] float32 values + int64 timestamps
//                        (S·5/32 up); content + time (dim 30) + calendar
//                        (nine fields CYCLIC, America/New_York) = 64 float32
//                        columns (S down), T = S/256
//   apply_rope_profile   apply_rope through the profile --rope_model with
//                        positions as an INT64 tensor [T]: the native twin of
//                        oip_apply_rope
//   oip_apply_rope       the same through the Open Inference Protocol:
//                        ModelInfer of model --rope_model, query and
//                        positions as raw_input_contents, the rotated query
//                        back in raw_output_contents
// The last two need a server started with a profile of that name whose spec
// is plain RoPE (bench/load_profiles.textpb).
// Modes:
//   latency     one connection, one call in flight, the methods taking turns
//               call by call: per-call latency
//   throughput  --connections channels (separate TCP connections), with
//               --concurrency calls in flight in total, closed loop, the
//               methods taking turns in --rounds windows: QPS
// Taking turns keeps slow drifts of a shared machine out of the ratios.
// Every response is checked (status OK, tensor of the expected byte count)
// before timing starts.
//
// Names: rpc/method=apply_rope/payload=1048576/mode=latency. Fields:
// real_time (mean ns), p50_ns, p90_ns, p99_ns, qps, calls, request_bytes,
// response_bytes.
//
// The client side is phasor_client_lib's EncoderClient (blocking calls), one
// thread per call in flight; on a small machine the client competes with the
// server for cores, equally for Echo and for the encoders.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "bench/load_spec.h"
#include "client/encoder_client.h"
#include "inference/grpc_service.grpc.pb.h"
#include "phasor/v1/encoder.pb.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "phasor-server address.");
ABSL_FLAG(std::string, methods, "echo,encode_positions,apply_rope,encode_observations",
          "Comma-separated calls to drive.");
ABSL_FLAG(std::string, payloads, "1024,1048576,16777216",
          "Comma-separated payload sizes S in bytes (multiples of 1024).");
ABSL_FLAG(std::string, modes, "latency,throughput", "latency and/or throughput.");
ABSL_FLAG(std::string, throughput_payloads, "1024",
          "Payloads also measured in throughput mode.");
ABSL_FLAG(double, seconds, 2.0, "Measured seconds per (method, payload, mode).");
ABSL_FLAG(int, rounds, 4, "Throughput mode: turns each method gets, seconds/rounds each.");
ABSL_FLAG(double, warmup_seconds, 0.3, "Unmeasured seconds before each run.");
ABSL_FLAG(int, connections, 4, "Channels (TCP connections) in throughput mode.");
ABSL_FLAG(int, concurrency, 16, "Calls in flight in throughput mode.");
ABSL_FLAG(int, max_message_bytes, 64 << 20, "Client send/receive limit, bytes.");
ABSL_FLAG(std::string, channel_args, "",
          "Extra integer channel arguments, name=value,... (e.g. "
          "grpc.http2.lookahead_bytes=67108864), to measure transport settings.");
ABSL_FLAG(double, wait_seconds, 30.0, "How long to wait for the server to be up.");
ABSL_FLAG(std::string, out, "", "Write the JSON here instead of stdout.");
ABSL_FLAG(std::string, rope_model, "load-rope",
          "Profile (and Open Inference Protocol model) of plain RoPE for "
          "apply_rope_profile and oip_apply_rope.");

namespace phasor::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kHeadDim = 128;
constexpr int64_t kRopeHeads = 2;
constexpr int64_t kPositionsDim = 256;
constexpr int64_t kChannels = 8;
constexpr int64_t kObservationColumns = 16 + 30 + 18;  // content + time + calendar.

// Deterministic float32 bytes (see bench_common.h's InputValue).
std::string FloatBytes(int64_t count) {
  std::string bytes(static_cast<size_t>(count) * 4, '\0');
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t hashed = (static_cast<uint64_t>(i) * uint64_t{2654435761}) & 0xffffffffu;
    const float value =
        static_cast<float>(static_cast<double>(hashed) / 4294967296.0 * 2.0 - 1.0);
    std::memcpy(&bytes[static_cast<size_t>(i) * 4], &value, 4);
  }
  return bytes;
}

void SetTensor(v1::Tensor* tensor, std::vector<int64_t> shape, v1::DType dtype,
               std::string data) {
  for (int64_t extent : shape) tensor->add_shape(extent);
  tensor->set_dtype(dtype);
  tensor->set_data(std::move(data));
}

// One kind of call at one payload: builds its request once and performs it.
class Call {
 public:
  virtual ~Call() = default;
  // Performs one call; checks the response when `check`.
  virtual absl::Status Run(const EncoderClient& client, bool check) const = 0;
  virtual size_t request_bytes() const = 0;
  size_t response_bytes() const { return response_bytes_; }

 protected:
  explicit Call(size_t response_bytes) : response_bytes_(response_bytes) {}
  absl::Status CheckSize(size_t got) const {
    if (got == response_bytes_) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat("response tensor has ", got, " bytes, expected ", response_bytes_));
  }

 private:
  size_t response_bytes_;
};

class EchoCall final : public Call {
 public:
  explicit EchoCall(int64_t payload) : Call(static_cast<size_t>(payload)) {
    request_.set_payload(FloatBytes(payload / 4));
  }
  absl::Status Run(const EncoderClient& client, bool check) const override {
    absl::StatusOr<v1::EchoResponse> response = client.Echo(request_);
    if (!response.ok()) return response.status();
    return check ? CheckSize(response->payload().size()) : absl::OkStatus();
  }
  size_t request_bytes() const override { return request_.ByteSizeLong(); }

 private:
  v1::EchoRequest request_;
};

class EncodePositionsCall final : public Call {
 public:
  explicit EncodePositionsCall(int64_t payload) : Call(static_cast<size_t>(payload)) {
    const int64_t rows = payload / (kPositionsDim * 4);
    request_.mutable_positions()->mutable_range()->set_start(0);
    request_.mutable_positions()->mutable_range()->set_count(rows);
    request_.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(
        kPositionsDim);
    SetTensor(request_.mutable_content(), {rows, kPositionsDim}, v1::FLOAT32,
              FloatBytes(rows * kPositionsDim));
    request_.set_content_scale(16.0);
  }
  absl::Status Run(const EncoderClient& client, bool check) const override {
    absl::StatusOr<v1::EncodePositionsResponse> response = client.EncodePositions(request_);
    if (!response.ok()) return response.status();
    return check ? CheckSize(response->encodings().data().size()) : absl::OkStatus();
  }
  size_t request_bytes() const override { return request_.ByteSizeLong(); }

 private:
  v1::EncodePositionsRequest request_;
};

class ApplyRopeCall final : public Call {
 public:
  explicit ApplyRopeCall(int64_t payload) : Call(static_cast<size_t>(payload)) {
    const int64_t tokens = payload / (kRopeHeads * kHeadDim * 4);
    SetTensor(request_.mutable_query(), {tokens, kRopeHeads, kHeadDim}, v1::FLOAT32,
              FloatBytes(tokens * kRopeHeads * kHeadDim));
    request_.mutable_positions()->mutable_range()->set_start(0);
    request_.mutable_positions()->mutable_range()->set_count(tokens);
    request_.mutable_spec()->mutable_rope();  // Plain RoPE, HALF, rd = D.
  }
  absl::Status Run(const EncoderClient& client, bool check) const override {
    absl::StatusOr<v1::ApplyRopeResponse> response = client.ApplyRope(request_);
    if (!response.ok()) return response.status();
    return check ? CheckSize(response->query().data().size()) : absl::OkStatus();
  }
  size_t request_bytes() const override { return request_.ByteSizeLong(); }

 private:
  v1::ApplyRopeRequest request_;
};

class EncodeObservationsCall final : public Call {
 public:
  explicit EncodeObservationsCall(int64_t payload) : Call(static_cast<size_t>(payload)) {
    const int64_t rows = payload / (kObservationColumns * 4);
    std::string times(static_cast<size_t>(rows) * 8, '\0');
    for (int64_t t = 0; t < rows; ++t) {
      // One row every 37 s from 2026-01-01T00:00:00Z.
      const int64_t ns = int64_t{1767225600} * 1000000000 + t * int64_t{37000000000};
      std::memcpy(&times[static_cast<size_t>(t) * 8], &ns, 8);
    }
    v1::Observations* observations = request_.mutable_observations();
    SetTensor(observations->mutable_timestamps(), {rows}, v1::INT64, std::move(times));
    SetTensor(observations->mutable_values(), {rows, kChannels}, v1::FLOAT32,
              FloatBytes(rows * kChannels));
    observations->set_num_channels(kChannels);
    bench::SetLoadObservationsSpec(request_.mutable_spec()->mutable_temporal());
  }
  absl::Status Run(const EncoderClient& client, bool check) const override {
    absl::StatusOr<v1::EncodeObservationsResponse> response =
        client.EncodeObservations(request_);
    if (!response.ok()) return response.status();
    return check ? CheckSize(response->features().data().size()) : absl::OkStatus();
  }
  size_t request_bytes() const override { return request_.ByteSizeLong(); }

 private:
  v1::EncodeObservationsRequest request_;
};

// Positions 0..count-1 as an INT64 tensor.
void SetPositionValues(v1::Tensor* tensor, int64_t count) {
  std::string data(static_cast<size_t>(count) * 8, '\0');
  for (int64_t t = 0; t < count; ++t) std::memcpy(&data[static_cast<size_t>(t) * 8], &t, 8);
  SetTensor(tensor, {count}, v1::INT64, std::move(data));
}

class ApplyRopeProfileCall final : public Call {
 public:
  explicit ApplyRopeProfileCall(int64_t payload) : Call(static_cast<size_t>(payload)) {
    const int64_t tokens = payload / (kRopeHeads * kHeadDim * 4);
    SetTensor(request_.mutable_query(), {tokens, kRopeHeads, kHeadDim}, v1::FLOAT32,
              FloatBytes(tokens * kRopeHeads * kHeadDim));
    SetPositionValues(request_.mutable_positions()->mutable_values(), tokens);
    request_.set_profile(absl::GetFlag(FLAGS_rope_model));
  }
  absl::Status Run(const EncoderClient& client, bool check) const override {
    absl::StatusOr<v1::ApplyRopeResponse> response = client.ApplyRope(request_);
    if (!response.ok()) return response.status();
    return check ? CheckSize(response->query().data().size()) : absl::OkStatus();
  }
  size_t request_bytes() const override { return request_.ByteSizeLong(); }

 private:
  v1::ApplyRopeRequest request_;
};

// ApplyRopeProfileCall's request as a ModelInferRequest, on a generated
// inference stub over the client's channel (one per thread and channel, so
// the calls share nothing but the channel, as EncoderClient's do).
class OipApplyRopeCall final : public Call {
 public:
  explicit OipApplyRopeCall(int64_t payload) : Call(static_cast<size_t>(payload)) {
    const int64_t tokens = payload / (kRopeHeads * kHeadDim * 4);
    request_.set_model_name(absl::GetFlag(FLAGS_rope_model));
    inference::ModelInferRequest::InferInputTensor* query = request_.add_inputs();
    query->set_name("query");
    query->set_datatype("FP32");
    for (const int64_t extent : {tokens, kRopeHeads, kHeadDim}) query->add_shape(extent);
    *request_.add_raw_input_contents() = FloatBytes(tokens * kRopeHeads * kHeadDim);
    v1::Tensor positions;
    SetPositionValues(&positions, tokens);
    inference::ModelInferRequest::InferInputTensor* input = request_.add_inputs();
    input->set_name("positions");
    input->set_datatype("INT64");
    input->add_shape(tokens);
    *request_.add_raw_input_contents() = positions.data();
  }
  absl::Status Run(const EncoderClient& client, bool check) const override {
    thread_local const grpc::Channel* stub_channel = nullptr;
    thread_local std::unique_ptr<inference::GRPCInferenceService::Stub> stub;
    if (stub == nullptr || stub_channel != client.channel().get()) {
      stub = inference::GRPCInferenceService::NewStub(client.channel());
      stub_channel = client.channel().get();
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    inference::ModelInferResponse response;
    const grpc::Status status = stub->ModelInfer(&context, request_, &response);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    if (!check) return absl::OkStatus();
    if (response.raw_output_contents_size() != 1) {
      return absl::InternalError("ModelInfer returned other than one output");
    }
    return CheckSize(response.raw_output_contents(0).size());
  }
  size_t request_bytes() const override { return request_.ByteSizeLong(); }

 private:
  inference::ModelInferRequest request_;
};

std::unique_ptr<Call> MakeCall(const std::string& method, int64_t payload) {
  if (method == "echo") return std::make_unique<EchoCall>(payload);
  if (method == "encode_positions") return std::make_unique<EncodePositionsCall>(payload);
  if (method == "apply_rope") return std::make_unique<ApplyRopeCall>(payload);
  if (method == "apply_rope_profile") return std::make_unique<ApplyRopeProfileCall>(payload);
  if (method == "oip_apply_rope") return std::make_unique<OipApplyRopeCall>(payload);
  if (method == "encode_observations") {
    return std::make_unique<EncodeObservationsCall>(payload);
  }
  return nullptr;
}

// A channel of its own: a local subchannel pool keeps gRPC from sharing one
// TCP connection between channels to the same target.
std::unique_ptr<EncoderClient> Connect(const std::string& target, int index) {
  grpc::ChannelArguments args;
  const int max_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  args.SetMaxReceiveMessageSize(max_bytes);
  args.SetMaxSendMessageSize(max_bytes);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("phasor.load.connection", index);
  for (absl::string_view item : absl::StrSplit(absl::GetFlag(FLAGS_channel_args), ',',
                                               absl::SkipEmpty())) {
    const std::pair<std::string, std::string> name_value = absl::StrSplit(item, '=');
    int value = 0;
    if (!absl::SimpleAtoi(name_value.second, &value)) {
      std::fprintf(stderr, "phasor_load: --channel_args: %s is not name=integer\n",
                   std::string(item).c_str());
      std::exit(2);
    }
    args.SetInt(name_value.first, value);
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  ClientOptions options;
  options.target = target;
  options.deadline = absl::Seconds(60);
  options.max_message_bytes = max_bytes;
  return std::make_unique<EncoderClient>(std::move(channel), options);
}

struct RunResult {
  int64_t calls = 0;
  double seconds = 0;
  std::vector<double> latencies_ns;
  std::string error;
};

// Closed loop: `concurrency` threads, spread over `clients`, each issuing
// calls back to back; warm-up first, then the measured window.
RunResult Drive(const Call& call, const std::vector<std::unique_ptr<EncoderClient>>& clients,
                int concurrency, double warmup_seconds, double seconds) {
  std::atomic<int> phase{0};  // 0 warm-up, 1 measuring, 2 stop.
  std::vector<std::vector<double>> per_thread(concurrency);
  std::vector<std::string> errors(concurrency);
  std::vector<std::thread> threads;
  for (int i = 0; i < concurrency; ++i) {
    threads.emplace_back([&, i] {
      const EncoderClient& client = *clients[i % clients.size()];
      std::vector<double>& latencies = per_thread[i];
      while (true) {
        const int now_phase = phase.load(std::memory_order_relaxed);
        if (now_phase == 2) break;
        const Clock::time_point start = Clock::now();
        const absl::Status status = call.Run(client, /*check=*/false);
        const Clock::time_point end = Clock::now();
        if (!status.ok()) {
          errors[i] = status.ToString();
          break;
        }
        // Counted only if the call both started and ended in the window.
        if (now_phase == 1 && phase.load(std::memory_order_relaxed) == 1) {
          latencies.push_back(
              std::chrono::duration<double, std::nano>(end - start).count());
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(warmup_seconds));
  phase = 1;
  const Clock::time_point start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  phase = 2;
  const Clock::time_point end = Clock::now();
  for (std::thread& thread : threads) thread.join();
  RunResult result;
  result.seconds = std::chrono::duration<double>(end - start).count();
  for (int i = 0; i < concurrency; ++i) {
    if (!errors[i].empty() && result.error.empty()) result.error = errors[i];
    result.latencies_ns.insert(result.latencies_ns.end(), per_thread[i].begin(),
                               per_thread[i].end());
  }
  result.calls = static_cast<int64_t>(result.latencies_ns.size());
  return result;
}

// Latency mode: one connection, one call in flight, the methods taking turns
// call by call (echo, encoder, echo, ...), so slow drifts of the machine
// (other processes, frequency) affect every method alike.
std::vector<RunResult> DriveInterleaved(const std::vector<const Call*>& calls,
                                        const EncoderClient& client,
                                        double warmup_seconds, double seconds) {
  std::vector<RunResult> results(calls.size());
  const auto run_for = [&](double window, bool record) {
    const Clock::time_point end =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(window));
    while (Clock::now() < end) {
      for (size_t m = 0; m < calls.size(); ++m) {
        const Clock::time_point start = Clock::now();
        const absl::Status status = calls[m]->Run(client, /*check=*/false);
        const Clock::time_point stop = Clock::now();
        if (!status.ok()) {
          results[m].error = status.ToString();
          return;
        }
        if (record) {
          const double ns = std::chrono::duration<double, std::nano>(stop - start).count();
          results[m].latencies_ns.push_back(ns);
          results[m].seconds += ns * 1e-9;
        }
      }
    }
  };
  run_for(warmup_seconds, false);
  run_for(seconds, true);
  for (RunResult& result : results) {
    result.calls = static_cast<int64_t>(result.latencies_ns.size());
  }
  return results;
}

double Percentile(std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t index = std::min(sorted.size() - 1,
                                static_cast<size_t>(q * static_cast<double>(sorted.size())));
  return sorted[index];
}

std::vector<std::string> SplitList(const std::string& text) {
  return absl::StrSplit(text, ',', absl::SkipEmpty());
}

int Main() {
  const std::string target = absl::GetFlag(FLAGS_target);
  // Wait for the server (it may still be starting).
  {
    std::unique_ptr<EncoderClient> probe = Connect(target, -1);
    const auto deadline = std::chrono::system_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(
                              absl::GetFlag(FLAGS_wait_seconds) * 1000));
    if (!probe->channel()->WaitForConnected(deadline)) {
      std::fprintf(stderr, "phasor_load: no server at %s\n", target.c_str());
      return 1;
    }
  }
  std::vector<std::unique_ptr<EncoderClient>> single;
  single.push_back(Connect(target, 0));
  std::vector<std::unique_ptr<EncoderClient>> many;
  for (int i = 0; i < std::max(1, absl::GetFlag(FLAGS_connections)); ++i) {
    many.push_back(Connect(target, i + 1));
  }
  const std::vector<std::string> modes = SplitList(absl::GetFlag(FLAGS_modes));
  const std::vector<std::string> methods = SplitList(absl::GetFlag(FLAGS_methods));
  const std::vector<std::string> throughput_payloads =
      SplitList(absl::GetFlag(FLAGS_throughput_payloads));
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const double warmup = absl::GetFlag(FLAGS_warmup_seconds);
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  std::vector<std::string> rows;
  int failures = 0;
  const auto report = [&](const std::string& method, int64_t payload,
                          const std::string& mode, const Call& call, RunResult& result,
                          int concurrency, int connections) {
    const std::string name =
        absl::StrCat("rpc/method=", method, "/payload=", payload, "/mode=", mode);
    if (!result.error.empty() || result.calls == 0) {
      std::fprintf(stderr, "phasor_load: %s: %s\n", name.c_str(),
                   result.error.empty() ? "no call completed" : result.error.c_str());
      ++failures;
      return;
    }
    std::sort(result.latencies_ns.begin(), result.latencies_ns.end());
    double sum = 0;
    for (double v : result.latencies_ns) sum += v;
    const double mean = sum / static_cast<double>(result.calls);
    const double qps = static_cast<double>(result.calls) / result.seconds;
    const double p50 = Percentile(result.latencies_ns, 0.50);
    const double p90 = Percentile(result.latencies_ns, 0.90);
    const double p99 = Percentile(result.latencies_ns, 0.99);
    std::fprintf(stderr,
                 "%-62s %8lld calls %10.1f qps  p50 %9.3f ms  p90 %9.3f ms  p99 %9.3f ms\n",
                 name.c_str(), static_cast<long long>(result.calls), qps, p50 / 1e6,
                 p90 / 1e6, p99 / 1e6);
    rows.push_back(absl::StrCat(
        "  {\"name\": \"", name, "\", \"run_type\": \"iteration\", \"real_time\": ", mean,
        ", \"time_unit\": \"ns\", \"iterations\": ", result.calls, ", \"qps\": ", qps,
        ", \"p50_ns\": ", p50, ", \"p90_ns\": ", p90, ", \"p99_ns\": ", p99,
        ", \"calls\": ", result.calls, ", \"concurrency\": ", concurrency,
        ", \"connections\": ", connections, ", \"request_bytes\": ", call.request_bytes(),
        ", \"response_bytes\": ", call.response_bytes(), "}"));
  };
  for (const std::string& payload_text : SplitList(absl::GetFlag(FLAGS_payloads))) {
    int64_t payload = 0;
    if (!absl::SimpleAtoi(payload_text, &payload) || payload < 1024 || payload % 1024 != 0) {
      std::fprintf(stderr, "phasor_load: bad payload %s\n", payload_text.c_str());
      return 2;
    }
    std::vector<std::string> names;
    std::vector<std::unique_ptr<Call>> calls;
    for (const std::string& method : methods) {
      std::unique_ptr<Call> call = MakeCall(method, payload);
      if (call == nullptr) {
        std::fprintf(stderr, "phasor_load: unknown method %s\n", method.c_str());
        return 2;
      }
      const absl::Status checked = call->Run(*single[0], /*check=*/true);
      if (!checked.ok()) {
        std::fprintf(stderr, "phasor_load: %s at %lld bytes: %s\n", method.c_str(),
                     static_cast<long long>(payload), checked.ToString().c_str());
        ++failures;
        continue;
      }
      names.push_back(method);
      calls.push_back(std::move(call));
    }
    std::vector<const Call*> call_ptrs;
    for (const auto& call : calls) call_ptrs.push_back(call.get());
    if (std::find(modes.begin(), modes.end(), "latency") != modes.end()) {
      std::vector<RunResult> results =
          DriveInterleaved(call_ptrs, *single[0], warmup, seconds * calls.size());
      for (size_t m = 0; m < calls.size(); ++m) {
        report(names[m], payload, "latency", *calls[m], results[m], 1, 1);
      }
    }
    if (std::find(modes.begin(), modes.end(), "throughput") != modes.end() &&
        std::find(throughput_payloads.begin(), throughput_payloads.end(), payload_text) !=
            throughput_payloads.end()) {
      // Methods take turns in `rounds` windows each, for the same reason.
      const int concurrency = std::max(1, absl::GetFlag(FLAGS_concurrency));
      std::vector<RunResult> totals(calls.size());
      for (int round = 0; round < rounds; ++round) {
        for (size_t m = 0; m < calls.size(); ++m) {
          RunResult window = Drive(*calls[m], many, concurrency,
                                   round == 0 ? warmup : 0.05, seconds / rounds);
          RunResult& total = totals[m];
          if (!window.error.empty()) total.error = window.error;
          total.seconds += window.seconds;
          total.latencies_ns.insert(total.latencies_ns.end(), window.latencies_ns.begin(),
                                    window.latencies_ns.end());
          total.calls += window.calls;
        }
      }
      for (size_t m = 0; m < calls.size(); ++m) {
        report(names[m], payload, "throughput", *calls[m], totals[m], concurrency,
               static_cast<int>(many.size()));
      }
    }
  }
  const std::string json = absl::StrCat(
      "{\"context\": {\"program\": \"phasor_load\", \"target\": \"", target,
      "\", \"hardware_concurrency\": ", std::thread::hardware_concurrency(),
      "},\n \"benchmarks\": [\n", absl::StrJoin(rows, ",\n"), "\n]}\n");
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::fputs(json.c_str(), stdout);
  } else {
    std::FILE* file = std::fopen(out.c_str(), "w");
    if (file == nullptr) {
      std::fprintf(stderr, "phasor_load: cannot write %s\n", out.c_str());
      return 1;
    }
    std::fputs(json.c_str(), file);
    std::fclose(file);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace phasor::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Load generator: encoder RPCs against Echo of the same bytes on one server.");
  absl::ParseCommandLine(argc, argv);
  return phasor::bench::Main();
}
