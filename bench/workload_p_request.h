// Workload P (bench/workload_p.h) as phasor.v1 requests.
//
// Thread-safety: pure functions.
#ifndef PHASOR_BENCH_WORKLOAD_P_REQUEST_H_
#define PHASOR_BENCH_WORKLOAD_P_REQUEST_H_

#include <cstdint>
#include <vector>

#include "bench/workload_p.h"
#include "phasor/v1/encoder.pb.h"

namespace phasor::bench {

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

#endif  // PHASOR_BENCH_WORKLOAD_P_REQUEST_H_
