// phasor_soak: a long mixed-load run against a running phasor-server, to find
// what short benchmarks and tests do not: memory that grows, threads or file
// descriptors that pile up, latency that drifts, rare wrong answers under
// concurrency, and error paths that stop answering correctly after hours.
//
// --clients channels (separate TCP connections), each driven by
// --threads_per_client threads, issue calls back to back for
// --duration_seconds. Every call picks a kind at random by weight (the table
// in MakeKinds; --mix overrides weights, "name=weight,..."):
//   EncodePositions     sinusoidal, 32 KiB out; and 1 MiB in + 1 MiB out
//                       (content fused)
//   ApplyRope           fp32 query+key with YaRN; bf16 query+key with Llama 3
//                       bands at real-valued (continuous-time) positions
//   RopeTables          2048 positions, rd 128, Llama 3 bands (1 MiB out)
//   AlibiBias           12 heads (not a power of two), causal bias [12,32,256]
//   Describe            sinusoidal dim 256, 512 offsets
//   ListProfiles
//   EncodeObservations  wide [512, 8] with ~30% NaN, content + time + gaps +
//                       calendar (America/New_York, across the 2026 spring
//                       DST change, holidays, UTC offset, DST flag); and the
//                       same series through a server profile (--profile)
//   EncodeObservationsStream  the same series in 4 chunks of 128 rows
//   Health/Check        "" and "phasor.v1.Encoder", expecting SERVING
// and a small share of bad requests, each with the code it must get:
//   unknown time zone (a new name every call, so a server that caches
//   failed lookups by name grows)    INVALID_ARGUMENT
//   tensor shape/byte-count mismatch INVALID_ARGUMENT
//   range count over the element cap RESOURCE_EXHAUSTED (EncodePositions,
//                                    RopeTables)
//   unparseable request bytes sent through grpc::GenericStub to each unary
//   method in turn                   INVALID_ARGUMENT
//
// Every call has a deadline (--deadline_seconds). An error is any outcome
// other than the expected one: another status code, or an OK response whose
// bytes differ from the first response to the same request (responses are
// deterministic by contract, so a difference is corruption under load).
//
// --server_pid: the server's VmRSS, VmHWM (peak RSS), thread count and open
// file descriptors are read from /proc/<pid> at the start, every
// --sample_seconds, and at the end, together with the running call and error
// counts and the machine's load average. Output: a table on stdout and one
// JSON object on one line (--json_out, else stdout). Exit status 0 when no
// call had an unexpected outcome.
//
// The client side is phasor_client_lib's EncoderClient (blocking calls), one
// thread per call in flight, as in bench/phasor_load.cc.
#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/encoder_client.h"
#include "phasor/v1/encoder.pb.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "phasor-server address.");
ABSL_FLAG(double, duration_seconds, 60.0, "How long to drive the server.");
ABSL_FLAG(int, clients, 4, "Channels, each its own TCP connection.");
ABSL_FLAG(int, threads_per_client, 1,
          "Threads per channel, each with one call in flight.");
ABSL_FLAG(double, deadline_seconds, 10.0, "Deadline of every call (and of a whole stream).");
ABSL_FLAG(int, server_pid, 0,
          "Server process to read VmRSS/VmHWM/threads/fds from (/proc); 0 = none.");
ABSL_FLAG(double, sample_seconds, 30.0, "Interval of the /proc samples.");
ABSL_FLAG(std::string, profile, "",
          "Name of a server profile with a temporal spec; when set, "
          "EncodeObservations also runs through it.");
ABSL_FLAG(std::string, mix, "",
          "Weight overrides, \"kind=weight,...\" (kind names as in the table; "
          "0 disables one).");
ABSL_FLAG(int64_t, over_limit_count, int64_t{1} << 40,
          "positions.range.count of the over-the-limit requests; must exceed "
          "the server's --max_elements_per_request.");
ABSL_FLAG(int, max_message_bytes, 64 << 20, "Client send/receive limit, bytes.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the call mix.");
ABSL_FLAG(double, wait_seconds, 30.0, "How long to wait for the server to be up.");
ABSL_FLAG(std::string, json_out, "", "Write the JSON line here instead of stdout.");

