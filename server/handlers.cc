#include "server/handlers.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/alibi.h"
#include "core/continuous_time.h"
#include "core/describe.h"
#include "core/errors.h"
#include "core/learned.h"
#include "core/rope.h"
#include "core/sinusoidal.h"
#include "core/status_macros.h"
#include "server/spec_convert.h"

namespace phasor::server {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

const char* KindName(v1::EncoderSpec::KindCase kind) {
  switch (kind) {
    case v1::EncoderSpec::kPositional: return "positional";
    case v1::EncoderSpec::kRope: return "rope";
    case v1::EncoderSpec::kTemporal: return "temporal";
    case v1::EncoderSpec::kRelativeBias: return "relative_bias";
    case v1::EncoderSpec::KIND_NOT_SET: break;
  }
  return "empty";
}

// The spec a request configures: inline, or the named profile's.
template <typename Request>
absl::StatusOr<const v1::EncoderSpec*> ResolveSpec(const HandlerContext& context,
                                                   const Request& request) {
  switch (request.config_case()) {
    case Request::kSpec:
      return &request.spec();
    case Request::kProfile: {
      PHASOR_ASSIGN_OR_RETURN(const v1::Profile* profile,
                              context.profiles->FindProfile(request.profile(), "profile"));
      return &profile->spec();
    }
    default:
      break;
  }
  return InvalidField("spec", "set spec or profile");
}

// The spec must be of `kind` for `rpc`.
template <typename Request>
absl::Status RequireKind(const Request& request, const v1::EncoderSpec& spec,
                         v1::EncoderSpec::KindCase kind, absl::string_view rpc) {
  if (spec.kind_case() == kind) return absl::OkStatus();
  if (request.config_case() == Request::kProfile) {
    return InvalidField("profile",
                        absl::StrCat("profile '", request.profile(), "' is a ",
                                     KindName(spec.kind_case()), " encoder; ", rpc,
                                     " needs a ", KindName(kind), " one"));
  }
  return InvalidField(absl::StrCat("spec.", KindName(kind)),
                      absl::StrCat(rpc, " needs spec.", KindName(kind), ", got ",
                                   KindName(spec.kind_case())));
}

void Count(const HandlerContext& context, EncodedKind kind, int64_t values) {
  if (context.metrics != nullptr) context.metrics->RecordEncodedValues(kind, values);
}

constexpr DType kFloatInputs[] = {DType::kFloat32, DType::kFloat16,
                                  DType::kBFloat16, DType::kFloat64};
constexpr DType kFloatOutputs[] = {DType::kFloat32, DType::kFloat16,
                                   DType::kBFloat16, DType::kFloat64};

// The sequence length a RoPE spec's frequencies are computed at: the spec's,
// else derived from the positions.
int64_t RopeSeqLen(const v1::RopeSpec& wire, const Positions& positions) {
  return wire.seq_len() > 0 ? wire.seq_len() : DefaultRopeSeqLen(positions);
}

// θ_i and the attention factor for heads of `head_dim` channels at
// `seq_len` tokens, errors at their wire paths: core/rope_scaling.h keeps
// max_position_embeddings inside the scaling variants that read it
// (spec.rope.scaling.<variant>.max_position_embeddings); on the wire it is
// spec.rope.max_position_embeddings, which RopeFromProto copies in.
absl::StatusOr<RopeFrequencies> RopeFrequenciesFor(const RopeSpec& rope,
                                                   int64_t head_dim, int64_t seq_len) {
  absl::StatusOr<RopeFrequencies> frequencies =
      ComputeRopeFrequencies(rope, head_dim, seq_len, kRopePrefix);
  if (frequencies.ok()) return frequencies;
  return RenameFieldPath(frequencies.status(),
                         absl::StrCat(kRopePrefix, ".scaling.",
                                      RopeScalingName(rope.scaling),
                                      ".max_position_embeddings"),
                         absl::StrCat(kRopePrefix, ".max_position_embeddings"));
}

// Plans (frequencies and their exact-reduction constants) for the specs the
// server has seen, so a stream of ApplyRope/RopeTables calls with one spec
// does not recompute rd/2 std::pow per call. Keys hold client bytes, so the
// cache is bounded in entries and in bytes (server/spec_cache.h).
SpecCache<RopePlan>& RopePlans() {
  static SpecCache<RopePlan>* const plans =
      new SpecCache<RopePlan>(SpecCacheLimits{/*max_entries=*/64});
  return *plans;
}

// The plan for `wire` (as `rope`) at `head_dim`, keyed by the spec's bytes,
// head_dim and what of the sequence length its frequencies depend on:
// nothing, except dynamic NTK (max(seq_len, max_position_embeddings)) and
// longrope (whether seq_len is past the original context).
absl::StatusOr<std::shared_ptr<const RopePlan>> RopePlanFor(const RopeSpec& rope,
                                                           const v1::RopeSpec& wire,
                                                           int64_t head_dim,
                                                           const Positions& positions) {
  const int64_t seq_len = RopeSeqLen(wire, positions);
  int64_t length_key = 0;
  if (const auto* dynamic = std::get_if<DynamicNtkRopeScaling>(&rope.scaling)) {
    length_key = std::max(seq_len, dynamic->max_position_embeddings);
  } else if (const auto* longrope = std::get_if<LongRopeScaling>(&rope.scaling)) {
    const std::optional<int64_t> original =
        longrope->original_max_position_embeddings.has_value()
            ? longrope->original_max_position_embeddings
            : longrope->max_position_embeddings;
    length_key = original.has_value() ? (seq_len > *original ? 1 : 0) : seq_len;
  }
  std::string key(2 * sizeof(int64_t), '\0');
  std::memcpy(key.data(), &head_dim, sizeof(int64_t));
  std::memcpy(key.data() + sizeof(int64_t), &length_key, sizeof(int64_t));
  if (!wire.AppendToString(&key)) {
    return InvalidField(kRopePrefix, "could not serialise the spec");
  }
  if (std::shared_ptr<const RopePlan> plan = RopePlans().Find(key)) return plan;
  // Built outside the cache's lock; an error is returned, not cached.
  PHASOR_ASSIGN_OR_RETURN(RopeFrequencies frequencies,
                          RopeFrequenciesFor(rope, head_dim, seq_len));
  auto plan = std::make_shared<const RopePlan>(MakeRopePlan(std::move(frequencies)));
  RopePlans().Insert(key, plan,
                     plan->frequencies.inv_freq.size() * sizeof(double) +
                         plan->angles.size() * sizeof(ExactAngle));
  return plan;
}

// The sequence length a profile's RoPE spec is checked at without
// positions: seq_len, else max_position_embeddings, else 1.
int64_t SpecSeqLen(const v1::RopeSpec& wire) {
  return std::max<int64_t>({wire.seq_len(), wire.max_position_embeddings(), 1});
}

// The sequence length Describe chooses a RoPE spec's frequencies for, as
// ApplyRope would: spec.rope.seq_len when the spec pins it (ApplyRope then
// ignores the positions), else the request's seq_len (standing in for
// 1 + the largest position), else the frequencies HF builds at model
// initialisation (seq_len None): for longrope the short factors, i.e. a
// length of original_max_position_embeddings when given (Phi-3: 4096 of
// 131072), otherwise max_position_embeddings (the model's own context:
// dynamic NTK is unscaled there since L = L0), else 1.
// REQUIRES: request_seq_len >= 0.
int64_t DescribeSeqLen(const v1::RopeSpec& wire, int64_t request_seq_len) {
  if (wire.seq_len() > 0) return wire.seq_len();
  if (request_seq_len > 0) return request_seq_len;
  if (wire.scaling().has_longrope() &&
      wire.scaling().longrope().original_max_position_embeddings() > 0) {
    return wire.scaling().longrope().original_max_position_embeddings();
  }
  return std::max<int64_t>(wire.max_position_embeddings(), 1);
}

// RopeTables and Describe have no head to default rotary_dim to.
absl::Status RequireRotaryDim(const RopeSpec& rope, absl::string_view rpc,
                              const RequestLimits& limits) {
  const std::string field = absl::StrCat(kRopePrefix, ".rotary_dim");
  if (rope.rotary_dim <= 0) {
    return InvalidField(field, absl::StrCat(rpc, " needs rotary_dim > 0 (there "
                                                 "is no head dimension to "
                                                 "default to)"));
  }
  return CheckWidth(rope.rotary_dim, field, limits);
}

// Describe's response holds frequencies and wavelengths (`num_frequencies`
// doubles each) and the similarity curve (`num_offsets` doubles): checked
// against the message limit before any of them is computed. Offsets
// outside core's range are left for core to reject (before it allocates).
absl::Status CheckDescribeSize(int64_t num_frequencies, int64_t num_offsets,
                               absl::string_view field, const RequestLimits& limits) {
  constexpr int64_t kMaxOffsets = int64_t{1} << 20;  // core/describe.cc's bound.
  const int64_t offsets = std::clamp<int64_t>(num_offsets, 0, kMaxOffsets);
  const int64_t values = 2 * num_frequencies + offsets;  // No overflow: both < 2^62.
  const int64_t shape[] = {values};
  return CheckOutputSize(shape, DType::kFloat64, field, limits);
}

}  // namespace

