// EncodeObservations and EncodeObservationsStream: request tensors -> a core
// ObservationsView, the series state in and out, and the schema.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/compose.h"
#include "core/errors.h"
#include "core/observations.h"
#include "core/status_macros.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/handlers.h"
#include "server/spec_convert.h"

namespace phasor::server {
namespace {

constexpr DType kTimeTypes[] = {DType::kInt64, DType::kFloat64};
constexpr DType kValueTypes[] = {DType::kFloat32, DType::kFloat64};
constexpr DType kMaskTypes[] = {DType::kBool, DType::kUInt8};
constexpr DType kContentTypes[] = {DType::kFloat32, DType::kFloat16,
                                   DType::kBFloat16};
constexpr DType kChannelTypes[] = {DType::kInt32};
constexpr DType kFeatureTypes[] = {DType::kFloat32, DType::kFloat16,
                                   DType::kBFloat16};

// A channel's record in the response's SeriesState once it has been
// observed: 2 bytes of framing, last_seen_ns (tag + varint, up to 11) and
// last_value (tag + 8).
constexpr int64_t kStateBytesPerChannel = 22;

// Everything an ObservationsView points into.
struct DecodedObservations {
  ObservationsView view;
  // Times given as float64 seconds, converted to ns.
  std::vector<int64_t> converted_times;
  TypedInput<int64_t> times;
  TypedInput<double> values_f64;
  TypedInput<float> values_f32;
  TypedInput<int32_t> channels;
  FloatInput content;
};

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

absl::Status DecodeObservations(const v1::Observations& in,
                                const SeriesState* state,
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
      channels_field = "state.channels";
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
    out->content = FloatInput(content);
    view.content = out->content.span();
    view.content_dim = content.shape[1];
  }
  return absl::OkStatus();
}

absl::StatusOr<SeriesState> StateFromProto(const v1::SeriesState& in) {
  SeriesState out;
  out.has_rows = in.has_last_timestamp_ns();
  if (out.has_rows != in.has_first_timestamp_ns()) {
    return InvalidField(out.has_rows ? "state.first_timestamp_ns"
                                     : "state.last_timestamp_ns",
                        "first_timestamp_ns and last_timestamp_ns are set together");
  }
  out.first_timestamp_ns = in.first_timestamp_ns();
  out.last_timestamp_ns = in.last_timestamp_ns();
  out.channels.reserve(in.channels_size());
  for (const v1::SeriesState::Channel& channel : in.channels()) {
    ChannelState state;
    state.seen = channel.has_last_seen_ns();
    state.last_seen_ns = channel.last_seen_ns();
    state.last_value = channel.last_value();
    state.seen_before_last = channel.has_before_last_seen_ns();
    state.before_last_seen_ns = channel.before_last_seen_ns();
    state.before_last_value = channel.before_last_value();
    out.channels.push_back(state);
  }
  return out;
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

bool SameConfig(const v1::EncodeObservationsRequest& a,
                const v1::EncodeObservationsRequest& b) {
  if (a.config_case() != b.config_case()) return false;
  if (a.config_case() == v1::EncodeObservationsRequest::kProfile) {
    return a.profile() == b.profile();
  }
  return google::protobuf::util::MessageDifferencer::Equals(a.spec(), b.spec());
}

// The temporal spec a request configures (inline or profile), converted and
// validated.
absl::StatusOr<TemporalSpec> ResolveTemporal(const HandlerContext& context,
                                             const v1::EncodeObservationsRequest& request) {
  const v1::EncoderSpec* spec = nullptr;
  switch (request.config_case()) {
    case v1::EncodeObservationsRequest::kSpec:
      spec = &request.spec();
      break;
    case v1::EncodeObservationsRequest::kProfile: {
      PHASOR_ASSIGN_OR_RETURN(const v1::Profile* profile,
                              context.profiles->FindProfile(request.profile(), "profile"));
      spec = &profile->spec();
      if (!spec->has_temporal()) {
        return InvalidField("profile", absl::StrCat("profile '", request.profile(),
                                                    "' is not a temporal encoder; "
                                                    "EncodeObservations needs one"));
      }
      break;
    }
    default:
      return InvalidField("spec", "set spec or profile");
  }
  if (!spec->has_temporal()) {
    return InvalidField("spec.temporal", "EncodeObservations needs spec.temporal");
  }
  PHASOR_ASSIGN_OR_RETURN(TemporalSpec temporal,
                          TemporalFromProto(spec->temporal(), *context.profiles));
  // Widths size per-request tables even for a chunk with no rows; bound them
  // before core allocates anything (and before widths are multiplied).
  // The paths are literals (kTemporalPrefix spelled out, checked below): the
  // checks run on every call and should build no string when they pass.
  static_assert(kTemporalPrefix == "spec.temporal");
  PHASOR_RETURN_IF_ERROR(
      CheckWidth(temporal.d_model, "spec.temporal.d_model", context.limits));
  if (temporal.time.has_value()) {
    PHASOR_RETURN_IF_ERROR(
        CheckWidth(temporal.time->dim, "spec.temporal.time.dim", context.limits));
  }
  if (temporal.gaps.has_value()) {
    PHASOR_RETURN_IF_ERROR(CheckWidth(temporal.gaps->sinusoidal_dim,
                                      "spec.temporal.gaps.sinusoidal_dim",
                                      context.limits));
  }
  PHASOR_RETURN_IF_ERROR(ValidateTemporalSpec(temporal, kTemporalPrefix));
  return temporal;
}

}  // namespace

absl::Status HandleEncodeObservations(const HandlerContext& context,
                                      const v1::EncodeObservationsRequest& request,
                                      ObservationStream* stream,
                                      v1::EncodeObservationsResponse* response) {
  // The spec, and the state this chunk continues from.
  TemporalSpec resolved;
  const TemporalSpec* spec = &resolved;
  std::optional<SeriesState> request_state;
  if (stream != nullptr && stream->started) {
    if (request.config_case() != v1::EncodeObservationsRequest::CONFIG_NOT_SET &&
        !SameConfig(request, stream->config)) {
      return InvalidField(request.has_profile() ? "profile" : "spec",
                          "a stream's spec is fixed by its first message; later "
                          "messages may omit it or repeat it unchanged");
    }
    if (request.has_state()) {
      return InvalidField("state",
                          "only the first message of a stream may carry a state; "
                          "the stream carries it from chunk to chunk");
    }
    spec = &stream->spec;
  } else {
    PHASOR_ASSIGN_OR_RETURN(resolved, ResolveTemporal(context, request));
    if (request.has_state()) {
      PHASOR_ASSIGN_OR_RETURN(request_state, StateFromProto(request.state()));
    }
  }
  const SeriesState* state_in =
      stream != nullptr && stream->started
          ? &stream->state
          : (request_state.has_value() ? &*request_state : nullptr);

  PHASOR_ASSIGN_OR_RETURN(
      const DType output_dtype,
      OutputDType(request.output_dtype(), "output_dtype", kFeatureTypes));

  // Conversion: tensors to spans (float64 seconds to ns, unaligned copies).
  DecodedObservations observations;
  PHASOR_RETURN_IF_ERROR(
      DecodeObservations(request.observations(), state_in, context.limits, &observations));
  PHASOR_RETURN_IF_ERROR(context.check_alive());

  // Validation, once: the spec was validated when it was resolved, and
  // EncodeValidatedObservations does not repeat any of it.
  const ObservationsView& view = observations.view;
  PHASOR_RETURN_IF_ERROR(ValidateObservations(view));
  if (state_in != nullptr) {
    PHASOR_RETURN_IF_ERROR(ValidateSeriesState(*state_in, view));
  }
  // Built once: the kernel reads its width, and its schema strings are then
  // moved (not copied) into the response.
  PHASOR_ASSIGN_OR_RETURN(
      FeatureLayout layout,
      TemporalFeatureLayout(*spec, view.num_channels,
                            view.content.empty() ? 0 : view.content_dim));
  const int64_t rows = view.num_rows();
  PHASOR_RETURN_IF_ERROR(CheckWidth(layout.width, "spec.temporal", context.limits));
  const int64_t shape[] = {rows, layout.width};
  // The state and the channel names (repeated in every per-channel schema
  // entry) travel with the features.
  int64_t names_bytes = 0;
  for (const std::string& name : request.observations().channel_names()) {
    names_bytes += static_cast<int64_t>(name.size()) + 2;  // ", "
  }
  int64_t per_channel_entries = 0;
  for (const SchemaEntry& entry : layout.schema) per_channel_entries += entry.per_channel;
  PHASOR_RETURN_IF_ERROR(CheckOutputSize(
      shape, output_dtype, "observations", context.limits,
      /*extra_bytes=*/view.num_channels * kStateBytesPerChannel +
          names_bytes * per_channel_entries));
  PHASOR_RETURN_IF_ERROR(context.check_alive());

  SeriesState state_out;
  const absl::Status encoded = WriteFloatOutput(
      context, shape, output_dtype, response->mutable_features(),
      [&](absl::Span<float> out) {
        return EncodeValidatedObservations(*spec, layout, view, state_in,
                                           context.execution, out, &state_out);
      });
  // A kernel stopped through execution.stop_requested reports CANCELLED;
  // the call itself tells a passed deadline from a cancelled client.
  PHASOR_RETURN_IF_ERROR(context.check_alive());
  PHASOR_RETURN_IF_ERROR(encoded);

  const std::string channel_list =
      request.observations().channel_names_size() > 0
          ? absl::StrCat("; channels in order: ",
                         absl::StrJoin(request.observations().channel_names(), ", "))
          : std::string();
  response->mutable_schema()->Reserve(static_cast<int>(layout.schema.size()));
  for (SchemaEntry& entry : layout.schema) {
    v1::SchemaEntry* out = response->add_schema();
    out->set_block(std::move(entry.block));
    out->set_offset(entry.offset);
    out->set_width(entry.width);
    if (entry.per_channel && !channel_list.empty()) entry.meaning += channel_list;
    out->set_meaning(std::move(entry.meaning));
  }
  StateToProto(state_out, response->mutable_state());
  if (stream != nullptr) {
    if (!stream->started) {
      stream->started = true;
      stream->spec = std::move(resolved);
      if (request.has_profile()) {
        stream->config.set_profile(request.profile());
      } else {
        *stream->config.mutable_spec() = request.spec();
      }
    }
    stream->state = std::move(state_out);
  }
  if (context.metrics != nullptr) {
    context.metrics->RecordEncodedValues(EncodedKind::kObservations, rows * layout.width);
  }
  return absl::OkStatus();
}

absl::Status ValidateTemporalProfile(const ProfileRegistry& profiles,
                                     const v1::TemporalSpec& spec) {
  PHASOR_ASSIGN_OR_RETURN(const TemporalSpec temporal, TemporalFromProto(spec, profiles));
  return ValidateTemporalSpec(temporal, kTemporalPrefix);
}

}  // namespace phasor::server