namespace phasor::bench {
namespace {

using Clock = std::chrono::steady_clock;

// 2026-03-07T12:00:00Z: the series below crosses America/New_York's spring
// DST change (2026-03-08 07:00 UTC).
constexpr int64_t kSeriesStartNs = int64_t{1772884800} * 1000000000;
constexpr int64_t kSeriesRows = 512;
constexpr int64_t kSeriesChannels = 8;
constexpr int64_t kStreamChunks = 4;

uint64_t Hash(uint64_t i) { return (i * uint64_t{2654435761}) & 0xffffffffu; }

// Deterministic values in [−1, 1) (bench_common.h's InputValue).
float Value(uint64_t i) {
  return static_cast<float>(static_cast<double>(Hash(i)) / 4294967296.0 * 2.0 - 1.0);
}

std::string FloatBytes(int64_t count) {
  std::string bytes(static_cast<size_t>(count) * 4, '\0');
  for (int64_t i = 0; i < count; ++i) {
    const float value = Value(static_cast<uint64_t>(i));
    std::memcpy(&bytes[static_cast<size_t>(i) * 4], &value, 4);
  }
  return bytes;
}

// bfloat16 by round-to-nearest-even of the float32 bits (finite inputs).
std::string BFloat16Bytes(int64_t count) {
  std::string bytes(static_cast<size_t>(count) * 2, '\0');
  for (int64_t i = 0; i < count; ++i) {
    const float value = Value(static_cast<uint64_t>(i));
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    const uint16_t half =
        static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    std::memcpy(&bytes[static_cast<size_t>(i) * 2], &half, 2);
  }
  return bytes;
}

template <typename T>
std::string RawBytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

void SetTensor(v1::Tensor* tensor, std::vector<int64_t> shape, v1::DType dtype,
               std::string data) {
  for (int64_t extent : shape) tensor->add_shape(extent);
  tensor->set_dtype(dtype);
  tensor->set_data(std::move(data));
}

// A client-side check failed: the server answered OK with the wrong bytes.
absl::Status Mismatch(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("client check: ", what));
}

absl::Status CheckTensor(const v1::Tensor& tensor, absl::string_view field,
                         const std::vector<int64_t>& shape, int64_t element_bytes) {
  const std::vector<int64_t> got(tensor.shape().begin(), tensor.shape().end());
  if (got != shape) {
    return Mismatch(absl::StrCat(field, ".shape [", absl::StrJoin(got, ","),
                                 "], expected [", absl::StrJoin(shape, ","), "]"));
  }
  int64_t elements = 1;
  for (int64_t extent : shape) elements *= extent;
  if (static_cast<int64_t>(tensor.data().size()) != elements * element_bytes) {
    return Mismatch(absl::StrCat(field, ".data: ", tensor.data().size(), " bytes, expected ",
                                 elements * element_bytes));
  }
  return absl::OkStatus();
}

// Features [rows, F] with F > 0 and F·rows·4 bytes.
absl::Status CheckFeatures(const v1::Tensor& features, int64_t rows) {
  if (features.shape_size() != 2 || features.shape(0) != rows || features.shape(1) <= 0) {
    return Mismatch(absl::StrCat("features: rank ", features.shape_size(), ", expected [",
                                 rows, ", F]"));
  }
  return CheckTensor(features, "features", {rows, features.shape(1)}, 4);
}

std::string Fingerprint(const google::protobuf::Message& message) {
  const std::string bytes = message.SerializeAsString();
  return absl::StrCat(bytes.size(), ":", std::hash<std::string_view>()(bytes));
}

// One channel: the typed client and a generic stub on the same connection.
struct Connection {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<EncoderClient> client;
  std::unique_ptr<grpc::GenericStub> generic;
};

// A local subchannel pool keeps gRPC from sharing one TCP connection between
// channels to the same target (as in phasor_load).
std::unique_ptr<Connection> Connect(const std::string& target, int index) {
  grpc::ChannelArguments args;
  const int max_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  args.SetMaxReceiveMessageSize(max_bytes);
  args.SetMaxSendMessageSize(max_bytes);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("phasor.soak.connection", index);
  auto connection = std::make_unique<Connection>();
  connection->channel =
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  ClientOptions options;
  options.target = target;
  options.deadline = absl::Seconds(absl::GetFlag(FLAGS_deadline_seconds));
  options.max_message_bytes = max_bytes;
  connection->client = std::make_unique<EncoderClient>(connection->channel, options);
  connection->generic = std::make_unique<grpc::GenericStub>(connection->channel);
  return connection;
}

// One kind of call. `run` performs call number `sequence` and, when the
// server answered OK, stores a fingerprint of the response in `*fingerprint`
// (empty = not compared).
struct Kind {
  std::string name;
  int weight = 0;
  absl::StatusCode expected = absl::StatusCode::kOk;
  std::function<absl::Status(const Connection&, uint64_t sequence, std::string* fingerprint)>
      run;
};

// The observation series: irregular times (1 s .. 10 min apart, a few
// repeated), ~30% of values NaN (unobserved).
v1::Observations SeriesRows(int64_t first_row, int64_t rows) {
  std::vector<int64_t> times;
  int64_t t = kSeriesStartNs;
  for (int64_t r = 0; r < first_row + rows; ++r) {
    const uint64_t h = Hash(static_cast<uint64_t>(r) + 7);
    if (r > 0 && h % 50 != 0) t += (1 + static_cast<int64_t>(h % 600)) * 1000000000;
    if (r >= first_row) times.push_back(t);
  }
  std::vector<float> values;
  for (int64_t r = first_row; r < first_row + rows; ++r) {
    for (int64_t c = 0; c < kSeriesChannels; ++c) {
      const uint64_t i = static_cast<uint64_t>(r * kSeriesChannels + c);
      values.push_back(Hash(i + 99) % 10 < 3 ? std::numeric_limits<float>::quiet_NaN()
                                             : Value(i));
    }
  }
  v1::Observations observations;
  SetTensor(observations.mutable_timestamps(), {rows}, v1::INT64, RawBytes(times));
  SetTensor(observations.mutable_values(), {rows, kSeriesChannels}, v1::FLOAT32,
            RawBytes(values));
  observations.set_num_channels(kSeriesChannels);
  for (int64_t c = 0; c < kSeriesChannels; ++c) {
    observations.add_channel_names(absl::StrCat("channel_", c));
  }
  return observations;
}

// Every block on: content, time, gaps, calendar in a DST zone with holidays.
v1::TemporalSpec SeriesSpec() {
  v1::TemporalSpec spec;
  spec.mutable_content();
  spec.mutable_time()->set_dim(16);
  spec.mutable_time()->set_min_period_seconds(1.0);
  spec.mutable_time()->set_max_period_seconds(365.2425 * 86400.0);
  v1::GapsBlock* gaps = spec.mutable_gaps();
  gaps->set_first_observation(v1::GapsBlock::FLAG);
  gaps->set_transform(v1::GapsBlock::LOG1P);
  gaps->set_unit_seconds(60.0);
  gaps->set_include_mask(true);
  gaps->set_include_last_value(true);
  v1::CalendarBlock* calendar = spec.mutable_calendar();
  calendar->set_time_zone("America/New_York");
  for (int field = v1::CalendarBlock::SECOND_OF_MINUTE; field <= v1::CalendarBlock::QUARTER;
       ++field) {
    calendar->add_fields(static_cast<v1::CalendarBlock::Field>(field));
  }
  calendar->set_encoding(v1::CalendarBlock::CYCLIC);
  calendar->set_fractional(true);
  calendar->set_include_utc_offset(true);
  calendar->set_include_dst(true);
  v1::HolidayFeatures* holidays = calendar->mutable_holidays();
  for (const char* date : {"2026-01-01", "2026-01-19", "2026-02-16", "2026-05-25"}) {
    holidays->add_dates(date);
  }
  holidays->set_kernel(v1::HolidayFeatures::EXPONENTIAL);
  holidays->set_alpha(0.5);
  return spec;
}

// Sends `bytes` as the request of unary `method` through the generic stub.
grpc::Status GenericUnary(const Connection& connection, const std::string& method,
                          const std::string& bytes) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(
      absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_deadline_seconds))));
  grpc::Slice slice(bytes);
  const grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Notification done;
  connection.generic->UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                                [&status, &done](grpc::Status result) {
                                  status = std::move(result);
                                  done.Notify();
                                });
  done.WaitForNotification();  // Bounded by the call's deadline.
  return status;
}

