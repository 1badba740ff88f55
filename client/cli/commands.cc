#include "client/cli/commands.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/cli/common.h"
#include "client/cli/panel_csv.h"
#include "client/tensor_io.h"
#include "core/base/errors.h"
#include "core/base/file.h"
#include "core/base/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace {
constexpr double kUnset = std::numeric_limits<double>::quiet_NaN();
}  // namespace

// Which encoder: a server profile, a full text-format spec, or the shortcut
// flags below.
ABSL_FLAG(std::string, profile, "", "Name of a server-side profile");
ABSL_FLAG(std::string, spec, "",
          "phasor.v1.EncoderSpec in protobuf text format, e.g. "
          "'positional { sinusoidal { dim: 64 } }'; overrides the shortcut "
          "flags");

// Positions.
ABSL_FLAG(std::string, positions, "",
          "File (.npy/CSV) of positions [N]: integers are token indices, "
          "reals are continuous positions. Overrides --start/--count/--step");
ABSL_FLAG(int64_t, start, 0, "First position of the range");
ABSL_FLAG(int64_t, count, -1,
          "Number of positions (default: rows of the input tensor)");
ABSL_FLAG(int64_t, step, 1, "Distance between consecutive positions");

// Sinusoidal / learned shortcut.
ABSL_FLAG(int64_t, dim, 0, "Sinusoidal encoding width (even)");
ABSL_FLAG(double, base, kUnset, "Frequency base (server default 10000)");
ABSL_FLAG(std::string, layout, "",
          "Sinusoidal: interleaved | split_sin_cos | split_cos_sin; "
          "RoPE: half | interleaved");
ABSL_FLAG(std::string, frequencies, "",
          "Sinusoidal frequency ladder: vaswani | tensor2tensor");
ABSL_FLAG(std::string, learned_table, "",
          "Use this learned table (from the server's profiles) instead of "
          "sinusoids");
ABSL_FLAG(std::string, content, "",
          "Content embeddings (.npy/CSV) [N, dim] added to the encodings, or "
          "token embeddings for encode-observations");
ABSL_FLAG(double, content_scale, kUnset,
          "Multiplier of --content, e.g. sqrt(dim) (server default 1)");
ABSL_FLAG(std::string, output_dtype, "",
          "float32 (default) | float16 | bfloat16 | float64, where the RPC "
          "allows it");

// RoPE shortcut.
ABSL_FLAG(std::string, query, "", "Queries (.npy [T,H,D], or CSV [T,H*D])");
ABSL_FLAG(std::string, key, "", "Keys (.npy [T,Hkv,D], or CSV [T,Hkv*D])");
ABSL_FLAG(int64_t, num_heads, 1,
          "Heads: splits CSV query columns (apply-rope); heads of the bias "
          "(alibi)");
ABSL_FLAG(int64_t, num_kv_heads, 0,
          "Heads that split CSV key columns (default --num_heads)");
ABSL_FLAG(int64_t, rotary_dim, 0,
          "Rotated channels per head (apply-rope: default the head dim; "
          "describe: selects a RoPE spec)");
ABSL_FLAG(std::string, scaling, "",
          "RoPE scaling: linear | ntk | dynamic | yarn | llama3 (others via "
          "--spec)");
ABSL_FLAG(double, factor, kUnset, "RoPE scaling factor");
ABSL_FLAG(int64_t, max_position_embeddings, 0,
          "The model's max_position_embeddings (dynamic, yarn)");
ABSL_FLAG(int64_t, original_max_position_embeddings, 0,
          "Pre-training context length (yarn, llama3)");
ABSL_FLAG(int64_t, seq_len, 0, "Sequence length for dynamic scaling");
ABSL_FLAG(bool, fold_attention_factor, true,
          "Multiply the scaling's attention factor into the outputs");
ABSL_FLAG(std::string, key_out, "", "apply-rope: file for the rotated keys");
ABSL_FLAG(std::string, cos_out, "", "rope-tables: file for the cos table");
ABSL_FLAG(std::string, sin_out, "", "rope-tables: file for the sin table");

// ALiBi.
ABSL_FLAG(int64_t, q_len, 0, "ALiBi query length (with --k_len: full bias)");
ABSL_FLAG(int64_t, k_len, 0, "ALiBi key length");
ABSL_FLAG(bool, causal, false, "ALiBi: mask future keys with -inf");
ABSL_FLAG(std::string, slopes_out, "", "alibi: file for the slopes");

// Observations.
ABSL_FLAG(std::string, timestamps, "",
          "Wide observations: row times [T] since the Unix epoch, in "
          "--time_unit (int64 ns without it)");
ABSL_FLAG(std::string, values, "",
          "Wide observations: values [T, C], NaN (or an empty CSV cell) = "
          "not observed");
ABSL_FLAG(std::string, mask, "", "Wide observations: observed mask [T, C]");
ABSL_FLAG(std::string, event_times, "",
          "Long observations: times [N], as --timestamps");
ABSL_FLAG(std::string, time_unit, "",
          "Unit of numeric times (--timestamps, --event_times, the "
          "--observations_csv time column): s | ms | us | ns. Without it "
          "integers are ns, except when all of them are within the first "
          "day after the epoch as ns (seconds or milliseconds, then: an "
          "error), and decimals are an error");
ABSL_FLAG(std::string, event_channels, "", "Long observations: channels [N]");
ABSL_FLAG(std::string, event_values, "", "Long observations: values [N]");
ABSL_FLAG(int64_t, num_channels, 0, "Long observations: channel count");
ABSL_FLAG(std::string, channel_names, "", "Comma-separated channel names");
ABSL_FLAG(std::string, state, "",
          "Text-format phasor.v1.SeriesState to continue a series from");
ABSL_FLAG(std::string, state_out, "",
          "Write the series state after this call here (text format)");
ABSL_FLAG(bool, stream, false,
          "encode-observations: send the series in chunks over "
          "EncodeObservationsStream");
ABSL_FLAG(int64_t, chunk_rows, 1024, "Rows (or events) per streamed chunk");

// Panels from one CSV table (client/cli/panel_csv.h).
ABSL_FLAG(std::string, observations_csv, "",
          "encode-observations: a CSV table of many series, long "
          "(series,time,channel,value) or wide (series,time,<channels...>), "
          "sent as one panel; the client splits it to fit the message limit");
ABSL_FLAG(std::string, csv_layout, "auto",
          "--observations_csv layout: auto (long when the other columns are "
          "exactly channel,value) | long | wide");
ABSL_FLAG(std::string, series_column, "series",
          "--observations_csv: the column naming each row's series");
ABSL_FLAG(std::string, time_column, "time",
          "--observations_csv: the time column: numbers of --time_unit since "
          "the epoch (int ns without it), or ISO 8601 (UTC without an "
          "offset)");
ABSL_FLAG(std::string, time_zone_column, "",
          "--observations_csv: a column with each series' IANA time zone for "
          "the calendar block (one zone per series); empty = the spec's");
ABSL_FLAG(std::string, series_offsets_out, "",
          "--observations_csv: write the series offsets [S+1] here (.npy or "
          "CSV); with a .npy --out they default to <out>.series_offsets.npy");
