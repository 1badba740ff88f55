#include "server/inference_models.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/temporal/compose.h"
#include "google/protobuf/arena.h"
#include "server/inference_convert.h"
#include "server/inference_shared_memory.h"
#include "server/spec_convert.h"

namespace phasor::server {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelMetadataResponse;

constexpr v1::DType kFloatTypes[] = {v1::FLOAT32, v1::FLOAT16, v1::BFLOAT16, v1::FLOAT64};
// Token indices, or real positions (continuous-time RoPE, real-valued
// sinusoid arguments), as the native Positions.values take them.
constexpr v1::DType kPositionTypes[] = {v1::INT64, v1::FLOAT64};
constexpr v1::DType kInt64Type[] = {v1::INT64};
constexpr v1::DType kInt32Type[] = {v1::INT32};
// Observation times: INT64 ns, or FLOAT64 seconds, since the Unix epoch.
constexpr v1::DType kTimeTypes[] = {v1::INT64, v1::FLOAT64};
constexpr v1::DType kValueTypes[] = {v1::FLOAT32, v1::FLOAT64};
constexpr v1::DType kMaskTypes[] = {v1::BOOL, v1::UINT8};

// Which request input feeds each of a model's inputs; -1: not sent. (No
// model has more than 16 inputs, so this never allocates.)
using InputIndices = absl::InlinedVector<int, 16>;

// One input a model accepts. No dtypes: a BYTES input.
struct InputRule {
  absl::string_view name;
  absl::Span<const v1::DType> dtypes;
  bool required = false;
};

// What a model kind accepts and produces, and where the native request's
// field paths land on the wire.
struct ModelInterface {
  absl::string_view kind;
  absl::Span<const InputRule> inputs;
  absl::Span<const absl::string_view> outputs;
  absl::Span<const absl::string_view> parameters;
  absl::Span<const PathRename> renames;
};

// --- positional (EncodePositions) -------------------------------------------

enum PositionalInput { kPositionalPositions, kPositionalContent };
constexpr InputRule kPositionalInputs[] = {
    {"positions", kPositionTypes, /*required=*/true},
    {"content", kFloatTypes},
};
constexpr absl::string_view kPositionalOutputs[] = {"encodings"};
constexpr absl::string_view kPositionalParameters[] = {"output_dtype", "content_scale"};
constexpr PathRename kPositionalRenames[] = {
    {"positions.values", "inputs[positions]"},
    {"positions", "inputs[positions]"},
    {"content_scale", "parameters[content_scale]"},
    {"content", "inputs[content]"},
    {"output_dtype", "parameters[output_dtype]"},
    {"profile", "model_name"},
};
constexpr ModelInterface kPositional{"positional", kPositionalInputs, kPositionalOutputs,
                                     kPositionalParameters, kPositionalRenames};

// --- rope (ApplyRope) ----------------------------------------------------------

enum RopeInput { kRopeQuery, kRopeKey, kRopePositions };
constexpr InputRule kRopeInputs[] = {
    {"query", kFloatTypes, /*required=*/true},
    {"key", kFloatTypes},
    {"positions", kPositionTypes, /*required=*/true},
};
constexpr absl::string_view kRopeOutputs[] = {"query", "key"};
constexpr absl::string_view kRopeParameters[] = {"tensor_layout"};
constexpr PathRename kRopeRenames[] = {
    {"positions.values", "inputs[positions]"},
    {"positions", "inputs[positions]"},
    {"query", "inputs[query]"},
    {"key", "inputs[key]"},
    {"tensor_layout", "parameters[tensor_layout]"},
    {"profile", "model_name"},
};
constexpr ModelInterface kRope{"rope", kRopeInputs, kRopeOutputs, kRopeParameters,
                               kRopeRenames};

// --- temporal (EncodeObservations) ------------------------------------------------

enum TemporalInput {
  kTimestamps,
  kValues,
  kMask,
  kEventTimes,
  kEventChannels,
  kEventValues,
  kTemporalContent,
  kSeriesOffsets,
  kTimeZoneIndex,
  kChannelNames,
  kTimeZones,
  kState,
  kStates,
};
constexpr InputRule kTemporalInputs[] = {
    {"timestamps", kTimeTypes},
    {"values", kValueTypes},
    {"mask", kMaskTypes},
    {"event_times", kTimeTypes},
    {"event_channels", kInt32Type},
    {"event_values", kValueTypes},
    {"content", kFloatTypes},
    {"series_offsets", kInt64Type},
    {"time_zone_index", kInt32Type},
    {"channel_names", {}},
    {"time_zones", {}},
    {"state", {}},
    {"states", {}},
};
constexpr absl::string_view kTemporalOutputs[] = {"features", "state", "states",
                                                  "series_offsets"};
constexpr absl::string_view kTemporalParameters[] = {"output_dtype", "num_channels"};
constexpr PathRename kTemporalRenames[] = {
    {"observations.num_channels", "parameters[num_channels]"},
    {"observations.timestamps", "inputs[timestamps]"},
    {"observations.values", "inputs[values]"},
    {"observations.mask", "inputs[mask]"},
    {"observations.event_times", "inputs[event_times]"},
    {"observations.event_channels", "inputs[event_channels]"},
    {"observations.event_values", "inputs[event_values]"},
    {"observations.content", "inputs[content]"},
    {"observations.series_offsets", "inputs[series_offsets]"},
    {"observations.time_zone_index", "inputs[time_zone_index]"},
    {"observations.channel_names", "inputs[channel_names]"},
    {"observations.time_zones", "inputs[time_zones]"},
    {"observations", "inputs"},
    {"states", "inputs[states]"},
    {"state", "inputs[state]"},
    {"output_dtype", "parameters[output_dtype]"},
    {"profile", "model_name"},
};
constexpr ModelInterface kTemporal{"temporal", kTemporalInputs, kTemporalOutputs,
                                   kTemporalParameters, kTemporalRenames};

// --- relative_bias (RelativeBias) ------------------------------------------------

enum RelativeInput { kQueryPositions, kKeyPositions, kTable };
constexpr InputRule kRelativeInputs[] = {
    {"query_positions", kInt64Type, /*required=*/true},
    {"key_positions", kInt64Type, /*required=*/true},
    {"table", kFloatTypes},
};
constexpr absl::string_view kRelativeOutputs[] = {"bias", "bucket_ids"};
constexpr absl::string_view kRelativeParameters[] = {"output_dtype", "include_bucket_ids"};
constexpr PathRename kRelativeRenames[] = {
    {"query_positions.values", "inputs[query_positions]"},
    {"query_positions", "inputs[query_positions]"},
    {"key_positions.values", "inputs[key_positions]"},
    {"key_positions", "inputs[key_positions]"},
    {"table", "inputs[table]"},
    {"include_bucket_ids", "parameters[include_bucket_ids]"},
    {"output_dtype", "parameters[output_dtype]"},
    {"profile", "model_name"},
};
constexpr ModelInterface kRelative{"relative_bias", kRelativeInputs, kRelativeOutputs,
                                   kRelativeParameters, kRelativeRenames};

const ModelInterface* InterfaceOf(const v1::EncoderSpec& spec) {
  switch (spec.kind_case()) {
    case v1::EncoderSpec::kPositional: return &kPositional;
    case v1::EncoderSpec::kRope: return &kRope;
    case v1::EncoderSpec::kTemporal: return &kTemporal;
    case v1::EncoderSpec::kRelativeBias: return &kRelative;
    case v1::EncoderSpec::KIND_NOT_SET: break;
  }
  return nullptr;
}

std::string QuoteModel(absl::string_view name) {
  return QuoteForError(name, /*max_bytes=*/64, "'");
}

template <typename Names>
std::string NameList(const Names& names) {
  return absl::StrJoin(names, ", ", [](std::string* out, const auto& item) {
    if constexpr (std::is_same_v<std::decay_t<decltype(item)>, InputRule>) {
      absl::StrAppend(out, item.name);
    } else {
      absl::StrAppend(out, item);
    }
  });
}

// A shared-memory parameter sent to a server without the extension.
constexpr absl::string_view kSharedMemoryOff =
    "this server has no shared-memory regions (the system shared-memory "
    "extension is "
    "not enabled: phasor-server --system_shared_memory=true): send the "
    "elements in "
    "raw_input_contents or contents";

// Which request input feeds each of the model's inputs (-1: not sent).
// Unknown names, per-input parameters and missing required inputs are
// errors naming the input.
absl::StatusOr<InputIndices> MatchInputs(const ModelInferRequest& request,
                                          const ModelInterface& model,
                                          absl::string_view model_name) {
  InputIndices at(model.inputs.size(), -1);
  for (int i = 0; i < request.inputs_size(); ++i) {
    const ModelInferRequest::InferInputTensor& input = request.inputs(i);
    size_t rule = 0;
    while (rule < model.inputs.size() && model.inputs[rule].name != input.name()) ++rule;
    if (rule == model.inputs.size()) {
      return InvalidField(InputPath(request, i),
                          absl::StrCat("unknown input; model ", QuoteModel(model_name),
                                       " (", model.kind, ") takes ",
                                       NameList(model.inputs)));
    }
    if (!input.parameters().empty()) {
      // Inputs take no parameters; the first one found is named.
      const std::string& key = input.parameters().begin()->first;
      const std::string path = ParameterPath(absl::StrCat(InputPath(request, i), "."), key);
      if (absl::StartsWith(key, "shared_memory_")) {
        return InvalidField(path, kSharedMemoryOff);
      }
      return InvalidField(path, "unknown parameter; inputs take no parameters");
    }
    at[rule] = i;
  }
  for (size_t rule = 0; rule < model.inputs.size(); ++rule) {
    if (!model.inputs[rule].required || at[rule] >= 0) continue;
    return InvalidField(absl::StrCat("inputs[", model.inputs[rule].name, "]"),
                        absl::StrCat("is required by model ", QuoteModel(model_name),
                                     " (", model.kind, ")"));
  }
  return at;
}

// The requested outputs are the model's and carry no parameters.
absl::Status CheckRequestedOutputs(const ModelInferRequest& request,
                                   const ModelInterface& model,
                                   absl::string_view model_name) {
  for (int i = 0; i < request.outputs_size(); ++i) {
    const ModelInferRequest::InferRequestedOutputTensor& output = request.outputs(i);
    const auto path = [&] { return IndexedPath("outputs", output.name(), i); };
    bool known = false;
    for (const absl::string_view name : model.outputs) known |= name == output.name();
    if (!known) {
      return InvalidField(path(), absl::StrCat("unknown output; model ", QuoteModel(model_name),
                                               " (", model.kind, ") produces ",
                                               NameList(model.outputs)));
    }
    if (!output.parameters().empty()) {
      const std::string& key = output.parameters().begin()->first;
      if (absl::StartsWith(key, "shared_memory_")) {
        return InvalidField(ParameterPath(absl::StrCat(path(), "."), key), kSharedMemoryOff);
      }
      return CheckParameterKeys(output.parameters(), absl::StrCat(path(), "."), {}, "outputs");
    }
  }
  return absl::OkStatus();
}

bool OutputRequested(const ModelInferRequest& request, absl::string_view name) {
  for (const auto& output : request.outputs()) {
    if (output.name() == name) return true;
  }
  return false;
}

// Keeps only the requested outputs, in the requested order (all of them
// when none were requested). The outputs and their raw contents move by
// swapping elements, never by copying bytes.
absl::Status SelectOutputs(const ModelInferRequest& request, ModelInferResponse* response) {
  if (request.outputs_size() == 0) return absl::OkStatus();
  auto& outputs = *response->mutable_outputs();
  auto& raw = *response->mutable_raw_output_contents();
  for (int i = 0; i < request.outputs_size(); ++i) {
    const std::string& name = request.outputs(i).name();
    int found = i;
    while (found < outputs.size() && outputs[found].name() != name) ++found;
    if (found == outputs.size()) {
      return InvalidField(IndexedPath("outputs", name, i),
                          "is not produced for these inputs (docs/API.md, \"Open "
                          "Inference Protocol\", says when each output is)");
    }
    if (found != i) {
      outputs.SwapElements(i, found);
      raw.SwapElements(i, found);
    }
  }
  const int keep = request.outputs_size();
  outputs.DeleteSubrange(keep, outputs.size() - keep);
  raw.DeleteSubrange(keep, raw.size() - keep);
  return absl::OkStatus();
}

// Whether `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF). Names become proto string fields and
// JSON, both of which require it.
bool IsValidUtf8(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char lead = byte(i);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    unsigned char min_second = 0x80;
    unsigned char max_second = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) min_second = 0xA0;  // Overlong.
      if (lead == 0xED) max_second = 0x9F;  // Surrogates.
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) min_second = 0x90;  // Overlong.
      if (lead == 0xF4) max_second = 0x8F;  // Above U+10FFFF.
    } else {
      return false;
    }
    if (text.size() - i < length) return false;
    if (byte(i + 1) < min_second || byte(i + 1) > max_second) return false;
    for (size_t k = 2; k < length; ++k) {
      if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return false;
    }
    i += length;
  }
  return true;
}