absl::Status ReserveMemory(const HandlerContext& context, int64_t bytes) {
  if (context.memory == nullptr) return absl::OkStatus();
  return context.memory->Reserve(bytes, context.check_alive);
}

absl::Status ReserveOutputMemory(const HandlerContext& context,
                                 absl::Span<const int64_t> shape, DType dtype,
                                 int64_t extra_bytes) {
  int64_t elements = 1;
  for (int64_t extent : shape) elements *= extent;
  const int64_t dtype_bytes = static_cast<int64_t>(DTypeSize(dtype));
  // 16-bit outputs are computed in float32 first (WriteFloatOutput).
  const int64_t scratch = dtype_bytes < 4 ? elements * 4 : 0;
  return ReserveMemory(context,
                       elements * dtype_bytes + kOtherFieldCopies * extra_bytes + scratch);
}

absl::Status HandleEncodePositions(const HandlerContext& context,
                                   const v1::EncodePositionsRequest& request,
                                   v1::EncodePositionsResponse* response) {
  PHASOR_ASSIGN_OR_RETURN(const v1::EncoderSpec* spec, ResolveSpec(context, request));
  PHASOR_RETURN_IF_ERROR(
      RequireKind(request, *spec, v1::EncoderSpec::kPositional, "EncodePositions"));
  const v1::PositionalSpec& positional = spec->positional();
  PHASOR_ASSIGN_OR_RETURN(
      const DType output_dtype,
      OutputDType(request.output_dtype(), "output_dtype", kFloatOutputs));
  // Sizes first, from the shapes alone: nothing is allocated (a range is
  // not materialised) until the output they imply is within the limits.
  PHASOR_ASSIGN_OR_RETURN(
      const int64_t rows,
      CountPositions(request.positions(), "positions", context.limits));

  // The encoder and its width.
  SinusoidalSpec sinusoidal;
  const LearnedTable* table = nullptr;
  int64_t dim = 0;
  switch (positional.kind_case()) {
    case v1::PositionalSpec::kSinusoidal:
      sinusoidal = SinusoidalFromProto(positional.sinusoidal());
      PHASOR_RETURN_IF_ERROR(ValidateSinusoidalSpec(sinusoidal, kSinusoidalPrefix));
      PHASOR_RETURN_IF_ERROR(CheckWidth(sinusoidal.dim, "spec.positional.sinusoidal.dim",
                                        context.limits));
      dim = sinusoidal.dim;
      break;
    case v1::PositionalSpec::kLearned: {
      PHASOR_ASSIGN_OR_RETURN(
          table, context.profiles->FindLearnedTable(positional.learned().table(),
                                                    "spec.positional.learned.table"));
      dim = table->dim();
      break;
    }
    case v1::PositionalSpec::KIND_NOT_SET:
      return InvalidField("spec.positional", "set sinusoidal or learned");
  }
  const int64_t output_shape[] = {rows, dim};
  PHASOR_RETURN_IF_ERROR(
      CheckOutputSize(output_shape, output_dtype, "positions", context.limits));
  PHASOR_RETURN_IF_ERROR(ReserveOutputMemory(context, output_shape, output_dtype));

  // Content in the arithmetic's precision: float32, or double for FLOAT64.
  const bool in_double = output_dtype == DType::kFloat64;
  FloatInput content;
  DoubleInput content64;
  if (request.has_content()) {
    PHASOR_ASSIGN_OR_RETURN(const TensorView view,
                            CheckTensor(request.content(), "content", kFloatInputs,
                                        /*rank=*/2, context.limits));
    if (view.shape[0] != rows || view.shape[1] != dim) {
      return InvalidField("content.shape",
                          absl::StrCat("must be [", rows, ",", dim,
                                       "] (positions x dim), got ",
                                       ShapeString(view.shape)));
    }
    if (in_double) {
      content64 = DoubleInput(view);
    } else {
      content = FloatInput(view);
    }
  }
  PHASOR_ASSIGN_OR_RETURN(
      const PositionsInput positions_input,
      DecodePositions(request.positions(), "positions", context.limits));
  const Positions positions = positions_input.view();
  PHASOR_RETURN_IF_ERROR(context.check_alive());

  const double scale64 = request.has_content_scale() ? request.content_scale() : 1.0;
  const float content_scale = static_cast<float>(scale64);
  PHASOR_RETURN_IF_ERROR(PositionsErrorAtWire(
      table != nullptr
          ? (in_double ? table->ValidateInputs(positions, content64.span(), scale64)
                       : table->ValidateInputs(positions, content.span(), content_scale))
          : (in_double ? ValidateSinusoidalInputs(sinusoidal, positions,
                                                  content64.span(), scale64)
                       : ValidateSinusoidalInputs(sinusoidal, positions,
                                                  content.span(), content_scale)),
      request.positions(), "positions"));
  PHASOR_RETURN_IF_ERROR(context.check_alive());

  // The content and scale in the output's arithmetic: double for FLOAT64.
  auto encode = [&](auto out, auto content_values, auto scale) {
    if (table != nullptr) {
      table->Encode(positions, content_values, scale, context.execution, out);
    } else {
      EncodeSinusoidal(sinusoidal, positions, content_values, scale,
                       context.execution, out);
    }
    return absl::OkStatus();
  };
  PHASOR_RETURN_IF_ERROR(WriteFloatOutput(
      context, output_shape, output_dtype, response->mutable_encodings(),
      [&](auto out) {
        if constexpr (std::is_same_v<decltype(out), absl::Span<double>>) {
          return encode(out, content64.span(), scale64);
        } else {
          return encode(out, content.span(), content_scale);
        }
      }));
  Count(context, table != nullptr ? EncodedKind::kLearned : EncodedKind::kSinusoidal,
        rows * dim);
  return absl::OkStatus();
}