std::vector<Kind> MakeKinds() {
  std::vector<Kind> kinds;
  const auto add = [&kinds](std::string name, int weight, absl::StatusCode expected,
                            auto run) {
    kinds.push_back(Kind{std::move(name), weight, expected, std::move(run)});
  };
  using absl::StatusCode;

  {
    v1::EncodePositionsRequest request;
    request.mutable_positions()->mutable_range()->set_count(128);
    request.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(64);
    add("EncodePositions/small", 16, StatusCode::kOk,
        [request](const Connection& c, uint64_t, std::string* fingerprint) -> absl::Status {
          auto response = c.client->EncodePositions(request);
          if (!response.ok()) return response.status();
          *fingerprint = Fingerprint(*response);
          return CheckTensor(response->encodings(), "encodings", {128, 64}, 4);
        });
  }
  {
    constexpr int64_t kRows = 1024, kDim = 256;  // 1 MiB each way.
    v1::EncodePositionsRequest request;
    request.mutable_positions()->mutable_range()->set_start(1000);
    request.mutable_positions()->mutable_range()->set_count(kRows);
    v1::SinusoidalSpec* sinusoidal =
        request.mutable_spec()->mutable_positional()->mutable_sinusoidal();
    sinusoidal->set_dim(kDim);
    sinusoidal->set_layout(v1::SinusoidalSpec::SPLIT_SIN_COS);
    SetTensor(request.mutable_content(), {kRows, kDim}, v1::FLOAT32,
              FloatBytes(kRows * kDim));
    request.set_content_scale(16.0);
    add("EncodePositions/1MiB", 4, StatusCode::kOk,
        [request](const Connection& c, uint64_t, std::string* fingerprint) -> absl::Status {
          auto response = c.client->EncodePositions(request);
          if (!response.ok()) return response.status();
          *fingerprint = Fingerprint(*response);
          return CheckTensor(response->encodings(), "encodings", {kRows, kDim}, 4);
        });
  }
  {
    constexpr int64_t kTokens = 128, kHeads = 8, kKvHeads = 2, kDim = 64;
    v1::ApplyRopeRequest request;
    SetTensor(request.mutable_query(), {kTokens, kHeads, kDim}, v1::FLOAT32,
              FloatBytes(kTokens * kHeads * kDim));
    SetTensor(request.mutable_key(), {kTokens, kKvHeads, kDim}, v1::FLOAT32,
              FloatBytes(kTokens * kKvHeads * kDim));
    request.mutable_positions()->mutable_range()->set_start(4096);
    request.mutable_positions()->mutable_range()->set_count(kTokens);
    v1::RopeSpec* rope = request.mutable_spec()->mutable_rope();
    rope->set_max_position_embeddings(8192);
    rope->mutable_scaling()->mutable_yarn()->set_factor(4.0);
    rope->mutable_scaling()->mutable_yarn()->set_original_max_position_embeddings(2048);
    add("ApplyRope/fp32", 10, StatusCode::kOk,
        [request](const Connection& c, uint64_t, std::string* fingerprint) -> absl::Status {
          auto response = c.client->ApplyRope(request);
          if (!response.ok()) return response.status();
          *fingerprint = Fingerprint(*response);
          absl::Status status =
              CheckTensor(response->query(), "query", {kTokens, kHeads, kDim}, 4);
          if (!status.ok()) return status;
          return CheckTensor(response->key(), "key", {kTokens, kKvHeads, kDim}, 4);
        });

    // The same call with one float missing from query.data.
    v1::ApplyRopeRequest bad = request;
    bad.mutable_query()->mutable_data()->resize(bad.query().data().size() - 4);
    add("ApplyRope/bad_shape", 2, StatusCode::kInvalidArgument,
        [bad](const Connection& c, uint64_t, std::string*) -> absl::Status {
          return c.client->ApplyRope(bad).status();
        });
  }
  {
    constexpr int64_t kTokens = 128, kHeads = 8, kKvHeads = 2, kDim = 128;
    v1::ApplyRopeRequest request;
    SetTensor(request.mutable_query(), {kTokens, kHeads, kDim}, v1::BFLOAT16,
              BFloat16Bytes(kTokens * kHeads * kDim));
    SetTensor(request.mutable_key(), {kTokens, kKvHeads, kDim}, v1::BFLOAT16,
              BFloat16Bytes(kTokens * kKvHeads * kDim));
    std::vector<double> positions;  // Continuous time: 0.37 units apart.
    for (int64_t t = 0; t < kTokens; ++t) positions.push_back(100.0 + 0.37 * t);
    SetTensor(request.mutable_positions()->mutable_values(), {kTokens}, v1::FLOAT64,
              RawBytes(positions));
    v1::RopeSpec* rope = request.mutable_spec()->mutable_rope();
    rope->set_base(500000.0);
    rope->set_layout(v1::RopeSpec::INTERLEAVED);
    rope->mutable_scaling()->mutable_llama3()->set_factor(8.0);
    add("ApplyRope/bf16", 10, StatusCode::kOk,
        [request](const Connection& c, uint64_t, std::string* fingerprint) -> absl::Status {
          auto response = c.client->ApplyRope(request);
          if (!response.ok()) return response.status();
          *fingerprint = Fingerprint(*response);
          absl::Status status =
              CheckTensor(response->query(), "query", {kTokens, kHeads, kDim}, 2);
          if (!status.ok()) return status;
          return CheckTensor(response->key(), "key", {kTokens, kKvHeads, kDim}, 2);
        });
  }
  {
    constexpr int64_t kPositions = 2048, kRotaryDim = 128;
    v1::RopeTablesRequest request;
    request.mutable_positions()->mutable_range()->set_count(kPositions);
    v1::RopeSpec* rope = request.mutable_spec()->mutable_rope();
    rope->set_rotary_dim(kRotaryDim);
    rope->set_base(500000.0);
    rope->mutable_scaling()->mutable_llama3()->set_factor(8.0);
    add("RopeTables", 6, StatusCode::kOk,
        [request](const Connection& c, uint64_t, std::string* fingerprint) -> absl::Status {
          auto response = c.client->RopeTables(request);
          if (!response.ok()) return response.status();
          *fingerprint = Fingerprint(*response);
          absl::Status status =
              CheckTensor(response->cos(), "cos", {kPositions, kRotaryDim / 2}, 4);
          if (!status.ok()) return status;
          return CheckTensor(response->sin(), "sin", {kPositions, kRotaryDim / 2}, 4);
        });
  }
  {
    // A request of about 20 bytes asking for more positions than any server
    // allows.
    const int64_t count = absl::GetFlag(FLAGS_over_limit_count);
    v1::EncodePositionsRequest positions;
    positions.mutable_positions()->mutable_range()->set_count(count);
    positions.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(2);
    add("EncodePositions/range_over_limit", 1, StatusCode::kResourceExhausted,
        [positions](const Connection& c, uint64_t, std::string*) -> absl::Status {
          return c.client->EncodePositions(positions).status();
        });
    v1::RopeTablesRequest tables;
    tables.mutable_positions()->mutable_range()->set_count(count);
    tables.mutable_spec()->mutable_rope()->set_rotary_dim(2);
    add("RopeTables/range_over_limit", 1, StatusCode::kResourceExhausted,
        [tables](const Connection& c, uint64_t, std::string*) -> absl::Status {
          return c.client->RopeTables(tables).status();
        });
  }
  {
    v1::AlibiBiasRequest request;
    request.set_num_heads(12);
    request.set_q_len(32);
    request.set_k_len(256);
    request.set_causal(true);
    add("AlibiBias", 6, StatusCode::kOk,
        [request](const Connection& c, uint64_t, std::string* fingerprint) -> absl::Status {
          auto response = c.client->AlibiBias(request);
          if (!response.ok()) return response.status();
          *fingerprint = Fingerprint(*response);
          absl::Status status = CheckTensor(response->slopes(), "slopes", {12}, 4);
          if (!status.ok()) return status;
          return CheckTensor(response->bias(), "bias", {12, 32, 256}, 4);
        });
  }
  {
    v1::DescribeRequest request;
    request.mutable_spec()->mutable_positional()->mutable_sinusoidal()->set_dim(256);
    request.set_num_offsets(512);
    add("Describe", 6, StatusCode::kOk,
        [request](const Connection& c, uint64_t, std::string* fingerprint) -> absl::Status {
          auto response = c.client->Describe(request);
          if (!response.ok()) return response.status();
          *fingerprint = Fingerprint(*response);
          if (response->frequencies_size() != 128 || response->similarity_size() != 512) {
            return Mismatch(absl::StrCat(response->frequencies_size(), " frequencies, ",
                                         response->similarity_size(), " similarities"));
          }
          return absl::OkStatus();
        });
  }
  {
    const std::string profile = absl::GetFlag(FLAGS_profile);
    add("ListProfiles", 5, StatusCode::kOk,
        [profile](const Connection& c, uint64_t, std::string* fingerprint) -> absl::Status {
          auto response = c.client->ListProfiles();
          if (!response.ok()) return response.status();
          *fingerprint = Fingerprint(*response);
          if (profile.empty()) return absl::OkStatus();
          for (const v1::ProfileInfo& info : response->profiles()) {
            if (info.name() == profile) return absl::OkStatus();
          }
          return Mismatch(absl::StrCat("profile ", profile, " not listed"));
        });
  }
  {
    v1::EncodeObservationsRequest request;
    *request.mutable_observations() = SeriesRows(0, kSeriesRows);
    *request.mutable_spec()->mutable_temporal() = SeriesSpec();
    add("EncodeObservations/wide", 10, StatusCode::kOk,
        [request](const Connection& c, uint64_t, std::string* fingerprint) -> absl::Status {
          auto response = c.client->EncodeObservations(request);
          if (!response.ok()) return response.status();
          *fingerprint = Fingerprint(*response);
          return CheckFeatures(response->features(), kSeriesRows);
        });

    const std::string profile = absl::GetFlag(FLAGS_profile);
    if (!profile.empty()) {
      v1::EncodeObservationsRequest named;
      *named.mutable_observations() = request.observations();
      named.set_profile(profile);
      add("EncodeObservations/profile", 4, StatusCode::kOk,
          [named](const Connection& c, uint64_t, std::string* fingerprint) -> absl::Status {
            auto response = c.client->EncodeObservations(named);
            if (!response.ok()) return response.status();
            *fingerprint = Fingerprint(*response);
            return CheckFeatures(response->features(), kSeriesRows);
          });
    }

    // A short series in a zone that does not exist, named anew every call.
    v1::EncodeObservationsRequest bad;
    *bad.mutable_observations() = SeriesRows(0, 4);
    *bad.mutable_spec()->mutable_temporal() = SeriesSpec();
    add("EncodeObservations/unknown_time_zone", 2, StatusCode::kInvalidArgument,
        [bad](const Connection& c, uint64_t sequence, std::string*) -> absl::Status {
          v1::EncodeObservationsRequest request = bad;
          request.mutable_spec()->mutable_temporal()->mutable_calendar()->set_time_zone(
              absl::StrCat("Soak/No_Such_Zone_", sequence));
          return c.client->EncodeObservations(request).status();
        });
  }
  {
    constexpr int64_t kChunkRows = kSeriesRows / kStreamChunks;
    std::vector<v1::EncodeObservationsRequest> chunks(kStreamChunks);
    for (int64_t i = 0; i < kStreamChunks; ++i) {
      *chunks[i].mutable_observations() = SeriesRows(i * kChunkRows, kChunkRows);
    }
    *chunks[0].mutable_spec()->mutable_temporal() = SeriesSpec();
    add("EncodeObservationsStream", 6, StatusCode::kOk,
        [chunks](const Connection& c, uint64_t, std::string* fingerprint) -> absl::Status {
          std::string joined;
          absl::Status checked;
          const absl::Status status = c.client->EncodeObservationsStream(
              chunks, [&](const v1::EncodeObservationsResponse& response) {
                if (checked.ok()) checked = CheckFeatures(response.features(), kChunkRows);
                absl::StrAppend(&joined, Fingerprint(response), ";");
                return absl::OkStatus();
              });
          if (!status.ok()) return status;
          *fingerprint = joined;
          return checked;
        });
  }
  add("Health/Check", 9, absl::StatusCode::kOk,
      [](const Connection& c, uint64_t sequence, std::string*) -> absl::Status {
        auto serving = c.client->CheckHealth(sequence % 2 == 0 ? "" : "phasor.v1.Encoder");
        if (!serving.ok()) return serving.status();
        if (*serving != ServingStatus::kServing) {
          return Mismatch(absl::StrCat("health ", ServingStatusName(*serving)));
        }
        return absl::OkStatus();
      });
  {
    // Field 1, length-delimited, says 100 bytes, carries 3: unparseable as
    // any message (a truncated field is a parse error, not an unknown field).
    static const char* const kUnaryMethods[] = {
        "EncodePositions", "ApplyRope",    "RopeTables",  "AlibiBias",
        "EncodeObservations", "Describe", "ListProfiles",
    };
    add("Encoder.*/unparseable", 2, absl::StatusCode::kInvalidArgument,
        [](const Connection& c, uint64_t sequence, std::string*) -> absl::Status {
          const std::string method = absl::StrCat(
              "/phasor.v1.Encoder/",
              kUnaryMethods[sequence % (sizeof(kUnaryMethods) / sizeof(kUnaryMethods[0]))]);
          const grpc::Status status =
              GenericUnary(c, method, std::string("\x0a\x64" "abc", 5));
          if (status.ok()) return absl::OkStatus();
          return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                              absl::StrCat(method, ": ", status.error_message()));
        });
  }
  return kinds;
}