ABSL_FLAG(int32_t, max_in_flight, 4,
          "--observations_csv: sub-calls in flight when the panel is split");
ABSL_FLAG(int64_t, max_call_bytes, 0,
          "--observations_csv: largest request or response per sub-call, "
          "bytes; 0 = half of --max_message_bytes");

// Describe.
ABSL_FLAG(int64_t, num_offsets, 0,
          "Describe: length K of the similarity curve (server default 64)");
ABSL_FLAG(double, offset_step, kUnset,
          "Describe: spacing of the offsets (server default 1)");
ABSL_FLAG(bool, show_similarity, false,
          "Describe: also print the similarity curve");

// Health.
ABSL_FLAG(std::string, service, "",
          "Health: service to ask about; empty = the whole server");

namespace phasor::cli {
namespace {

bool IsSet(double value) { return !std::isnan(value); }

// Collects protobuf text-format errors into one message.
class TextFormatErrors final : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    absl::StrAppend(&text_, text_.empty() ? "" : "; ", "line ", line + 1,
                    " column ", column + 1, ": ", message);
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

absl::Status ParseText(absl::string_view flag, const std::string& text,
                       google::protobuf::Message* message) {
  TextFormatErrors errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, message)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": not a text-format ", message->GetTypeName(), ": ",
        errors.text()));
  }
  return absl::OkStatus();
}

// Parses an enum flag value case-insensitively with the proto's own names.
template <typename Enum>
absl::StatusOr<Enum> ParseEnum(absl::string_view flag, absl::string_view text,
                               bool (*parse)(const std::string&, Enum*),
                               absl::string_view choices) {
  Enum value;
  if (!parse(absl::AsciiStrToUpper(text), &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": '", text, "' is not one of ", choices));
  }
  return value;
}

absl::StatusOr<v1::DType> OutputDTypeFromFlag() {
  const std::string text = absl::GetFlag(FLAGS_output_dtype);
  if (text.empty()) return v1::DTYPE_UNSPECIFIED;
  return ParseEnum<v1::DType>("output_dtype", text, &v1::DType_Parse,
                              "float32, float16, bfloat16, float64");
}

// --spec if given, else nothing: callers then build one from shortcuts.
absl::StatusOr<bool> SpecFromTextFlag(v1::EncoderSpec* spec) {
  const std::string text = absl::GetFlag(FLAGS_spec);
  if (text.empty()) return false;
  PHASOR_RETURN_IF_ERROR(ParseText("spec", text, spec));
  return true;
}

// --positions, or the range --start/--count/--step; `default_count` (-1 for
// none) stands in for an absent --count.
absl::StatusOr<v1::Positions> PositionsFromFlags(int64_t default_count) {
  v1::Positions positions;
  const std::string path = absl::GetFlag(FLAGS_positions);
  if (!path.empty()) {
    PHASOR_ASSIGN_OR_RETURN(v1::Tensor values, ReadInput("positions", path));
    PHASOR_ASSIGN_OR_RETURN(
        const int64_t count,
        CheckedElementCount(values, "--positions"));
    PHASOR_ASSIGN_OR_RETURN(values,
                            ReshapeTensor(std::move(values), {count},
                                          "--positions"));
    const bool integral = values.dtype() == v1::INT64 ||
                          values.dtype() == v1::INT32 ||
                          values.dtype() == v1::UINT8;
    PHASOR_ASSIGN_OR_RETURN(
        *positions.mutable_values(),
        CastTensor(std::move(values), integral ? v1::INT64 : v1::FLOAT64,
                   "--positions"));
    return positions;
  }
  int64_t count = absl::GetFlag(FLAGS_count);
  if (count < 0) count = default_count;
  if (count < 0) {
    return absl::InvalidArgumentError(
        "give --count (with --start, --step) or --positions FILE");
  }
  v1::Positions::Range* range = positions.mutable_range();
  range->set_start(absl::GetFlag(FLAGS_start));
  range->set_count(count);
  if (absl::GetFlag(FLAGS_step) != 1) range->set_step(absl::GetFlag(FLAGS_step));
  return positions;
}

absl::StatusOr<v1::PositionalSpec> PositionalSpecFromFlags() {
  v1::PositionalSpec spec;
  const std::string table = absl::GetFlag(FLAGS_learned_table);
  if (!table.empty()) {
    spec.mutable_learned()->set_table(table);
    return spec;
  }
  v1::SinusoidalSpec* sinusoidal = spec.mutable_sinusoidal();
  sinusoidal->set_dim(absl::GetFlag(FLAGS_dim));
  if (IsSet(absl::GetFlag(FLAGS_base))) {
    sinusoidal->set_base(absl::GetFlag(FLAGS_base));
  }
  const std::string layout = absl::GetFlag(FLAGS_layout);
  if (!layout.empty()) {
    PHASOR_ASSIGN_OR_RETURN(
        const auto value,
        ParseEnum<v1::SinusoidalSpec::Layout>(
            "layout", layout, &v1::SinusoidalSpec::Layout_Parse,
            "interleaved, split_sin_cos, split_cos_sin"));
    sinusoidal->set_layout(value);
  }
  const std::string frequencies = absl::GetFlag(FLAGS_frequencies);
  if (!frequencies.empty()) {
    PHASOR_ASSIGN_OR_RETURN(
        const auto value,
        ParseEnum<v1::SinusoidalSpec::Frequencies>(
            "frequencies", frequencies,
            &v1::SinusoidalSpec::Frequencies_Parse, "vaswani, tensor2tensor"));
    sinusoidal->set_frequencies(value);
  }
  return spec;
}

absl::StatusOr<v1::RopeScaling> RopeScalingFromFlags() {
  v1::RopeScaling scaling;
  const std::string kind = absl::AsciiStrToLower(absl::GetFlag(FLAGS_scaling));
  const double factor = absl::GetFlag(FLAGS_factor);
  const int64_t original = absl::GetFlag(FLAGS_original_max_position_embeddings);
  if (kind.empty() || kind == "none") return scaling;
  if (kind != "yarn" && !IsSet(factor)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--scaling=", kind, " needs --factor"));
  }
  if (kind == "linear") {
    scaling.mutable_linear()->set_factor(factor);
  } else if (kind == "ntk") {
    scaling.mutable_ntk()->set_factor(factor);
  } else if (kind == "dynamic") {
    scaling.mutable_dynamic()->set_factor(factor);
  } else if (kind == "yarn") {
    v1::RopeScaling::Yarn* yarn = scaling.mutable_yarn();
    if (IsSet(factor)) yarn->set_factor(factor);
    if (original > 0) yarn->set_original_max_position_embeddings(original);
  } else if (kind == "llama3") {
    v1::RopeScaling::Llama3* llama3 = scaling.mutable_llama3();
    llama3->set_factor(factor);
    if (original > 0) llama3->set_original_max_position_embeddings(original);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--scaling: '", kind,
        "' is not one of linear, ntk, dynamic, yarn, llama3 (longrope: "
        "use --spec)"));
  }
  return scaling;
}

