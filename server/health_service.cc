#include "server/health_service.h"

#include <optional>
#include <utility>
#include <vector>

namespace phasor::server {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One Watch call. Writes strictly one at a time; a status that changes while
// a write is in flight is sent when it completes (only the latest counts).
//
// No lock is held while calling StartWrite or Finish: gRPC may run a
// reaction inline on the calling thread when an operation completes at
// once, and that reaction takes mu_. What keeps the reactor alive between
// deciding under a lock and acting outside it: a reserved write
// (write_in_flight_) or a decided finish (finished_) both come before
// OnDone, which gRPC runs only after Finish and every pending operation.
class HealthService::WatchReactor final
    : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  enum class Action { kNone, kWrite, kFinish };

  WatchReactor(HealthService* service, std::string service_name)
      : service_(service), service_name_(std::move(service_name)) {}

  const std::string& service_name() const { return service_name_; }

  // Queues `status` (and, with `finish`, the end of the call). Returns what
  // the caller must then do through Act(), outside its locks.
  Action Offer(ServingStatus status, bool finish) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (finished_) return Action::kNone;
    finish_requested_ |= finish;
    if (!last_written_.has_value() || *last_written_ != status) pending_ = status;
    else pending_.reset();
    return NextLocked();
  }

  void Act(Action action) {
    switch (action) {
      case Action::kWrite:
        StartWrite(&response_);
        break;
      case Action::kFinish:
        Finish(finish_status_);
        break;
      case Action::kNone:
        break;
    }
  }

  void OnWriteDone(bool ok) override {
    Action action;
    {
      absl::MutexLock lock(&mu_);
      write_in_flight_ = false;
      if (!ok) gone_ = true;  // The call ended under the write.
      action = NextLocked();
    }
    Act(action);
  }

  void OnCancel() override {
    Action action;
    {
      absl::MutexLock lock(&mu_);
      gone_ = true;
      action = NextLocked();
    }
    Act(action);
  }

  void OnDone() override {
    service_->Unregister(this);
    delete this;
  }

 private:
  Action NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (write_in_flight_ || finished_) return Action::kNone;
    if (gone_) {
      finished_ = true;
      finish_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "the call ended");
      return Action::kFinish;
    }
    if (pending_.has_value()) {
      response_.set_status(*pending_);
      last_written_ = pending_;
      pending_.reset();
      write_in_flight_ = true;
      return Action::kWrite;
    }
    if (finish_requested_) {
      finished_ = true;
      finish_status_ = grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          "the server is shutting down; watch another replica");
      return Action::kFinish;
    }
    return Action::kNone;
  }

  HealthService* const service_;
  const std::string service_name_;
  absl::Mutex mu_;
  // Touched only by the holder of a reserved write (see the class comment).
  HealthCheckResponse response_;
  std::optional<ServingStatus> pending_ ABSL_GUARDED_BY(mu_);
  std::optional<ServingStatus> last_written_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool gone_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // Set once, under mu_, before the kFinish that reads it.
  grpc::Status finish_status_;
};

HealthService::ServingStatus HealthService::StatusOf(
    const std::string& service) const {
  const auto it = statuses_.find(service);
  return it == statuses_.end() ? HealthCheckResponse::SERVICE_UNKNOWN : it->second;
}

void HealthService::SetServingStatus(const std::string& service, bool serving) {
  std::vector<std::pair<WatchReactor*, WatchReactor::Action>> actions;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    const ServingStatus status =
        serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
    statuses_[service] = status;
    for (WatchReactor* watcher : watchers_) {
      if (watcher->service_name() == service) {
        actions.emplace_back(watcher, watcher->Offer(status, /*finish=*/false));
      }
    }
  }
  for (auto& [watcher, action] : actions) watcher->Act(action);
}

void HealthService::Shutdown() {
  std::vector<std::pair<WatchReactor*, WatchReactor::Action>> actions;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    for (auto& entry : statuses_) entry.second = HealthCheckResponse::NOT_SERVING;
    actions.reserve(watchers_.size());
    for (WatchReactor* watcher : watchers_) {
      actions.emplace_back(watcher, watcher->Offer(StatusOf(watcher->service_name()),
                                                   /*finish=*/true));
    }
  }
  for (auto& [watcher, action] : actions) watcher->Act(action);
}

void HealthService::Unregister(WatchReactor* watcher) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(watcher);
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* context,
                                               const HealthCheckRequest* request,
                                               HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  ServingStatus status;
  {
    absl::MutexLock lock(&mu_);
    status = StatusOf(request->service());
  }
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
  } else {
    response->set_status(status);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* /*context*/, const HealthCheckRequest* request) {
  auto* watcher = new WatchReactor(this, request->service());
  WatchReactor::Action action;
  {
    absl::MutexLock lock(&mu_);
    watchers_.insert(watcher);
    action = watcher->Offer(StatusOf(request->service()), /*finish=*/shut_down_);
  }
  watcher->Act(action);
  return watcher;
}

}  // namespace phasor::server
