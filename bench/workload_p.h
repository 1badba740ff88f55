// Workload P, the panel benchmark's data: S irregular series of R rows and
// C = 3 channels (30% missing), stacked, spelled the same way in
// bench/peers/panel_peer.py so every side times the same numbers:
//   h(k) = (k · 2654435761) mod 2^32
//   series s, row i, k = s·R + i:
//     t = 2024-01-01T00:00:00Z + s·7919 s + i·3600 s + (h(k) mod 3600000) ms
//     value[c] = NaN if h(3k + c + 1) mod 10 < 3 else sin(0.001·k + c)
// Series s starts 7919 s after series s − 1 and spans about R hours, so a
// panel of 10,000 series covers 2.5 years and five New York DST changes.
// The spec: time sinusoid dim 8, gaps (Δt, δ per channel, mask) and calendar
// (hour, weekday, month, CYCLIC) in America/New_York: F = 21 columns.
#ifndef PHASOR_BENCH_WORKLOAD_P_H_
#define PHASOR_BENCH_WORKLOAD_P_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/compose.h"

namespace phasor::bench {

struct WorkloadP {
  static constexpr int64_t kChannels = 3;
  int64_t num_series = 0;
  int64_t rows_per_series = 0;
  std::vector<int64_t> times;   // [S·R] ns since the Unix epoch.
  std::vector<double> values;   // [S·R, 3], NaN = not observed.
  std::vector<int64_t> offsets; // [S + 1].

  WorkloadP(int64_t series, int64_t rows) : num_series(series), rows_per_series(rows) {
    const auto h = [](uint64_t k) { return (k * uint64_t{2654435761}) & 0xffffffffu; };
    constexpr int64_t kStartNs = int64_t{1704067200} * 1000000000;
    times.reserve(series * rows);
    values.reserve(series * rows * kChannels);
    offsets.reserve(series + 1);
    offsets.push_back(0);
    for (int64_t s = 0; s < series; ++s) {
      for (int64_t i = 0; i < rows; ++i) {
        const uint64_t k = static_cast<uint64_t>(s * rows + i);
        times.push_back(kStartNs + s * 7919 * int64_t{1000000000} +
                        i * 3600 * int64_t{1000000000} +
                        static_cast<int64_t>(h(k) % 3600000) * 1000000);
        for (int64_t c = 0; c < kChannels; ++c) {
          values.push_back(h(3 * k + static_cast<uint64_t>(c) + 1) % 10 < 3
                               ? std::numeric_limits<double>::quiet_NaN()
                               : std::sin(0.001 * static_cast<double>(k) +
                                          static_cast<double>(c)));
        }
      }
      offsets.push_back(static_cast<int64_t>(times.size()));
    }
  }

  int64_t num_rows() const { return static_cast<int64_t>(times.size()); }

  PanelView Panel() const {
    PanelView panel;
    panel.rows.num_channels = kChannels;
    panel.rows.timestamps = times;
    panel.rows.values.f64 = values;
    panel.series_offsets = offsets;
    return panel;
  }
  // Series s alone.
  ObservationsView Series(int64_t s) const { return Panel().Series(s); }

  static TemporalSpec Spec() {
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
};

}  // namespace phasor::bench

#endif  // PHASOR_BENCH_WORKLOAD_P_H_