absl::StatusOr<v1::RopeSpec> RopeSpecFromFlags() {
  v1::RopeSpec spec;
  spec.set_rotary_dim(absl::GetFlag(FLAGS_rotary_dim));
  if (IsSet(absl::GetFlag(FLAGS_base))) spec.set_base(absl::GetFlag(FLAGS_base));
  const std::string layout = absl::GetFlag(FLAGS_layout);
  if (!layout.empty()) {
    PHASOR_ASSIGN_OR_RETURN(
        const auto value,
        ParseEnum<v1::RopeSpec::Layout>("layout", layout,
                                        &v1::RopeSpec::Layout_Parse,
                                        "half, interleaved"));
    spec.set_layout(value);
  }
  PHASOR_ASSIGN_OR_RETURN(*spec.mutable_scaling(), RopeScalingFromFlags());
  if (!absl::GetFlag(FLAGS_fold_attention_factor)) {
    spec.set_fold_attention_factor(false);
  }
  spec.set_max_position_embeddings(absl::GetFlag(FLAGS_max_position_embeddings));
  spec.set_seq_len(absl::GetFlag(FLAGS_seq_len));
  return spec;
}

// Fills a request's `config` oneof: --profile, --spec, or `shortcut()`.
template <typename Request, typename Shortcut>
absl::Status SetConfig(Request* request, Shortcut shortcut) {
  const std::string profile = absl::GetFlag(FLAGS_profile);
  if (!profile.empty()) {
    request->set_profile(profile);
    return absl::OkStatus();
  }
  PHASOR_ASSIGN_OR_RETURN(const bool from_text,
                          SpecFromTextFlag(request->mutable_spec()));
  if (from_text) return absl::OkStatus();
  return shortcut(request->mutable_spec());
}

// fp32/fp16/bf16 stay as they are; anything else becomes float32 (for
// inputs the RPCs take in those three dtypes).
absl::StatusOr<v1::Tensor> NarrowFloat(v1::Tensor tensor,
                                       absl::string_view field) {
  if (tensor.dtype() == v1::FLOAT32 || tensor.dtype() == v1::FLOAT16 ||
      tensor.dtype() == v1::BFLOAT16) {
    return tensor;
  }
  return CastTensor(std::move(tensor), v1::FLOAT32, field);
}

// fp32/fp64 stay as they are; anything else becomes float64 (observation
// values, where NaN marks a missing value).
absl::StatusOr<v1::Tensor> WideFloat(v1::Tensor tensor,
                                     absl::string_view field) {
  if (tensor.dtype() == v1::FLOAT32 || tensor.dtype() == v1::FLOAT64) {
    return tensor;
  }
  return CastTensor(std::move(tensor), v1::FLOAT64, field);
}

// A [T, H, D] float tensor for RoPE: .npy as is, a 2-D CSV [T, H*D] split
// into `heads`; float64 narrowed to float32 (the RPC takes fp32/fp16/bf16).
absl::StatusOr<v1::Tensor> ReadHeads(absl::string_view flag,
                                     const std::string& path, int64_t heads) {
  PHASOR_ASSIGN_OR_RETURN(v1::Tensor tensor, ReadInput(flag, path));
  const std::string field = absl::StrCat("--", flag);
  if (tensor.shape_size() == 1) {
    tensor.add_shape(1);  // [T] -> [T, 1]: one channel per row.
  }
  if (tensor.shape_size() == 2) {
    const int64_t columns = tensor.shape(1);
    if (heads <= 0 || columns % heads != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", columns, " columns do not split into ", heads,
          " heads"));
    }
    const int64_t rows = tensor.shape(0);
    PHASOR_ASSIGN_OR_RETURN(
        tensor, ReshapeTensor(std::move(tensor),
                              {rows, heads, columns / heads}, field));
  }
  return NarrowFloat(std::move(tensor), field);
}

// A 1-D [N] view of a file that may hold [N] or [N, 1].
absl::StatusOr<v1::Tensor> ReadVector(absl::string_view flag,
                                      const std::string& path,
                                      v1::DType dtype) {
  PHASOR_ASSIGN_OR_RETURN(v1::Tensor tensor, ReadInput(flag, path));
  const std::string field = absl::StrCat("--", flag);
  PHASOR_ASSIGN_OR_RETURN(const int64_t count,
                          CheckedElementCount(tensor, field));
  PHASOR_ASSIGN_OR_RETURN(tensor,
                          ReshapeTensor(std::move(tensor), {count}, field));
  return CastTensor(std::move(tensor), dtype, field);
}

// Rows [begin, end) of a tensor along its first dimension; copies only
// those rows' bytes.
v1::Tensor SliceRows(const v1::Tensor& tensor, int64_t begin, int64_t end) {
  v1::Tensor slice;
  slice.set_dtype(tensor.dtype());
  *slice.mutable_shape() = tensor.shape();
  const int64_t rows = tensor.shape(0);
  const int64_t row_bytes =
      rows == 0 ? 0 : static_cast<int64_t>(tensor.data().size()) / rows;
  slice.set_shape(0, end - begin);
  slice.set_data(tensor.data().data() + begin * row_bytes,
                 static_cast<size_t>((end - begin) * row_bytes));
  return slice;
}

// Times [N] from a file (.npy or CSV, [N] or [N, 1]) as int64 ns, in
// --time_unit: integers exactly (unitless: ns, unless all are within the
// first day after the epoch, panel_csv.h), floats rounded to the nearest ns
// and only with a unit.
absl::StatusOr<v1::Tensor> ReadTimes(absl::string_view flag,
                                     const std::string& path) {
  PHASOR_ASSIGN_OR_RETURN(
      const TimeUnit unit,
      ParseTimeUnit(absl::GetFlag(FLAGS_time_unit), "time_unit"));
  PHASOR_ASSIGN_OR_RETURN(v1::Tensor tensor, ReadInput(flag, path));
  const std::string field = absl::StrCat("--", flag);
  PHASOR_ASSIGN_OR_RETURN(const int64_t count, CheckedElementCount(tensor, field));
  PHASOR_ASSIGN_OR_RETURN(tensor, ReshapeTensor(std::move(tensor), {count}, field));
  const int64_t per_unit = NanosPerUnit(unit);
  const bool integral = tensor.dtype() == v1::INT64 ||
                        tensor.dtype() == v1::INT32 || tensor.dtype() == v1::UINT8;
  std::vector<int64_t> ns(static_cast<size_t>(count));
  if (integral) {
    PHASOR_ASSIGN_OR_RETURN(tensor, CastTensor(std::move(tensor), v1::INT64, field));
    std::memcpy(ns.data(), tensor.data().data(), ns.size() * sizeof(int64_t));
    bool all_in_first_day = count > 0;
    for (size_t i = 0; i < ns.size(); ++i) {
      all_in_first_day = all_in_first_day && ns[i] >= 0 && ns[i] < kNanosPerDay;
      if (ns[i] > std::numeric_limits<int64_t>::max() / per_unit ||
          ns[i] < std::numeric_limits<int64_t>::min() / per_unit) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, "[", i, "]: ", ns[i],
            " is out of the int64 nanosecond range in --time_unit"));
      }
      ns[i] *= per_unit;
    }
    if (unit == TimeUnit::kUnspecified && all_in_first_day) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": every time is within the first day after the epoch as "
                 "nanoseconds (",
          ns.front(), " first): seconds or milliseconds without their unit? ",
          kTimeUnitHint));
    }
  } else {
    if (unit == TimeUnit::kUnspecified) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", DTypeString(tensor.dtype()),
          " times have no unit (decimal seconds read as nanoseconds would "
          "come back wrong); ",
          kTimeUnitHint));
    }
    PHASOR_ASSIGN_OR_RETURN(const std::vector<double> values, TensorToDoubles(tensor));
    for (size_t i = 0; i < values.size(); ++i) {
      const double nanos = values[i] * static_cast<double>(per_unit);
      if (!std::isfinite(nanos) || std::abs(nanos) >= 9.2e18) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, "[", i, "]: ", values[i],
            " is not a time in the int64 nanosecond range"));
      }
      ns[i] = std::llround(nanos);
    }
  }
  return TensorFromInt64s(ns, {count});
}