// A BYTES input whose elements become a native repeated string field.
absl::Status TakeNames(ModelInferRequest* request, int index, const RequestLimits& limits,
                       google::protobuf::RepeatedPtrField<std::string>* out) {
  std::vector<std::string> names;
  std::vector<int64_t> shape;
  PHASOR_RETURN_IF_ERROR(TakeInputStrings(request, index, limits, &names, &shape));
  for (size_t i = 0; i < names.size(); ++i) {
    if (!IsValidUtf8(names[i])) {
      return InvalidField(absl::StrCat(InputPath(*request, index), "[", i, "]"),
                          "is not valid UTF-8");
    }
  }
  out->Reserve(static_cast<int>(names.size()));
  for (std::string& name : names) *out->Add() = std::move(name);
  return absl::OkStatus();
}

// A BYTES input of serialized phasor.v1.SeriesState messages.
absl::Status TakeStates(ModelInferRequest* request, int index, const RequestLimits& limits,
                        std::vector<std::string>* serialized) {
  std::vector<int64_t> shape;
  return TakeInputStrings(request, index, limits, serialized, &shape);
}

absl::Status ParseState(const std::string& bytes, const std::string& path,
                        v1::SeriesState* state) {
  if (state->ParseFromString(bytes)) return absl::OkStatus();
  return InvalidField(path,
                      "is not a serialized phasor.v1.SeriesState (send back the bytes "
                      "of the state or states output of the previous chunk)");
}

