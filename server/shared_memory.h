// File: server/shared_memory.h
//
// SharedMemoryRegistry: the regions of Triton's system shared-memory
// extension (Triton's protocol documentation, "System Shared-Memory
// Extension"), through which a caller on the same host passes tensors
// without sending their bytes over the socket. A caller creates a POSIX
// shared-memory object (shm_open), registers [offset, offset + byte_size)
// of it under a name (SystemSharedMemoryRegister), and then names the
// region in an input's or requested output's parameters
// ("shared_memory_region", "shared_memory_offset", "shared_memory_byte_size");
// the server reads the input from, or writes the output into, that memory.
//
// The server maps each region once, at Register (shm_open of the key
// O_RDWR, mmap MAP_SHARED read/write of the pages covering the region), and
// unmaps it at Unregister or when the registry is destroyed (shutdown) —
// or, when calls still use it at that moment, as soon as the last of them
// ends: a call holds its region (SharedMemoryBlock) until it is done, so
// Unregister never pulls memory from under a running kernel.
//
// What the registry enforces (docs/SECURITY.md, "Shared memory", has the
// threat model):
//  - keys must start with the configured prefix ("/phasor" by default) and
//    be a single POSIX shm name ("/" then no further "/"): the server maps
//    only objects meant for it, never an arbitrary file (glibc's shm_open
//    opens under /dev/shm with O_NOFOLLOW, and the object must be a
//    regular file);
//  - at most max_regions regions and max_bytes mapped bytes in all;
//  - every access is checked against the region AND against the object's
//    size at that moment (fstat on each Acquire), so a region whose object
//    was truncated or removed since it was registered gives an error naming
//    the region instead of a SIGBUS. The window that remains: an object
//    truncated by its owner after that fstat and while the call reads or
//    writes it still faults; only a process that can write the object can
//    open that window, and it can only hit the server through it while the
//    server is inside that one call.
//
// Thread-safety: safe for concurrent use; one mutex guards the name table
// and is never held while a region is read or written.
#ifndef PHASOR_SERVER_SHARED_MEMORY_H_
#define PHASOR_SERVER_SHARED_MEMORY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace phasor::server {

struct SharedMemoryOptions {
  // Off by default: the extension lets a same-host process hand the server
  // memory to read and write, which only deployments that want it allow
  // (phasor-server --system_shared_memory).
  bool enabled = false;
  // Every key must start with this (--shared_memory_key_prefix).
  std::string key_prefix = "/phasor";
  // Regions registered at once (--shared_memory_max_regions).
  int max_regions = 64;
  // Bytes of all registered regions together (--shared_memory_max_bytes);
  // 4 GiB holds workload-sized panels (84 MB) many times over while
  // bounding the address space a caller can make the server map.
  int64_t max_bytes = int64_t{4} << 30;
};

// One registered region as the Status RPC reports it.
struct SharedMemoryRegionInfo {
  std::string name;
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

class SharedMemoryRegion;

// A checked window [offset, offset + byte_size) of a region, held by one
// call: the region stays mapped while the block lives. Move-only.
class SharedMemoryBlock final {
 public:
  SharedMemoryBlock() = default;
  SharedMemoryBlock(SharedMemoryBlock&&) = default;
  SharedMemoryBlock& operator=(SharedMemoryBlock&&) = default;

  absl::Span<char> bytes() const { return bytes_; }
  const std::string& region_name() const;
  // The object's size checked again (fstat) before the block is read or
  // written once more: FAILED_PRECONDITION naming the region when it no
  // longer covers the block.
  absl::Status Recheck(absl::string_view field) const;

 private:
  friend class SharedMemoryRegistry;
  std::shared_ptr<const SharedMemoryRegion> region_;
  uint64_t end_in_object_ = 0;  // Region offset + block offset + size.
  absl::Span<char> bytes_;
};

class SharedMemoryRegistry final {
 public:
  explicit SharedMemoryRegistry(SharedMemoryOptions options);
  SharedMemoryRegistry(const SharedMemoryRegistry&) = delete;
  SharedMemoryRegistry& operator=(const SharedMemoryRegistry&) = delete;
  // Drops every region (each unmapped once no call holds it).
  ~SharedMemoryRegistry();

  bool enabled() const { return options_.enabled; }
  const SharedMemoryOptions& options() const { return options_; }

  // UNIMPLEMENTED, saying how to switch the extension on, when it is off;
  // OK otherwise.
  absl::Status CheckEnabled() const;
  // CheckEnabled's error for a server started without the extension, which
  // has no registry to ask.
  static absl::Status DisabledError();

  // Maps [offset, offset + byte_size) of the object `key` under `name`.
  // Errors, at the request field: name or key empty or too long, or key
  // not a single shm name (INVALID_ARGUMENT); key outside the prefix
  // (PERMISSION_DENIED naming --shared_memory_key_prefix); name taken
  // (ALREADY_EXISTS); no such object (NOT_FOUND); object not a regular
  // file, or smaller than offset + byte_size (INVALID_ARGUMENT); byte_size 0
  // or offset + byte_size overflowing (INVALID_ARGUMENT); over max_regions
  // or max_bytes (RESOURCE_EXHAUSTED naming the flag); the object's
  // permissions refuse the server (PERMISSION_DENIED).
  absl::Status Register(absl::string_view name, absl::string_view key, uint64_t offset,
                        uint64_t byte_size);
  // Unregisters `name`, or every region when `name` is empty. An unknown
  // name is NOT_FOUND at "name".
  absl::Status Unregister(absl::string_view name);
  // Every region, or only `name` (NOT_FOUND at "name" when unknown).
  absl::StatusOr<std::vector<SharedMemoryRegionInfo>> Status(absl::string_view name) const;

  // [offset, offset + byte_size) of region `name`, checked against the
  // region and the object's current size. `field` prefixes the parameter
  // paths of errors ("inputs[query]." -> "inputs[query].parameters[
  // shared_memory_region]"): unknown region INVALID_ARGUMENT; offset or
  // size outside the region INVALID_ARGUMENT; object truncated or removed
  // FAILED_PRECONDITION naming the region.
  absl::StatusOr<SharedMemoryBlock> Acquire(absl::string_view name, int64_t offset,
                                            int64_t byte_size, absl::string_view field) const;

  // Regions and bytes registered now.
  int region_count() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t registered_bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const SharedMemoryOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const SharedMemoryRegion>> regions_
      ABSL_GUARDED_BY(mu_);
  int64_t registered_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace phasor::server

#endif  // PHASOR_SERVER_SHARED_MEMORY_H_
