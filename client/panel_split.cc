#include "client/panel_split.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/tensor_io.h"

namespace phasor {
namespace panel {
namespace {

constexpr RowTensor kRowTensors[] = {
    {v1::Observations::kTimestampsFieldNumber, &v1::Observations::has_timestamps,
     &v1::Observations::timestamps},
    {v1::Observations::kValuesFieldNumber, &v1::Observations::has_values,
     &v1::Observations::values},
    {v1::Observations::kMaskFieldNumber, &v1::Observations::has_mask,
     &v1::Observations::mask},
    {v1::Observations::kEventTimesFieldNumber,
     &v1::Observations::has_event_times, &v1::Observations::event_times},
    {v1::Observations::kEventChannelsFieldNumber,
     &v1::Observations::has_event_channels, &v1::Observations::event_channels},
    {v1::Observations::kEventValuesFieldNumber,
     &v1::Observations::has_event_values, &v1::Observations::event_values},
    {v1::Observations::kContentFieldNumber, &v1::Observations::has_content,
     &v1::Observations::content},
};

// C as the server derives it for the whole panel (Observations.num_channels
// comment). A long chunk may not show every channel, so the long layout
// pins it in every sub-call; wide chunks read it from the values' width.
// False when event_channels is malformed.
bool InspectChannels(const v1::Observations& observations, bool wide,
                     PanelShape* shape) {
  if (observations.num_channels() > 0) {
    shape->channels = observations.num_channels();
    return true;
  }
  if (wide) {
    if (observations.has_values() && observations.values().shape_size() == 2) {
      shape->channels = observations.values().shape(1);
    }
    return true;
  }
  if (observations.channel_names_size() > 0) {
    shape->channels = observations.channel_names_size();
    return true;
  }
  for (const v1::SeriesState& state : shape->states) {
    shape->channels = std::max<int64_t>(shape->channels, state.channels_size());
  }
  if (shape->channels == 0 && observations.has_event_channels()) {
    const v1::Tensor& channels = observations.event_channels();
    if (channels.dtype() != v1::INT32) return false;
    const size_t count = channels.data().size() / sizeof(int32_t);
    int32_t largest = -1;
    for (size_t i = 0; i < count; ++i) {
      int32_t channel;
      std::memcpy(&channel, channels.data().data() + i * sizeof(int32_t),
                  sizeof(channel));
      if (channel < 0) return false;
      largest = std::max(largest, channel);
    }
    shape->channels = largest + 1;
  }
  shape->set_num_channels = shape->channels > 0;
  return true;
}

// The series offsets and states of `request` into `shape`; false when they
// are malformed.
bool InspectSeries(const v1::EncodeObservationsRequest& request,
                   PanelShape* shape) {
  const v1::Observations& observations = request.observations();
  if (!observations.has_series_offsets()) {
    if (request.states_size() != 0) return false;
    shape->single = true;
    shape->offsets = {0, shape->rows};
    if (request.has_state()) shape->states.push_back(request.state());
    return true;
  }
  const v1::Tensor& offsets = observations.series_offsets();
  if (offsets.dtype() != v1::INT64 || offsets.shape_size() != 1 ||
      offsets.shape(0) < 2 || !CheckedElementCount(offsets, "").ok()) {
    return false;
  }
  shape->offsets.resize(static_cast<size_t>(offsets.shape(0)));
  std::memcpy(shape->offsets.data(), offsets.data().data(),
              offsets.data().size());
  if (shape->offsets.front() != 0 || shape->offsets.back() != shape->rows) {
    return false;
  }
  for (size_t s = 1; s < shape->offsets.size(); ++s) {
    if (shape->offsets[s] < shape->offsets[s - 1]) return false;
  }
  if (request.has_state()) return false;  // A panel uses `states`.
  const int64_t series = offsets.shape(0) - 1;
  if (request.states_size() != 0 && request.states_size() != series) {
    return false;
  }
  shape->states.assign(request.states().begin(), request.states().end());
  return true;
}

int64_t RequestSeriesBytes(const Budget& budget, const PanelShape& shape,
                           int64_t s) {
  return budget.request_per_series +
         (shape.states.empty()
              ? 0
              : static_cast<int64_t>(
                    shape.states[static_cast<size_t>(s)].ByteSizeLong()));
}

// Rows [begin, end) of a row tensor (shape[0] = rows).
void CopyRows(const v1::Tensor& from, int64_t begin, int64_t end,
              v1::Tensor* to) {
  to->set_dtype(from.dtype());
  *to->mutable_shape() = from.shape();
  to->set_shape(0, end - begin);
  const int64_t row_bytes = RowBytes(from);
  to->set_data(from.data().data() + begin * row_bytes,
               static_cast<size_t>((end - begin) * row_bytes));
}

}  // namespace

absl::Span<const RowTensor> RowTensors() { return kRowTensors; }

int64_t RowBytes(const v1::Tensor& tensor) {
  int64_t bytes = DTypeBytes(tensor.dtype());
  for (int d = 1; d < tensor.shape_size(); ++d) bytes *= tensor.shape(d);
  return bytes;
}

PanelShape InspectPanel(const v1::EncodeObservationsRequest& request) {
  PanelShape shape;
  const v1::Observations& observations = request.observations();
  const bool wide = observations.has_timestamps();
  if (wide == observations.has_event_times()) return shape;
  const v1::Tensor& times =
      wide ? observations.timestamps() : observations.event_times();
  shape.rows = times.shape_size() > 0 ? times.shape(0) : -1;
  if (shape.rows < 0) return shape;
  for (const RowTensor& row_tensor : kRowTensors) {
    if (!(observations.*row_tensor.has)()) continue;
    const v1::Tensor& tensor = (observations.*row_tensor.get)();
    if (tensor.shape_size() < 1 || tensor.shape(0) != shape.rows ||
        !CheckedElementCount(tensor, "").ok()) {
      return shape;
    }
    shape.request_row_bytes += RowBytes(tensor);
  }
  if (!InspectSeries(request, &shape)) return shape;
  const int64_t series = static_cast<int64_t>(shape.offsets.size()) - 1;

  if (observations.has_time_zone_index()) {
    const v1::Tensor& index = observations.time_zone_index();
    if (index.dtype() != v1::INT32 || index.shape_size() != 1 ||
        index.shape(0) != series || !CheckedElementCount(index, "").ok()) {
      return shape;
    }
    shape.time_zone_mode = TimeZoneMode::kIndexed;
  } else if (series > 1 && observations.time_zones_size() == series) {
    shape.time_zone_mode = TimeZoneMode::kPerSeries;
  }
  if (!InspectChannels(observations, wide, &shape)) return shape;
  shape.ok = true;
  return shape;
}

Budget MakeBudget(const v1::EncodeObservationsRequest& request,
                  const PanelShape& shape,
                  const v1::EncodeObservationsRequest& shared,
                  int64_t probe_response_bytes, int64_t width,
                  int64_t element_bytes, int64_t limit_bytes,
                  int64_t max_call_elements) {
  Budget budget;
  const int64_t slack = SlackBytes(limit_bytes);
  budget.request_per_row = shape.request_row_bytes;
  budget.response_per_row = width * element_bytes;
  budget.request_per_series =
      sizeof(int64_t) + 2 +
      (shape.time_zone_mode == TimeZoneMode::kIndexed ? sizeof(int32_t) : 0);
  budget.response_per_series =
      sizeof(int64_t) + 3 + SeriesStateBytesBound(shape.channels);
  budget.request_limit =
      limit_bytes - static_cast<int64_t>(shared.ByteSizeLong()) - slack;
  if (shape.time_zone_mode == TimeZoneMode::kPerSeries) {
    // Names are small; the longest one bounds each series' share.
    int64_t longest = 0;
    for (const std::string& name : request.observations().time_zones()) {
      longest = std::max<int64_t>(longest, static_cast<int64_t>(name.size()));
    }
    budget.request_per_series += longest + 2;
  }
  budget.response_limit = limit_bytes - probe_response_bytes - slack;
  // The server's element limit applies to the features alone.
  if (max_call_elements > 0) {
    budget.response_limit =
        std::min(budget.response_limit, max_call_elements * element_bytes);
  }
  return budget;
}

bool FitsOneCall(const v1::EncodeObservationsRequest& request,
                 const PanelShape& shape, const Budget& budget,
                 int64_t limit_bytes) {
  const int64_t series = static_cast<int64_t>(shape.offsets.size()) - 1;
  return static_cast<int64_t>(request.ByteSizeLong()) <=
             limit_bytes - SlackBytes(limit_bytes) &&
         series * budget.response_per_series +
                 shape.rows * budget.response_per_row <=
             budget.response_limit;
}

absl::StatusOr<std::vector<SubCall>> PlanSubCalls(const PanelShape& shape,
                                                  const Budget& budget) {
  std::vector<SubCall> calls;
  const int64_t series = static_cast<int64_t>(shape.offsets.size()) - 1;
  SubCall open;
  int64_t open_request = 0, open_response = 0;
  bool has_open = false;
  auto flush = [&] {
    if (has_open) calls.push_back(open);
    has_open = false;
    open_request = open_response = 0;
  };
  for (int64_t s = 0; s < series; ++s) {
    const int64_t rows = shape.offsets[s + 1] - shape.offsets[s];
    const int64_t request_bytes =
        RequestSeriesBytes(budget, shape, s) + rows * budget.request_per_row;
    const int64_t response_bytes =
        budget.response_per_series + rows * budget.response_per_row;
    if (has_open && (open_request + request_bytes > budget.request_limit ||
                     open_response + response_bytes > budget.response_limit)) {
      flush();
    }
    if (request_bytes <= budget.request_limit &&
        response_bytes <= budget.response_limit) {
      if (!has_open) {
        open = SubCall{s, s, shape.offsets[s], shape.offsets[s], false};
        has_open = true;
      }
      open.series_end = s + 1;
      open.row_end = shape.offsets[s + 1];
      open_request += request_bytes;
      open_response += response_bytes;
      continue;
    }
    // Too large alone: consecutive chunks, each but the first continuing
    // from its predecessor's state (whose size the bound covers).
    const int64_t state_in = std::max(
        RequestSeriesBytes(budget, shape, s),
        budget.request_per_series + SeriesStateBytesBound(shape.channels));
    const int64_t by_request =
        budget.request_per_row > 0
            ? (budget.request_limit - state_in) / budget.request_per_row
            : rows;
    const int64_t by_response =
        budget.response_per_row > 0
            ? (budget.response_limit - budget.response_per_series) /
                  budget.response_per_row
            : rows;
    const int64_t chunk_rows = std::min(by_request, by_response);
    if (chunk_rows < 1) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "observations.series[", s, "]: one row needs ",
          budget.request_per_row, " request bytes and ",
          budget.response_per_row,
          " response bytes, more than a call may carry under the message "
          "limit; raise max_message_bytes"));
    }
    for (int64_t begin = shape.offsets[s]; begin < shape.offsets[s + 1];
         begin += chunk_rows) {
      calls.push_back(SubCall{s, s + 1, begin,
                              std::min(begin + chunk_rows, shape.offsets[s + 1]),
                              begin > shape.offsets[s]});
    }
  }
  flush();
  return calls;
}

