#include "server/blocking_pool.h"

#include <cassert>
#include <utility>

namespace phasor::server {

BlockingPool::BlockingPool(int num_threads) {
  assert(num_threads > 0);
  threads_.reserve(static_cast<size_t>(num_threads));
  for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this] { Run(); });
}

BlockingPool::~BlockingPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

bool BlockingPool::Submit(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  tasks_.push_back(std::move(task));
  return true;
}

bool BlockingPool::HasWorkOrStopping() const { return !tasks_.empty() || stopping_; }

void BlockingPool::Run() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &BlockingPool::HasWorkOrStopping));
      // Stopping: the queue is drained first.
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace phasor::server