// Native handler errors at the ModelInferRequest's paths: spec errors of
// the profile at model_name, panel rows ("observations.series[17].
// timestamps[3]") at their stacked input ("inputs[timestamps].series[17][3]"),
// every other native field at its input or parameter.
absl::Status NativeErrors(const absl::Status& status, const ModelInterface& model,
                          const v1::Profile& profile) {
  if (status.ok()) return status;
  absl::Status mapped = SpecErrorsToProfile(status, profile.name());
  if (const std::optional<std::string> path = FieldPathOf(mapped)) {
    constexpr absl::string_view kSeries = "observations.series[";
    const absl::string_view text = *path;
    const size_t close = text.find(']');
    if (absl::StartsWith(text, kSeries) && close != absl::string_view::npos) {
      const absl::string_view index = text.substr(kSeries.size(), close - kSeries.size());
      absl::string_view rest = text.substr(close + 1);
      if (absl::StartsWith(rest, ".")) {
        rest.remove_prefix(1);
        const size_t end = std::min(rest.find('.'), rest.find('['));
        const absl::string_view field = rest.substr(0, end);
        const absl::string_view after =
            end == absl::string_view::npos ? absl::string_view() : rest.substr(end);
        mapped = ReplaceFieldPath(
            mapped, absl::StrCat("observations.", field, ".series[", index, "]", after));
      } else {
        mapped = ReplaceFieldPath(
            mapped, absl::StrCat("observations.series_offsets[", index, "]", rest));
      }
    }
  }
  return ToInferPaths(mapped, model.renames);
}

