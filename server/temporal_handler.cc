// EncodeObservations and EncodeObservationsStream: request tensors -> a core
// ObservationsView, the series state in and out, and the schema.
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/calendar.h"
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
                                   DType::kBFloat16, DType::kFloat64};
constexpr DType kChannelTypes[] = {DType::kInt32};
// FLOAT64 is computed on core's float64 path (compose.h), not widened.
constexpr DType kFeatureTypes[] = {DType::kFloat32, DType::kFloat16,
                                   DType::kBFloat16, DType::kFloat64};

// A channel's record in the response's SeriesState once it has been
// observed: 2 bytes of framing, last_seen_ns (tag + varint, up to 11) and
// last_value (tag + 8).
constexpr int64_t kStateBytesPerChannel = 22;
// A series' own fields in a response: framing and its two timestamps.
constexpr int64_t kStateBytesPerSeries = 26;

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
  TypedInput<double> content_f64;
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

// `state` (may be null) is a state the request continues from, for the
// long layout's channel count; `state_field` names it.
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

// `field` names the state in errors ("state", "states[3]").
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

// A panel entry with no fields starts its series.
bool IsNewSeries(const v1::SeriesState& state) {
  return !state.has_last_timestamp_ns() && !state.has_first_timestamp_ns() &&
         state.channels_size() == 0;
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

// The memory a cached TemporalSpec holds (SpecCache charges it): the
// structure and what its blocks own. A profile's holiday calendar can make a
// short request key stand for many dates, hence the dates count.
size_t CachedBytes(const TemporalSpec& spec) {
  size_t bytes = sizeof(TemporalSpec);
  if (spec.time2vec.has_value()) {
    bytes += (spec.time2vec->omega.capacity() + spec.time2vec->phi.capacity()) *
             sizeof(double);
  }
  if (spec.calendar.has_value()) {
    bytes += spec.calendar->time_zone.capacity() +
             spec.calendar->fields.capacity() * sizeof(CalendarField);
    if (spec.calendar->holidays.has_value()) {
      for (const std::string& date : spec.calendar->holidays->dates) {
        bytes += sizeof(std::string) + date.capacity();
      }
    }
  }
  return bytes;
}

size_t CachedBytes(const FeatureLayout& layout) {
  size_t bytes = sizeof(FeatureLayout);
  for (const SchemaEntry& entry : layout.schema) {
    bytes += sizeof(SchemaEntry) + entry.block.capacity() + entry.meaning.capacity();
  }
  return bytes;
}

// The key of a request's config in ObservationsCaches: "p" and a profile's
// name, or "s" and the inline spec's bytes (profiles do not change while
// the server runs). False for a request that configures nothing.
bool ConfigKey(const v1::EncodeObservationsRequest& request, std::string* key) {
  key->clear();
  switch (request.config_case()) {
    case v1::EncodeObservationsRequest::kSpec:
      key->push_back('s');
      return request.spec().AppendToString(key);
    case v1::EncodeObservationsRequest::kProfile:
      key->push_back('p');
      key->append(request.profile());
      return true;
    default:
      return false;
  }
}

// ResolveTemporal through the cache; `key` is set to the config's key
// (empty without a cache). Only specs that resolved and validated are
// cached, so a hit returns what ResolveTemporal would.
absl::StatusOr<std::shared_ptr<const TemporalSpec>> ResolveTemporalCached(
    const HandlerContext& context, const v1::EncodeObservationsRequest& request,
    std::string* key) {
  ObservationsCaches* caches = context.observations_caches;
  if (caches == nullptr || !ConfigKey(request, key)) {
    key->clear();
    PHASOR_ASSIGN_OR_RETURN(TemporalSpec spec, ResolveTemporal(context, request));
    return std::make_shared<const TemporalSpec>(std::move(spec));
  }
  if (std::shared_ptr<const TemporalSpec> hit = caches->specs.Find(*key)) return hit;
  PHASOR_ASSIGN_OR_RETURN(TemporalSpec spec, ResolveTemporal(context, request));
  auto resolved = std::make_shared<const TemporalSpec>(std::move(spec));
  caches->specs.Insert(*key, resolved, CachedBytes(*resolved));
  return resolved;
}

// A cache key for what is derived from a config: its key, then `values` as
// raw int64s (fixed width, so two keys never run into each other).
std::string DerivedKey(absl::string_view config_key,
                       std::initializer_list<int64_t> values) {
  std::string key;
  key.reserve(config_key.size() + values.size() * sizeof(int64_t));
  key.append(config_key.data(), config_key.size());
  for (const int64_t value : values) {
    char bytes[sizeof(int64_t)];
    std::memcpy(bytes, &value, sizeof(value));
    key.append(bytes, sizeof(bytes));
  }
  return key;
}

// TemporalFeatureLayout through the cache, under the config's key plus C
// and the content width (everything the layout depends on besides the
// spec). `config_key` empty: not cached.
absl::StatusOr<std::shared_ptr<const FeatureLayout>> LayoutCached(
    const HandlerContext& context, absl::string_view config_key,
    const TemporalSpec& spec, int64_t num_channels, int64_t content_dim) {
  ObservationsCaches* caches = context.observations_caches;
  std::string key;
  if (caches != nullptr && !config_key.empty()) {
    key = DerivedKey(config_key, {num_channels, content_dim});
    if (std::shared_ptr<const FeatureLayout> hit = caches->layouts.Find(key)) return hit;
  }
  PHASOR_ASSIGN_OR_RETURN(FeatureLayout layout,
                          TemporalFeatureLayout(spec, num_channels, content_dim));
  auto built = std::make_shared<const FeatureLayout>(std::move(layout));
  if (!key.empty()) caches->layouts.Insert(key, built, CachedBytes(*built));
  return built;
}

// TemporalEncoders::Make through the cache, under the config's key plus C
// and the accuracy (everything the encoders depend on besides the spec).
// `config_key` empty: built for this call alone.
absl::StatusOr<std::shared_ptr<const TemporalEncoders>> EncodersCached(
    const HandlerContext& context, absl::string_view config_key,
    const TemporalSpec& spec, int64_t num_channels, SinusoidAccuracy accuracy) {
  ObservationsCaches* caches = context.observations_caches;
  std::string key;
  if (caches != nullptr && !config_key.empty()) {
    key = DerivedKey(config_key,
                     {num_channels, accuracy == SinusoidAccuracy::kFloat64 ? 1 : 0});
    if (std::shared_ptr<const TemporalEncoders> hit = caches->encoders.Find(key)) {
      return hit;
    }
  }
  PHASOR_ASSIGN_OR_RETURN(TemporalEncoders encoders,
                          TemporalEncoders::Make(spec, num_channels, accuracy));
  auto built = std::make_shared<const TemporalEncoders>(std::move(encoders));
  if (!key.empty()) caches->encoders.Insert(key, built, built->approximate_bytes());
  return built;
}

// The panel parts of a request: series offsets, time zones, states in.
struct DecodedPanel {
  TypedInput<int64_t> offsets_input;
  std::vector<int64_t> offsets_storage;  // The single series' {0, rows}.
  absl::Span<const int64_t> offsets;
  std::vector<absl::TimeZone> zones;
  TypedInput<int32_t> zone_index_input;
  std::vector<int32_t> zone_index_storage;  // When derived from the list.
  absl::Span<const int32_t> zone_index;
  std::vector<SeriesState> states;
  // S entries (null for a new series), or empty when every series is new.
  std::vector<const SeriesState*> state_ptrs;

  int64_t num_series() const {
    return static_cast<int64_t>(offsets.size()) - 1;
  }
};

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

// request.states: none, or one per series (an empty entry is a new series).
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

// Zone names a request may list: every IANA zone and link once is under
// 700.
constexpr int kMaxTimeZones = 4096;

// observations.time_zones and time_zone_index: loaded zones and one index
// per series.
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

}  // namespace