absl::StatusOr<v1::Observations> ObservationsFromFlags() {
  v1::Observations observations;
  const std::string timestamps = absl::GetFlag(FLAGS_timestamps);
  const std::string event_times = absl::GetFlag(FLAGS_event_times);
  if (timestamps.empty() == event_times.empty()) {
    return absl::InvalidArgumentError(
        "give --timestamps and --values (wide) or --event_times, "
        "--event_channels and --event_values (long)");
  }
  if (!timestamps.empty()) {
    PHASOR_ASSIGN_OR_RETURN(
        *observations.mutable_timestamps(),
        ReadTimes("timestamps", timestamps));
    const std::string values_path = absl::GetFlag(FLAGS_values);
    if (values_path.empty()) {
      return absl::InvalidArgumentError("--timestamps needs --values");
    }
    PHASOR_ASSIGN_OR_RETURN(v1::Tensor values, ReadInput("values", values_path));
    if (values.shape_size() == 1) values.add_shape(1);  // One channel.
    PHASOR_ASSIGN_OR_RETURN(*observations.mutable_values(),
                            WideFloat(std::move(values), "--values"));
    const std::string mask_path = absl::GetFlag(FLAGS_mask);
    if (!mask_path.empty()) {
      PHASOR_ASSIGN_OR_RETURN(v1::Tensor mask, ReadInput("mask", mask_path));
      if (mask.shape_size() == 1) mask.add_shape(1);
      if (mask.dtype() != v1::BOOL) {
        PHASOR_ASSIGN_OR_RETURN(mask, CastTensor(std::move(mask), v1::UINT8, "--mask"));
      }
      *observations.mutable_mask() = std::move(mask);
    }
  } else {
    const std::string channels = absl::GetFlag(FLAGS_event_channels);
    const std::string values = absl::GetFlag(FLAGS_event_values);
    if (channels.empty() || values.empty()) {
      return absl::InvalidArgumentError(
          "--event_times needs --event_channels and --event_values");
    }
    PHASOR_ASSIGN_OR_RETURN(*observations.mutable_event_times(),
                            ReadTimes("event_times", event_times));
    PHASOR_ASSIGN_OR_RETURN(
        *observations.mutable_event_channels(),
        ReadVector("event_channels", channels, v1::INT32));
    PHASOR_ASSIGN_OR_RETURN(v1::Tensor event_values,
                            ReadVector("event_values", values, v1::FLOAT64));
    *observations.mutable_event_values() = std::move(event_values);
    observations.set_num_channels(absl::GetFlag(FLAGS_num_channels));
  }
  const std::string content = absl::GetFlag(FLAGS_content);
  if (!content.empty()) {
    PHASOR_ASSIGN_OR_RETURN(v1::Tensor tensor, ReadInput("content", content));
    PHASOR_ASSIGN_OR_RETURN(*observations.mutable_content(),
                            NarrowFloat(std::move(tensor), "--content"));
  }
  const std::string names = absl::GetFlag(FLAGS_channel_names);
  if (!names.empty()) {
    for (absl::string_view name : absl::StrSplit(names, ',')) {
      observations.add_channel_names(std::string(absl::StripAsciiWhitespace(name)));
    }
  }
  return observations;
}

// The observations cut into chunks of `chunk_rows` rows (wide) or events
// (long); the first chunk alone carries the spec or profile and the state.
// Each observation byte is copied once, into its chunk.
absl::StatusOr<std::vector<v1::EncodeObservationsRequest>> Chunk(
    v1::EncodeObservationsRequest whole, int64_t chunk_rows) {
  if (chunk_rows <= 0) {
    return absl::InvalidArgumentError("--chunk_rows: must be positive");
  }
  v1::Observations all;
  all.Swap(whole.mutable_observations());
  whole.clear_observations();
  const bool wide = all.has_timestamps();
  const int64_t rows =
      wide ? all.timestamps().shape(0) : all.event_times().shape(0);
  std::vector<v1::EncodeObservationsRequest> chunks;
  for (int64_t begin = 0; begin < rows || begin == 0; begin += chunk_rows) {
    const int64_t end = std::min(rows, begin + chunk_rows);
    v1::EncodeObservationsRequest chunk;
    if (begin == 0) chunk = whole;  // Everything but the observations.
    chunk.set_output_dtype(whole.output_dtype());
    v1::Observations* part = chunk.mutable_observations();
    *part->mutable_channel_names() = all.channel_names();
    part->set_num_channels(all.num_channels());
    if (wide) {
      *part->mutable_timestamps() = SliceRows(all.timestamps(), begin, end);
      *part->mutable_values() = SliceRows(all.values(), begin, end);
      if (all.has_mask()) *part->mutable_mask() = SliceRows(all.mask(), begin, end);
    } else {
      *part->mutable_event_times() = SliceRows(all.event_times(), begin, end);
      *part->mutable_event_channels() =
          SliceRows(all.event_channels(), begin, end);
      *part->mutable_event_values() = SliceRows(all.event_values(), begin, end);
    }
    if (all.has_content()) {
      *part->mutable_content() = SliceRows(all.content(), begin, end);
    }
    chunks.push_back(std::move(chunk));
    if (end == rows) break;
  }
  return chunks;
}

void PrintSchema(const v1::EncodeObservationsResponse& response) {
  int name_width = 5;  // "block"
  for (const v1::SchemaEntry& entry : response.schema()) {
    name_width = std::max(name_width, static_cast<int>(entry.block().size()));
  }
  std::cout << "schema:\n";
  std::cout << absl::StrFormat("  %-*s %7s %6s  %s\n", name_width, "block",
                               "offset", "width", "meaning");
  for (const v1::SchemaEntry& entry : response.schema()) {
    std::cout << absl::StrFormat("  %-*s %7d %6d  %s\n", name_width,
                                 entry.block(), entry.offset(), entry.width(),
                                 entry.meaning());
  }
}

absl::Status WriteState(const v1::SeriesState& state) {
  const std::string path = absl::GetFlag(FLAGS_state_out);
  if (path.empty()) return absl::OkStatus();
  std::string text;
  google::protobuf::TextFormat::PrintToString(state, &text);
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    return absl::PermissionDeniedError(
        absl::StrCat("--state_out: cannot write ", path));
  }
  std::cerr << "wrote series state to " << path << "\n";
  return absl::OkStatus();
}

