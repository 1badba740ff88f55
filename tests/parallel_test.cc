#include "core/adapters/parallel.h"

#include <omp.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace phasor {
namespace {

// Every item is visited exactly once, for any budget and grain.
TEST(ParallelForTest, CoversEveryItemOnce) {
  for (int threads : {1, 2, 3, 8}) {
    for (int64_t n : {0, 1, 7, 100, 1001}) {
      std::vector<std::atomic<int>> seen(n);
      ParallelFor({.max_threads = threads, .grain_elements = 3}, n, 1,
                  [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) seen[i]++;
                  });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[i].load(), 1);
    }
  }
}

// Below two grains the body runs once, on the calling thread.
TEST(ParallelForTest, SmallWorkRunsSeriallyInOneChunk) {
  int calls = 0;
  ParallelFor({.max_threads = 8, .grain_elements = 1000}, 10, 150,
              [&](int64_t b, int64_t e) {
                ++calls;
                EXPECT_EQ(b, 0);
                EXPECT_EQ(e, 10);
                EXPECT_EQ(omp_get_num_threads(), 1);
              });
  EXPECT_EQ(calls, 1);
}

TEST(ParallelForTest, LargeWorkUsesSeveralThreads) {
  std::mutex mu;
  std::set<int> threads;
  ParallelFor({.max_threads = 2, .grain_elements = 10}, 1000, 10,
              [&](int64_t, int64_t) {
                std::lock_guard<std::mutex> lock(mu);
                threads.insert(omp_get_thread_num());
              });
  EXPECT_EQ(threads.size(), 2u);
}

// With a region thread, a parallel region starts there: every chunk runs on
// that thread's team, never on the caller, and every item once. Serial work
// stays on the caller.
TEST(RegionThreadTest, ParallelRegionsStartOnTheRegionThread) {
  RegionThread region_thread;
  const ExecutionOptions options{
      .max_threads = 2, .grain_elements = 1, .region_thread = &region_thread};
  for (int call = 0; call < 3; ++call) {
    std::vector<std::atomic<int>> seen(100);
    std::mutex mu;
    std::set<std::thread::id> threads;
    ParallelFor(options, 100, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) seen[i]++;
      std::lock_guard<std::mutex> lock(mu);
      threads.insert(std::this_thread::get_id());
    });
    for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(seen[i].load(), 1);
    EXPECT_EQ(threads.size(), 2u);
    EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
  }
  std::thread::id serial;
  ParallelFor({.max_threads = 2, .grain_elements = 1000, .region_thread = &region_thread}, 10, 1,
              [&](int64_t, int64_t) { serial = std::this_thread::get_id(); });
  EXPECT_EQ(serial, std::this_thread::get_id());
}

// A caller that finds the region thread busy runs its region itself, at
// once: a region that starts another (nested) does not wait for itself, and
// RunRanges takes the same path.
TEST(RegionThreadTest, BusyThreadLeavesTheRegionToTheCaller) {
  RegionThread region_thread;
  const ExecutionOptions options{
      .max_threads = 2, .grain_elements = 1, .region_thread = &region_thread};
  std::atomic<int> inner_items{0};
  std::atomic<bool> inner_on_region_thread{false};
  std::thread::id outer_id;
  EXPECT_TRUE(region_thread.TryRun([&] {
    outer_id = std::this_thread::get_id();
    const int64_t bounds[] = {0, 5, 10};
    RunRanges(options, bounds, [&](int64_t b, int64_t e) {
      inner_items += static_cast<int>(e - b);
      // The nested region's master is the busy thread itself.
      if (omp_get_thread_num() == 0 && std::this_thread::get_id() == outer_id) {
        inner_on_region_thread = true;
      }
    });
  }));
  EXPECT_EQ(inner_items.load(), 10);
  EXPECT_TRUE(inner_on_region_thread.load());
  EXPECT_NE(outer_id, std::this_thread::get_id());
}

}  // namespace
}  // namespace phasor