template <typename T>
T* NewMessage(google::protobuf::Arena* arena) {
  return google::protobuf::Arena::CreateMessage<T>(arena);
}

// --- ModelInfer per kind ----------------------------------------------------------

absl::Status InferPositional(const HandlerContext& context, SharedMemoryTensors* shm,
                             const v1::Profile& profile, const InputIndices& at,
                             ModelInferRequest* request, ModelInferResponse* response,
                             google::protobuf::Arena* arena) {
  auto* native = NewMessage<v1::EncodePositionsRequest>(arena);
  native->set_profile(profile.name());
  PHASOR_RETURN_IF_ERROR(shm->TakeInput(request, at[kPositionalPositions], kPositionTypes,
                                         context.limits,
                                         native->mutable_positions()->mutable_values()));
  if (at[kPositionalContent] >= 0) {
    PHASOR_RETURN_IF_ERROR(shm->TakeInput(request, at[kPositionalContent], kFloatTypes,
                                           context.limits, native->mutable_content()));
  }
  PHASOR_ASSIGN_OR_RETURN(const v1::DType output_dtype,
                          OutputDTypeParameter(request->parameters()));
  native->set_output_dtype(output_dtype);
  PHASOR_ASSIGN_OR_RETURN(const std::optional<double> content_scale,
                          DoubleParameter(request->parameters(), "content_scale"));
  if (content_scale) native->set_content_scale(*content_scale);

  auto* result = NewMessage<v1::EncodePositionsResponse>(arena);
  const HandlerContext bound =
      shm->Bind(context, {{"encodings", [&] { return result->mutable_encodings(); }}});
  PHASOR_RETURN_IF_ERROR(
      NativeErrors(HandleEncodePositions(bound, *native, result), kPositional, profile));
  AddTensorOutput("encodings", result->mutable_encodings(), response);
  return absl::OkStatus();
}

absl::Status InferRope(const HandlerContext& context, SharedMemoryTensors* shm,
                       const v1::Profile& profile, const InputIndices& at,
                       ModelInferRequest* request, ModelInferResponse* response,
                       google::protobuf::Arena* arena) {
  auto* native = NewMessage<v1::ApplyRopeRequest>(arena);
  native->set_profile(profile.name());
  PHASOR_RETURN_IF_ERROR(shm->TakeInput(request, at[kRopeQuery], kFloatTypes,
                                         context.limits, native->mutable_query()));
  if (at[kRopeKey] >= 0) {
    PHASOR_RETURN_IF_ERROR(shm->TakeInput(request, at[kRopeKey], kFloatTypes,
                                           context.limits, native->mutable_key()));
  }
  PHASOR_RETURN_IF_ERROR(shm->TakeInput(request, at[kRopePositions], kPositionTypes,
                                         context.limits,
                                         native->mutable_positions()->mutable_values()));
  PHASOR_ASSIGN_OR_RETURN(const std::optional<std::string> layout,
                          StringParameter(request->parameters(), "tensor_layout"));
  if (layout) {
    v1::ApplyRopeRequest::TensorLayout value;
    if (!v1::ApplyRopeRequest::TensorLayout_Parse(*layout, &value) ||
        value == v1::ApplyRopeRequest::TENSOR_LAYOUT_UNSPECIFIED) {
      return InvalidField(ParameterPath("", "tensor_layout"),
                          absl::StrCat("must be TOKENS_HEADS_DIM, BATCH_SEQ_HEADS_DIM or "
                                       "BATCH_HEADS_SEQ_DIM, got ",
                                       QuoteForError(*layout, /*max_bytes=*/32)));
    }
    native->set_tensor_layout(value);
  }

  auto* result = NewMessage<v1::ApplyRopeResponse>(arena);
  const HandlerContext bound =
      shm->Bind(context, {{"query", [&] { return result->mutable_query(); }},
                          {"key", [&] { return result->mutable_key(); }}});
  PHASOR_RETURN_IF_ERROR(NativeErrors(HandleApplyRope(bound, *native, result), kRope, profile));
  AddTensorOutput("query", result->mutable_query(), response);
  if (result->has_key()) AddTensorOutput("key", result->mutable_key(), response);
  (*response->mutable_parameters())["attention_factor"].set_double_param(
      result->attention_factor());
  return absl::OkStatus();
}