namespace {

// The query/key shape of one ApplyRope tensor layout.
struct RopeShape {
  int64_t batch = 1;     // B (1 for [T, H, D]).
  int64_t seq = 0;       // T.
  int64_t heads = 0;     // H.
  int64_t head_dim = 0;  // D.
  bool heads_first = false;  // [B, H, T, D].
};

RopeShape RopeShapeOf(const TensorView& view, v1::ApplyRopeRequest::TensorLayout layout) {
  const Shape& d = view.shape;
  switch (layout) {
    case v1::ApplyRopeRequest::BATCH_SEQ_HEADS_DIM:
      return {d[0], d[1], d[2], d[3], false};
    case v1::ApplyRopeRequest::BATCH_HEADS_SEQ_DIM:
      return {d[0], d[2], d[1], d[3], true};
    default:
      return {1, d[0], d[1], d[2], false};
  }
}

const char* RopeShapeName(v1::ApplyRopeRequest::TensorLayout layout) {
  switch (layout) {
    case v1::ApplyRopeRequest::BATCH_SEQ_HEADS_DIM: return "[B, T, H, D]";
    case v1::ApplyRopeRequest::BATCH_HEADS_SEQ_DIM: return "[B, H, T, D]";
    default: return "[T, H, D]";
  }
}

// Checks the positions' shape for tokens [B, T] with `axes` rows each
// (M-RoPE: 3) and says whether one [T] row per axis is shared by every batch
// row. Accepted: [T] or a range of T; [B, T] when batched; [3, T] and, when
// batched, [3, B, T] for M-RoPE.
absl::StatusOr<bool> CheckRopePositionsShape(const v1::Positions& positions,
                                             const RopeShape& shape, int64_t axes,
                                             bool batched) {
  const std::vector<int64_t> got = PositionsShape(positions);
  std::vector<int64_t> shared = {shape.seq};
  std::vector<int64_t> per_row = {shape.batch, shape.seq};
  if (axes == 3) {
    shared.insert(shared.begin(), 3);
    per_row.insert(per_row.begin(), 3);
  }
  if (got == shared && !(axes == 3 && positions.has_range())) return shape.batch > 1;
  if (batched && got == per_row) return false;
  if (!batched && axes == 1 && got.size() == 1) {
    // The same words as core's ValidateRopeOperands.
    return InvalidField("positions",
                        absl::StrCat("must have one position per query token (",
                                     shape.seq, "), got ", got[0]));
  }
  std::string expected = ShapeString(shared);
  if (batched) absl::StrAppend(&expected, " or ", ShapeString(per_row));
  return InvalidField(
      positions.has_range() ? "positions.range.count" : "positions.values.shape",
      absl::StrCat("must be ", expected,
                   axes == 3 ? " (one row per M-RoPE axis: temporal, height, width)"
                             : batched ? " (shared by every batch row, or HF's "
                                         "position_ids per row)"
                                       : " (one position per query token)",
                   ", got ", ShapeString(got)));
}

// Positions for every token b·T + t, axis by axis: `shared` rows of T
// repeated for each of the B batch rows.
template <typename T>
std::vector<T> RepeatRows(absl::Span<const T> rows, int64_t axes, int64_t batch,
                          int64_t seq) {
  std::vector<T> out;
  out.reserve(static_cast<size_t>(axes * batch * seq));
  for (int64_t axis = 0; axis < axes; ++axis) {
    for (int64_t b = 0; b < batch; ++b) {
      out.insert(out.end(), rows.begin() + axis * seq, rows.begin() + (axis + 1) * seq);
    }
  }
  return out;
}

}  // namespace

