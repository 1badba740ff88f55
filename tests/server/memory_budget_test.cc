// MemoryBudget and CallMemory (server/memory_budget.h): bytes taken and
// given back, the two refusals and what marks them, waiting bounded by a
// deadline and by the call's liveness, small calls going ahead of waiting
// large ones; and the retry pushback each refusal gets on the wire
// (server/grpc_status.h RetryPushback).
#include "server/memory_budget.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/grpc_status.h"

namespace phasor::server {
namespace {

using ::testing::HasSubstr;

absl::Status Alive() { return absl::OkStatus(); }

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(MemoryBudget, LeasesTakeAndGiveBack) {
  std::vector<int64_t> seen;
  MemoryBudget budget(100 * kMiB, [&seen](int64_t in_use) { seen.push_back(in_use); });
  {
    MemoryBudget::Lease lease;
    ASSERT_TRUE(budget.Acquire(40 * kMiB, absl::InfinitePast(), Alive, &lease).ok());
    ASSERT_TRUE(budget.Acquire(20 * kMiB, absl::InfinitePast(), Alive, &lease).ok());
    EXPECT_EQ(lease.bytes(), 60 * kMiB);
    EXPECT_EQ(budget.in_use_bytes(), 60 * kMiB);
    MemoryBudget::Lease moved = std::move(lease);
    EXPECT_EQ(lease.bytes(), 0);  // NOLINT(bugprone-use-after-move): documented.
    EXPECT_EQ(moved.bytes(), 60 * kMiB);
    EXPECT_EQ(budget.in_use_bytes(), 60 * kMiB);
  }
  EXPECT_EQ(budget.in_use_bytes(), 0);
  EXPECT_EQ(budget.released_bytes_total(), 60 * kMiB);
  EXPECT_EQ(seen, (std::vector<int64_t>{40 * kMiB, 60 * kMiB, 0}));
  // Zero bytes take nothing.
  MemoryBudget::Lease empty;
  EXPECT_TRUE(budget.Acquire(0, absl::InfinitePast(), Alive, &empty).ok());
  EXPECT_EQ(empty.bytes(), 0);
}

TEST(MemoryBudget, ExactlyTheCapacityFits) {
  MemoryBudget budget(10 * kMiB);
  MemoryBudget::Lease lease;
  EXPECT_TRUE(budget.Acquire(10 * kMiB, absl::InfinitePast(), Alive, &lease).ok());
  MemoryBudget::Lease more;
  EXPECT_EQ(budget.Acquire(1, absl::InfinitePast(), Alive, &more).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(MemoryBudget, MoreThanTheWholeBudgetIsRefusedAtOnce) {
  MemoryBudget budget(10 * kMiB);
  MemoryBudget::Lease lease;
  const absl::Time start = absl::Now();
  const absl::Status status =
      budget.Acquire(10 * kMiB + 1, absl::Now() + absl::Seconds(30), Alive, &lease);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1)) << "it must not wait";
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(MemoryRefusalOf(status), MemoryRefusal::kTooLarge);
  EXPECT_THAT(status.message(), HasSubstr("10485761 bytes"));
  EXPECT_THAT(status.message(), HasSubstr("whole memory budget of 10485760 bytes"));
  EXPECT_THAT(status.message(), HasSubstr("--memory_budget_bytes"));
  // What a lease already holds counts: 6 + 6 MiB is over 10.
  ASSERT_TRUE(budget.Acquire(6 * kMiB, absl::InfinitePast(), Alive, &lease).ok());
  EXPECT_EQ(MemoryRefusalOf(budget.Acquire(6 * kMiB, absl::InfinitePast(), Alive, &lease)),
            MemoryRefusal::kTooLarge);
  EXPECT_EQ(lease.bytes(), 6 * kMiB);
  // Absurd sizes saturate rather than overflow.
  EXPECT_EQ(MemoryRefusalOf(budget.Acquire(INT64_MAX, absl::InfinitePast(), Alive, &lease)),
            MemoryRefusal::kTooLarge);
}

TEST(MemoryBudget, BusyAfterTheDeadline) {
  MemoryBudget budget(10 * kMiB);
  MemoryBudget::Lease held;
  ASSERT_TRUE(budget.Acquire(8 * kMiB, absl::InfinitePast(), Alive, &held).ok());
  MemoryBudget::Lease lease;
  const absl::Time start = absl::Now();
  const absl::Status status =
      budget.Acquire(4 * kMiB, absl::Now() + absl::Milliseconds(200), Alive, &lease);
  const absl::Duration waited = absl::Now() - start;
  EXPECT_GE(waited, absl::Milliseconds(190));
  EXPECT_LT(waited, absl::Seconds(5));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(MemoryRefusalOf(status), MemoryRefusal::kBusy);
  EXPECT_THAT(status.message(), HasSubstr("in use by other calls"));
  EXPECT_THAT(status.message(), HasSubstr("needs 4194304 bytes"));
  EXPECT_THAT(status.message(), HasSubstr("2097152 of the budget's 10485760 bytes"));
  EXPECT_THAT(status.message(), HasSubstr("retry"));
  EXPECT_EQ(lease.bytes(), 0);
  EXPECT_EQ(budget.in_use_bytes(), 8 * kMiB);
}

TEST(MemoryBudget, AWaiterTakesWhatAnotherCallGivesBack) {
  MemoryBudget budget(10 * kMiB);
  auto held = std::make_unique<MemoryBudget::Lease>();
  ASSERT_TRUE(budget.Acquire(8 * kMiB, absl::InfinitePast(), Alive, held.get()).ok());
  std::thread releaser([&held] {
    absl::SleepFor(absl::Milliseconds(100));
    held.reset();
  });
  MemoryBudget::Lease lease;
  const absl::Status status =
      budget.Acquire(4 * kMiB, absl::Now() + absl::Seconds(30), Alive, &lease);
  releaser.join();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(budget.in_use_bytes(), 4 * kMiB);
}

TEST(MemoryBudget, AWaitEndsWhenTheCallIsNoLongerWanted) {
  MemoryBudget budget(10 * kMiB);
  MemoryBudget::Lease held;
  ASSERT_TRUE(budget.Acquire(10 * kMiB, absl::InfinitePast(), Alive, &held).ok());
  std::atomic<bool> cancelled{false};
  std::thread canceller([&cancelled] {
    absl::SleepFor(absl::Milliseconds(100));
    cancelled = true;
  });
  MemoryBudget::Lease lease;
  const absl::Time start = absl::Now();
  const absl::Status status = budget.Acquire(
      kMiB, absl::Now() + absl::Seconds(30),
      [&cancelled] {
        return cancelled ? absl::CancelledError("the call was cancelled") : absl::OkStatus();
      },
      &lease);
  canceller.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(MemoryBudget, SmallCallsGoAheadOfAWaitingLargeOneAndLargeOnesQueue) {
  MemoryBudget budget(100 * kMiB);
  MemoryBudget::Lease held;
  ASSERT_TRUE(budget.Acquire(60 * kMiB, absl::InfinitePast(), Alive, &held).ok());
  absl::Notification large_done;
  absl::Status large_status;
  std::thread large([&] {
    MemoryBudget::Lease lease;
    large_status = budget.Acquire(70 * kMiB, absl::Now() + absl::Seconds(1), Alive, &lease);
    large_done.Notify();
  });
  // Let the large call start waiting.
  absl::SleepFor(absl::Milliseconds(100));
  ASSERT_FALSE(large_done.HasBeenNotified());
  // A small call fits and goes ahead.
  MemoryBudget::Lease small;
  EXPECT_TRUE(budget.Acquire(MemoryBudget::kSmallCallBytes, absl::InfinitePast(), Alive,
                             &small).ok());
  // A larger one that would fit does not jump the queue: it may not wait,
  // so it is refused.
  MemoryBudget::Lease medium;
  EXPECT_EQ(MemoryRefusalOf(budget.Acquire(10 * kMiB, absl::InfinitePast(), Alive, &medium)),
            MemoryRefusal::kBusy);
  large.join();
  EXPECT_EQ(MemoryRefusalOf(large_status), MemoryRefusal::kBusy);
  // With nobody waiting it fits.
  EXPECT_TRUE(budget.Acquire(10 * kMiB, absl::InfinitePast(), Alive, &medium).ok());
}

TEST(MemoryBudget, ConcurrentLeasesNeverExceedTheCapacity) {
  constexpr int64_t kCapacity = 10 * kMiB;
  std::atomic<int64_t> peak{0};
  MemoryBudget budget(kCapacity, [&peak](int64_t in_use) {
    int64_t seen = peak.load();
    while (in_use > seen && !peak.compare_exchange_weak(seen, in_use)) {
    }
  });
  std::vector<std::thread> threads;
  std::atomic<int> granted{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&budget, &granted, t] {
      for (int i = 0; i < 200; ++i) {
        MemoryBudget::Lease lease;
        if (budget.Acquire((t % 4 + 1) * kMiB, absl::Now() + absl::Seconds(10), Alive, &lease)
                .ok()) {
          ++granted;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(granted.load(), 8 * 200);
  EXPECT_LE(peak.load(), kCapacity);
  EXPECT_EQ(budget.in_use_bytes(), 0);
}

TEST(CallMemory, ChargesTheRequestOnceAndGivesEverythingBack) {
  MemoryBudget budget(100 * kMiB);
  {
    CallMemory memory(&budget, /*request_bytes=*/kMiB, absl::Now() + absl::Seconds(1));
    ASSERT_TRUE(memory.Reserve(10 * kMiB, Alive).ok());
    EXPECT_EQ(memory.reserved_bytes(), 10 * kMiB + CallMemory::kRequestCopies * kMiB);
    ASSERT_TRUE(memory.Reserve(5 * kMiB, Alive).ok());
    EXPECT_EQ(memory.reserved_bytes(), 15 * kMiB + CallMemory::kRequestCopies * kMiB);
    EXPECT_EQ(budget.in_use_bytes(), memory.reserved_bytes());
  }
  EXPECT_EQ(budget.in_use_bytes(), 0);
  // Without a budget nothing is counted.
  CallMemory unbounded(nullptr, kMiB, absl::InfinitePast());
  EXPECT_TRUE(unbounded.Reserve(int64_t{1} << 40, Alive).ok());
  EXPECT_EQ(unbounded.reserved_bytes(), 0);
}

TEST(CallMemory, AFirstTryThatMayNotWaitSaysWhetherWaitingCouldHelp) {
  MemoryBudget budget(10 * kMiB);
  MemoryBudget::Lease held;
  ASSERT_TRUE(budget.Acquire(8 * kMiB, absl::InfinitePast(), Alive, &held).ok());
  CallMemory memory(&budget, 0, absl::Now() + absl::Seconds(30));
  memory.set_may_wait(false);
  const absl::Time start = absl::Now();
  EXPECT_EQ(MemoryRefusalOf(memory.Reserve(4 * kMiB, Alive)), MemoryRefusal::kBusy);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_TRUE(memory.would_have_waited());
  // Run again where it may wait: it gets the bytes once they come back.
  std::thread releaser([&held] {
    absl::SleepFor(absl::Milliseconds(50));
    held.Reset();
  });
  memory.set_may_wait(true);
  EXPECT_TRUE(memory.Reserve(4 * kMiB, Alive).ok());
  releaser.join();

  // Too large, or past the wait deadline: waiting cannot help.
  CallMemory too_large(&budget, 0, absl::Now() + absl::Seconds(30));
  too_large.set_may_wait(false);
  EXPECT_EQ(MemoryRefusalOf(too_large.Reserve(11 * kMiB, Alive)), MemoryRefusal::kTooLarge);
  EXPECT_FALSE(too_large.would_have_waited());
  CallMemory late(&budget, 0, absl::InfinitePast());
  late.set_may_wait(false);
  EXPECT_EQ(MemoryRefusalOf(late.Reserve(7 * kMiB, Alive)), MemoryRefusal::kBusy);
  EXPECT_FALSE(late.would_have_waited());
}

TEST(RetryPushback, OnlyTheBusyRefusalMayBeRetried) {
  MemoryBudget budget(10 * kMiB);
  MemoryBudget::Lease lease;
  const absl::Status too_large =
      budget.Acquire(11 * kMiB, absl::InfinitePast(), Alive, &lease);
  ASSERT_TRUE(budget.Acquire(10 * kMiB, absl::InfinitePast(), Alive, &lease).ok());
  MemoryBudget::Lease other;
  const absl::Status busy = budget.Acquire(kMiB, absl::InfinitePast(), Alive, &other);
  EXPECT_EQ(RetryPushback(too_large), "-1");
  EXPECT_EQ(RetryPushback(busy), std::nullopt);
  // Limits a retry cannot fix.
  EXPECT_EQ(RetryPushback(absl::ResourceExhaustedError("over the message limit")), "-1");
  EXPECT_EQ(RetryPushback(absl::UnavailableError("draining")), std::nullopt);
  EXPECT_EQ(RetryPushback(absl::InvalidArgumentError("bad")), std::nullopt);
}

}  // namespace
}  // namespace phasor::server