// The schema entries as a JSON array of {block, offset, width, meaning}.
std::string SchemaJson(const google::protobuf::RepeatedPtrField<v1::SchemaEntry>& schema) {
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const v1::SchemaEntry& entry : schema) {
    entries.push_back({{"block", entry.block()},
                       {"offset", entry.offset()},
                       {"width", entry.width()},
                       {"meaning", entry.meaning()}});
  }
  // Every string is the server's own or checked UTF-8; `replace` keeps a
  // slip from throwing.
  return entries.dump(/*indent=*/-1, /*indent_char=*/' ', /*ensure_ascii=*/false,
                      nlohmann::ordered_json::error_handler_t::replace);
}

absl::Status InferTemporal(const HandlerContext& context, SharedMemoryTensors* shm,
                           const v1::Profile& profile, const InputIndices& at,
                           ModelInferRequest* request, ModelInferResponse* response,
                           google::protobuf::Arena* arena) {
  auto* native = NewMessage<v1::EncodeObservationsRequest>(arena);
  native->set_profile(profile.name());
  v1::Observations* observations = native->mutable_observations();
  const struct {
    TemporalInput input;
    absl::Span<const v1::DType> dtypes;
    v1::Tensor* (v1::Observations::*field)();
  } tensors[] = {
      {kTimestamps, kTimeTypes, &v1::Observations::mutable_timestamps},
      {kValues, kValueTypes, &v1::Observations::mutable_values},
      {kMask, kMaskTypes, &v1::Observations::mutable_mask},
      {kEventTimes, kTimeTypes, &v1::Observations::mutable_event_times},
      {kEventChannels, kInt32Type, &v1::Observations::mutable_event_channels},
      {kEventValues, kValueTypes, &v1::Observations::mutable_event_values},
      {kTemporalContent, kFloatTypes, &v1::Observations::mutable_content},
      {kSeriesOffsets, kInt64Type, &v1::Observations::mutable_series_offsets},
      {kTimeZoneIndex, kInt32Type, &v1::Observations::mutable_time_zone_index},
  };
  for (const auto& tensor : tensors) {
    if (at[tensor.input] < 0) continue;
    PHASOR_RETURN_IF_ERROR(shm->TakeInput(request, at[tensor.input], tensor.dtypes,
                                           context.limits, (observations->*tensor.field)()));
  }
  if (at[kChannelNames] >= 0) {
    PHASOR_RETURN_IF_ERROR(TakeNames(request, at[kChannelNames], context.limits,
                                     observations->mutable_channel_names()));
  }
  if (at[kTimeZones] >= 0) {
    PHASOR_RETURN_IF_ERROR(TakeNames(request, at[kTimeZones], context.limits,
                                     observations->mutable_time_zones()));
  }
  std::vector<std::string> serialized;
  if (at[kState] >= 0) {
    PHASOR_RETURN_IF_ERROR(TakeStates(request, at[kState], context.limits, &serialized));
    const std::string path = InputPath(*request, at[kState]);
    if (serialized.size() != 1) {
      return InvalidField(path, absl::StrCat("holds ", serialized.size(),
                                             " elements; a single series has one state "
                                             "(a panel sends `states`)"));
    }
    PHASOR_RETURN_IF_ERROR(
        ParseState(serialized[0], absl::StrCat(path, "[0]"), native->mutable_state()));
  }
  if (at[kStates] >= 0) {
    PHASOR_RETURN_IF_ERROR(TakeStates(request, at[kStates], context.limits, &serialized));
    const std::string path = InputPath(*request, at[kStates]);
    native->mutable_states()->Reserve(static_cast<int>(serialized.size()));
    for (size_t s = 0; s < serialized.size(); ++s) {
      PHASOR_RETURN_IF_ERROR(
          ParseState(serialized[s], absl::StrCat(path, "[", s, "]"), native->add_states()));
    }
  }
  PHASOR_ASSIGN_OR_RETURN(const v1::DType output_dtype,
                          OutputDTypeParameter(request->parameters()));
  native->set_output_dtype(output_dtype);
  PHASOR_ASSIGN_OR_RETURN(const std::optional<int64_t> num_channels,
                          IntParameter(request->parameters(), "num_channels"));
  if (num_channels) observations->set_num_channels(*num_channels);

  auto* result = NewMessage<v1::EncodeObservationsResponse>(arena);
  const HandlerContext bound =
      shm->Bind(context, {{"features", [&] { return result->mutable_features(); }},
                          {"series_offsets", [&] { return result->mutable_series_offsets(); }}});
  // The states are computed only for a request that returns them (every
  // output when none is named).
  const bool with_states = request->outputs_size() == 0 || OutputRequested(*request, "states") ||
                           OutputRequested(*request, "state");
  PHASOR_RETURN_IF_ERROR(NativeErrors(
      HandleEncodeObservations(bound, *native, /*stream=*/nullptr, result,
                               with_states ? StatesReply::kInclude : StatesReply::kOmit),
      kTemporal, profile));
  ModelInferResponse::InferOutputTensor* features =
      AddTensorOutput("features", result->mutable_features(), response);
  (*features->mutable_parameters())["schema"].set_string_param(SchemaJson(result->schema()));
  std::vector<std::string> states;
  if (observations->has_series_offsets()) {
    if (with_states) {
      states.reserve(static_cast<size_t>(result->states_size()));
      for (const v1::SeriesState& state : result->states()) {
        states.push_back(state.SerializeAsString());
      }
      const int64_t shape[] = {static_cast<int64_t>(states.size())};
      AddBytesOutput("states", states, shape, response);
    }
    AddTensorOutput("series_offsets", result->mutable_series_offsets(), response);
  } else if (with_states) {
    states.push_back(result->state().SerializeAsString());
    const int64_t shape[] = {1};
    AddBytesOutput("state", states, shape, response);
  }
  return absl::OkStatus();
}

