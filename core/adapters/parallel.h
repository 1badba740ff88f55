// -----------------------------------------------------------------------------
// File: core/adapters/parallel.h
// -----------------------------------------------------------------------------
//
// ParallelFor: the one place where core/ uses OpenMP.
//
// Kernels see a half-open range [begin, end) of independent work items (rows);
// each item has exactly one writer, so results are bytewise identical for any
// thread count. Small jobs (fewer than two grains) run serially on the calling
// thread: many concurrent small RPCs must not fight over OpenMP teams.
//
// Early stop: a caller whose result may stop being wanted (a server call
// whose deadline passes or whose client goes away) sets
// ExecutionOptions::stop_requested. Kernels long enough to matter poll it
// between blocks of rows, never inside a row, so output bytes do not depend
// on it; a kernel that stops reports CANCELLED and leaves its output
// unspecified. core/ knows nothing of why the caller wants to stop.
//
// Thread-safety: ParallelFor may be called concurrently from many threads.
//
// Example:
//
//   ExecutionOptions options;
//   options.max_threads = 4;
//   ParallelFor(options, /*num_items=*/rows, /*elements_per_item=*/width,
//               [&](int64_t begin, int64_t end) { EncodeRows(begin, end); });
#ifndef PHASOR_CORE_ADAPTERS_PARALLEL_H_
#define PHASOR_CORE_ADAPTERS_PARALLEL_H_

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace phasor {

// A thread of its own that starts parallel regions for callers, so that
// regions from many calling threads share one OpenMP team. OpenMP gives each
// thread that starts regions a team of its own; a server's handlers run on
// several gRPC threads, so consecutive calls would alternate between teams
// whose workers went to sleep after their last region and start late
// (docs/BENCHMARKS.md, "Shared memory and Unix socket", has the figures).
//
// Thread-safety: TryRun may be called from any thread; one region runs at a
// time, and a caller that finds the thread busy runs its region itself.
class RegionThread {
 public:
  RegionThread();
  RegionThread(const RegionThread&) = delete;
  RegionThread& operator=(const RegionThread&) = delete;
  // Joins the thread. REQUIRES: no TryRun is running or will start.
  ~RegionThread();

  // Runs `region` on the thread and returns once it has finished: true. Or,
  // when the thread is running another caller's region, runs nothing and
  // returns false at once (the caller runs it: no call waits behind another).
  bool TryRun(absl::FunctionRef<void()> region) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (job_ != nullptr && !done_) || stopping_;
  }

  absl::Mutex mu_;
  const absl::FunctionRef<void()>* job_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// How much parallelism a call may use. Passed by value to every kernel; there
// is no process-wide mutable setting.
struct ExecutionOptions {
  // Upper bound on OpenMP threads for one call; 1 runs serially. The server
  // sets it from --threads.
  int max_threads = 1;
  // Minimum number of scalar outputs (elements) per parallel chunk. Below two
  // grains of total work the call runs serially. 64K elements is about 30-100
  // microseconds of work for the kernels here, well above OpenMP's fork cost.
  int64_t grain_elements = int64_t{1} << 16;
  // Optional, not owned: returns true once the result is no longer wanted.
  // Called from worker threads, about once per grain of outputs, so it must
  // be thread-safe and cheap (a clock read, an atomic load). Null = never.
  // Kernels that poll it say so in their header (compose.h).
  const std::function<bool()>* stop_requested = nullptr;
  // Optional, not owned: parallel regions start on this thread when it is
  // free (RegionThread), else on the calling thread. Null = the caller's.
  RegionThread* region_thread = nullptr;
};

// Whether `options` asks the running kernel to stop.
inline bool StopRequested(const ExecutionOptions& options) {
  return options.stop_requested != nullptr && (*options.stop_requested)();
}

// How ParallelFor splits [0, num_items): `chunks` contiguous chunks, chunk c
// covering [c·step, min(num_items, (c + 1)·step)). One chunk runs serially on
// the calling thread.
struct ChunkPlan {
  int64_t chunks = 1;
  int64_t step = 0;

  int64_t begin(int64_t c) const { return c * step; }
};

// The plan ParallelFor follows: `elements_per_item` is the work per item,
// used with the grain to decide the number of chunks. A kernel that must
// place the boundaries itself (to keep whole series in one chunk) asks for
// the plan, moves them, and runs the result with RunRanges.
ChunkPlan PlanChunks(const ExecutionOptions& options, int64_t num_items,
                     int64_t elements_per_item);

// Calls `body(bounds[c], bounds[c + 1])` for every c, each on its own
// thread (bounds are increasing; bounds.size() - 1 threads, one serially).
// Only options.region_thread is read.
void RunRanges(const ExecutionOptions& options, absl::Span<const int64_t> bounds,
               absl::FunctionRef<void(int64_t begin, int64_t end)> body);

// Calls `body(begin, end)` over disjoint chunks covering [0, num_items), as
// PlanChunks plans them. Chunks are contiguous and statically assigned.
void ParallelFor(const ExecutionOptions& options, int64_t num_items,
                 int64_t elements_per_item,
                 absl::FunctionRef<void(int64_t begin, int64_t end)> body);

}  // namespace phasor

#endif  // PHASOR_CORE_ADAPTERS_PARALLEL_H_