absl::Status HandleApplyRope(const HandlerContext& context,
                             const v1::ApplyRopeRequest& request,
                             v1::ApplyRopeResponse* response) {
  PHASOR_ASSIGN_OR_RETURN(const v1::EncoderSpec* spec, ResolveSpec(context, request));
  PHASOR_RETURN_IF_ERROR(RequireKind(request, *spec, v1::EncoderSpec::kRope, "ApplyRope"));
  PHASOR_ASSIGN_OR_RETURN(const RopeSpec rope, RopeFromProto(spec->rope()));
  const int64_t axes = RopePositionAxes(rope);
  const v1::ApplyRopeRequest::TensorLayout layout = request.tensor_layout();
  switch (layout) {
    case v1::ApplyRopeRequest::TENSOR_LAYOUT_UNSPECIFIED:
    case v1::ApplyRopeRequest::TOKENS_HEADS_DIM:
    case v1::ApplyRopeRequest::BATCH_SEQ_HEADS_DIM:
    case v1::ApplyRopeRequest::BATCH_HEADS_SEQ_DIM:
      break;
    default:
      return InvalidField("tensor_layout", absl::StrCat("unknown layout ", layout));
  }
  const bool batched = layout == v1::ApplyRopeRequest::BATCH_SEQ_HEADS_DIM ||
                       layout == v1::ApplyRopeRequest::BATCH_HEADS_SEQ_DIM;
  const int rank = batched ? 4 : 3;
  PHASOR_ASSIGN_OR_RETURN(
      const int64_t num_positions,
      CountPositions(request.positions(), "positions", context.limits, /*max_rank=*/3));

  if (!request.has_query()) return InvalidField("query", "is required");
  PHASOR_ASSIGN_OR_RETURN(const TensorView query_view,
                          CheckTensor(request.query(), "query", kFloatInputs, rank,
                                      context.limits));
  const RopeShape q = RopeShapeOf(query_view, layout);
  TensorView key_view;
  if (request.has_key()) {
    PHASOR_ASSIGN_OR_RETURN(key_view, CheckTensor(request.key(), "key", kFloatInputs,
                                                  rank, context.limits));
    const RopeShape k = RopeShapeOf(key_view, layout);
    if (k.batch != q.batch || k.seq != q.seq || k.head_dim != q.head_dim) {
      return InvalidField(
          "key.shape",
          absl::StrCat("must match query's B, T and D in ", RopeShapeName(layout),
                       " (the head count may differ), got ",
                       ShapeString(key_view.shape), " for query ",
                       ShapeString(query_view.shape)));
    }
    int64_t total = 0;
    if (__builtin_add_overflow(query_view.num_elements, key_view.num_elements, &total) ||
        total > context.limits.max_elements) {
      return FieldError(absl::StatusCode::kResourceExhausted, "key",
                        absl::StrCat("query and key hold more elements than the "
                                     "server's limit of ",
                                     context.limits.max_elements, " per request"));
    }
  }
  // The head dimension sizes the frequency table even for a query with no
  // tokens (and so no bytes): bounded like any width.
  PHASOR_RETURN_IF_ERROR(CheckWidth(q.head_dim, "query.shape", context.limits));
  // Positions per token (per axis): a range or tensor is materialised only
  // once its shape matches the query the client paid for.
  PHASOR_ASSIGN_OR_RETURN(const bool shared,
                          CheckRopePositionsShape(request.positions(), q, axes, batched));
  assert(num_positions == axes * (shared ? q.seq : q.batch * q.seq));
  (void)num_positions;
  // Repeating shared rows materialises axes·B·T positions: bounded like any
  // tensor, even when a query without heads or channels holds no elements.
  int64_t repeated = 0;
  if (shared && (!CheckedMultiply(axes * q.seq, q.batch, &repeated) ||
                 repeated > context.limits.max_elements)) {
    return FieldError(absl::StatusCode::kResourceExhausted, "query.shape",
                      absl::StrCat("B·T = ", q.batch, "·", q.seq,
                                   " positions is over the server's limit of ",
                                   context.limits.max_elements, " per request"));
  }
  // The rotated query and key are the response, as large as the inputs;
  // the positions are materialised at 8 bytes per token and axis.
  PHASOR_RETURN_IF_ERROR(ReserveMemory(
      context, static_cast<int64_t>(query_view.bytes.size() + key_view.bytes.size()) +
                   8 * axes * q.batch * q.seq));
  PHASOR_ASSIGN_OR_RETURN(
      const PositionsInput positions_input,
      DecodePositions(request.positions(), "positions", context.limits, /*max_rank=*/3));
  // Shared rows are repeated for each batch row (8 bytes per token and axis,
  // far below the query's own bytes).
  std::vector<int64_t> repeated_integers;
  std::vector<double> repeated_reals;
  Positions positions = positions_input.view();
  if (shared) {
    if (positions.is_real()) {
      repeated_reals = RepeatRows(positions.reals(), axes, q.batch, q.seq);
      positions = Positions::Reals(repeated_reals);
    } else {
      repeated_integers = RepeatRows(positions.integers(), axes, q.batch, q.seq);
      positions = Positions::Integers(repeated_integers);
    }
  }
  PHASOR_RETURN_IF_ERROR(context.check_alive());

  // The rotated tensors are written straight into the response's bytes.
  auto make_operand = [&](const TensorView& view, v1::Tensor* out) {
    const RopeShape shape = RopeShapeOf(view, layout);
    RopeOperand operand;
    operand.dtype = view.dtype;
    operand.num_tokens = shape.batch * shape.seq;
    operand.num_heads = shape.heads;
    operand.head_dim = shape.head_dim;
    operand.seq_len = shape.heads_first ? shape.seq : 0;
    operand.in = absl::MakeConstSpan(
        reinterpret_cast<const uint8_t*>(view.bytes.data()), view.bytes.size());
    absl::Span<char> bytes = AllocateTensor(view.shape, view.dtype, out);
    operand.out = absl::MakeSpan(reinterpret_cast<uint8_t*>(bytes.data()), bytes.size());
    return operand;
  };
  PHASOR_ASSIGN_OR_RETURN(
      const std::shared_ptr<const RopePlan> plan,
      RopePlanFor(rope, spec->rope(), q.head_dim, positions));
  const RopeFrequencies& frequencies = plan->frequencies;
  // Core numbers positions flat over the (repeated) rows; the wire index is
  // the same unless rows were repeated.
  PHASOR_RETURN_IF_ERROR(PositionsErrorAtWire(
      ValidateRopePositions(positions, frequencies, "positions"),
      request.positions(), "positions"));

  const RopeOperand query = make_operand(query_view, response->mutable_query());
  RopeOperand key;
  if (request.has_key()) key = make_operand(key_view, response->mutable_key());
  PHASOR_RETURN_IF_ERROR(ValidateRopeOperands(
      query, request.has_key() ? &key : nullptr, positions.size() / axes));

  PHASOR_RETURN_IF_ERROR(context.check_alive());
  ApplyRope(rope, *plan, positions, context.execution, query,
            request.has_key() ? &key : nullptr);
  response->set_attention_factor(frequencies.attention_factor);
  Count(context, EncodedKind::kRope, query_view.num_elements + key_view.num_elements);
  return absl::OkStatus();
}

