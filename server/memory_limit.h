// File: server/memory_limit.h
//
// How much memory phasor-server may use, and the memory budget it gives
// calls in flight (server/memory_budget.h) from that.
//
// The limit is the one the kernel enforces: the memory limit of the cgroup
// the process runs in — what a container runtime sets from a Kubernetes
// pod's resources.limits.memory — else the host's physical memory. It is
// found the way JVMs (container support) and Go's automemlimit find it:
//  - /proc/self/cgroup names the process's cgroup in each hierarchy:
//    "0::<path>" under cgroup v2, "<id>:<controllers>:<path>" with "memory"
//    among the controllers under v1;
//  - /proc/self/mountinfo says where that hierarchy is mounted (fstype
//    cgroup2, or cgroup with the "memory" super option) and which of its
//    directories the mount shows as its root (a container with a cgroup
//    namespace sees its own cgroup as "/");
//  - the limit is memory.max (v2; "max" = none) or memory.limit_in_bytes
//    (v1; about 2^63 = none), the lowest along the cgroup's directory and
//    its ancestors up to the mount point, since a parent's limit binds its
//    children; under v1 also memory.stat's hierarchical_memory_limit, which
//    covers ancestors the mount does not show.
// A limit at or above physical memory (MemTotal in /proc/meminfo) is no
// limit: physical memory is the source then.
//
// Thread-safety: pure functions of the files, which are read on each call.
#ifndef PHASOR_SERVER_MEMORY_LIMIT_H_
#define PHASOR_SERVER_MEMORY_LIMIT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace phasor::server {

struct MemoryLimit {
  int64_t bytes = 0;
  // Where the figure comes from, for the startup log: "cgroup v2
  // /sys/fs/cgroup/memory.max", "cgroup v1 .../memory.limit_in_bytes",
  // "/proc/meminfo MemTotal".
  std::string source;
};

// The limit as seen under `root`, which prefixes every path read: "/" in
// the server, a directory of fake proc and cgroup files in tests. Errors:
// NOT_FOUND when no cgroup limit applies and root/proc/meminfo has no
// MemTotal.
absl::StatusOr<MemoryLimit> DetectMemoryLimit(const std::string& root);

// The share of the limit calls in flight may hold. The rest is headroom
// for what the budget does not count: the server's baseline (code, gRPC,
// caches), requests gRPC has received before a handler could charge them,
// converted copies of inputs, the allocator's free lists and
// fragmentation, and kernel socket buffers, which a cgroup charges too.
// 0.7 would leave a 1 GiB container about 300 MB for all of that; 0.6
// leaves about 400 MB, and the peak stays well below the limit in the
// storm docs/BENCHMARKS.md ("Memory budget") measures.
inline constexpr double kMemoryBudgetFraction = 0.6;

struct MemoryBudgetSize {
  int64_t bytes = 0;
  std::string source;  // For the startup log.
};

// `configured_bytes` (> 0, from --memory_budget_bytes) as given; otherwise
// kMemoryBudgetFraction of DetectMemoryLimit(root), or of the physical
// memory sysconf reports when no file says. Always > 0.
MemoryBudgetSize ChooseMemoryBudget(int64_t configured_bytes, const std::string& root = "/");

}  // namespace phasor::server

#endif  // PHASOR_SERVER_MEMORY_LIMIT_H_
