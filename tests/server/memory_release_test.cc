// IdleMemoryReleaser (server/memory_release.h) with a counting release
// function and short polls: it releases once after large calls end, not
// while they hold memory, not for small calls; ReleaseFreeMemoryToSystem
// names a mechanism and runs. BlockingPool (server/blocking_pool.h): tasks
// run off the caller's thread, several at once, and the queue drains on
// destruction.
#include "server/memory_release.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/blocking_pool.h"
#include "server/memory_budget.h"

namespace phasor::server {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

absl::Status Alive() { return absl::OkStatus(); }

IdleMemoryReleaserOptions FastOptions() {
  IdleMemoryReleaserOptions options;
  options.poll_interval = absl::Milliseconds(10);
  options.idle_polls = 2;
  options.idle_bytes = 4 * kMiB;
  options.min_released_bytes = 64 * kMiB;
  return options;
}

// Polls `predicate` for up to 5 s.
template <typename Predicate>
bool Eventually(Predicate predicate) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (absl::Now() < deadline) {
    if (predicate()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return predicate();
}

TEST(IdleMemoryReleaser, ReleasesOnceAfterLargeCallsEnd) {
  MemoryBudget budget(1024 * kMiB);
  std::atomic<int> released{0};
  IdleMemoryReleaser releaser(&budget, FastOptions(), [&released] { ++released; });
  {
    MemoryBudget::Lease lease;
    ASSERT_TRUE(budget.Acquire(100 * kMiB, absl::InfinitePast(), Alive, &lease).ok());
    // Nothing while the call holds its memory.
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_EQ(released.load(), 0);
  }
  ASSERT_TRUE(Eventually([&] { return released.load() == 1; }));
  EXPECT_EQ(releaser.releases(), 1);
  // Idle with nothing new given back: no second release.
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(released.load(), 1);
}

TEST(IdleMemoryReleaser, SmallCallsAloneNeverRelease) {
  MemoryBudget budget(1024 * kMiB);
  std::atomic<int> released{0};
  IdleMemoryReleaser releaser(&budget, FastOptions(), [&released] { ++released; });
  for (int i = 0; i < 10; ++i) {
    MemoryBudget::Lease lease;
    ASSERT_TRUE(budget.Acquire(kMiB, absl::InfinitePast(), Alive, &lease).ok());
  }
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(released.load(), 0);
}

TEST(IdleMemoryReleaser, WaitsUntilTheServerIsQuiet) {
  MemoryBudget budget(1024 * kMiB);
  std::atomic<int> released{0};
  IdleMemoryReleaser releaser(&budget, FastOptions(), [&released] { ++released; });
  MemoryBudget::Lease still_running;
  ASSERT_TRUE(budget.Acquire(50 * kMiB, absl::InfinitePast(), Alive, &still_running).ok());
  {
    MemoryBudget::Lease done;
    ASSERT_TRUE(budget.Acquire(100 * kMiB, absl::InfinitePast(), Alive, &done).ok());
  }
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(released.load(), 0) << "50 MiB still in use is not idle";
  still_running.Reset();
  EXPECT_TRUE(Eventually([&] { return released.load() == 1; }));
}

TEST(ReleaseFreeMemoryToSystem, NamesItsMechanismAndRuns) {
  const absl::string_view mechanism = MemoryReleaseMechanism();
  EXPECT_TRUE(mechanism == "tcmalloc ReleaseFreeMemory" || mechanism == "glibc malloc_trim" ||
              mechanism == "none (jemalloc decay)")
      << mechanism;
  std::vector<std::unique_ptr<char[]>> blocks;
  for (int i = 0; i < 8; ++i) blocks.emplace_back(new char[kMiB]);
  blocks.clear();
  ReleaseFreeMemoryToSystem();
}

TEST(BlockingPool, RunsTasksConcurrentlyAndDrainsOnDestruction) {
  std::atomic<int> ran{0};
  {
    BlockingPool pool(/*num_threads=*/2);
    EXPECT_EQ(pool.num_threads(), 2);
    // Two tasks that each wait for the other: they only finish if the pool
    // runs them at the same time.
    absl::Notification first, second;
    ASSERT_TRUE(pool.Submit([&] {
      first.Notify();
      second.WaitForNotificationWithTimeout(absl::Seconds(10));
      ++ran;
    }));
    ASSERT_TRUE(pool.Submit([&] {
      second.Notify();
      first.WaitForNotificationWithTimeout(absl::Seconds(10));
      ++ran;
    }));
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(pool.Submit([&ran] { ++ran; }));
    }
  }
  EXPECT_EQ(ran.load(), 22);
}

}  // namespace
}  // namespace phasor::server