absl::Status HandleRopeTables(const HandlerContext& context,
                              const v1::RopeTablesRequest& request,
                              v1::RopeTablesResponse* response) {
  PHASOR_ASSIGN_OR_RETURN(const v1::EncoderSpec* spec, ResolveSpec(context, request));
  PHASOR_RETURN_IF_ERROR(RequireKind(request, *spec, v1::EncoderSpec::kRope, "RopeTables"));
  PHASOR_ASSIGN_OR_RETURN(const RopeSpec rope, RopeFromProto(spec->rope()));
  PHASOR_RETURN_IF_ERROR(RequireRotaryDim(rope, "RopeTables", context.limits));
  PHASOR_ASSIGN_OR_RETURN(
      const DType output_dtype,
      OutputDType(request.output_dtype(), "output_dtype", kFloatOutputs));
  const int64_t axes = RopePositionAxes(rope);
  // The output's size from the shapes alone, before the range is
  // materialised or any table built: cos and sin [rows, rotary_dim/2] each,
  // plus inv_freq (rotary_dim/2 doubles).
  PHASOR_ASSIGN_OR_RETURN(
      const int64_t num_positions,
      CountPositions(request.positions(), "positions", context.limits,
                     /*max_rank=*/static_cast<int>(axes) + 1));
  // [N] or [B, T] per axis; M-RoPE's leading axis of 3.
  std::vector<int64_t> table_shape = PositionsShape(request.positions());
  if (axes == 3) {
    if (request.positions().has_range() || table_shape.size() < 2 ||
        table_shape[0] != 3) {
      return InvalidField(
          request.positions().has_range() ? "positions.range" : "positions.values.shape",
          absl::StrCat("must be [3, N] or [3, B, T] (one row per M-RoPE axis), got ",
                       ShapeString(table_shape)));
    }
    table_shape.erase(table_shape.begin());
  }
  const int64_t rows = num_positions / axes;
  const int64_t width = rope.rotary_dim / 2;
  const int64_t both_shape[] = {2, rows, width};
  PHASOR_RETURN_IF_ERROR(CheckOutputSize(both_shape, output_dtype, "positions",
                                         context.limits,
                                         /*extra_bytes=*/width * 8));
  PHASOR_RETURN_IF_ERROR(ReserveOutputMemory(context, both_shape, output_dtype,
                                             /*extra_bytes=*/width * 8));
  PHASOR_ASSIGN_OR_RETURN(
      const PositionsInput positions_input,
      DecodePositions(request.positions(), "positions", context.limits,
                      /*max_rank=*/static_cast<int>(axes) + 1));
  const Positions positions = positions_input.view();
  PHASOR_RETURN_IF_ERROR(context.check_alive());
  PHASOR_ASSIGN_OR_RETURN(
      const std::shared_ptr<const RopePlan> plan,
      RopePlanFor(rope, spec->rope(), rope.rotary_dim, positions));
  const RopeFrequencies& frequencies = plan->frequencies;
  PHASOR_RETURN_IF_ERROR(PositionsErrorAtWire(
      ValidateRopePositions(positions, frequencies, "positions"),
      request.positions(), "positions"));
  assert(static_cast<int64_t>(frequencies.inv_freq.size()) == width);

  PHASOR_RETURN_IF_ERROR(context.check_alive());
  table_shape.push_back(width);
  if (output_dtype == DType::kFloat32 || output_dtype == DType::kFloat64) {
    AllocateTensor(table_shape, output_dtype, response->mutable_cos());
    AllocateTensor(table_shape, output_dtype, response->mutable_sin());
    if (output_dtype == DType::kFloat32) {
      ComputeRopeTables(rope, *plan, positions, context.execution,
                        FloatData(response->mutable_cos()),
                        FloatData(response->mutable_sin()));
    } else {
      ComputeRopeTables(rope, *plan, positions, context.execution,
                        DoubleData(response->mutable_cos()),
                        DoubleData(response->mutable_sin()));
    }
  } else {
    std::vector<float> cos(rows * width), sin(rows * width);
    ComputeRopeTables(rope, *plan, positions, context.execution,
                      absl::MakeSpan(cos), absl::MakeSpan(sin));
    PHASOR_RETURN_IF_ERROR(context.check_alive());
    StoreFloats(cos, table_shape, output_dtype, response->mutable_cos());
    StoreFloats(sin, table_shape, output_dtype, response->mutable_sin());
  }
  response->set_attention_factor(frequencies.attention_factor);
  response->mutable_inv_freq()->Add(frequencies.inv_freq.begin(),
                                    frequencies.inv_freq.end());
  Count(context, EncodedKind::kRopeTables, 2 * rows * width);
  return absl::OkStatus();
}

