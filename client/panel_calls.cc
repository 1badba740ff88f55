#include "client/panel_calls.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/panel_errors.h"
#include "client/panel_split.h"
#include "client/panel_wire.h"
#include "client/tensor_io.h"
#include "common/uninitialized_string.h"
#include "core/base/status_macros.h"
#include "phasor/v1/encoder.grpc.pb.h"

namespace phasor {
namespace panel {
namespace {

// What the zero-row call says about every piece's response.
struct Probe {
  v1::EncodeObservationsResponse response;  // Schema and fixed parts.
  int64_t width = 0;                        // F
  int64_t element_bytes = 0;                // Of the features' dtype.
};

// The feature width F and dtype, the schema and the response's fixed part:
// from the same request with zero rows (series 0 only, empty).
absl::StatusOr<Probe> ProbeFeatures(const PanelChannel& channel,
                                    grpc::GenericStub& generic,
                                    const std::string& method,
                                    const v1::EncodeObservationsRequest& request,
                                    const v1::EncodeObservationsRequest& shared,
                                    const PanelShape& shape) {
  const SubCall zero_rows{/*series_begin=*/0, /*series_end=*/1,
                          /*row_begin=*/0, /*row_end=*/0,
                          /*continues=*/false};
  const grpc::ByteBuffer probe_request = EncodeSubRequest(
      request, BuildSubRequest(request, shared, shape, zero_rows, nullptr),
      zero_rows);
  grpc::ClientContext context;
  channel.prepare_context(&context);
  grpc::ByteBuffer probe_response;
  grpc::Status status;
  absl::Notification done;
  generic.UnaryCall(&context, method, grpc::StubOptions(), &probe_request,
                    &probe_response, [&status, &done](grpc::Status result) {
                      status = std::move(result);
                      done.Notify();
                    });
  done.WaitForNotification();  // The call's deadline bounds the wait.
  if (!status.ok()) return channel.from_grpc_status(status);

  Probe probe;
  size_t probe_bytes;
  PHASOR_RETURN_IF_ERROR(DecodeSubResponse(&probe_response, nullptr, 0,
                                           &probe.response, &probe_bytes));
  const v1::Tensor& features = probe.response.features();
  if (features.shape_size() != 2) {
    return absl::DataLossError(absl::StrCat(
        "EncodeObservationsPanel: the zero-row call returned features of shape ",
        ShapeString(features), ", not [0, F]"));
  }
  probe.width = features.shape(1);
  probe.element_bytes = DTypeBytes(features.dtype());
  // The joined features are rows·F elements: a width the server could not
  // have meant (negative, or a size past int64) is not sized.
  if (probe.width < 0 || probe.element_bytes <= 0 ||
      (probe.width > 0 && shape.rows > std::numeric_limits<int64_t>::max() /
                                           probe.width / probe.element_bytes)) {
    return absl::DataLossError(absl::StrCat(
        "EncodeObservationsPanel: the zero-row call returned features of shape ",
        ShapeString(features), " and dtype ", DTypeString(features.dtype()),
        ", which cannot be joined for ", shape.rows, " rows"));
  }
  return probe;
}

// The joined response, filled in place as pieces finish: each piece's
// features go straight into its rows, its states into its series.
class PanelJoin final {
 public:
  PanelJoin(const Probe& probe, const PanelShape& shape)
      : width_(probe.width),
        element_bytes_(probe.element_bytes),
        states_(shape.offsets.size() - 1) {
    *joined_.mutable_schema() = probe.response.schema();
    v1::Tensor* features = joined_.mutable_features();
    features->set_dtype(probe.response.features().dtype());
    features->add_shape(shape.rows);
    features->add_shape(width_);
    // Every byte is a piece's (a DATA_LOSS error otherwise): not zeroed
    // first.
    ResizeUninitialized(features->mutable_data(),
                        static_cast<size_t>(shape.rows * width_ * element_bytes_));
  }

  PanelJoin(const PanelJoin&) = delete;
  PanelJoin& operator=(const PanelJoin&) = delete;

  // The state a continuing piece starts from: its predecessor's, which must
  // have been accepted. Null for a piece that does not continue.
  const v1::SeriesState* Carried(const SubCall& part) const {
    return part.continues ? &states_[static_cast<size_t>(part.series_begin)]
                          : nullptr;
  }

