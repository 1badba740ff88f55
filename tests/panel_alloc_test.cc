// EncodePanel allocates nothing per series beyond the output: a call over
// 4000 series makes as many allocations as a call over 4 (global operator
// new is counted here, so this binary does not run under ASan).
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#include "absl/types/span.h"
#include "core/temporal/compose.h"
#include "gtest/gtest.h"
#include "tests/temporal_test_data.h"

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace phasor {
namespace {

// Allocations made by one EncodePanel call over `num_series` series of 5
// rows each, with states in and out and two time zones.
int64_t AllocationsFor(int64_t num_series, int threads) {
  const WideSeries data(static_cast<int>(num_series * 5), 42);
  std::vector<int64_t> times = data.times;
  std::vector<int64_t> offsets;
  std::vector<int32_t> zone_index;
  for (int64_t s = 0; s <= num_series; ++s) offsets.push_back(5 * s);
  for (int64_t s = 0; s < num_series; ++s) zone_index.push_back(static_cast<int32_t>(s % 2));
  PanelView panel;
  panel.rows = data.View(0, data.rows(), /*with_content=*/false);
  panel.series_offsets = offsets;
  panel.zone_index = zone_index;
  // Every series continues from a state with all channels.
  SeriesState state;
  state.has_rows = true;
  state.first_timestamp_ns = data.times[0] - 10 * kSec;
  state.last_timestamp_ns = data.times[0] - kSec;
  state.channels.resize(3);
  for (ChannelState& c : state.channels) {
    c.seen = true;
    c.last_seen_ns = state.last_timestamp_ns;
    c.last_value = 1.0;
  }
  // Each series' times restart so the state comes before them.
  for (int64_t s = 0; s < num_series; ++s) {
    for (int64_t r = 0; r < 5; ++r) times[5 * s + r] = data.times[r];
  }
  panel.rows.timestamps = times;
  const std::vector<const SeriesState*> states_in(num_series, &state);
  std::vector<SeriesState> states_out(num_series, state);  // Sized: the output.
  const TemporalSpec spec = FullSpec();
  std::vector<float> out(static_cast<size_t>(num_series * 5 * 200));
  const absl::StatusOr<FeatureLayout> layout = TemporalFeatureLayout(spec, 3, 0);
  EXPECT_TRUE(layout.ok());
  out.resize(num_series * 5 * layout->width);
  const absl::TimeZone zones[] = {absl::UTCTimeZone(), absl::FixedTimeZone(3600)};

  const int64_t before = g_allocations.load();
  const absl::Status status =
      EncodePanel(spec, panel, zones, states_in,
                  ExecutionOptions{.max_threads = threads, .grain_elements = 1000},
                  absl::MakeSpan(out), absl::MakeSpan(states_out));
  const int64_t allocations = g_allocations.load() - before;
  EXPECT_TRUE(status.ok()) << status;
  return allocations;
}

TEST(PanelAllocationTest, NothingPerSeries) {
  AllocationsFor(4, 1);  // Warms process-wide caches (zones, tables).
  for (int threads : {1, 2}) {
    const int64_t few = AllocationsFor(4, threads);
    const int64_t many = AllocationsFor(4000, threads);
    EXPECT_GT(few, 0) << "the counter counts nothing";
    // Chunks (at most `threads`) each hold their own scratch.
    EXPECT_LE(many, few + 16 * threads) << "threads " << threads;
  }
}

}  // namespace
}  // namespace phasor
