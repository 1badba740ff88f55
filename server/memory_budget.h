// File: server/memory_budget.h
//
// MemoryBudget: a server-wide bound on the bytes that calls in flight hold —
// their request as received and as parsed, their response, their scratch —
// counted before the work that allocates them starts. A reply is built whole
// in memory, so without a bound sixteen concurrent 60 MiB replies hold about
// 1 GB, and in a container with a 1 GiB limit the kernel kills the process:
// every call in flight fails, not only the excess ones. With the budget the
// excess calls wait, and are refused if memory does not come free in time.
//
// A counting semaphore over bytes, like Go's golang.org/x/sync/semaphore
// Weighted: a newcomer does not go ahead of callers already waiting, so a
// stream of calls cannot starve a large one. With three differences:
//  - a small newcomer (at most kSmallCallBytes) that fits goes ahead anyway,
//    so cheap calls are answered at once while large ones queue;
//  - among waiters, whichever fits when bytes come back goes first (no
//    strict order); every wait is bounded by a deadline, after which the
//    caller is refused (and its client may retry, see below);
//  - a request for more than the whole capacity fails at once instead of
//    blocking forever.
//
// CallMemory is one call's share: its handler reserves what the call will
// hold once the output is sized (server/handler_context.h ReserveOutputMemory), and
// the bytes go back when the call is done — after its response has been
// sent, not when the handler returns, since the response's bytes live until
// gRPC has written them. A CallMemory that may not wait (set_may_wait(false):
// the server's first try, on a gRPC thread that must not block) is refused
// at once when its bytes do not fit, and says whether waiting could have
// helped (would_have_waited): the server then runs the call again where it
// may wait (server/blocking_pool.h).
//
// Errors (absl codes, which map 1:1 to gRPC's), each marked with a
// kMemoryRefusalPayload so that the server's edge tells them apart without
// reading messages (MemoryRefusalOf):
//  - RESOURCE_EXHAUSTED "busy": the call's bytes did not fit before its
//    wait deadline because other calls held the budget. The same call may
//    succeed a moment later or on another replica, so the server lets
//    clients retry it with backoff (server/grpc_status.h RetryPushback).
//  - RESOURCE_EXHAUSTED "too_large": the call alone needs more than the
//    whole budget, so it can never run on this server, idle or not; refused
//    at once, and marked so that clients do not retry it. RESOURCE_EXHAUSTED
//    rather than OUT_OF_RANGE: like the message and element limits, it is a
//    limit of this server (its flag or its container raises it), not a value
//    outside the API's range.
//  - a wait also ends when the call's `alive` check fails (the client
//    cancelled, or the call's deadline passed): that status is returned.
//
// Thread-safety: MemoryBudget is safe for concurrent use; one mutex guards
// the count, held only to compare and update it. A Lease and a CallMemory
// belong to one call and are not thread-safe; they may be destroyed on any
// thread. A MemoryBudget must outlive every Lease taken from it.
//
// Example:
//   MemoryBudget budget(/*capacity_bytes=*/int64_t{640} << 20);
//   CallMemory memory(&budget, /*request_bytes=*/request.Length(),
//                     /*wait_deadline=*/absl::Now() + absl::Seconds(2));
//   PHASOR_RETURN_IF_ERROR(memory.Reserve(response_bytes, check_alive));
//   ... allocate and fill the response; `memory` gives the bytes back when
//   destroyed.
#ifndef PHASOR_SERVER_MEMORY_BUDGET_H_
#define PHASOR_SERVER_MEMORY_BUDGET_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace phasor::server {

// Why a call was refused memory; the payload's value is its name.
enum class MemoryRefusal { kBusy, kTooLarge };
inline constexpr absl::string_view kMemoryRefusalPayload = "phasor.dev/memory-refusal";
// "busy" or "too_large" (also the label value of the refusal metric).
absl::string_view MemoryRefusalName(MemoryRefusal refusal);
// The refusal a status reports, if it is one.
std::optional<MemoryRefusal> MemoryRefusalOf(const absl::Status& status);

class MemoryBudget final {
 public:
  // Bytes held for one caller, given back when it is destroyed or Reset.
  // Move-only; an empty Lease holds nothing.
  class Lease final {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { Reset(); }