  // Decodes piece `part`'s response into its rows and series. DATA_LOSS when
  // it is not the response the piece asked for.
  absl::Status Accept(const SubCall& part, grpc::ByteBuffer* buffer) {
    const v1::Tensor& features = joined_.features();
    const int64_t rows = part.row_end - part.row_begin;
    const size_t expected_bytes =
        static_cast<size_t>(rows * width_ * element_bytes_);
    v1::EncodeObservationsResponse response;
    size_t got_bytes = 0;
    const absl::Status decoded = DecodeSubResponse(
        buffer,
        joined_.mutable_features()->mutable_data()->data() +
            part.row_begin * width_ * element_bytes_,
        expected_bytes, &response, &got_bytes);
    const v1::Tensor& got = response.features();
    if (!decoded.ok() || got.dtype() != features.dtype() ||
        got.shape_size() != 2 || got.shape(0) != rows ||
        got.shape(1) != width_ || got_bytes != expected_bytes ||
        response.states_size() != part.series_end - part.series_begin) {
      return absl::DataLossError(absl::StrCat(
          "panel sub-call for series [", part.series_begin, ", ",
          part.series_end, "): expected features [", rows, ",", width_, "] ",
          DTypeString(features.dtype()), " and ",
          part.series_end - part.series_begin, " states, got ",
          DTypeString(got.dtype()), " ", ShapeString(got), " (", got_bytes,
          " bytes) and ", response.states_size(), " states",
          decoded.ok() ? "" : absl::StrCat(": ", decoded.message())));
    }
    for (int64_t s = part.series_begin; s < part.series_end; ++s) {
      states_[static_cast<size_t>(s)] = std::move(
          *response.mutable_states(static_cast<int>(s - part.series_begin)));
    }
    return absl::OkStatus();
  }

  // The joined response, once every piece is accepted: a single series'
  // state as `state`, a panel's as `states` with the request's offsets.
  v1::EncodeObservationsResponse Finish(
      const v1::EncodeObservationsRequest& request, const PanelShape& shape) && {
    if (shape.single) {
      *joined_.mutable_state() = std::move(states_.front());
    } else {
      for (v1::SeriesState& state : states_) *joined_.add_states() = std::move(state);
      *joined_.mutable_series_offsets() = request.observations().series_offsets();
    }
    return std::move(joined_);
  }