absl::Status HandleAlibiBias(const HandlerContext& context,
                             const v1::AlibiBiasRequest& request,
                             v1::AlibiBiasResponse* response) {
  PHASOR_RETURN_IF_ERROR(
      ValidateAlibi(request.num_heads(), request.q_len(), request.k_len()));
  PHASOR_ASSIGN_OR_RETURN(
      const DType output_dtype,
      OutputDType(request.output_dtype(), "output_dtype", kFloatOutputs));
  // Slopes are FLOAT32, or FLOAT64 with a FLOAT64 bias.
  const bool in_double = output_dtype == DType::kFloat64;
  const DType slopes_dtype = in_double ? DType::kFloat64 : DType::kFloat32;
  const int64_t heads = request.num_heads();
  const int64_t slopes_shape[] = {heads};
  PHASOR_RETURN_IF_ERROR(
      CheckOutputSize(slopes_shape, slopes_dtype, "num_heads", context.limits));
  const bool with_bias = request.q_len() > 0 && request.k_len() > 0;
  const int64_t bias_shape[] = {heads, request.q_len(), request.k_len()};
  if (with_bias) {
    PHASOR_RETURN_IF_ERROR(CheckOutputSize(bias_shape, output_dtype, "k_len",
                                           context.limits,
                                           /*extra_bytes=*/heads * static_cast<int64_t>(
                                               DTypeSize(slopes_dtype))));
    PHASOR_RETURN_IF_ERROR(ReserveOutputMemory(context, bias_shape, output_dtype));
  }
  PHASOR_RETURN_IF_ERROR(ReserveOutputMemory(context, slopes_shape, slopes_dtype));

  PHASOR_RETURN_IF_ERROR(context.check_alive());
  AllocateTensor(slopes_shape, slopes_dtype, response->mutable_slopes());
  int64_t values = heads;
  if (in_double) {
    const absl::Span<double> slopes = DoubleData(response->mutable_slopes());
    AlibiSlopes(heads, slopes);
    if (with_bias) {
      AllocateTensor(bias_shape, DType::kFloat64, response->mutable_bias());
      AlibiBias(slopes, request.q_len(), request.k_len(), request.causal(),
                context.execution, DoubleData(response->mutable_bias()));
      values += AlibiBiasSize(heads, request.q_len(), request.k_len());
    }
    Count(context, EncodedKind::kAlibi, values);
    return absl::OkStatus();
  }
  const absl::Span<float> slopes = FloatData(response->mutable_slopes());
  AlibiSlopes(heads, slopes);
  if (with_bias) {
    PHASOR_RETURN_IF_ERROR(WriteFloatOutput(
        context, bias_shape, output_dtype, response->mutable_bias(),
        [&](absl::Span<float> bias) {
          AlibiBias(slopes, request.q_len(), request.k_len(), request.causal(),
                    context.execution, bias);
          return absl::OkStatus();
        }));
    values += AlibiBiasSize(heads, request.q_len(), request.k_len());
  }
  Count(context, EncodedKind::kAlibi, values);
  return absl::OkStatus();
}