absl::Status HandleEncodeObservations(const HandlerContext& context,
                                      const v1::EncodeObservationsRequest& request,
                                      ObservationStream* stream,
                                      v1::EncodeObservationsResponse* response) {
  const bool continues = stream != nullptr && stream->started;
  const bool is_panel = request.observations().has_series_offsets();
  // The spec, and the states this chunk continues from.
  std::shared_ptr<const TemporalSpec> resolved;
  std::string config_key;
  const TemporalSpec* spec = nullptr;
  if (continues) {
    if (request.config_case() != v1::EncodeObservationsRequest::CONFIG_NOT_SET &&
        !SameConfig(request, stream->config)) {
      return InvalidField(request.has_profile() ? "profile" : "spec",
                          "a stream's spec is fixed by its first message; later "
                          "messages may omit it or repeat it unchanged");
    }
    if (request.has_state() || request.states_size() > 0) {
      return InvalidField(request.has_state() ? "state" : "states",
                          "only the first message of a stream may carry states; "
                          "the stream carries them from chunk to chunk");
    }
    if (is_panel != stream->panel) {
      return InvalidField("observations.series_offsets",
                          is_panel ? "the stream began with a single series; "
                                     "every message must be one"
                                   : "the stream began with a panel; every "
                                     "message must be one, with the same series");
    }
    spec = stream->spec.get();
  } else {
    PHASOR_ASSIGN_OR_RETURN(resolved, ResolveTemporalCached(context, request, &config_key));
    spec = resolved.get();
    if (is_panel && request.has_state()) {
      return InvalidField("state",
                          "a panel (observations.series_offsets) takes one state "
                          "per series in `states`");
    }
    if (!is_panel && request.states_size() > 0) {
      return InvalidField("states",
                          "per-series states need a panel "
                          "(observations.series_offsets); one series uses `state`");
    }
  }
  PHASOR_ASSIGN_OR_RETURN(
      const DType output_dtype,
      OutputDType(request.output_dtype(), "output_dtype", kFeatureTypes));

  // The series: offsets as sent, or the single series [0, rows).
  DecodedPanel panel;
  if (is_panel) {
    PHASOR_RETURN_IF_ERROR(DecodeSeriesOffsets(request.observations(),
                                               context.limits, &panel));
  }
  const int64_t num_series = is_panel ? panel.num_series() : 1;
  if (continues && is_panel &&
      num_series != static_cast<int64_t>(stream->states.size())) {
    return InvalidField("observations.series_offsets",
                        absl::StrCat("has ", num_series, " series; the stream's "
                                     "panel has ", stream->states.size()));
  }
  // The states in: the stream's, or the request's.
  if (continues) {
    panel.state_ptrs.reserve(stream->states.size());
    for (const SeriesState& state : stream->states) panel.state_ptrs.push_back(&state);
  } else if (is_panel) {
    PHASOR_RETURN_IF_ERROR(DecodeStates(request, num_series, &panel));
  } else if (request.has_state()) {
    panel.states.resize(1);
    PHASOR_RETURN_IF_ERROR(StateFromProto(request.state(), "state", &panel.states[0]));
    panel.state_ptrs.push_back(&panel.states[0]);
  }
  // The long layout may take its channel count from a state.
  const SeriesState* channel_hint = nullptr;
  for (const SeriesState* state : panel.state_ptrs) {
    if (state != nullptr) {
      channel_hint = state;
      break;
    }
  }

  // Conversion: tensors to spans (float64 seconds to ns, unaligned copies).
  DecodedObservations observations;
  PHASOR_RETURN_IF_ERROR(DecodeObservations(
      request.observations(), channel_hint,
      is_panel ? "states.channels" : "state.channels", context.limits, &observations));
  const ObservationsView& view = observations.view;
  const int64_t rows = view.num_rows();
  if (!is_panel) {
    panel.offsets_storage = {0, rows};
    panel.offsets = panel.offsets_storage;
  }
  PHASOR_RETURN_IF_ERROR(
      DecodeZones(request.observations(), *spec, num_series, context.limits, &panel));
  PHASOR_RETURN_IF_ERROR(context.check_alive());

  // Validation, once: the spec was validated when it was resolved, and
  // EncodeValidatedPanel does not repeat any of it.
  const PanelView panel_view{view, panel.offsets, panel.zone_index};
  if (is_panel) {
    PHASOR_RETURN_IF_ERROR(ValidatePanel(panel_view, panel.state_ptrs,
                                         static_cast<int64_t>(panel.zones.size())));
  } else {
    PHASOR_RETURN_IF_ERROR(ValidateObservations(view));
    PHASOR_RETURN_IF_ERROR(ValidateZoneIndex(panel.zone_index, 1,
                                             static_cast<int64_t>(panel.zones.size())));
    if (!panel.state_ptrs.empty()) {
      PHASOR_RETURN_IF_ERROR(ValidateSeriesState(*panel.state_ptrs[0], view));
    }
  }
  // Built once per spec, channel count and content width (cached): the
  // kernel reads its width, the response copies its schema.
  PHASOR_ASSIGN_OR_RETURN(
      const std::shared_ptr<const FeatureLayout> layout_ptr,
      LayoutCached(context, continues ? absl::string_view(stream->config_key) : config_key,
                   *spec, view.num_channels, view.has_content() ? view.content_dim : 0));
  const FeatureLayout& layout = *layout_ptr;
  PHASOR_RETURN_IF_ERROR(CheckWidth(layout.width, "spec.temporal", context.limits));
  const int64_t shape[] = {rows, layout.width};
  // The states, the offsets and the channel names (repeated in every
  // per-channel schema entry) travel with the features.
  int64_t names_bytes = 0;
  for (const std::string& name : request.observations().channel_names()) {
    names_bytes += static_cast<int64_t>(name.size()) + 2;  // ", "
  }
  int64_t per_channel_entries = 0;
  for (const SchemaEntry& entry : layout.schema) per_channel_entries += entry.per_channel;
  const int64_t state_bytes =
      num_series * (view.num_channels * kStateBytesPerChannel + kStateBytesPerSeries);
  const int64_t offsets_bytes = is_panel ? 8 * (num_series + 1) : 0;
  PHASOR_RETURN_IF_ERROR(CheckOutputSize(
      shape, output_dtype, "observations", context.limits,
      /*extra_bytes=*/state_bytes + offsets_bytes + names_bytes * per_channel_entries));
  PHASOR_RETURN_IF_ERROR(ReserveOutputMemory(
      context, shape, output_dtype,
      /*extra_bytes=*/state_bytes + offsets_bytes + names_bytes * per_channel_entries));
  PHASOR_RETURN_IF_ERROR(context.check_alive());

  PHASOR_ASSIGN_OR_RETURN(
      const std::shared_ptr<const TemporalEncoders> encoders,
      EncodersCached(context,
                     continues ? absl::string_view(stream->config_key) : config_key, *spec,
                     view.num_channels,
                     output_dtype == DType::kFloat64 ? SinusoidAccuracy::kFloat64
                                                     : SinusoidAccuracy::kFloat32));
  std::vector<SeriesState> states_out(static_cast<size_t>(num_series));
  const absl::Status encoded = WriteFloatOutput(
      context, shape, output_dtype, response->mutable_features(),
      [&](auto out) {
        return EncodeValidatedPanel(*spec, layout, panel_view, panel.zones,
                                    panel.state_ptrs, context.execution, out,
                                    absl::MakeSpan(states_out), encoders.get());
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
  const bool zone_list = !panel.zones.empty();
  response->mutable_schema()->Reserve(static_cast<int>(layout.schema.size()));
  for (const SchemaEntry& entry : layout.schema) {
    v1::SchemaEntry* out = response->add_schema();
    out->set_block(entry.block);
    out->set_offset(entry.offset);
    out->set_width(entry.width);
    const bool add_channels = entry.per_channel && !channel_list.empty();
    const bool name_zones = zone_list && entry.names_zone;
    if (!add_channels && !name_zones) {
      out->set_meaning(entry.meaning);
      continue;
    }
    std::string meaning = entry.meaning;
    if (add_channels) meaning += channel_list;
    if (name_zones) {
      const std::string& zone = spec->calendar->time_zone;
      // Core ends these meanings with " in <zone>".
      meaning = absl::StrReplaceAll(
          meaning, {{absl::StrCat(" in ", zone.empty() ? "UTC" : zone),
                     " in the series' zone (observations.time_zones)"}});
    }
    out->set_meaning(std::move(meaning));
  }
  if (is_panel) {
    response->mutable_states()->Reserve(static_cast<int>(num_series));
    for (const SeriesState& state : states_out) StateToProto(state, response->add_states());
    *response->mutable_series_offsets() = request.observations().series_offsets();
  } else {
    StateToProto(states_out[0], response->mutable_state());
  }
  if (stream != nullptr) {
    if (!stream->started) {
      stream->started = true;
      stream->spec = std::move(resolved);
      stream->config_key = std::move(config_key);
      stream->panel = is_panel;
      if (request.has_profile()) {
        stream->config.set_profile(request.profile());
      } else {
        *stream->config.mutable_spec() = request.spec();
      }
    }
    stream->states = std::move(states_out);
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
