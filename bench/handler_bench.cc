// handler_bench: the server's per-call work for a small EncodeObservations
// request, in process (no transport): HandleEncodeObservations on a parsed
// request, then the response serialized, as EncoderService::Unary does.
// Three ways, side by side in one run:
//   caches=none      every call converts its spec, builds its layout and
//                    its encoders (no ServerCaches)
//   caches=spec      converted spec and layout cached, encoders built per
//                    call (the encoder cache turned off)
//   caches=all       the server as shipped: spec, layout and encoders cached
// Requests: `load` is phasor_load's 1 KiB call (4 rows x 8 channels; content,
// time dim 30, nine CYCLIC calendar fields in America/New_York, 64 columns);
// `every_block` adds Time2Vec, gaps and holidays (2 channels, 8 rows).
//
//   build/bench/handler_bench --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true   (one command line)
#include <cstdint>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/load_spec.h"
#include "benchmark/benchmark.h"
#include "phasor/v1/encoder.pb.h"
#include "server/handlers.h"
#include "server/profiles.h"

namespace phasor::server {
namespace {

v1::Tensor MakeTensor(const std::string& bytes, std::vector<int64_t> shape,
                      v1::DType dtype) {
  v1::Tensor tensor;
  for (int64_t extent : shape) tensor.add_shape(extent);
  tensor.set_dtype(dtype);
  tensor.set_data(bytes);
  return tensor;
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// phasor_load's EncodeObservationsCall at 1 KiB (bench/phasor_load.cc).
v1::EncodeObservationsRequest LoadRequest() {
  constexpr int64_t kRows = 4;
  constexpr int64_t kChannels = 8;
  std::vector<int64_t> times;
  std::vector<float> values;
  for (int64_t t = 0; t < kRows; ++t) {
    times.push_back(int64_t{1767225600} * 1000000000 + t * int64_t{37000000000});
    for (int64_t c = 0; c < kChannels; ++c) values.push_back(0.25f * static_cast<float>(t + c));
  }
  v1::EncodeObservationsRequest request;
  v1::Observations* observations = request.mutable_observations();
  *observations->mutable_timestamps() = MakeTensor(Bytes(times), {kRows}, v1::INT64);
  *observations->mutable_values() = MakeTensor(Bytes(values), {kRows, kChannels}, v1::FLOAT32);
  observations->set_num_channels(kChannels);
  bench::SetLoadObservationsSpec(request.mutable_spec()->mutable_temporal());
  return request;
}

// Every block: content, time, Time2Vec, gaps, calendar with holidays.
v1::EncodeObservationsRequest EveryBlockRequest() {
  constexpr int64_t kRows = 8;
  std::vector<int64_t> times;
  std::vector<float> values;
  for (int64_t t = 0; t < kRows; ++t) {
    times.push_back((int64_t{1710054000} + 1800 * t) * 1000000000);
    values.push_back(t % 3 == 0 ? std::nanf("") : 0.5f * static_cast<float>(t));
    values.push_back(-1.0f * static_cast<float>(t));
  }
  v1::EncodeObservationsRequest request;
  v1::Observations* observations = request.mutable_observations();
  *observations->mutable_timestamps() = MakeTensor(Bytes(times), {kRows}, v1::INT64);
  *observations->mutable_values() = MakeTensor(Bytes(values), {kRows, 2}, v1::FLOAT32);
  v1::TemporalSpec* spec = request.mutable_spec()->mutable_temporal();
  spec->mutable_content();
  spec->mutable_time()->set_dim(16);
  spec->mutable_time()->set_min_period_seconds(60);
  spec->mutable_time()->set_max_period_seconds(86400 * 365.0);
  v1::Time2VecBlock* t2v = spec->mutable_time2vec();
  for (double omega : {1e-6, 7.27e-5, 1.75e-3}) t2v->add_omega(omega);
  for (double phi : {0.1, 0.2, 0.3}) t2v->add_phi(phi);
  spec->mutable_gaps()->set_include_mask(true);
  v1::CalendarBlock* calendar = spec->mutable_calendar();
  calendar->set_time_zone("America/New_York");
  calendar->add_fields(v1::CalendarBlock::HOUR_OF_DAY);
  calendar->add_fields(v1::CalendarBlock::DAY_OF_WEEK);
  calendar->add_fields(v1::CalendarBlock::MONTH_OF_YEAR);
  calendar->set_encoding(v1::CalendarBlock::CYCLIC);
  calendar->set_fractional(true);
  v1::HolidayFeatures* holidays = calendar->mutable_holidays();
  for (const char* date : {"2024-01-01", "2024-05-27", "2024-07-04", "2024-09-02",
                           "2024-11-28", "2024-12-25"}) {
    holidays->add_dates(date);
  }
  holidays->set_kernel(v1::HolidayFeatures::EXPONENTIAL);
  holidays->set_alpha(0.5);
  return request;
}

enum class Caches { kNone, kSpec, kAll };

void BM_Handler(benchmark::State& state, v1::EncodeObservationsRequest request,
                Caches mode) {
  const ProfileRegistry profiles;
  std::optional<ServerCaches> caches;
  if (mode == Caches::kSpec) caches.emplace(SpecCacheLimits{/*max_entries=*/0});
  if (mode == Caches::kAll) caches.emplace();
  const auto alive = [] { return absl::OkStatus(); };
  ExecutionOptions execution;
  execution.max_threads = 1;
  HandlerContext context{&profiles, execution, RequestLimits{}, /*metrics=*/nullptr, alive};
  context.caches = caches.has_value() ? &*caches : nullptr;
  std::string wire;
  for (auto _ : state) {
    v1::EncodeObservationsResponse response;
    const absl::Status status =
        HandleEncodeObservations(context, request, /*stream=*/nullptr, &response);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
    wire.clear();
    response.AppendToString(&wire);
    benchmark::DoNotOptimize(wire.data());
  }
  state.counters["response_bytes"] = static_cast<double>(wire.size());
}

const int registered = [] {
  const struct {
    const char* name;
    v1::EncodeObservationsRequest request;
  } requests[] = {{"load", LoadRequest()}, {"every_block", EveryBlockRequest()}};
  const struct {
    const char* name;
    Caches mode;
  } modes[] = {{"none", Caches::kNone}, {"spec", Caches::kSpec}, {"all", Caches::kAll}};
  for (const auto& r : requests) {
    for (const auto& m : modes) {
      benchmark::RegisterBenchmark(
          (std::string("handler/request=") + r.name + "/caches=" + m.name).c_str(),
          BM_Handler, r.request, m.mode);
    }
  }
  return 0;
}();

}  // namespace
}  // namespace phasor::server

BENCHMARK_MAIN();
