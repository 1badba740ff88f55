#include "core/adapters/parallel.h"

#include <omp.h>

#include <atomic>
#include <mutex>
#include <set>
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

}  // namespace
}  // namespace phasor