absl::StatusOr<v1::DescribeRequest> DescribeRequestFromFlags() {
  v1::DescribeRequest request;
  PHASOR_RETURN_IF_ERROR(SetConfig(&request, [](v1::EncoderSpec* spec)
                                                 -> absl::Status {
    if (absl::GetFlag(FLAGS_rotary_dim) > 0) {
      PHASOR_ASSIGN_OR_RETURN(*spec->mutable_rope(), RopeSpecFromFlags());
      return absl::OkStatus();
    }
    if (absl::GetFlag(FLAGS_dim) <= 0) {
      return absl::InvalidArgumentError(
          "give --dim (sinusoidal), --rotary_dim (RoPE), --spec or --profile");
    }
    PHASOR_ASSIGN_OR_RETURN(*spec->mutable_positional(),
                            PositionalSpecFromFlags());
    return absl::OkStatus();
  }));
  if (absl::GetFlag(FLAGS_num_offsets) > 0) {
    request.set_num_offsets(absl::GetFlag(FLAGS_num_offsets));
  }
  if (IsSet(absl::GetFlag(FLAGS_offset_step))) {
    request.set_offset_step(absl::GetFlag(FLAGS_offset_step));
  }
  return request;
}

absl::string_view SpecKind(const v1::EncoderSpec& spec) {
  switch (spec.kind_case()) {
    case v1::EncoderSpec::kPositional:
      return spec.positional().has_learned() ? "positional.learned"
                                             : "positional.sinusoidal";
    case v1::EncoderSpec::kRope:
      return "rope";
    case v1::EncoderSpec::kTemporal:
      return "temporal";
    case v1::EncoderSpec::kRelativeBias:
      return "relative_bias";
    default:
      return "-";
  }
}

}  // namespace

absl::Status RunEncodePositions(const EncoderClient& client) {
  v1::EncodePositionsRequest request;
  int64_t content_rows = -1;
  const std::string content = absl::GetFlag(FLAGS_content);
  if (!content.empty()) {
    PHASOR_ASSIGN_OR_RETURN(v1::Tensor tensor, ReadInput("content", content));
    PHASOR_ASSIGN_OR_RETURN(*request.mutable_content(),
                            NarrowFloat(std::move(tensor), "--content"));
    if (request.content().shape_size() > 0) {
      content_rows = request.content().shape(0);
    }
    if (IsSet(absl::GetFlag(FLAGS_content_scale))) {
      request.set_content_scale(absl::GetFlag(FLAGS_content_scale));
    }
  }
  PHASOR_ASSIGN_OR_RETURN(*request.mutable_positions(),
                          PositionsFromFlags(content_rows));
  PHASOR_RETURN_IF_ERROR(SetConfig(&request, [](v1::EncoderSpec* spec)
                                                 -> absl::Status {
    PHASOR_ASSIGN_OR_RETURN(*spec->mutable_positional(),
                            PositionalSpecFromFlags());
    return absl::OkStatus();
  }));
  PHASOR_ASSIGN_OR_RETURN(const v1::DType output_dtype, OutputDTypeFromFlag());
  request.set_output_dtype(output_dtype);

  PHASOR_ASSIGN_OR_RETURN(const v1::EncodePositionsResponse response,
                          client.EncodePositions(request));
  return Emit(response.encodings(), "encodings", OutFlag());
}

absl::Status RunApplyRope(const EncoderClient& client) {
  const std::string query_path = absl::GetFlag(FLAGS_query);
  if (query_path.empty()) return absl::InvalidArgumentError("give --query");
  const int64_t heads = absl::GetFlag(FLAGS_num_heads);
  v1::ApplyRopeRequest request;
  PHASOR_ASSIGN_OR_RETURN(*request.mutable_query(),
                          ReadHeads("query", query_path, heads));
  const std::string key_path = absl::GetFlag(FLAGS_key);
  if (!key_path.empty()) {
    const int64_t kv_heads = absl::GetFlag(FLAGS_num_kv_heads);
    PHASOR_ASSIGN_OR_RETURN(
        *request.mutable_key(),
        ReadHeads("key", key_path, kv_heads > 0 ? kv_heads : heads));
  }
  PHASOR_ASSIGN_OR_RETURN(*request.mutable_positions(),
                          PositionsFromFlags(request.query().shape(0)));
  PHASOR_RETURN_IF_ERROR(SetConfig(&request, [](v1::EncoderSpec* spec)
                                                 -> absl::Status {
    PHASOR_ASSIGN_OR_RETURN(*spec->mutable_rope(), RopeSpecFromFlags());
    return absl::OkStatus();
  }));

  PHASOR_ASSIGN_OR_RETURN(const v1::ApplyRopeResponse response,
                          client.ApplyRope(request));
  std::cout << "attention_factor: " << response.attention_factor() << "\n";
  PHASOR_RETURN_IF_ERROR(Emit(response.query(), "query", OutFlag()));
  if (response.has_key()) {
    PHASOR_RETURN_IF_ERROR(
        Emit(response.key(), "key", absl::GetFlag(FLAGS_key_out)));
  }
  return absl::OkStatus();
}

absl::Status RunRopeTables(const EncoderClient& client) {
  v1::RopeTablesRequest request;
  PHASOR_ASSIGN_OR_RETURN(*request.mutable_positions(), PositionsFromFlags(-1));
  PHASOR_RETURN_IF_ERROR(SetConfig(&request, [](v1::EncoderSpec* spec)
                                                 -> absl::Status {
    if (absl::GetFlag(FLAGS_rotary_dim) <= 0) {
      return absl::InvalidArgumentError("give --rotary_dim");
    }
    PHASOR_ASSIGN_OR_RETURN(*spec->mutable_rope(), RopeSpecFromFlags());
    return absl::OkStatus();
  }));
  PHASOR_ASSIGN_OR_RETURN(const v1::DType output_dtype, OutputDTypeFromFlag());
  request.set_output_dtype(output_dtype);

  PHASOR_ASSIGN_OR_RETURN(const v1::RopeTablesResponse response,
                          client.RopeTables(request));
  std::cout << "attention_factor: " << response.attention_factor() << "\n";
  std::cout << "inv_freq: "
            << absl::StrJoin(response.inv_freq(), " ",
                             [](std::string* out, double value) {
                               absl::StrAppend(out,
                                               absl::StrFormat("%.10g", value));
                             })
            << "\n";
  PHASOR_RETURN_IF_ERROR(
      Emit(response.cos(), "cos", absl::GetFlag(FLAGS_cos_out)));
  return Emit(response.sin(), "sin", absl::GetFlag(FLAGS_sin_out));
}

absl::Status RunAlibi(const EncoderClient& client) {
  v1::AlibiBiasRequest request;
  request.set_num_heads(absl::GetFlag(FLAGS_num_heads));
  request.set_q_len(absl::GetFlag(FLAGS_q_len));
  request.set_k_len(absl::GetFlag(FLAGS_k_len));
  request.set_causal(absl::GetFlag(FLAGS_causal));
  PHASOR_ASSIGN_OR_RETURN(const v1::DType output_dtype, OutputDTypeFromFlag());
  request.set_output_dtype(output_dtype);

  PHASOR_ASSIGN_OR_RETURN(const v1::AlibiBiasResponse response,
                          client.AlibiBias(request));
  PHASOR_RETURN_IF_ERROR(
      Emit(response.slopes(), "slopes", absl::GetFlag(FLAGS_slopes_out)));
  if (response.has_bias()) {
    PHASOR_RETURN_IF_ERROR(Emit(response.bias(), "bias", OutFlag()));
  }
  return absl::OkStatus();
}

