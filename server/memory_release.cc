#include "server/memory_release.h"

#include <dlfcn.h>
#include <malloc.h>

#include <utility>

namespace phasor::server {
namespace {

// gperftools/malloc_extension_c.h: void MallocExtension_ReleaseFreeMemory(void).
using ReleaseFunction = void (*)();

ReleaseFunction TcmallocRelease() {
  static const ReleaseFunction release = reinterpret_cast<ReleaseFunction>(
      dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory"));
  return release;
}

}  // namespace

void ReleaseFreeMemoryToSystem() {
  if (const ReleaseFunction release = TcmallocRelease()) {
    release();
    return;
  }
  // jemalloc replaces malloc and also answers for mallctl; its decay does
  // the work, and glibc's malloc_trim would only trim glibc's own (unused)
  // arena.
  if (dlsym(RTLD_DEFAULT, "mallctl") != nullptr) return;
  malloc_trim(0);
}

absl::string_view MemoryReleaseMechanism() {
  if (TcmallocRelease() != nullptr) return "tcmalloc ReleaseFreeMemory";
  if (dlsym(RTLD_DEFAULT, "mallctl") != nullptr) return "none (jemalloc decay)";
  return "glibc malloc_trim";
}

IdleMemoryReleaser::IdleMemoryReleaser(const MemoryBudget* budget,
                                       IdleMemoryReleaserOptions options,
                                       std::function<void()> release)
    : budget_(budget),
      options_(options),
      release_(std::move(release)),
      released_at_start_(budget->released_bytes_total()),
      thread_([this] { Run(); }) {}

IdleMemoryReleaser::~IdleMemoryReleaser() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

int64_t IdleMemoryReleaser::releases() const {
  absl::MutexLock lock(&mu_);
  return releases_;
}

void IdleMemoryReleaser::Run() {
  int64_t released_at_last = released_at_start_;
  int idle_looks = 0;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.poll_interval)) return;
    }
    const int64_t released = budget_->released_bytes_total();
    if (released - released_at_last < options_.min_released_bytes ||
        budget_->in_use_bytes() > options_.idle_bytes) {
      idle_looks = 0;
      continue;
    }
    if (++idle_looks < options_.idle_polls) continue;
    release_();
    released_at_last = released;
    idle_looks = 0;
    absl::MutexLock lock(&mu_);
    ++releases_;
  }
}

}  // namespace phasor::server