int64_t SeriesSplit(absl::Span<const SubCall> plan) {
  int64_t split = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    if (plan[i].continues &&
        (i == 0 || !plan[i - 1].continues ||
         plan[i - 1].series_begin != plan[i].series_begin)) {
      ++split;
    }
  }
  return split;
}

v1::EncodeObservationsRequest TemplateRequest(
    const v1::EncodeObservationsRequest& request, const PanelShape& shape) {
  v1::EncodeObservationsRequest shared = request;
  v1::Observations* observations = shared.mutable_observations();
  observations->clear_timestamps();
  observations->clear_values();
  observations->clear_mask();
  observations->clear_event_times();
  observations->clear_event_channels();
  observations->clear_event_values();
  observations->clear_content();
  observations->clear_series_offsets();
  observations->clear_time_zone_index();
  if (shape.time_zone_mode == TimeZoneMode::kPerSeries) {
    observations->clear_time_zones();
  }
  if (shape.set_num_channels) observations->set_num_channels(shape.channels);
  shared.clear_state();
  shared.clear_states();
  return shared;
}

v1::EncodeObservationsRequest BuildSubRequest(
    const v1::EncodeObservationsRequest& request,
    const v1::EncodeObservationsRequest& shared, const PanelShape& shape,
    const SubCall& call, const v1::SeriesState* carried) {
  v1::EncodeObservationsRequest sub = shared;
  const v1::Observations& from = request.observations();
  v1::Observations* to = sub.mutable_observations();
  std::vector<int64_t> offsets;
  offsets.reserve(static_cast<size_t>(call.series_end - call.series_begin + 1));
  offsets.push_back(0);
  for (int64_t s = call.series_begin + 1; s < call.series_end; ++s) {
    offsets.push_back(shape.offsets[s] - call.row_begin);
  }
  offsets.push_back(call.row_end - call.row_begin);
  const int64_t series = call.series_end - call.series_begin;
  *to->mutable_series_offsets() = TensorFromInt64s(offsets, {series + 1});

  switch (shape.time_zone_mode) {
    case TimeZoneMode::kShared:
      break;
    case TimeZoneMode::kIndexed: {
      v1::Tensor* index = to->mutable_time_zone_index();
      CopyRows(from.time_zone_index(), call.series_begin, call.series_end,
               index);
      break;
    }
    case TimeZoneMode::kPerSeries:
      for (int64_t s = call.series_begin; s < call.series_end; ++s) {
        to->add_time_zones(from.time_zones(static_cast<int>(s)));
      }
      break;
  }

  if (carried != nullptr || !shape.states.empty()) {
    for (int64_t s = call.series_begin; s < call.series_end; ++s) {
      if (s == call.series_begin && carried != nullptr) {
        *sub.add_states() = *carried;
      } else if (!shape.states.empty()) {
        *sub.add_states() = shape.states[static_cast<size_t>(s)];
      } else {
        sub.add_states();  // An empty entry starts its series.
      }
    }
  }
  return sub;
}

}  // namespace panel
}  // namespace phasor