namespace {

// `text` as one CSV field: quoted when it holds a comma, quote or line break.
std::string CsvField(absl::string_view text) {
  if (text.find_first_of(",\"\r\n") == absl::string_view::npos) {
    return std::string(text);
  }
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"') quoted.push_back('"');
    quoted.push_back(c);
  }
  quoted.push_back('"');
  return quoted;
}

// `prefix`.sin_k, `prefix`.cos_k for k = first.. over `width` columns.
void AppendSinCos(absl::string_view prefix, int64_t width, int64_t first,
                  std::vector<std::string>* names) {
  for (int64_t k = 0; k < width / 2; ++k) {
    names->push_back(absl::StrCat(prefix, ".sin_", first + k));
    names->push_back(absl::StrCat(prefix, ".cos_", first + k));
  }
}

// One name per feature column, the names the Python client's
// feature_names() gives (client/python/phasor_client/schema.py):
// per-channel entries (core/compose.cc marks them; the proto does not) get
// the channel's name, "gaps.delta.hr"; sinusoid pairs ".sin_k"/".cos_k";
// under combine SUM, where the entries overlap, "sum.<j>"; anything else
// "<block>" or "<block>.<j>".
std::vector<std::string> FeatureNames(const v1::EncodeObservationsResponse& response,
                                      const std::vector<std::string>& channels) {
  static constexpr absl::string_view kPerChannel[] = {
      "content.values", "content.mask", "gaps.delta",
      "gaps.first_flag", "gaps.mask", "gaps.last_value"};
  const int64_t width =
      response.features().shape_size() == 2 ? response.features().shape(1) : 0;
  std::vector<std::string> names;
  for (const v1::SchemaEntry& entry : response.schema()) {
    const absl::string_view block = entry.block();
    const int64_t columns = entry.width();
    if (entry.offset() != static_cast<int64_t>(names.size())) {
      names.clear();  // Overlapping entries: combine SUM.
      for (int64_t j = 0; j < width; ++j) names.push_back(absl::StrCat("sum.", j));
      return names;
    }
    const bool per_channel =
        std::find(std::begin(kPerChannel), std::end(kPerChannel), block) !=
            std::end(kPerChannel) &&
        !channels.empty() && columns % static_cast<int64_t>(channels.size()) == 0;
    if (per_channel) {
      const int64_t per = columns / static_cast<int64_t>(channels.size());
      for (const std::string& channel : channels) {
        const std::string prefix = absl::StrCat(block, ".", channel);
        if (per == 1) {
          names.push_back(prefix);
        } else {
          AppendSinCos(prefix, per, /*first=*/0, &names);
        }
      }
    } else if ((block == "time" || block == "gaps.global_delta") && columns > 1) {
      AppendSinCos(block, columns, /*first=*/0, &names);
    } else if (block == "time2vec") {
      names.push_back("time2vec.linear");
      for (int64_t k = 1; k < columns; ++k) {
        names.push_back(absl::StrCat("time2vec.sin_", k));
      }
    } else if (absl::StartsWith(block, "calendar.") && columns == 2) {
      names.push_back(absl::StrCat(block, ".sin"));
      names.push_back(absl::StrCat(block, ".cos"));
    } else if (absl::StartsWith(block, "calendar.") && columns % 2 == 0) {
      AppendSinCos(block, columns, /*first=*/1, &names);
    } else if (columns == 1) {
      names.emplace_back(block);
    } else {
      for (int64_t j = 0; j < columns; ++j) names.push_back(absl::StrCat(block, ".", j));
    }
  }
  return names;
}

// Features as CSV: a header naming the series and time columns as the input
// did (and `channel` for a long table), then one name per feature column,
// and in each row the series key, the time cell as written and (long) the
// channel, so that the rows join back onto the input's. Rows are in panel
// order: series by first appearance, each in file order.
absl::Status WritePanelCsv(const v1::EncodeObservationsResponse& response,
                           const PanelCsv& panel, const PanelCsvOptions& options,
                           const v1::Observations& observations,
                           const std::vector<int64_t>& offsets,
                           const std::string& path) {
  std::vector<std::string> channels(observations.channel_names().begin(),
                                    observations.channel_names().end());
  std::vector<int32_t> event_channels;
  if (panel.long_layout) {
    event_channels.resize(observations.event_channels().data().size() /
                          sizeof(int32_t));
    std::memcpy(event_channels.data(), observations.event_channels().data().data(),
                event_channels.size() * sizeof(int32_t));
  }
  const std::string body = TensorToCsv(response.features());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot open for writing"));
  }
  std::vector<std::string> header = {CsvField(options.series_column),
                                     CsvField(options.time_column)};
  if (panel.long_layout) header.push_back("channel");
  for (const std::string& name : FeatureNames(response, channels)) {
    header.push_back(CsvField(name));
  }
  out << absl::StrJoin(header, ",") << "\n";
  size_t series = 0;
  size_t row = 0;
  for (const absl::string_view line :
       absl::StrSplit(body, '\n', absl::SkipEmpty())) {
    while (series + 1 < offsets.size() - 1 &&
           static_cast<int64_t>(row) >= offsets[series + 1]) {
      ++series;
    }
    out << CsvField(panel.series_keys[series]) << ","
        << CsvField(panel.row_times[row]) << ",";
    if (panel.long_layout) {
      out << CsvField(channels[static_cast<size_t>(event_channels[row])]) << ",";
    }
    out << line << "\n";
    ++row;
  }
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  std::cerr << "wrote features " << DTypeString(response.features().dtype())
            << " " << ShapeString(response.features()) << " with "
            << (panel.long_layout ? "series, time and channel columns"
                                  : "series and time columns")
            << " to " << path << "\n";
  return absl::OkStatus();
}

// Where a field path of the panel request points: its series and the row
// (wide) or event (long) within the series, or -1 for none.
struct PanelPlace {
  int64_t series = -1;
  int64_t row = -1;
};

// "observations.series[<s>]" with, optionally, ".<tensor>[<i>]" after it;
// tensors indexed per element ([T, C] values, mask; [T, D] content) give
// the row of element i.
PanelPlace PlaceOf(absl::string_view path, const v1::Observations& observations) {
  PanelPlace place;
  if (!absl::ConsumePrefix(&path, "observations.series[")) return place;
  const size_t close = path.find(']');
  int64_t series;
  if (close == absl::string_view::npos ||
      !absl::SimpleAtoi(path.substr(0, close), &series) || series < 0) {
    return place;
  }
  place.series = series;
  path.remove_prefix(close + 1);
  if (!absl::ConsumePrefix(&path, ".")) return place;
  const size_t open = path.find('[');
  if (open == absl::string_view::npos || !absl::EndsWith(path, "]")) return place;
  const absl::string_view tensor_name = path.substr(0, open);
  int64_t index;
  if (!absl::SimpleAtoi(path.substr(open + 1, path.size() - open - 2), &index) ||
      index < 0) {
    return place;
  }
  const v1::Tensor* tensor = nullptr;
  if (tensor_name == "values") tensor = &observations.values();
  if (tensor_name == "mask") tensor = &observations.mask();
  if (tensor_name == "content") tensor = &observations.content();
  int64_t per_row = 1;
  if (tensor != nullptr) {
    for (int d = 1; d < tensor->shape_size(); ++d) per_row *= tensor->shape(d);
  } else if (tensor_name != "timestamps" && tensor_name != "event_times" &&
             tensor_name != "event_channels" && tensor_name != "event_values") {
    return place;
  }
  place.row = per_row > 0 ? index / per_row : -1;
  return place;
}