absl::Status InferRelativeBias(const HandlerContext& context, SharedMemoryTensors* shm,
                               const v1::Profile& profile, const InputIndices& at,
                               ModelInferRequest* request, ModelInferResponse* response,
                               google::protobuf::Arena* arena) {
  auto* native = NewMessage<v1::RelativeBiasRequest>(arena);
  native->set_profile(profile.name());
  PHASOR_RETURN_IF_ERROR(
      shm->TakeInput(request, at[kQueryPositions], kInt64Type, context.limits,
                      native->mutable_query_positions()->mutable_values()));
  PHASOR_RETURN_IF_ERROR(
      shm->TakeInput(request, at[kKeyPositions], kInt64Type, context.limits,
                      native->mutable_key_positions()->mutable_values()));
  if (at[kTable] >= 0) {
    PHASOR_RETURN_IF_ERROR(shm->TakeInput(request, at[kTable], kFloatTypes,
                                           context.limits, native->mutable_table()));
  }
  PHASOR_ASSIGN_OR_RETURN(const v1::DType output_dtype,
                          OutputDTypeParameter(request->parameters()));
  native->set_output_dtype(output_dtype);
  PHASOR_ASSIGN_OR_RETURN(const std::optional<bool> include_bucket_ids,
                          BoolParameter(request->parameters(), "include_bucket_ids"));
  // Asking for the bucket_ids output asks for the ids.
  native->set_include_bucket_ids(include_bucket_ids.value_or(false) ||
                                 OutputRequested(*request, "bucket_ids"));

  auto* result = NewMessage<v1::RelativeBiasResponse>(arena);
  const HandlerContext bound =
      shm->Bind(context, {{"bias", [&] { return result->mutable_bias(); }},
                          {"bucket_ids", [&] { return result->mutable_bucket_ids(); }}});
  PHASOR_RETURN_IF_ERROR(
      NativeErrors(HandleRelativeBias(bound, *native, result), kRelative, profile));
  if (result->has_bias()) AddTensorOutput("bias", result->mutable_bias(), response);
  if (result->has_bucket_ids()) {
    AddTensorOutput("bucket_ids", result->mutable_bucket_ids(), response);
  }
  (*response->mutable_parameters())["num_buckets"].set_int64_param(result->num_buckets());
  return absl::OkStatus();
}

// --- ModelMetadata ------------------------------------------------------------------

void AddMetadata(google::protobuf::RepeatedPtrField<ModelMetadataResponse::TensorMetadata>* list,
                 absl::string_view name, absl::string_view datatype,
                 std::initializer_list<int64_t> shape) {
  ModelMetadataResponse::TensorMetadata* tensor = list->Add();
  tensor->set_name(std::string(name));
  tensor->set_datatype(std::string(datatype));
  for (const int64_t extent : shape) tensor->add_shape(extent);
}