// What one thread saw of one kind.
struct KindStats {
  std::vector<float> latencies_ms;
  int64_t calls = 0;
  int64_t errors = 0;
};

// Unexpected outcomes, counted by kind and text (the first 40 distinct
// texts per kind are kept).
class ErrorLog {
 public:
  void Add(const std::string& kind, const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::map<std::string, int64_t>& texts = by_kind_[kind];
    auto it = texts.find(text);
    if (it != texts.end()) {
      ++it->second;
    } else if (texts.size() < 40) {
      texts.emplace(text, 1);
    }
  }
  std::map<std::string, std::map<std::string, int64_t>> Snapshot() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return by_kind_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::map<std::string, int64_t>> by_kind_;
};

struct ProcSample {
  double t_seconds = 0;
  bool ok = false;
  int64_t rss_kib = 0;
  int64_t hwm_kib = 0;
  int64_t threads = 0;
  int64_t fds = 0;
  double load_1m = 0;  // The machine's 1-minute load average.
  int64_t calls = 0;
  int64_t errors = 0;
};

// VmRSS, VmHWM and Threads from /proc/<pid>/status, fds from /proc/<pid>/fd,
// and the load average (the machine may be shared).
ProcSample ReadProc(int pid) {
  ProcSample sample;
  std::ifstream loadavg("/proc/loadavg");
  loadavg >> sample.load_1m;
  if (pid <= 0) return sample;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    std::vector<std::string> words = absl::StrSplit(line, absl::ByAnyChar(" \t"),
                                                    absl::SkipEmpty());
    if (words.size() < 2) continue;
    int64_t value = 0;
    if (!absl::SimpleAtoi(words[1], &value)) continue;
    if (words[0] == "VmRSS:") {
      sample.rss_kib = value;
      sample.ok = true;
    } else if (words[0] == "VmHWM:") {
      sample.hwm_kib = value;
    } else if (words[0] == "Threads:") {
      sample.threads = value;
    }
  }
  if (DIR* dir = opendir(absl::StrCat("/proc/", pid, "/fd").c_str())) {
    while (const dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') ++sample.fds;
    }
    closedir(dir);
  }
  return sample;
}