// A panel call's error, prefixed with the file line of the row its field
// violation names (or, for a series, the series' first line); unchanged when
// it names none. The message and its payloads are kept as they are.
absl::Status WithCsvLine(const absl::Status& status, const PanelCsv& panel,
                         const v1::Observations& observations,
                         const std::vector<int64_t>& offsets,
                         absl::string_view path) {
  for (const FieldViolation& violation : FieldViolationsOf(status)) {
    const PanelPlace place = PlaceOf(violation.field, observations);
    if (place.series < 0 || place.series + 1 >= static_cast<int64_t>(offsets.size())) {
      continue;
    }
    const int64_t begin = offsets[static_cast<size_t>(place.series)];
    const int64_t end = offsets[static_cast<size_t>(place.series) + 1];
    const std::string& key = panel.series_keys[static_cast<size_t>(place.series)];
    std::string where;
    if (place.row >= 0 && begin + place.row < end) {
      where = absl::StrCat(path, ": line ",
                           panel.row_lines[static_cast<size_t>(begin + place.row)],
                           " (series ", QuoteForError(key, /*max_bytes=*/64),
                           ")");
    } else if (place.row < 0 && begin < end) {
      where = absl::StrCat(path, ": series ", QuoteForError(key, /*max_bytes=*/64),
                           " (first on line ",
                           panel.row_lines[static_cast<size_t>(begin)], ")");
    } else {
      continue;
    }
    absl::Status located(status.code(), absl::StrCat(where, ": ", status.message()));
    status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
      located.SetPayload(url, payload);
    });
    return located;
  }
  return status;
}