// F, the feature width, when the spec fixes it: the same for 1 and 2
// channels and with or without content embeddings; -1 otherwise (it then
// depends on the request).
int64_t FixedFeatureWidth(const ProfileRegistry& profiles, const v1::TemporalSpec& wire) {
  const absl::StatusOr<TemporalSpec> spec = TemporalFromProto(wire, profiles);
  if (!spec.ok() || !ValidateTemporalSpec(*spec).ok()) return -1;
  int64_t width = -1;
  const struct {
    int64_t channels;
    int64_t content_dim;
  } probes[] = {{1, 0}, {2, 0}, {1, 3}};
  for (const auto& probe : probes) {
    const absl::StatusOr<FeatureLayout> layout =
        TemporalFeatureLayout(*spec, probe.channels, probe.content_dim);
    if (!layout.ok() || (width >= 0 && layout->width != width)) return -1;
    width = layout->width;
  }
  return width;
}

// Rows of a relative_bias spec's table: N, 2K + 1 for Shaw, 0 for
// time_alibi (no table).
int64_t TableRows(const v1::RelativeBiasSpec& spec) {
  constexpr int64_t kDefaultBuckets = 32;
  switch (spec.kind_case()) {
    case v1::RelativeBiasSpec::kT5:
      return spec.t5().num_buckets() > 0 ? spec.t5().num_buckets() : kDefaultBuckets;
    case v1::RelativeBiasSpec::kShaw:
      return 2 * spec.shaw().max_relative_position() + 1;
    case v1::RelativeBiasSpec::kTimeBuckets:
      return spec.time_buckets().num_buckets() > 0 ? spec.time_buckets().num_buckets()
                                                   : kDefaultBuckets;
    default:
      break;
  }
  return 0;
}

}  // namespace

absl::StatusOr<const v1::Profile*> FindModel(const ProfileRegistry& profiles,
                                             absl::string_view name,
                                             absl::string_view version,
                                             absl::string_view name_field,
                                             absl::string_view version_field) {
  const absl::StatusOr<const v1::Profile*> profile = profiles.FindProfile(name, name_field);
  if (!profile.ok() || InterfaceOf((*profile)->spec()) == nullptr) {
    return FieldError(absl::StatusCode::kNotFound, name_field,
                      absl::StrCat("unknown model ", QuoteModel(name),
                                   ": the server's models are its profiles "
                                   "(ListProfiles lists them)"));
  }
  if (!version.empty() && version != kModelVersion) {
    return FieldError(absl::StatusCode::kNotFound, version_field,
                      absl::StrCat("model ", QuoteModel(name), " has no version ",
                                   QuoteForError(version, /*max_bytes=*/32, "'"),
                                   "; its only version is '", kModelVersion, "'"));
  }
  return *profile;
}

void FillModelMetadata(const ProfileRegistry& profiles, const v1::Profile& profile,
                       ModelMetadataResponse* response) {
  response->set_name(profile.name());
  response->add_versions(std::string(kModelVersion));
  const ModelInterface* model = InterfaceOf(profile.spec());
  if (model == nullptr) return;
  response->set_platform(absl::StrCat("phasor_", model->kind));
  auto* inputs = response->mutable_inputs();
  auto* outputs = response->mutable_outputs();
  const v1::EncoderSpec& spec = profile.spec();
  switch (spec.kind_case()) {
    case v1::EncoderSpec::kPositional: {
      int64_t dim = -1;
      if (spec.positional().has_sinusoidal()) {
        dim = spec.positional().sinusoidal().dim();
      } else if (spec.positional().has_learned()) {
        const absl::StatusOr<const LearnedTable*> table =
            profiles.FindLearnedTable(spec.positional().learned().table(), "table");
        if (table.ok()) dim = (*table)->dim();
      }
      AddMetadata(inputs, "positions", "INT64", {-1});
      AddMetadata(inputs, "content", "FP32", {-1, dim});
      AddMetadata(outputs, "encodings", "FP32", {-1, dim});
      break;
    }
    case v1::EncoderSpec::kRope:
      // [T, H, D] in the default layout; the head dimension D (>=
      // rotary_dim) comes with the tensors.
      AddMetadata(inputs, "query", "FP32", {-1, -1, -1});
      AddMetadata(inputs, "key", "FP32", {-1, -1, -1});
      AddMetadata(inputs, "positions", "INT64", {-1});
      AddMetadata(outputs, "query", "FP32", {-1, -1, -1});
      AddMetadata(outputs, "key", "FP32", {-1, -1, -1});
      break;
    case v1::EncoderSpec::kTemporal: {
      AddMetadata(inputs, "timestamps", "INT64", {-1});
      AddMetadata(inputs, "values", "FP32", {-1, -1});
      AddMetadata(inputs, "mask", "BOOL", {-1, -1});
      AddMetadata(inputs, "event_times", "INT64", {-1});
      AddMetadata(inputs, "event_channels", "INT32", {-1});
      AddMetadata(inputs, "event_values", "FP32", {-1});
      AddMetadata(inputs, "content", "FP32", {-1, -1});
      AddMetadata(inputs, "series_offsets", "INT64", {-1});
      AddMetadata(inputs, "time_zone_index", "INT32", {-1});
      AddMetadata(inputs, "channel_names", "BYTES", {-1});
      AddMetadata(inputs, "time_zones", "BYTES", {-1});
      AddMetadata(inputs, "state", "BYTES", {1});
      AddMetadata(inputs, "states", "BYTES", {-1});
      AddMetadata(outputs, "features", "FP32",
                  {-1, FixedFeatureWidth(profiles, spec.temporal())});
      AddMetadata(outputs, "state", "BYTES", {1});
      AddMetadata(outputs, "states", "BYTES", {-1});
      AddMetadata(outputs, "series_offsets", "INT64", {-1});
      break;
    }
    case v1::EncoderSpec::kRelativeBias: {
      const v1::RelativeBiasSpec& relative = spec.relative_bias();
      int64_t heads = -1;
      if (relative.has_time_alibi()) {
        heads = relative.time_alibi().slopes_size() > 0 ? relative.time_alibi().slopes_size()
                                                        : relative.time_alibi().num_heads();
      } else if (!relative.table().empty()) {
        const absl::StatusOr<const LearnedTable*> table =
            profiles.FindLearnedTable(relative.table(), "table");
        if (table.ok()) heads = (*table)->dim();
      }
      AddMetadata(inputs, "query_positions", "INT64", {-1});
      AddMetadata(inputs, "key_positions", "INT64", {-1});
      if (!relative.has_time_alibi()) {
        AddMetadata(inputs, "table", "FP32", {TableRows(relative), heads});
      }
      AddMetadata(outputs, "bias", "FP32", {heads, -1, -1});
      if (!relative.has_time_alibi()) AddMetadata(outputs, "bucket_ids", "INT32", {-1, -1});
      break;
    }
    case v1::EncoderSpec::KIND_NOT_SET:
      break;
  }
}

