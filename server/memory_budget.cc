#include "server/memory_budget.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace phasor::server {
namespace {

absl::Status Refusal(MemoryRefusal refusal, std::string message) {
  absl::Status status = absl::ResourceExhaustedError(std::move(message));
  status.SetPayload(kMemoryRefusalPayload, absl::Cord(MemoryRefusalName(refusal)));
  return status;
}

constexpr const char* kBudgetFlag =
    "phasor-server --memory_budget_bytes or PHASOR_MEMORY_BUDGET_BYTES";

}  // namespace

absl::string_view MemoryRefusalName(MemoryRefusal refusal) {
  switch (refusal) {
    case MemoryRefusal::kBusy:
      return "busy";
    case MemoryRefusal::kTooLarge:
      return "too_large";
  }
  return "busy";
}

std::optional<MemoryRefusal> MemoryRefusalOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kMemoryRefusalPayload);
  if (!payload) return std::nullopt;
  if (*payload == MemoryRefusalName(MemoryRefusal::kTooLarge)) {
    return MemoryRefusal::kTooLarge;
  }
  return MemoryRefusal::kBusy;
}

MemoryBudget::Lease::Lease(Lease&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

MemoryBudget::Lease& MemoryBudget::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Reset();
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void MemoryBudget::Lease::Reset() {
  if (budget_ != nullptr && bytes_ > 0) budget_->Release(bytes_);
  budget_ = nullptr;
  bytes_ = 0;
}

MemoryBudget::MemoryBudget(int64_t capacity_bytes,
                           std::function<void(int64_t)> on_change)
    : capacity_bytes_(capacity_bytes), on_change_(std::move(on_change)) {
  assert(capacity_bytes > 0);
}

absl::Status MemoryBudget::Acquire(int64_t bytes, absl::Time deadline,
                                   absl::FunctionRef<absl::Status()> alive,
                                   Lease* lease) {
  assert(lease->budget_ == nullptr || lease->budget_ == this);
  if (bytes <= 0) return absl::OkStatus();
  // The call's total: what it holds already plus this (saturated; neither
  // term can be near 2^63 for a request within the message limit).
  const int64_t total =
      bytes > INT64_MAX - lease->bytes_ ? INT64_MAX : lease->bytes_ + bytes;
  if (total > capacity_bytes_) {
    return Refusal(
        MemoryRefusal::kTooLarge,
        absl::StrCat("this call needs ", total,
                     " bytes of server memory (request, response and scratch), "
                     "more than the server's whole memory budget of ",
                     capacity_bytes_,
                     " bytes, so it cannot run on this server even when idle: send "
                     "less per call (split the request), or raise the budget (",
                     kBudgetFlag, ") or the container's memory limit"));
  }
  const absl::Time start = absl::Now();
  absl::MutexLock lock(&mu_);
  const auto take = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    in_use_bytes_ += bytes;
    NotifyChange();
    lease->budget_ = this;
    lease->bytes_ += bytes;
  };
  // A newcomer does not go ahead of calls already waiting, unless it is
  // small: cheap calls are answered while large ones queue.
  if (in_use_bytes_ <= capacity_bytes_ - bytes &&
      (waiters_ == 0 || bytes <= kSmallCallBytes)) {
    take();
    return absl::OkStatus();
  }
  ++waiters_;
  for (;;) {
    const absl::Time now = absl::Now();
    if (now >= deadline) break;
    // Not under the lock: `alive` may take the call's own locks.
    mu_.Unlock();
    absl::Status still_wanted = alive();
    mu_.Lock();
    if (!still_wanted.ok()) {
      --waiters_;
      return still_wanted;
    }
    released_.WaitWithDeadline(&mu_, std::min(deadline, now + kAliveCheckInterval));
    if (in_use_bytes_ <= capacity_bytes_ - bytes) {
      --waiters_;
      take();
      return absl::OkStatus();
    }
  }
  --waiters_;
  const int64_t free_bytes = std::max<int64_t>(0, capacity_bytes_ - in_use_bytes_);
  return Refusal(
      MemoryRefusal::kBusy,
      absl::StrCat("the server's memory budget is in use by other calls: this call "
                   "needs ", total, " bytes (request, response and scratch), and ",
                   free_bytes, " of the budget's ", capacity_bytes_,
                   " bytes were free after waiting ",
                   absl::StrFormat("%.3f", absl::ToDoubleSeconds(absl::Now() - start)),
                   " s; retry with backoff, or on another replica (", kBudgetFlag,
                   " sets the budget)"));
}

void MemoryBudget::Release(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  in_use_bytes_ -= bytes;
  assert(in_use_bytes_ >= 0);
  released_bytes_total_ += bytes;
  NotifyChange();
  if (waiters_ > 0) released_.SignalAll();
}

void MemoryBudget::NotifyChange() {
  if (on_change_) on_change_(in_use_bytes_);
}

int64_t MemoryBudget::in_use_bytes() const {
  absl::MutexLock lock(&mu_);
  return in_use_bytes_;
}

int64_t MemoryBudget::released_bytes_total() const {
  absl::MutexLock lock(&mu_);
  return released_bytes_total_;
}

absl::Status CallMemory::Reserve(int64_t bytes, absl::FunctionRef<absl::Status()> alive) {
  if (budget_ == nullptr) return absl::OkStatus();
  int64_t wanted = std::max<int64_t>(bytes, 0);
  if (!request_charged_) {
    // The request fit the message limit (< 2^31), so this cannot overflow
    // unless `bytes` is near 2^63, which Acquire refuses as too large.
    const int64_t request = kRequestCopies * request_bytes_;
    wanted = wanted > INT64_MAX - request ? INT64_MAX : wanted + request;
  }
  absl::Status status = budget_->Acquire(
      wanted, may_wait_ ? wait_deadline_ : absl::InfinitePast(), alive, &lease_);
  if (status.ok()) {
    request_charged_ = true;
  } else if (!may_wait_ && MemoryRefusalOf(status) == MemoryRefusal::kBusy &&
             absl::Now() < wait_deadline_) {
    would_have_waited_ = true;
  }
  return status;
}

}  // namespace phasor::server