absl::Status RunPanelCsv(const EncoderClient& client, const std::string& path) {
  if (absl::GetFlag(FLAGS_stream) || !absl::GetFlag(FLAGS_state).empty() ||
      !absl::GetFlag(FLAGS_timestamps).empty() ||
      !absl::GetFlag(FLAGS_event_times).empty()) {
    return absl::InvalidArgumentError(
        "--observations_csv takes no --stream, --state, --timestamps or "
        "--event_times: the table is the whole input");
  }
  PanelCsvOptions options;
  const std::string layout = absl::AsciiStrToLower(absl::GetFlag(FLAGS_csv_layout));
  if (layout == "long") {
    options.layout = PanelCsvLayout::kLong;
  } else if (layout == "wide") {
    options.layout = PanelCsvLayout::kWide;
  } else if (layout != "auto") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--csv_layout: '", layout, "' is not one of auto, long, wide"));
  }
  options.series_column = absl::GetFlag(FLAGS_series_column);
  options.time_column = absl::GetFlag(FLAGS_time_column);
  options.time_zone_column = absl::GetFlag(FLAGS_time_zone_column);
  const std::string names = absl::GetFlag(FLAGS_channel_names);
  if (!names.empty()) {
    options.channel_names = absl::StrSplit(names, ',');
  }
  PHASOR_ASSIGN_OR_RETURN(
      options.time_unit, ParseTimeUnit(absl::GetFlag(FLAGS_time_unit), "time_unit"));
  PHASOR_ASSIGN_OR_RETURN(const std::string text,
                          ReadFileToString(path, "--observations_csv"));
  PHASOR_ASSIGN_OR_RETURN(PanelCsv panel, ReadPanelCsv(text, path, options));

  v1::EncodeObservationsRequest request;
  *request.mutable_observations() = std::move(panel.observations);
  PHASOR_RETURN_IF_ERROR(SetConfig(&request, [](v1::EncoderSpec*) {
    return absl::InvalidArgumentError(
        "give --spec 'temporal { ... }' or --profile");
  }));
  PHASOR_ASSIGN_OR_RETURN(const v1::DType output_dtype, OutputDTypeFromFlag());
  request.set_output_dtype(output_dtype);

  PanelOptions split;
  split.max_in_flight = absl::GetFlag(FLAGS_max_in_flight);
  split.max_call_bytes = absl::GetFlag(FLAGS_max_call_bytes);
  PanelStats stats;
  const v1::Tensor& offsets_tensor = request.observations().series_offsets();
  std::vector<int64_t> offsets(static_cast<size_t>(offsets_tensor.shape(0)));
  std::memcpy(offsets.data(), offsets_tensor.data().data(),
              offsets_tensor.data().size());
  absl::StatusOr<v1::EncodeObservationsResponse> called =
      client.EncodeObservationsPanel(request, split, &stats);
  if (!called.ok()) {
    return WithCsvLine(called.status(), panel, request.observations(), offsets,
                       path);
  }
  const v1::EncodeObservationsResponse& response = *called;
  std::cerr << "panel: " << panel.series_keys.size() << " series, "
            << offsets.back() << (panel.long_layout ? " events" : " rows")
            << ", " << stats.calls << (stats.calls == 1 ? " call" : " calls")
            << (stats.series_split > 0
                    ? absl::StrCat(" (", stats.series_split,
                                   " series cut into chunks)")
                    : "")
            << "\n";
  PrintSchema(response);

  const std::string out = OutFlag();
  std::string offsets_out = absl::GetFlag(FLAGS_series_offsets_out);
  if (out.empty() || absl::EndsWithIgnoreCase(out, ".npy")) {
    PHASOR_RETURN_IF_ERROR(Emit(response.features(), "features", out));
    if (offsets_out.empty() && !out.empty()) {
      offsets_out = absl::StrCat(out.substr(0, out.size() - 4),
                                 ".series_offsets.npy");
    }
    if (out.empty()) {
      std::cout << "series (in order of first appearance): "
                << absl::StrJoin(panel.series_keys.begin(),
                                 panel.series_keys.begin() +
                                     std::min<size_t>(panel.series_keys.size(), 16),
                                 ", ")
                << (panel.series_keys.size() > 16 ? ", ..." : "") << "\n";
    }
  } else {
    PHASOR_RETURN_IF_ERROR(WritePanelCsv(response, panel, options,
                                         request.observations(), offsets, out));
  }
  if (!offsets_out.empty() || out.empty()) {
    PHASOR_RETURN_IF_ERROR(
        Emit(response.series_offsets(), "series offsets", offsets_out));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunEncodeObservations(const EncoderClient& client) {
  const std::string panel_csv = absl::GetFlag(FLAGS_observations_csv);
  if (!panel_csv.empty()) return RunPanelCsv(client, panel_csv);
  v1::EncodeObservationsRequest request;
  PHASOR_ASSIGN_OR_RETURN(*request.mutable_observations(),
                          ObservationsFromFlags());
  PHASOR_RETURN_IF_ERROR(SetConfig(&request, [](v1::EncoderSpec*) {
    return absl::InvalidArgumentError(
        "give --spec 'temporal { ... }' or --profile");
  }));
  PHASOR_ASSIGN_OR_RETURN(const v1::DType output_dtype, OutputDTypeFromFlag());
  request.set_output_dtype(output_dtype);
  const std::string state_path = absl::GetFlag(FLAGS_state);
  if (!state_path.empty()) {
    PHASOR_ASSIGN_OR_RETURN(const std::string text,
                            ReadFileToString(state_path, "--state"));
    PHASOR_RETURN_IF_ERROR(ParseText("state", text, request.mutable_state()));
  }

  if (!absl::GetFlag(FLAGS_stream)) {
    PHASOR_ASSIGN_OR_RETURN(const v1::EncodeObservationsResponse response,
                            client.EncodeObservations(request));
    PrintSchema(response);
    PHASOR_RETURN_IF_ERROR(WriteState(response.state()));
    return Emit(response.features(), "features", OutFlag());
  }

  if (request.has_state()) {
    // The stream carries state itself; a resumed series seeds it in the
    // first message only.
    std::cerr << "note: --state seeds the first chunk of the stream\n";
  }
  PHASOR_ASSIGN_OR_RETURN(
      const auto chunks,
      Chunk(std::move(request), absl::GetFlag(FLAGS_chunk_rows)));
  v1::EncodeObservationsResponse combined;
  int64_t rows = 0;
  bool first = true;
  PHASOR_RETURN_IF_ERROR(client.EncodeObservationsStream(
      chunks, [&](const v1::EncodeObservationsResponse& response) {
        const v1::Tensor& features = response.features();
        if (first) {
          first = false;
          combined = response;
          combined.mutable_features()->clear_data();
        }
        if (features.shape_size() != 2 ||
            features.dtype() != combined.features().dtype() ||
            features.shape(1) != combined.features().shape(1)) {
          return absl::DataLossError(
              "stream: chunks returned features of different widths");
        }
        rows += features.shape(0);
        combined.mutable_features()->mutable_data()->append(features.data());
        *combined.mutable_state() = response.state();
        return absl::OkStatus();
      }));
  combined.mutable_features()->set_shape(0, rows);
  std::cerr << "streamed " << chunks.size() << " chunks, " << rows
            << " rows\n";
  PrintSchema(combined);
  PHASOR_RETURN_IF_ERROR(WriteState(combined.state()));
  return Emit(combined.features(), "features", OutFlag());
}

absl::Status RunDescribe(const EncoderClient& client) {
  PHASOR_ASSIGN_OR_RETURN(const v1::DescribeRequest request,
                          DescribeRequestFromFlags());
  PHASOR_ASSIGN_OR_RETURN(const v1::DescribeResponse response,
                          client.Describe(request));
  const std::string& unit = response.unit();
  std::string singular = unit;
  if (!singular.empty() && singular.back() == 's') singular.pop_back();

  std::cout << "frequency ladder (" << response.frequencies_size()
            << " pairs, unit: " << unit << ")\n";
  const std::string frequency_header =
      absl::StrCat("frequency (rad/", singular, ")");
  const std::string wavelength_header = absl::StrCat("wavelength (", unit, ")");
  std::cout << absl::StrFormat("%6s  %24s  %24s\n", "pair", frequency_header,
                               wavelength_header);
  for (int j = 0; j < response.frequencies_size(); ++j) {
    const double wavelength =
        j < response.wavelengths_size() ? response.wavelengths(j) : 0.0;
    std::cout << absl::StrFormat("%6d  %24.10g  %24.10g\n", j,
                                 response.frequencies(j), wavelength);
  }
  std::cout << absl::StrFormat("unambiguous range: %.10g %s\n",
                               response.unambiguous_range(), unit);
  std::cout << absl::StrFormat(
      "nearest code distance: %.10g at offset %d\n",
      response.nearest_code_distance(), response.nearest_code_offset());
  if (absl::GetFlag(FLAGS_show_similarity)) {
    const double step = IsSet(absl::GetFlag(FLAGS_offset_step))
                            ? absl::GetFlag(FLAGS_offset_step)
                            : 1.0;
    std::cout << "similarity (sum_j cos(w_j * k * step)):\n";
    std::cout << absl::StrFormat("%6s  %16s  %16s\n", "k",
                                 absl::StrCat("offset (", unit, ")"),
                                 "similarity");
    for (int k = 0; k < response.similarity_size(); ++k) {
      std::cout << absl::StrFormat("%6d  %16.10g  %16.10g\n", k, k * step,
                                   response.similarity(k));
    }
  }
  const std::string out = OutFlag();
  if (!out.empty()) {
    // The ladder as [pairs, 2] columns (frequency, wavelength).
    std::vector<double> ladder;
    for (int j = 0; j < response.frequencies_size(); ++j) {
      ladder.push_back(response.frequencies(j));
      ladder.push_back(j < response.wavelengths_size() ? response.wavelengths(j)
                                                       : 0.0);
    }
    PHASOR_ASSIGN_OR_RETURN(
        const v1::Tensor tensor,
        TensorFromDoubles(ladder, {response.frequencies_size(), 2},
                          v1::FLOAT64));
    PHASOR_RETURN_IF_ERROR(Emit(tensor, "frequency ladder", out));
  }
  return absl::OkStatus();
}

absl::Status RunListProfiles(const EncoderClient& client) {
  PHASOR_ASSIGN_OR_RETURN(const v1::ListProfilesResponse response,
                          client.ListProfiles());
  if (response.profiles_size() == 0) {
    std::cout << "no profiles (start the server with --profiles FILE)\n";
    return absl::OkStatus();
  }
  for (const v1::ProfileInfo& profile : response.profiles()) {
    std::cout << absl::StrFormat("%-24s %-22s %s\n", profile.name(),
                                 SpecKind(profile.spec()),
                                 profile.description());
    std::cout << "    spec: " << profile.spec().ShortDebugString() << "\n";
    for (const v1::LearnedTableInfo& table : profile.learned_tables()) {
      std::cout << absl::StrFormat("    learned table %s: %d x %d\n",
                                   table.name(), table.rows(), table.dim());
    }
    for (const std::string& name : profile.time2vec()) {
      std::cout << "    time2vec: " << name << "\n";
    }
    for (const std::string& name : profile.holiday_calendars()) {
      std::cout << "    holiday calendar: " << name << "\n";
    }
  }
  return absl::OkStatus();
}

absl::Status RunHealth(const EncoderClient& client) {
  const std::string service = absl::GetFlag(FLAGS_service);
  PHASOR_ASSIGN_OR_RETURN(const ServingStatus status,
                          client.CheckHealth(service));
  std::cout << (service.empty() ? "server" : service) << ": "
            << ServingStatusName(status) << "\n";
  if (status != ServingStatus::kServing) {
    return absl::UnavailableError(
        absl::StrCat(service.empty() ? "server" : service, " is ",
                     ServingStatusName(status)));
  }
  return absl::OkStatus();
}

}  // namespace phasor::cli