double Percentile(const std::vector<float>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t index = std::min(sorted.size() - 1,
                                static_cast<size_t>(q * static_cast<double>(sorted.size())));
  return sorted[index];
}

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (const char ch : text) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      out += absl::StrFormat("\\u%04x", ch);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

double Mib(int64_t kib) { return static_cast<double>(kib) / 1024.0; }

absl::Status ApplyMix(const std::string& mix, std::vector<Kind>& kinds) {
  for (absl::string_view entry : absl::StrSplit(mix, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> parts = absl::StrSplit(entry, '=');
    int weight = 0;
    if (!absl::SimpleAtoi(parts.second, &weight) || weight < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--mix: bad weight in ", entry));
    }
    auto it = std::find_if(kinds.begin(), kinds.end(),
                           [&](const Kind& kind) { return kind.name == parts.first; });
    if (it == kinds.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--mix: no kind ", parts.first));
    }
    it->weight = weight;
  }
  return absl::OkStatus();
}

int Main() {
  const std::string target = absl::GetFlag(FLAGS_target);
  const double duration_seconds = absl::GetFlag(FLAGS_duration_seconds);
  const int num_clients = std::max(1, absl::GetFlag(FLAGS_clients));
  const int threads_per_client = std::max(1, absl::GetFlag(FLAGS_threads_per_client));
  const int server_pid = absl::GetFlag(FLAGS_server_pid);
  const double sample_seconds = std::max(0.1, absl::GetFlag(FLAGS_sample_seconds));

  std::vector<Kind> kinds = MakeKinds();
  if (absl::Status mixed = ApplyMix(absl::GetFlag(FLAGS_mix), kinds); !mixed.ok()) {
    std::fprintf(stderr, "phasor_soak: %s\n", mixed.ToString().c_str());
    return 2;
  }
  std::vector<int> weights;
  for (const Kind& kind : kinds) weights.push_back(kind.weight);
  if (std::all_of(weights.begin(), weights.end(), [](int w) { return w == 0; })) {
    std::fprintf(stderr, "phasor_soak: --mix leaves no call with a weight\n");
    return 2;
  }

  std::vector<std::unique_ptr<Connection>> connections;
  for (int i = 0; i < num_clients; ++i) connections.push_back(Connect(target, i));
  const auto wait_until = std::chrono::system_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(
                              absl::GetFlag(FLAGS_wait_seconds) * 1000));
  for (const auto& connection : connections) {
    if (!connection->channel->WaitForConnected(wait_until)) {
      std::fprintf(stderr, "phasor_soak: no server at %s\n", target.c_str());
      return 1;
    }
  }

  // Reference responses, one call per kind before the load starts.
  std::vector<std::string> references(kinds.size());
  ErrorLog error_log;
  int64_t preflight_errors = 0;
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (kinds[k].weight == 0) continue;
    const absl::Status status = kinds[k].run(*connections[0], 0, &references[k]);
    if (status.code() != kinds[k].expected) {
      std::fprintf(stderr, "phasor_soak: preflight %s: expected %s, got %s\n",
                   kinds[k].name.c_str(), absl::StatusCodeToString(kinds[k].expected).c_str(),
                   status.ToString().c_str());
      error_log.Add(kinds[k].name, absl::StrCat("preflight: ", status.ToString()));
      references[k].clear();
      ++preflight_errors;
    }
  }

  const ProcSample start_sample = ReadProc(server_pid);
  if (server_pid > 0 && !start_sample.ok) {
    std::fprintf(stderr, "phasor_soak: cannot read /proc/%d/status\n", server_pid);
  }
  std::vector<ProcSample> samples = {start_sample};

  std::atomic<bool> stop{false};
  std::atomic<int64_t> total_calls{0};
  std::atomic<int64_t> total_errors{0};
  const int num_threads = num_clients * threads_per_client;
  std::vector<std::vector<KindStats>> per_thread(num_threads,
                                                 std::vector<KindStats>(kinds.size()));
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < num_threads; ++i) {
    threads.emplace_back([&, i] {
      const Connection& connection = *connections[i % num_clients];
      std::mt19937_64 random(seed * 1000003 + static_cast<uint64_t>(i));
      std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
      std::vector<KindStats>& stats = per_thread[i];
      // Distinct across threads: thread i uses i, i + num_threads, ...
      uint64_t sequence = static_cast<uint64_t>(i) + 1;
      while (!stop.load(std::memory_order_relaxed)) {
        const size_t k = pick(random);
        const Kind& kind = kinds[k];
        std::string fingerprint;
        const Clock::time_point call_start = Clock::now();
        const absl::Status status = kind.run(connection, sequence, &fingerprint);
        const Clock::time_point call_end = Clock::now();
        sequence += static_cast<uint64_t>(num_threads);
        KindStats& stat = stats[k];
        ++stat.calls;
        stat.latencies_ms.push_back(
            std::chrono::duration<float, std::milli>(call_end - call_start).count());
        std::string unexpected;
        if (status.code() != kind.expected) {
          unexpected = status.ToString();
        } else if (status.ok() && !references[k].empty() && fingerprint != references[k]) {
          unexpected = "client check: response differs from the first one";
        }
        total_calls.fetch_add(1, std::memory_order_relaxed);
        if (!unexpected.empty()) {
          ++stat.errors;
          total_errors.fetch_add(1, std::memory_order_relaxed);
          if (unexpected.size() > 300) unexpected = absl::StrCat(unexpected.substr(0, 300), "...");
          error_log.Add(kind.name, unexpected);
        }
      }
    });
  }

  // Sampler: /proc and the running counts every sample_seconds.
  const Clock::time_point end =
      start + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(duration_seconds));
  const auto elapsed = [&start] {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  for (int n = 1;; ++n) {
    const Clock::time_point next =
        start + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(n * sample_seconds));
    if (next >= end) break;
    std::this_thread::sleep_until(next);
    ProcSample sample = ReadProc(server_pid);
    sample.t_seconds = elapsed();
    sample.calls = total_calls.load();
    sample.errors = total_errors.load();
    samples.push_back(sample);
    std::fprintf(stderr,
                 "phasor_soak: %6.0f s  %9lld calls  %5lld errors  server RSS %.1f MiB, "
                 "peak %.1f MiB, %lld threads, %lld fds, load %.2f\n",
                 sample.t_seconds, static_cast<long long>(sample.calls),
                 static_cast<long long>(sample.errors), Mib(sample.rss_kib),
                 Mib(sample.hwm_kib), static_cast<long long>(sample.threads),
                 static_cast<long long>(sample.fds), sample.load_1m);
  }
  std::this_thread::sleep_until(end);
  stop = true;
  for (std::thread& thread : threads) thread.join();
  const double seconds = elapsed();
  ProcSample end_sample = ReadProc(server_pid);
  end_sample.t_seconds = seconds;
  end_sample.calls = total_calls.load();
  end_sample.errors = total_errors.load();
  samples.push_back(end_sample);

  // Per kind and overall.
  struct Row {
    std::string name;
    std::string expected;
    int weight = 0;
    int64_t calls = 0;
    int64_t errors = 0;
    double p50 = 0, p99 = 0, max = 0;
  };
  std::vector<Row> rows;
  std::vector<float> all;
  int64_t calls = 0, errors = preflight_errors;
  for (size_t k = 0; k < kinds.size(); ++k) {
    std::vector<float> latencies;
    Row row;
    row.name = kinds[k].name;
    row.expected = absl::StatusCodeToString(kinds[k].expected);
    row.weight = kinds[k].weight;
    for (int i = 0; i < num_threads; ++i) {
      const KindStats& stat = per_thread[i][k];
      row.calls += stat.calls;
      row.errors += stat.errors;
      latencies.insert(latencies.end(), stat.latencies_ms.begin(), stat.latencies_ms.end());
    }
    std::sort(latencies.begin(), latencies.end());
    row.p50 = Percentile(latencies, 0.50);
    row.p99 = Percentile(latencies, 0.99);
    row.max = latencies.empty() ? 0 : latencies.back();
    all.insert(all.end(), latencies.begin(), latencies.end());
    calls += row.calls;
    errors += row.errors;
    rows.push_back(row);
  }
  std::sort(all.begin(), all.end());
  Row total{"all", "", 1, calls, errors, Percentile(all, 0.50), Percentile(all, 0.99),
            all.empty() ? 0 : all.back()};

  std::printf("phasor_soak: %s, %.0f s, %d clients x %d threads, %lld calls (%.0f/s), "
              "%lld unexpected outcomes\n\n",
              target.c_str(), seconds, num_clients, threads_per_client,
              static_cast<long long>(calls), static_cast<double>(calls) / seconds,
              static_cast<long long>(errors));
  std::printf("%-38s %-18s %9s %7s %9s %9s %9s\n", "call", "expected", "calls", "errors",
              "p50 ms", "p99 ms", "max ms");
  for (const Row& row : rows) {
    if (row.weight == 0) continue;
    std::printf("%-38s %-18s %9lld %7lld %9.3f %9.3f %9.1f\n", row.name.c_str(),
                row.expected.c_str(), static_cast<long long>(row.calls),
                static_cast<long long>(row.errors), row.p50, row.p99, row.max);
  }
  std::printf("%-38s %-18s %9lld %7lld %9.3f %9.3f %9.1f\n", "all", "",
              static_cast<long long>(total.calls), static_cast<long long>(total.errors),
              total.p50, total.p99, total.max);

  const auto errors_by_kind = error_log.Snapshot();
  if (!errors_by_kind.empty()) {
    std::printf("\nunexpected outcomes:\n");
    for (const auto& [kind, texts] : errors_by_kind) {
      for (const auto& [text, count] : texts) {
        std::printf("  %-36s x%-6lld %s\n", kind.c_str(), static_cast<long long>(count),
                    text.c_str());
      }
    }
  }
  if (server_pid > 0) {
    std::printf("\nserver pid %d (/proc/%d):\n%8s %11s %11s %8s %6s %10s %7s %6s\n",
                server_pid, server_pid, "t s", "VmRSS MiB", "VmHWM MiB", "threads", "fds",
                "calls", "errors", "load");
    for (const ProcSample& sample : samples) {
      if (!sample.ok) {
        std::printf("%8.0f %11s\n", sample.t_seconds, "(gone)");
        continue;
      }
      std::printf("%8.0f %11.1f %11.1f %8lld %6lld %10lld %7lld %6.2f\n", sample.t_seconds,
                  Mib(sample.rss_kib), Mib(sample.hwm_kib),
                  static_cast<long long>(sample.threads), static_cast<long long>(sample.fds),
                  static_cast<long long>(sample.calls), static_cast<long long>(sample.errors),
                  sample.load_1m);
    }
    std::printf("RSS start %.1f MiB, end %.1f MiB (%+.1f MiB), peak (VmHWM) %.1f MiB\n",
                Mib(start_sample.rss_kib), Mib(end_sample.rss_kib),
                Mib(end_sample.rss_kib - start_sample.rss_kib), Mib(end_sample.hwm_kib));
  }
  std::fflush(stdout);

  // One JSON object on one line.
  std::vector<std::string> json_rows;
  for (const Row& row : rows) {
    if (row.weight == 0) continue;
    json_rows.push_back(absl::StrCat(
        "{\"name\":", JsonString(row.name), ",\"expected\":", JsonString(row.expected),
        ",\"calls\":", row.calls, ",\"errors\":", row.errors, ",\"p50_ms\":", row.p50,
        ",\"p99_ms\":", row.p99, ",\"max_ms\":", row.max, "}"));
  }
  std::vector<std::string> json_samples;
  for (const ProcSample& sample : samples) {
    json_samples.push_back(absl::StrCat(
        "{\"t_s\":", sample.t_seconds, ",\"ok\":", sample.ok ? "true" : "false",
        ",\"rss_kib\":", sample.rss_kib, ",\"hwm_kib\":", sample.hwm_kib,
        ",\"threads\":", sample.threads, ",\"fds\":", sample.fds,
        ",\"load_1m\":", sample.load_1m, ",\"calls\":", sample.calls,
        ",\"errors\":", sample.errors, "}"));
  }
  std::vector<std::string> json_errors;
  for (const auto& [kind, texts] : errors_by_kind) {
    for (const auto& [text, count] : texts) {
      json_errors.push_back(absl::StrCat("{\"name\":", JsonString(kind), ",\"count\":", count,
                                         ",\"text\":", JsonString(text), "}"));
    }
  }
  const std::string json = absl::StrCat(
      "{\"program\":\"phasor_soak\",\"target\":", JsonString(target),
      ",\"seconds\":", seconds, ",\"clients\":", num_clients,
      ",\"threads_per_client\":", threads_per_client,
      ",\"deadline_seconds\":", absl::GetFlag(FLAGS_deadline_seconds),
      ",\"hardware_concurrency\":", std::thread::hardware_concurrency(),
      ",\"calls\":", calls, ",\"errors\":", errors, ",\"p50_ms\":", total.p50,
      ",\"p99_ms\":", total.p99, ",\"max_ms\":", total.max,
      ",\"methods\":[", absl::StrJoin(json_rows, ","), "]",
      ",\"server\":{\"pid\":", server_pid, ",\"rss_start_kib\":", start_sample.rss_kib,
      ",\"rss_end_kib\":", end_sample.rss_kib, ",\"rss_peak_kib\":", end_sample.hwm_kib,
      ",\"samples\":[", absl::StrJoin(json_samples, ","), "]}",
      ",\"unexpected\":[", absl::StrJoin(json_errors, ","), "]}\n");
  const std::string out = absl::GetFlag(FLAGS_json_out);
  if (out.empty()) {
    std::fputs(json.c_str(), stdout);
  } else {
    std::FILE* file = std::fopen(out.c_str(), "w");
    if (file == nullptr) {
      std::fprintf(stderr, "phasor_soak: cannot write %s\n", out.c_str());
      return 1;
    }
    std::fputs(json.c_str(), file);
    std::fclose(file);
  }
  return errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace phasor::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Soak: mixed RPCs from several clients against a running phasor-server for "
      "a set time; reports unexpected outcomes, latency and the server's RSS.");
  absl::ParseCommandLine(argc, argv);
  return phasor::bench::Main();
}
