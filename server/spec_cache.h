// SpecCache: a bounded, thread-safe map from a spec's bytes to what the
// server derives from them (the converted and validated spec, a feature
// layout), so that calls repeating a spec — the common case: a client sends
// the same spec with every chunk of its data — skip that work.
//
// Keys are client bytes, so the cache is bounded twice (the server keeps
// no client-chosen string without bound, docs/SECURITY.md): at most `max_entries` entries,
// and at most `max_bytes` charged in total, an entry being charged its key
// plus the bytes its value says it holds. An entry charged more than
// max_bytes / 8 is not kept at all (one request cannot flush the cache), and
// the least recently used entries leave first. Values are shared immutable
// (std::shared_ptr<const V>): a caller keeps using an entry that was evicted
// meanwhile, and the cache never hands out a value being built.
//
// A hit must mean "same result": a key has to contain everything the value
// depends on (docs/SECURITY.md lists what the server caches and its bounds).
//
// Thread-safety: every method may be called from any thread at once; one
// mutex guards the map, held only for the lookup or the insertion.
#ifndef PHASOR_SERVER_SPEC_CACHE_H_
#define PHASOR_SERVER_SPEC_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace phasor::server {

struct SpecCacheLimits {
  size_t max_entries = 256;
  size_t max_bytes = size_t{8} << 20;  // Keys plus the values' charged bytes.
};

template <typename V>
class SpecCache final {
 public:
  // Bookkeeping charged per entry besides its key and value bytes: the list
  // node, the map slot, the shared_ptr control block.
  static constexpr size_t kEntryOverheadBytes = 128;

  explicit SpecCache(SpecCacheLimits limits) : limits_(limits) {}
  SpecCache(const SpecCache&) = delete;
  SpecCache& operator=(const SpecCache&) = delete;

  // The value stored under `key`, or null; a hit makes it the most recently
  // used.
  std::shared_ptr<const V> Find(absl::string_view key) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const auto it = index_.find(key);
    if (it == index_.end()) {
      ++misses_;
      return nullptr;
    }
    ++hits_;
    entries_.splice(entries_.begin(), entries_, it->second);
    return it->second->value;
  }

  // Stores `value` under `key`, charged key.size() + value_bytes; replaces an
  // entry already there (two calls may build the same value at once). Too
  // large an entry is dropped; older entries leave until the bounds hold.
  void Insert(absl::string_view key, std::shared_ptr<const V> value,
              size_t value_bytes) ABSL_LOCKS_EXCLUDED(mu_) {
    const size_t charge = key.size() + value_bytes + kEntryOverheadBytes;
    if (value == nullptr || limits_.max_entries == 0 || charge > limits_.max_bytes / 8) {
      return;
    }
    absl::MutexLock lock(&mu_);
    const auto found = index_.find(key);
    if (found != index_.end()) EraseLocked(found->second);
    entries_.push_front(Entry{std::string(key), std::move(value), charge});
    // The map's key views the list node's string, which never moves.
    index_.emplace(entries_.front().key, entries_.begin());
    bytes_ += charge;
    while (entries_.size() > limits_.max_entries || bytes_ > limits_.max_bytes) {
      EraseLocked(std::prev(entries_.end()));
    }
  }

  size_t size() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return entries_.size();
  }
  // Charged bytes of the entries present.
  size_t bytes() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return bytes_;
  }
  int64_t hits() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return hits_;
  }
  int64_t misses() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return misses_;
  }

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const V> value;
    size_t charge = 0;
  };
  using List = std::list<Entry>;

  void EraseLocked(typename List::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    bytes_ -= it->charge;
    index_.erase(absl::string_view(it->key));
    entries_.erase(it);
  }

  const SpecCacheLimits limits_;
  mutable absl::Mutex mu_;
  List entries_ ABSL_GUARDED_BY(mu_);  // Most recently used first.
  absl::flat_hash_map<absl::string_view, typename List::iterator> index_
      ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace phasor::server

#endif  // PHASOR_SERVER_SPEC_CACHE_H_
