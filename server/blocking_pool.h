// File: server/blocking_pool.h
//
// BlockingPool: a fixed set of threads that run queued tasks which may block.
//
// gRPC's callback API runs method handlers on a small set of library
// threads, the same threads that run each call's completion (a reactor's
// OnDone). A handler that blocks there stalls
// the server: a call waiting for the memory budget (server/memory_budget.h)
// would hold a thread that the calls holding the budget need in order to
// finish and give it back, and every new call, health checks included,
// would queue behind it. So a call that cannot take its memory at once is
// moved to this pool, which waits and then runs the call's work
// (EncoderService); gRPC's threads stay free.
//
// Tasks run in the order submitted, `num_threads` at a time.
//
// Thread-safety: Submit may be called from any thread. The destructor stops
// taking tasks, runs the ones already queued, and joins the threads; tasks
// must not Submit to the pool while it is being destroyed.
#ifndef PHASOR_SERVER_BLOCKING_POOL_H_
#define PHASOR_SERVER_BLOCKING_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace phasor::server {

class BlockingPool final {
 public:
  // REQUIRES: num_threads > 0.
  explicit BlockingPool(int num_threads);
  BlockingPool(const BlockingPool&) = delete;
  BlockingPool& operator=(const BlockingPool&) = delete;
  ~BlockingPool();

  // Queues `task`; false once the pool is stopping (the task is not run).
  bool Submit(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);

  int num_threads() const { return static_cast<int>(threads_.size()); }

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace phasor::server

#endif  // PHASOR_SERVER_BLOCKING_POOL_H_
