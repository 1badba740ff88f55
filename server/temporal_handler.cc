#include "server/temporal_handler.h"

#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/temporal/calendar.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/observations_convert.h"
#include "server/spec_convert.h"

namespace phasor::server {
namespace {

// FLOAT64 is computed on core's float64 path (compose.h), not widened.
constexpr DType kFeatureTypes[] = {DType::kFloat32, DType::kFloat16,
                                   DType::kBFloat16, DType::kFloat64};

// A series' own fields in a response: framing and its two timestamps.
constexpr int64_t kStateBytesPerSeries = 26;

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

// The key of a request's config in ServerCaches: "p" and a profile's
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
  ServerCaches* caches = context.caches;
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
  ServerCaches* caches = context.caches;
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
  ServerCaches* caches = context.caches;
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

}  // namespace

absl::Status HandleEncodeObservations(const HandlerContext& context,
                                      const v1::EncodeObservationsRequest& request,
                                      ObservationStream* stream,
                                      v1::EncodeObservationsResponse* response,
                                      StatesReply states) {
  const bool continues = stream != nullptr && stream->started;
  const bool with_states = stream != nullptr || states == StatesReply::kInclude;
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
      with_states ? num_series * (view.num_channels * kStateBytesPerChannel + kStateBytesPerSeries)
                  : 0;
  const int64_t offsets_bytes = is_panel ? 8 * (num_series + 1) : 0;
  PHASOR_RETURN_IF_ERROR(CheckOutputSize(
      shape, output_dtype, "observations", context.limits,
      /*extra_bytes=*/state_bytes + offsets_bytes + names_bytes * per_channel_entries));
  PHASOR_RETURN_IF_ERROR(ReserveOutputMemory(
      context, shape, output_dtype, response->mutable_features(),
      /*extra_bytes=*/state_bytes + offsets_bytes + names_bytes * per_channel_entries));
  PHASOR_RETURN_IF_ERROR(context.check_alive());

  PHASOR_ASSIGN_OR_RETURN(
      const std::shared_ptr<const TemporalEncoders> encoders,
      EncodersCached(context,
                     continues ? absl::string_view(stream->config_key) : config_key, *spec,
                     view.num_channels,
                     output_dtype == DType::kFloat64 ? SinusoidAccuracy::kFloat64
                                                     : SinusoidAccuracy::kFloat32));
  std::vector<SeriesState> states_out(with_states ? static_cast<size_t>(num_series) : 0);
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
    response->mutable_states()->Reserve(static_cast<int>(states_out.size()));
    for (const SeriesState& state : states_out) StateToProto(state, response->add_states());
    *response->mutable_series_offsets() = request.observations().series_offsets();
  } else if (with_states) {
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
  CountEncoded(context, EncodedKind::kObservations, rows * layout.width);
  return absl::OkStatus();
}

absl::Status ValidateTemporalProfile(const ProfileRegistry& profiles,
                                     const v1::TemporalSpec& spec) {
  PHASOR_ASSIGN_OR_RETURN(const TemporalSpec temporal, TemporalFromProto(spec, profiles));
  return ValidateTemporalSpec(temporal, kTemporalPrefix);
}

}  // namespace phasor::server
