// Workload P: a panel of S irregular, multichannel series, the workload the
// panel benchmarks share (bench/panel_client_bench.cc and any other C++
// benchmark that includes this header). Exact definition, so that every
// benchmark (and every language's peer) encodes the same bytes:
//
//   S = 10000 series, R = 100 rows each, C = 3 channels, wide float64 values.
//   h(k) = (k * 2654435761) mod 2^32, in uint64 arithmetic (Knuth's
//     multiplicative hash, TAOCP vol. 3 §6.4);
//   start_ns = 1704067200 * 10^9 (2024-01-01T00:00:00Z);
//   for series s, row i, k = s*R + i:
//     t = start_ns + s*7919*10^9 + i*3600*10^9 + (h(k) mod 3600000)*10^6
//     value[c] = NaN if h(3*k + c + 1) mod 10 < 3 else sin(0.001*k + c)
//   series_offsets = [0, R, 2R, ..., S*R]
//   spec: temporal { time { dim: 8 } gaps { include_mask: true }
//         calendar { time_zone: "America/New_York"
//                    fields: [HOUR_OF_DAY, DAY_OF_WEEK, MONTH_OF_YEAR] } }
//     -> F = 21 float32 columns.
// Rows are hourly with up to an hour of jitter, so times within a series are
// non-decreasing; about 30% of values are missing (NaN).
//
// Thread-safety: pure functions.
#ifndef PHASOR_BENCH_WORKLOAD_P_H_
#define PHASOR_BENCH_WORKLOAD_P_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "phasor/v1/encoder.pb.h"

namespace phasor::bench {

struct WorkloadPShape {
  int64_t series = 10000;  // S
  int64_t rows_per_series = 100;  // R
  int64_t channels = 3;  // C
};

// The raw columns: timestamps [S*R] ns, values [S*R, C] row-major, offsets
// [S+1].
struct WorkloadP {
  WorkloadPShape shape;
  std::vector<int64_t> timestamps_ns;
  std::vector<double> values;
  std::vector<int64_t> series_offsets;
};

inline uint64_t WorkloadPHash(uint64_t k) {
  return (k * uint64_t{2654435761}) % (uint64_t{1} << 32);
}

inline WorkloadP MakeWorkloadP(const WorkloadPShape& shape = WorkloadPShape()) {
  constexpr int64_t kStartNs = int64_t{1704067200} * 1000000000;
  constexpr int64_t kSecondNs = 1000000000;
  WorkloadP workload;
  workload.shape = shape;
  const int64_t rows = shape.series * shape.rows_per_series;
  workload.timestamps_ns.resize(static_cast<size_t>(rows));
  workload.values.resize(static_cast<size_t>(rows * shape.channels));
  for (int64_t s = 0; s < shape.series; ++s) {
    for (int64_t i = 0; i < shape.rows_per_series; ++i) {
      const int64_t k = s * shape.rows_per_series + i;
      const int64_t jitter_ms =
          static_cast<int64_t>(WorkloadPHash(static_cast<uint64_t>(k)) % 3600000);
      workload.timestamps_ns[static_cast<size_t>(k)] =
          kStartNs + s * 7919 * kSecondNs + i * 3600 * kSecondNs +
          jitter_ms * 1000000;
      for (int64_t c = 0; c < shape.channels; ++c) {
        const bool missing =
            WorkloadPHash(static_cast<uint64_t>(3 * k + c + 1)) % 10 < 3;
        workload.values[static_cast<size_t>(k * shape.channels + c)] =
            missing ? std::numeric_limits<double>::quiet_NaN()
                    : std::sin(0.001 * static_cast<double>(k) +
                               static_cast<double>(c));
      }
    }
  }
  workload.series_offsets.resize(static_cast<size_t>(shape.series + 1));
  for (int64_t s = 0; s <= shape.series; ++s) {
    workload.series_offsets[static_cast<size_t>(s)] = s * shape.rows_per_series;
  }
  return workload;
}

// Workload P's spec (F = 21 float32 columns for C = 3).
inline v1::EncoderSpec WorkloadPSpec() {
  v1::EncoderSpec spec;
  v1::TemporalSpec* temporal = spec.mutable_temporal();
  temporal->mutable_time()->set_dim(8);
  temporal->mutable_gaps()->set_include_mask(true);
  v1::CalendarBlock* calendar = temporal->mutable_calendar();
  calendar->set_time_zone("America/New_York");
  calendar->add_fields(v1::CalendarBlock::HOUR_OF_DAY);
  calendar->add_fields(v1::CalendarBlock::DAY_OF_WEEK);
  calendar->add_fields(v1::CalendarBlock::MONTH_OF_YEAR);
  return spec;
}

namespace workload_p_internal {
template <typename T>
v1::Tensor Pack(const T* data, int64_t count, std::vector<int64_t> shape,
                v1::DType dtype) {
  v1::Tensor tensor;
  tensor.set_dtype(dtype);
  for (const int64_t extent : shape) tensor.add_shape(extent);
  tensor.set_data(reinterpret_cast<const char*>(data),
                  static_cast<size_t>(count) * sizeof(T));
  return tensor;
}
}  // namespace workload_p_internal

// Series [series_begin, series_end) as one request: a panel when
// `as_panel`, else (one series only) a plain single-series request.
inline v1::EncodeObservationsRequest WorkloadPRequest(const WorkloadP& workload,
                                                      int64_t series_begin,
                                                      int64_t series_end,
                                                      bool as_panel) {
  using workload_p_internal::Pack;
  const int64_t channels = workload.shape.channels;
  const int64_t row_begin = workload.series_offsets[static_cast<size_t>(series_begin)];
  const int64_t row_end = workload.series_offsets[static_cast<size_t>(series_end)];
  const int64_t rows = row_end - row_begin;
  v1::EncodeObservationsRequest request;
  *request.mutable_spec() = WorkloadPSpec();
  v1::Observations* observations = request.mutable_observations();
  *observations->mutable_timestamps() =
      Pack(workload.timestamps_ns.data() + row_begin, rows, {rows}, v1::INT64);
  *observations->mutable_values() =
      Pack(workload.values.data() + row_begin * channels, rows * channels,
           {rows, channels}, v1::FLOAT64);
  if (as_panel) {
    std::vector<int64_t> offsets;
    for (int64_t s = series_begin; s <= series_end; ++s) {
      offsets.push_back(workload.series_offsets[static_cast<size_t>(s)] - row_begin);
    }
    *observations->mutable_series_offsets() =
        Pack(offsets.data(), static_cast<int64_t>(offsets.size()),
             {static_cast<int64_t>(offsets.size())}, v1::INT64);
  }
  return request;
}

// The whole of workload P as one panel request.
inline v1::EncodeObservationsRequest WorkloadPPanelRequest(const WorkloadP& workload) {
  return WorkloadPRequest(workload, 0, workload.shape.series, /*as_panel=*/true);
}

}  // namespace phasor::bench

#endif  // PHASOR_BENCH_WORKLOAD_P_H_
