#include "server/observations_convert.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/temporal/time_zone.h"

namespace phasor::server {
namespace {

constexpr DType kTimeTypes[] = {DType::kInt64, DType::kFloat64};
constexpr DType kValueTypes[] = {DType::kFloat32, DType::kFloat64};
constexpr DType kMaskTypes[] = {DType::kBool, DType::kUInt8};
constexpr DType kContentTypes[] = {DType::kFloat32, DType::kFloat16,
                                   DType::kBFloat16, DType::kFloat64};
constexpr DType kChannelTypes[] = {DType::kInt32};

// A [N] time tensor as int64 ns, in `storage` when converted from seconds.
absl::StatusOr<absl::Span<const int64_t>> DecodeTimes(
    const v1::Tensor& tensor, const std::string& field, const RequestLimits& limits,
    TypedInput<int64_t>* direct, std::vector<int64_t>* storage) {
  PHASOR_ASSIGN_OR_RETURN(const TensorView view,
                          CheckTensor(tensor, field, kTimeTypes, /*rank=*/1, limits));
  if (view.dtype == DType::kInt64) {
    *direct = TypedInput<int64_t>(view);
    return direct->span();
  }
  const TypedInput<double> seconds(view);
  storage->resize(view.num_elements);
  PHASOR_RETURN_IF_ERROR(
      TimestampsFromSeconds(seconds.span(), absl::MakeSpan(*storage), field));
  return absl::MakeConstSpan(*storage);
}

// Values [rows] or [rows, C] as float32 or float64.
void DecodeValues(const TensorView& view, DecodedObservations* out,
                  ValuesView* values) {
  if (view.dtype == DType::kFloat64) {
    out->values_f64 = TypedInput<double>(view);
    values->f64 = out->values_f64.span();
  } else {
    out->values_f32 = TypedInput<float>(view);
    values->f32 = out->values_f32.span();
  }
}

// A panel entry with no fields starts its series.
bool IsNewSeries(const v1::SeriesState& state) {
  return !state.has_last_timestamp_ns() && !state.has_first_timestamp_ns() &&
         state.channels_size() == 0;
}

// Zone names a request may list: every IANA zone and link once is under
// 700.
constexpr int kMaxTimeZones = 4096;

}  // namespace

absl::Status DecodeObservations(const v1::Observations& in,
                                const SeriesState* state,
                                absl::string_view state_field,
                                const RequestLimits& limits,
                                DecodedObservations* out) {
  ObservationsView& view = out->view;
  const bool wide = in.has_timestamps() || in.has_values() || in.has_mask();
  const bool long_layout =
      in.has_event_times() || in.has_event_channels() || in.has_event_values();
  if (wide && long_layout) {
    return InvalidField("observations",
                        "set the wide fields (timestamps, values, mask) or the "
                        "long fields (event_times, event_channels, "
                        "event_values), not both");
  }
  int64_t rows = 0;
  // The request field C comes from, for errors about C.
  absl::string_view channels_field = "observations.num_channels";
  if (!long_layout) {
    view.layout = ObservationLayout::kWide;
    if (!in.has_timestamps()) {
      return InvalidField("observations.timestamps",
                          "is required (or send event_times for the long layout)");
    }
    PHASOR_ASSIGN_OR_RETURN(
        view.timestamps,
        DecodeTimes(in.timestamps(), "observations.timestamps", limits, &out->times,
                    &out->converted_times));
    rows = static_cast<int64_t>(view.timestamps.size());
    if (in.has_values()) {
      PHASOR_ASSIGN_OR_RETURN(const TensorView values,
                              CheckTensor(in.values(), "observations.values",
                                          kValueTypes, /*rank=*/2, limits));
      if (values.shape[0] != rows) {
        return InvalidField("observations.values.shape",
                            absl::StrCat("must be [T, C] with T = ", rows,
                                         " timestamps, got ", ShapeString(values.shape)));
      }
      view.num_channels = values.shape[1];
      channels_field = "observations.values.shape";
      DecodeValues(values, out, &view.values);
    }
    if (in.has_mask()) {
      if (!in.has_values()) {
        return InvalidField("observations.mask", "needs observations.values");
      }
      PHASOR_ASSIGN_OR_RETURN(const TensorView mask,
                              CheckTensor(in.mask(), "observations.mask", kMaskTypes,
                                          /*rank=*/2, limits));
      if (mask.shape[0] != rows || mask.shape[1] != view.num_channels) {
        return InvalidField("observations.mask.shape",
                            absl::StrCat("must equal the values' shape [", rows, ",",
                                         view.num_channels, "], got ",
                                         ShapeString(mask.shape)));
      }
      view.mask = absl::MakeConstSpan(
          reinterpret_cast<const uint8_t*>(mask.bytes.data()), mask.bytes.size());
    }
  } else {
    view.layout = ObservationLayout::kLong;
    if (!in.has_event_times() || !in.has_event_channels() || !in.has_event_values()) {
      return InvalidField(!in.has_event_times()      ? "observations.event_times"
                          : !in.has_event_channels() ? "observations.event_channels"
                                                     : "observations.event_values",
                          "is required for the long layout");
    }
    PHASOR_ASSIGN_OR_RETURN(
        view.event_times,
        DecodeTimes(in.event_times(), "observations.event_times", limits, &out->times,
                    &out->converted_times));
    rows = static_cast<int64_t>(view.event_times.size());
    PHASOR_ASSIGN_OR_RETURN(const TensorView channels,
                            CheckTensor(in.event_channels(), "observations.event_channels",
                                        kChannelTypes, /*rank=*/1, limits));
    PHASOR_ASSIGN_OR_RETURN(const TensorView values,
                            CheckTensor(in.event_values(), "observations.event_values",
                                        kValueTypes, /*rank=*/1, limits));
    if (channels.num_elements != rows || values.num_elements != rows) {
      return InvalidField(channels.num_elements != rows ? "observations.event_channels"
                                                        : "observations.event_values",
                          absl::StrCat("must have one entry per event time (", rows,
                                       "), got ",
                                       channels.num_elements != rows
                                           ? channels.num_elements
                                           : values.num_elements));
    }
    out->channels = TypedInput<int32_t>(channels);
    view.event_channels = out->channels.span();
    DecodeValues(values, out, &view.event_values);
    // C: as declared, else as named, else as the state knows it, else as
    // the events show.
    if (in.num_channels() > 0) {
      view.num_channels = in.num_channels();
    } else if (in.channel_names_size() > 0) {
      view.num_channels = in.channel_names_size();
      channels_field = "observations.channel_names";
    } else if (state != nullptr && !state->channels.empty()) {
      view.num_channels = static_cast<int64_t>(state->channels.size());
      channels_field = state_field;
    } else {
      int64_t max_channel = -1;
      for (size_t i = 0; i < view.event_channels.size(); ++i) {
        const int32_t channel = view.event_channels[i];
        if (channel < 0) {
          return InvalidField(
              absl::StrCat("observations.event_channels[", i, "]"),
              absl::StrCat("channel ", channel, " is negative; channels are 0..C-1"));
        }
        max_channel = std::max<int64_t>(max_channel, channel);
      }
      view.num_channels = max_channel + 1;
      channels_field = "observations.event_channels";
    }
  }
  PHASOR_RETURN_IF_ERROR(CheckWidth(view.num_channels, channels_field, limits));
  // The response's state holds one record per channel, and the call keeps a
  // few copies of it (tracker, checkpoints, state, message) whatever the
  // row count: the channel count is bounded by what those records cost in
  // a response, so a request with no rows cannot name millions of channels.
  if (view.num_channels > limits.max_message_bytes / kStateBytesPerChannel) {
    return FieldError(
        absl::StatusCode::kResourceExhausted, channels_field,
        absl::StrCat(view.num_channels, " channels: their state in the response (",
                     kStateBytesPerChannel, " bytes a channel once observed) "
                     "would exceed the server's message limit of ",
                     limits.max_message_bytes, " bytes"));
  }
  if (in.num_channels() < 0) {
    return InvalidField("observations.num_channels",
                        absl::StrCat("must be >= 0, got ", in.num_channels()));
  }
  if (view.layout == ObservationLayout::kWide && in.num_channels() > 0 &&
      in.num_channels() != view.num_channels) {
    return InvalidField("observations.num_channels",
                        absl::StrCat("is ", in.num_channels(), " but values have ",
                                     view.num_channels, " columns"));
  }
  if (in.channel_names_size() > 0 && in.channel_names_size() != view.num_channels) {
    return InvalidField("observations.channel_names",
                        absl::StrCat("has ", in.channel_names_size(), " names for ",
                                     view.num_channels, " channels"));
  }
  if (in.has_content()) {
    PHASOR_ASSIGN_OR_RETURN(const TensorView content,
                            CheckTensor(in.content(), "observations.content",
                                        kContentTypes, /*rank=*/2, limits));
    if (content.shape[0] != rows) {
      return InvalidField("observations.content.shape",
                          absl::StrCat("must be [rows, d] with rows = ", rows,
                                       ", got ", ShapeString(content.shape)));
    }
    // Float64 embeddings stay float64 (content · scale in double).
    if (content.dtype == DType::kFloat64) {
      out->content_f64 = TypedInput<double>(content);
      view.content_f64 = out->content_f64.span();
    } else {
      out->content = FloatInput(content);
      view.content = out->content.span();
    }
    view.content_dim = content.shape[1];
  }
  return absl::OkStatus();
}

absl::Status StateFromProto(const v1::SeriesState& in, absl::string_view field,
                            SeriesState* state) {
  SeriesState& out = *state;
  out.has_rows = in.has_last_timestamp_ns();
  if (out.has_rows != in.has_first_timestamp_ns()) {
    return InvalidField(absl::StrCat(field, out.has_rows ? ".first_timestamp_ns"
                                                         : ".last_timestamp_ns"),
                        "first_timestamp_ns and last_timestamp_ns are set together");
  }
  out.first_timestamp_ns = in.first_timestamp_ns();
  out.last_timestamp_ns = in.last_timestamp_ns();
  out.channels.resize(in.channels_size());
  for (int c = 0; c < in.channels_size(); ++c) {
    const v1::SeriesState::Channel& channel = in.channels(c);
    ChannelState& state = out.channels[c];
    state.seen = channel.has_last_seen_ns();
    state.last_seen_ns = channel.last_seen_ns();
    state.last_value = channel.last_value();
    state.seen_before_last = channel.has_before_last_seen_ns();
    state.before_last_seen_ns = channel.before_last_seen_ns();
    state.before_last_value = channel.before_last_value();
  }
  return absl::OkStatus();
}

void StateToProto(const SeriesState& in, v1::SeriesState* out) {
  out->Clear();
  out->mutable_channels()->Reserve(static_cast<int>(in.channels.size()));
  if (in.has_rows) {
    out->set_last_timestamp_ns(in.last_timestamp_ns);
    out->set_first_timestamp_ns(in.first_timestamp_ns);
  }
  for (const ChannelState& state : in.channels) {
    v1::SeriesState::Channel* channel = out->add_channels();
    if (state.seen) {
      channel->set_last_seen_ns(state.last_seen_ns);
      channel->set_last_value(state.last_value);
    }
    if (state.seen_before_last) {
      channel->set_before_last_seen_ns(state.before_last_seen_ns);
      channel->set_before_last_value(state.before_last_value);
    }
  }
}

absl::Status DecodeSeriesOffsets(const v1::Observations& in,
                                 const RequestLimits& limits, DecodedPanel* out) {
  constexpr DType kOffsetTypes[] = {DType::kInt64};
  PHASOR_ASSIGN_OR_RETURN(
      const TensorView view,
      CheckTensor(in.series_offsets(), "observations.series_offsets", kOffsetTypes,
                  /*rank=*/1, limits));
  if (view.num_elements < 2) {
    return InvalidField("observations.series_offsets",
                        absl::StrCat("needs S + 1 >= 2 entries, got ", view.num_elements));
  }
  out->offsets_input = TypedInput<int64_t>(view);
  out->offsets = out->offsets_input.span();
  return absl::OkStatus();
}

absl::Status DecodeStates(const v1::EncodeObservationsRequest& request,
                          int64_t num_series, DecodedPanel* out) {
  if (request.states_size() == 0) return absl::OkStatus();
  if (request.states_size() != num_series) {
    return InvalidField("states",
                        absl::StrCat("has ", request.states_size(),
                                     " entries; expected none or one per series (",
                                     num_series, ")"));
  }
  out->states.resize(static_cast<size_t>(num_series));
  out->state_ptrs.assign(static_cast<size_t>(num_series), nullptr);
  for (int64_t s = 0; s < num_series; ++s) {
    const v1::SeriesState& state = request.states(static_cast<int>(s));
    if (IsNewSeries(state)) continue;
    absl::Status status = StateFromProto(state, "states", &out->states[s]);
    if (!status.ok()) {
      // Named again with the index, built only on error.
      return StateFromProto(state, absl::StrCat("states[", s, "]"), &out->states[s]);
    }
    out->state_ptrs[s] = &out->states[s];
  }
  return absl::OkStatus();
}


absl::Status DecodeZones(const v1::Observations& in, const TemporalSpec& spec,
                         int64_t num_series, const RequestLimits& limits,
                         DecodedPanel* out) {
  if (in.time_zones_size() == 0) {
    if (in.has_time_zone_index()) {
      return InvalidField("observations.time_zone_index",
                          "needs observations.time_zones");
    }
    return absl::OkStatus();
  }
  if (!spec.calendar.has_value()) {
    return InvalidField("observations.time_zones",
                        "per-series time zones need a calendar block in the spec");
  }
  if (in.time_zones_size() > kMaxTimeZones) {
    return InvalidField("observations.time_zones",
                        absl::StrCat("has ", in.time_zones_size(), " names; at most ",
                                     kMaxTimeZones, " (list each zone once)"));
  }
  out->zones.reserve(in.time_zones_size());
  for (int i = 0; i < in.time_zones_size(); ++i) {
    PHASOR_ASSIGN_OR_RETURN(
        const absl::TimeZone zone,
        LoadIanaTimeZone(in.time_zones(i), absl::StrCat("observations.time_zones[", i, "]")));
    out->zones.push_back(zone);
  }
  const int64_t num_zones = in.time_zones_size();
  if (in.has_time_zone_index()) {
    constexpr DType kIndexTypes[] = {DType::kInt32};
    PHASOR_ASSIGN_OR_RETURN(
        const TensorView view,
        CheckTensor(in.time_zone_index(), "observations.time_zone_index", kIndexTypes,
                    /*rank=*/1, limits));
    out->zone_index_input = TypedInput<int32_t>(view);
    out->zone_index = out->zone_index_input.span();
  } else if (num_zones == 1 || num_zones == num_series) {
    out->zone_index_storage.resize(static_cast<size_t>(num_series));
    for (int64_t s = 0; s < num_series; ++s) {
      out->zone_index_storage[s] = num_zones == 1 ? 0 : static_cast<int32_t>(s);
    }
    out->zone_index = out->zone_index_storage;
  } else {
    return InvalidField("observations.time_zone_index",
                        absl::StrCat("is required when time_zones holds neither one "
                                     "name nor one per series (", num_zones,
                                     " names, ", num_series, " series)"));
  }
  // Its length and range are checked with the panel (ValidateZoneIndex).
  return absl::OkStatus();
}

}  // namespace phasor::server