absl::Status HandleDescribe(const HandlerContext& context,
                            const v1::DescribeRequest& request,
                            v1::DescribeResponse* response) {
  PHASOR_ASSIGN_OR_RETURN(const v1::EncoderSpec* spec, ResolveSpec(context, request));
  const int64_t num_offsets = request.num_offsets() == 0 ? 64 : request.num_offsets();
  if (request.seq_len() < 0) {
    return InvalidField("seq_len", absl::StrCat("must be >= 0, got ", request.seq_len()));
  }
  // Only RoPE scaling depends on the sequence length; accepting seq_len for
  // another spec would answer as if it had been applied.
  if (request.seq_len() > 0 && spec->kind_case() != v1::EncoderSpec::kRope) {
    return InvalidField("seq_len", "applies only to a rope spec (sinusoidal and "
                                   "time-ladder frequencies do not depend on it)");
  }
  if (spec->kind_case() == v1::EncoderSpec::kRelativeBias) {
    return DescribeRelativeBias(context, spec->relative_bias(), response);
  }
  std::vector<double> frequencies;
  int64_t seq_len = 0;  // Reported for rope specs only.
  const char* unit = "positions";
  switch (spec->kind_case()) {
    case v1::EncoderSpec::kPositional: {
      if (!spec->positional().has_sinusoidal()) {
        return InvalidField("spec.positional",
                            "Describe needs a sinusoidal encoder; a learned "
                            "table has no frequency ladder");
      }
      const SinusoidalSpec sinusoidal = SinusoidalFromProto(spec->positional().sinusoidal());
      PHASOR_RETURN_IF_ERROR(ValidateSinusoidalSpec(sinusoidal, kSinusoidalPrefix));
      PHASOR_RETURN_IF_ERROR(CheckWidth(sinusoidal.dim, "spec.positional.sinusoidal.dim",
                                        context.limits));
      PHASOR_RETURN_IF_ERROR(CheckDescribeSize(sinusoidal.dim / 2, num_offsets,
                                               "spec.positional.sinusoidal.dim",
                                               context.limits));
      frequencies = SinusoidalFrequencies(sinusoidal);
      break;
    }
    case v1::EncoderSpec::kRope: {
      PHASOR_ASSIGN_OR_RETURN(const RopeSpec rope, RopeFromProto(spec->rope()));
      PHASOR_RETURN_IF_ERROR(RequireRotaryDim(rope, "Describe", context.limits));
      PHASOR_RETURN_IF_ERROR(CheckDescribeSize(rope.rotary_dim / 2, num_offsets,
                                               absl::StrCat(kRopePrefix, ".rotary_dim"),
                                               context.limits));
      seq_len = DescribeSeqLen(spec->rope(), request.seq_len());
      PHASOR_ASSIGN_OR_RETURN(RopeFrequencies rope_frequencies,
                              RopeFrequenciesFor(rope, rope.rotary_dim, seq_len));
      frequencies = std::move(rope_frequencies.inv_freq);
      break;
    }
    case v1::EncoderSpec::kTemporal: {
      if (!spec->temporal().has_time()) {
        return InvalidField("spec.temporal.time",
                            "Describe needs a time block (the time ladder)");
      }
      const std::string prefix = absl::StrCat(kTemporalPrefix, ".time");
      PHASOR_ASSIGN_OR_RETURN(const TimeBlock block,
                              TimeBlockFromProto(spec->temporal().time(), prefix));
      PHASOR_RETURN_IF_ERROR(ValidateTimeBlock(block, prefix));
      PHASOR_RETURN_IF_ERROR(
          CheckWidth(block.dim, absl::StrCat(prefix, ".dim"), context.limits));
      PHASOR_RETURN_IF_ERROR(CheckDescribeSize(block.dim / 2, num_offsets,
                                               absl::StrCat(prefix, ".dim"),
                                               context.limits));
      for (double period : TimeBlockPeriodsSeconds(block)) {
        frequencies.push_back(kTwoPi / period);
      }
      unit = "seconds";
      break;
    }
    case v1::EncoderSpec::kRelativeBias:  // Answered above.
    case v1::EncoderSpec::KIND_NOT_SET:
      return InvalidField("spec", "set positional, rope, temporal or relative_bias");
  }
  // The curve costs num_offsets × frequencies cosines.
  int64_t work = 0;
  if (CheckedMultiply(num_offsets, static_cast<int64_t>(frequencies.size()), &work) &&
      work > context.limits.max_elements) {
    return FieldError(absl::StatusCode::kResourceExhausted, "num_offsets",
                      absl::StrCat(num_offsets, " offsets x ", frequencies.size(),
                                   " frequencies is over the server's limit of ",
                                   context.limits.max_elements, " per request"));
  }
  PHASOR_RETURN_IF_ERROR(context.check_alive());
  PHASOR_ASSIGN_OR_RETURN(
      const FrequencyDescription description,
      DescribeFrequencies(frequencies, num_offsets,
                          request.has_offset_step() ? request.offset_step() : 1.0));
  response->mutable_frequencies()->Add(description.frequencies.begin(),
                                       description.frequencies.end());
  response->mutable_wavelengths()->Add(description.wavelengths.begin(),
                                       description.wavelengths.end());
  response->set_unit(unit);
  response->set_seq_len(seq_len);
  response->set_unambiguous_range(description.unambiguous_range);
  response->set_nearest_code_distance(description.nearest_code_distance);
  response->set_nearest_code_offset(description.nearest_code_offset);
  response->mutable_similarity()->Add(description.similarity.begin(),
                                      description.similarity.end());
  Count(context, EncodedKind::kDescribe, num_offsets);
  return absl::OkStatus();
}

