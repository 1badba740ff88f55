// Workload P: a panel of S irregular, multichannel series, the workload the
// panel benchmarks share (bench/panel_bench.cc in core, bench/
// panel_client_bench.cc through the client with bench/workload_p_request.h,
// bench/peers/panel_peer.py in pandas). Exact definition, so that every
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
#include <vector>

#include "core/temporal/compose.h"

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

// The workload as a core panel (views into `workload`).
inline PanelView WorkloadPPanel(const WorkloadP& workload) {
  PanelView panel;
  panel.rows.num_channels = workload.shape.channels;
  panel.rows.timestamps = workload.timestamps_ns;
  panel.rows.values.f64 = workload.values;
  panel.series_offsets = workload.series_offsets;
  return panel;
}

// Workload P's spec for core (the proto form is WorkloadPSpec).
inline TemporalSpec WorkloadPCoreSpec() {
  TemporalSpec spec;
  spec.time = TimeBlock{};
  spec.time->dim = 8;
  GapsBlock gaps;
  gaps.include_mask = true;
  spec.gaps = gaps;
  CalendarBlock calendar;
  calendar.time_zone = "America/New_York";
  calendar.fields = {CalendarField::kHourOfDay, CalendarField::kDayOfWeek,
                     CalendarField::kMonthOfYear};
  calendar.encoding = CalendarEncoding::kCyclic;
  spec.calendar = calendar;
  return spec;
}

}  // namespace phasor::bench

#endif  // PHASOR_BENCH_WORKLOAD_P_H_
