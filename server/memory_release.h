// File: server/memory_release.h
//
// Giving memory back to the system once large calls are over.
//
// Allocators keep freed pages for reuse. After a burst of calls with 60 MiB
// replies tcmalloc's page heap holds what the burst used, and an idle
// server's resident memory stays there: gperftools returns free spans only
// gradually, a few pages per page freed (TCMALLOC_RELEASE_RATE), and an idle
// server frees nothing. A container's resident memory counts against its
// limit and its node's capacity, so phasor-server returns it once idle.
//
// ReleaseFreeMemoryToSystem() asks the allocator the process runs on. The
// allocator is chosen when phasor-server is linked (CMakeLists.txt
// PHASOR_ALLOCATOR) while this library is linked into tests and tools that
// run on glibc's malloc, so its entry points are looked up at run time
// (dlsym), not linked:
//  - tcmalloc (gperftools): MallocExtension_ReleaseFreeMemory, the C form of
//    MallocExtension::instance()->ReleaseFreeMemory()
//    (gperftools/malloc_extension_c.h): every free span of the page heap is
//    returned with madvise, so RSS drops at once;
//  - glibc's malloc: malloc_trim(0);
//  - jemalloc: nothing is called; its decay (dirty_decay_ms, 10 s by
//    default) returns pages on its own.
//
// IdleMemoryReleaser decides when: a thread that looks at a MemoryBudget
// every poll_interval and releases once the calls in flight hold at most
// idle_bytes for idle_polls looks in a row, after calls have given back at
// least min_released_bytes since the last release. The debounce keeps a
// stream of large calls with short gaps from returning pages only to fault
// them in again; small calls alone never trigger a release.
//
// Thread-safety: ReleaseFreeMemoryToSystem may be called from any thread
// (the allocators lock). IdleMemoryReleaser's methods are thread-safe; its
// budget must outlive it.
#ifndef PHASOR_SERVER_MEMORY_RELEASE_H_
#define PHASOR_SERVER_MEMORY_RELEASE_H_

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/memory_budget.h"

namespace phasor::server {

// Returns free memory to the system as described above.
void ReleaseFreeMemoryToSystem();
// How ReleaseFreeMemoryToSystem works in this process, for the startup log:
// "tcmalloc ReleaseFreeMemory", "glibc malloc_trim" or "none".
absl::string_view MemoryReleaseMechanism();

struct IdleMemoryReleaserOptions {
  absl::Duration poll_interval = absl::Milliseconds(250);
  // Consecutive idle looks before a release: at 250 ms, 0.5 to 0.75 s of
  // quiet.
  int idle_polls = 2;
  // In use at or below this counts as idle (small calls may keep running).
  int64_t idle_bytes = int64_t{16} << 20;
  // Given back since the last release before another is worth it; a
  // release costs a madvise per free span and page faults later.
  int64_t min_released_bytes = int64_t{64} << 20;
};

class IdleMemoryReleaser final {
 public:
  // Starts the thread. `release` defaults to ReleaseFreeMemoryToSystem.
  IdleMemoryReleaser(const MemoryBudget* budget, IdleMemoryReleaserOptions options,
                     std::function<void()> release = ReleaseFreeMemoryToSystem);
  IdleMemoryReleaser(const IdleMemoryReleaser&) = delete;
  IdleMemoryReleaser& operator=(const IdleMemoryReleaser&) = delete;
  // Stops and joins the thread (within one poll).
  ~IdleMemoryReleaser();

  // Releases done so far.
  int64_t releases() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  const MemoryBudget* const budget_;
  const IdleMemoryReleaserOptions options_;
  const std::function<void()> release_;
  // Read before the thread starts, so bytes given back meanwhile count.
  const int64_t released_at_start_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t releases_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // Last: started once the rest is set.
};

}  // namespace phasor::server

#endif  // PHASOR_SERVER_MEMORY_RELEASE_H_