 private:
  const int64_t width_;
  const int64_t element_bytes_;
  v1::EncodeObservationsResponse joined_;
  std::vector<v1::SeriesState> states_;  // [S]
};

// Sends the plan's pieces with at most `max_in_flight` in flight, in row
// order, a continuing piece only once its predecessor has finished.
// `request_of(i)` encodes piece i when it starts; `on_finished(i, status,
// response)` handles it when it ends, on this thread. The first non-OK
// return of `on_finished` cancels the calls in flight and is returned, once
// they have all ended.
absl::Status RunSubCalls(
    const PanelChannel& channel, grpc::GenericStub& generic,
    const std::string& method, const std::vector<SubCall>& plan,
    int max_in_flight,
    const std::function<grpc::ByteBuffer(size_t)>& request_of,
    const std::function<absl::Status(size_t, const grpc::Status&,
                                     grpc::ByteBuffer*)>& on_finished) {
  struct Call {
    grpc::ClientContext context;
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls(plan.size());
  std::vector<bool> launched(plan.size(), false), finished(plan.size(), false);
  absl::Mutex mutex;
  std::vector<size_t> completed;  // Guarded by mutex.
  max_in_flight = std::max(1, max_in_flight);
  int in_flight = 0;
  size_t first_unlaunched = 0, done = 0;
  absl::Status error;
  const auto cancel_all = [&calls] {
    for (const std::unique_ptr<Call>& call : calls) {
      if (call != nullptr) call->context.TryCancel();
    }
  };

  while (done < plan.size()) {
    // Start every call whose predecessor state is known, in row order, up
    // to max_in_flight.
    for (size_t i = first_unlaunched;
         error.ok() && i < plan.size() && in_flight < max_in_flight; ++i) {
      if (launched[i]) continue;
      if (plan[i].continues && !finished[i - 1]) continue;
      auto call = std::make_unique<Call>();
      call->request = request_of(i);
      channel.prepare_context(&call->context);
      Call* raw = call.get();
      calls[i] = std::move(call);
      launched[i] = true;
      ++in_flight;
      generic.UnaryCall(
          &raw->context, method, grpc::StubOptions(), &raw->request,
          &raw->response, [raw, i, &mutex, &completed](grpc::Status status) {
            raw->status = std::move(status);
            absl::MutexLock lock(&mutex);
            completed.push_back(i);
          });
    }
    while (first_unlaunched < plan.size() && launched[first_unlaunched]) {
      ++first_unlaunched;
    }
    if (in_flight == 0) break;  // Only after an error: nothing left to wait on.

    std::vector<size_t> ready;
    {
      absl::MutexLock lock(&mutex);
      mutex.Await(absl::Condition(
          +[](std::vector<size_t>* pending) { return !pending->empty(); },
          &completed));
      ready.swap(completed);
    }
    for (const size_t i : ready) {
      --in_flight;
      ++done;
      finished[i] = true;
      std::unique_ptr<Call> call = std::move(calls[i]);
      if (!error.ok()) continue;
      error = on_finished(i, call->status, &call->response);
      if (!error.ok()) cancel_all();
    }
  }
  return error;
}

// One attempt of EncodePanel with sub-calls of at most `limit_bytes`.
absl::StatusOr<v1::EncodeObservationsResponse> EncodePanelWithin(
    const PanelChannel& channel, const v1::EncodeObservationsRequest& request,
    const PanelOptions& options, int64_t limit_bytes, PanelStats* stats) {
  PanelStats& counts = *stats;
  counts = PanelStats();
  const PanelShape shape = InspectPanel(request);
  if (!shape.ok || shape.rows == 0) {
    counts.calls = 1;
    return channel.encode_whole(request);
  }

  const v1::EncodeObservationsRequest shared = TemplateRequest(request, shape);
  // Sub-calls go through the generic stub, so that their rows and features
  // are copied straight between the panel's tensors and gRPC's slices.
  grpc::GenericStub generic(channel.channel);
  const std::string method =
      absl::StrCat("/", v1::Encoder::service_full_name(), "/EncodeObservations");
  counts.probe_calls = 1;
  PHASOR_ASSIGN_OR_RETURN(
      const Probe probe,
      ProbeFeatures(channel, generic, method, request, shared, shape));
  const Budget budget = MakeBudget(
      request, shape, shared,
      static_cast<int64_t>(probe.response.ByteSizeLong()), probe.width,
      probe.element_bytes, limit_bytes, options.max_call_elements);
  if (FitsOneCall(request, shape, budget, limit_bytes)) {
    counts.calls = 1;
    return channel.encode_whole(request);
  }
  PHASOR_ASSIGN_OR_RETURN(const std::vector<SubCall> plan,
                          PlanSubCalls(shape, budget));
  counts.calls = static_cast<int64_t>(plan.size());
  counts.series_split = SeriesSplit(plan);

  PanelJoin join(probe, shape);
  PHASOR_RETURN_IF_ERROR(RunSubCalls(
      channel, generic, method, plan, options.max_in_flight,
      [&](size_t i) {
        return EncodeSubRequest(
            request,
            BuildSubRequest(request, shared, shape, plan[i],
                            join.Carried(plan[i])),
            plan[i]);
      },
      [&](size_t i, const grpc::Status& status, grpc::ByteBuffer* response) {
        if (!status.ok()) {
          return SubCallError(channel.from_grpc_status(status), plan[i], shape,
                              request.observations());
        }
        return join.Accept(plan[i], response);
      }));
  return std::move(join).Finish(request, shape);
}

}  // namespace

absl::StatusOr<v1::EncodeObservationsResponse> EncodePanel(
    const PanelChannel& channel, const v1::EncodeObservationsRequest& request,
    const PanelOptions& options, PanelStats* stats) {
  PanelStats local_stats;
  PanelStats& counts = stats != nullptr ? *stats : local_stats;
  counts = PanelStats();
  int64_t limit = options.max_call_bytes > 0
                      ? options.max_call_bytes
                      : DefaultCallBytes(channel.max_message_bytes);
  int64_t retries = 0;
  for (;;) {
    absl::StatusOr<v1::EncodeObservationsResponse> result =
        EncodePanelWithin(channel, request, options, limit, &counts);
    counts.retries = retries;
    if (result.ok() ||
        result.status().code() != absl::StatusCode::kResourceExhausted ||
        limit <= kMinCallBytes) {
      return result;
    }
    // The server's message or element limit is lower than this client's:
    // the same panel in smaller calls.
    limit = std::max(kMinCallBytes, limit / 2);
    ++retries;
  }
}

}  // namespace panel

int64_t DefaultCallBytes(int64_t max_message_bytes) {
  // Half the limit: room for estimates that are a little low, and pieces
  // small enough that the transfer of one overlaps the server's work on the
  // next (workload P, 84 MB of features: 3 calls of ~28 MB ran 1.2x faster
  // than 2 of 42 MB, docs/BENCHMARKS.md). The Python client does the same.
  return std::max<int64_t>(1, max_message_bytes / 2);
}

}  // namespace phasor