absl::Status HandleModelInfer(const HandlerContext& context, ModelInferRequest* request,
                              ModelInferResponse* response,
                              const SharedMemoryRegistry* shared_memory) {
  PHASOR_ASSIGN_OR_RETURN(const v1::Profile* profile,
                          FindModel(*context.profiles, request->model_name(),
                                    request->model_version(), "model_name", "model_version"));
  const ModelInterface& model = *InterfaceOf(profile->spec());
  // Shared memory first: the parameters leave the tensors, and inputs not
  // read in place join raw_input_contents, so what follows sees a plain
  // request.
  const SharedMemoryRegistry* registry =
      shared_memory != nullptr && shared_memory->enabled() ? shared_memory : nullptr;
  SharedMemoryTensors shm;
  PHASOR_RETURN_IF_ERROR(shm.Take(registry, request));
  PHASOR_RETURN_IF_ERROR(CheckInferRequestForm(*request));
  PHASOR_RETURN_IF_ERROR(CheckParameterKeys(request->parameters(), "", model.parameters,
                                            "this model's requests"));
  PHASOR_ASSIGN_OR_RETURN(const InputIndices at,
                          MatchInputs(*request, model, profile->name()));
  PHASOR_RETURN_IF_ERROR(CheckRequestedOutputs(*request, model, profile->name()));
  response->set_model_name(profile->name());
  response->set_model_version(std::string(kModelVersion));
  response->set_id(request->id());

  // The native messages live on the request's arena when it has one (the
  // service's), else on one of their own.
  google::protobuf::Arena local_arena;
  google::protobuf::Arena* arena =
      request->GetArena() != nullptr ? request->GetArena() : &local_arena;
  // Inputs read in place from shared memory reach the native handler's
  // CheckTensor through this scope (the handler runs on this thread).
  const ScopedTensorBytes in_place(&shm.in_place_bytes());
  switch (profile->spec().kind_case()) {
    case v1::EncoderSpec::kPositional:
      PHASOR_RETURN_IF_ERROR(
          InferPositional(context, &shm, *profile, at, request, response, arena));
      break;
    case v1::EncoderSpec::kRope:
      PHASOR_RETURN_IF_ERROR(InferRope(context, &shm, *profile, at, request, response, arena));
      break;
    case v1::EncoderSpec::kTemporal:
      PHASOR_RETURN_IF_ERROR(InferTemporal(context, &shm, *profile, at, request, response, arena));
      break;
    case v1::EncoderSpec::kRelativeBias:
      PHASOR_RETURN_IF_ERROR(
          InferRelativeBias(context, &shm, *profile, at, request, response, arena));
      break;
    case v1::EncoderSpec::KIND_NOT_SET:
      break;  // FindModel found a kind.
  }
  PHASOR_RETURN_IF_ERROR(SelectOutputs(*request, response));
  return shm.Finish(response);
}

std::vector<absl::string_view> InferenceExtensions(bool system_shared_memory) {
  if (system_shared_memory) return {"parameters", "system_shared_memory"};
  return {"parameters"};
}

}  // namespace phasor::server
