#include "core/adapters/parallel.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace phasor {

ChunkPlan PlanChunks(const ExecutionOptions& options, int64_t num_items,
                     int64_t elements_per_item) {
  ChunkPlan plan;
  plan.step = std::max<int64_t>(num_items, 0);
  if (num_items <= 0 || options.max_threads < 2) return plan;
  const int64_t per_item = std::max<int64_t>(elements_per_item, 1);
  const int64_t grain = std::max<int64_t>(options.grain_elements, 1);
  // Total work, saturating: num_items · per_item can overflow for a huge
  // row count times a wide row.
  const int64_t total = per_item > INT64_MAX / num_items
                            ? INT64_MAX
                            : num_items * per_item;
  // Number of chunks worth running in parallel: one per grain of work, capped
  // by the thread budget and by the number of items.
  int64_t chunks = std::min<int64_t>(total / grain, options.max_threads);
  chunks = std::min(chunks, num_items);
  if (chunks < 2) return plan;
  plan.step = (num_items + chunks - 1) / chunks;
  // Rounding the step up can leave trailing chunks empty; drop them.
  plan.chunks = (num_items + plan.step - 1) / plan.step;
  return plan;
}

RegionThread::RegionThread() : thread_([this] { Loop(); }) {}

RegionThread::~RegionThread() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

bool RegionThread::TryRun(absl::FunctionRef<void()> region) {
  absl::MutexLock lock(&mu_);
  if (job_ != nullptr || stopping_) return false;
  job_ = &region;
  done_ = false;
  mu_.Await(absl::Condition(&done_));
  job_ = nullptr;
  return true;
}

void RegionThread::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(this, &RegionThread::HasWorkOrStopping));
    if (job_ == nullptr || done_) return;  // Stopping, nothing to run.
    const absl::FunctionRef<void()>& job = *job_;
    mu_.Unlock();
    job();
    mu_.Lock();
    done_ = true;
  }
}

namespace {

// Runs `region` on options.region_thread when it is free, else here.
void StartRegion(const ExecutionOptions& options, absl::FunctionRef<void()> region) {
  if (options.region_thread == nullptr || !options.region_thread->TryRun(region)) region();
}

}  // namespace

void RunRanges(const ExecutionOptions& options, absl::Span<const int64_t> bounds,
               absl::FunctionRef<void(int64_t begin, int64_t end)> body) {
  const auto ranges = static_cast<int64_t>(bounds.size()) - 1;
  if (ranges < 1) return;
  if (ranges == 1) {
    body(bounds[0], bounds[1]);
    return;
  }
  StartRegion(options, [&] {
#pragma omp parallel for num_threads(static_cast<int>(ranges)) schedule(static, 1)
    for (int64_t c = 0; c < ranges; ++c) body(bounds[c], bounds[c + 1]);
  });
}

void ParallelFor(const ExecutionOptions& options, int64_t num_items,
                 int64_t elements_per_item,
                 absl::FunctionRef<void(int64_t begin, int64_t end)> body) {
  if (num_items <= 0) return;
  const ChunkPlan plan = PlanChunks(options, num_items, elements_per_item);
  if (plan.chunks < 2) {
    body(0, num_items);
    return;
  }
  const int64_t chunks = plan.chunks;
  StartRegion(options, [&] {
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static, 1)
    for (int64_t c = 0; c < chunks; ++c) {
      body(plan.begin(c), std::min(num_items, plan.begin(c) + plan.step));
    }
  });
}

}  // namespace phasor