absl::Status SpecErrorsToProfile(const absl::Status& status,
                                 absl::string_view profile) {
  const std::optional<std::string> path = FieldPathOf(status);
  if (!path || (*path != "spec" && !absl::StartsWith(*path, "spec."))) {
    return status;
  }
  return ReplaceFieldPath(status, "profile",
                          absl::StrCat("profile '", profile, "' ", *path));
}

absl::Status HandleListProfiles(const HandlerContext& context,
                                const v1::ListProfilesRequest& /*request*/,
                                v1::ListProfilesResponse* response) {
  context.profiles->ListInto(response);
  return absl::OkStatus();
}

absl::Status ValidateProfiles(const ProfileRegistry& profiles) {
  for (const v1::Profile* profile : profiles.profiles()) {
    const v1::EncoderSpec& spec = profile->spec();
    absl::Status status;
    switch (spec.kind_case()) {
      case v1::EncoderSpec::kPositional:
        if (spec.positional().has_sinusoidal()) {
          status = ValidateSinusoidalSpec(SinusoidalFromProto(spec.positional().sinusoidal()),
                                          kSinusoidalPrefix);
        } else if (spec.positional().has_learned()) {
          status = profiles
                       .FindLearnedTable(spec.positional().learned().table(),
                                         "spec.positional.learned.table")
                       .status();
        } else {
          status = InvalidField("spec.positional", "set sinusoidal or learned");
        }
        break;
      case v1::EncoderSpec::kRope: {
        absl::StatusOr<RopeSpec> rope = RopeFromProto(spec.rope());
        status = rope.status();
        // Without a tensor the head dimension is known only when rotary_dim
        // is set; a spec that leaves it to the head is checked per request.
        if (status.ok() && rope->rotary_dim > 0) {
          status =
              RopeFrequenciesFor(*rope, rope->rotary_dim, SpecSeqLen(spec.rope())).status();
        }
        break;
      }
      case v1::EncoderSpec::kTemporal:
        status = ValidateTemporalProfile(profiles, spec.temporal());
        break;
      case v1::EncoderSpec::kRelativeBias:
        status = ValidateRelativeBiasProfile(profiles, spec.relative_bias());
        break;
      case v1::EncoderSpec::KIND_NOT_SET:
        status = InvalidField("spec", "set positional, rope, temporal or relative_bias");
        break;
    }
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("profile '", profile->name(),
                                                      "': ", status.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace phasor::server