    int64_t bytes() const { return bytes_; }
    // Gives the bytes back now.
    void Reset();

   private:
    friend class MemoryBudget;
    MemoryBudget* budget_ = nullptr;
    int64_t bytes_ = 0;
  };

  // `on_change`, when set, is called with the bytes in use after every
  // change (under the budget's lock, so calls arrive in order: keep it
  // short, e.g. a gauge's Set). REQUIRES: capacity_bytes > 0.
  explicit MemoryBudget(int64_t capacity_bytes,
                        std::function<void(int64_t in_use_bytes)> on_change = nullptr);
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Adds `bytes` to `lease` (empty, or from this budget). They are taken at
  // once when they fit; otherwise the caller waits until they do, until
  // `deadline`, or until `alive` returns an error (checked at least every
  // kAliveCheckInterval), whichever comes first. Errors: see the file
  // comment; `lease` is unchanged on error. `bytes` <= 0 is a no-op.
  absl::Status Acquire(int64_t bytes, absl::Time deadline,
                       absl::FunctionRef<absl::Status()> alive, Lease* lease)
      ABSL_LOCKS_EXCLUDED(mu_);

  int64_t capacity_bytes() const { return capacity_bytes_; }
  int64_t in_use_bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  // Every byte ever given back, for IdleMemoryReleaser
  // (server/memory_release.h), which returns freed memory to the system
  // after large calls.
  int64_t released_bytes_total() const ABSL_LOCKS_EXCLUDED(mu_);

  // How often a waiting call checks that it is still wanted.
  static constexpr absl::Duration kAliveCheckInterval = absl::Milliseconds(50);
  // Newcomers this small go ahead of waiting callers when they fit: an
  // EncodeObservations call of a few hundred rows, a RoPE step of a few
  // tokens.
  static constexpr int64_t kSmallCallBytes = int64_t{1} << 20;

 private:
  void Release(int64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  void NotifyChange() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t capacity_bytes_;
  const std::function<void(int64_t)> on_change_;
  mutable absl::Mutex mu_;
  absl::CondVar released_;
  int64_t in_use_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t released_bytes_total_ ABSL_GUARDED_BY(mu_) = 0;
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;
};

// One call's share of a MemoryBudget. The first reservation also charges
// the request: kRequestCopies times its serialized size, for the bytes gRPC
// received (held until the call ends) and the parsed message. Converted
// copies of inputs (16-bit to float32, seconds to nanoseconds) are not
// charged: they come out of the headroom the budget leaves below the
// container's limit (server/memory_limit.h).
class CallMemory final {
 public:
  static constexpr int64_t kRequestCopies = 2;

  // `budget` null: nothing is counted and Reserve always succeeds.
  CallMemory(MemoryBudget* budget, int64_t request_bytes, absl::Time wait_deadline)
      : budget_(budget), request_bytes_(request_bytes), wait_deadline_(wait_deadline) {}
  CallMemory(CallMemory&&) = default;
  CallMemory& operator=(CallMemory&&) = default;

  // Reserves `bytes` more for this call (plus the request's, the first
  // time), waiting for the budget up to the wait deadline when it may wait.
  // Errors: see the file comment.
  absl::Status Reserve(int64_t bytes, absl::FunctionRef<absl::Status()> alive);
  // Whether Reserve may wait (the default) or must answer at once.
  void set_may_wait(bool may_wait) { may_wait_ = may_wait; }
  // A Reserve that could not wait was refused as "busy" before the wait
  // deadline: the same call, run again where it may wait, may succeed.
  bool would_have_waited() const { return would_have_waited_; }
  // What the call holds now.
  int64_t reserved_bytes() const { return lease_.bytes(); }
  // Gives everything back (also done by the destructor).
  void Release() { lease_.Reset(); }

 private:
  MemoryBudget* budget_;
  int64_t request_bytes_;
  absl::Time wait_deadline_;
  bool request_charged_ = false;
  bool may_wait_ = true;
  bool would_have_waited_ = false;
  MemoryBudget::Lease lease_;
};

}  // namespace phasor::server

#endif  // PHASOR_SERVER_MEMORY_BUDGET_H_
