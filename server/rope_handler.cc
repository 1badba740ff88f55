#include "server/rope_handler.h"

#include <cassert>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/rope/rope_scaling.h"
#include "server/spec_convert.h"

namespace phasor::server {
namespace {

// The sequence length a RoPE spec's frequencies are computed at: the spec's,
// else derived from the positions.
int64_t RopeSeqLen(const v1::RopeSpec& wire, const Positions& positions) {
  return wire.seq_len() > 0 ? wire.seq_len() : DefaultRopeSeqLen(positions);
}

// The plan for `wire` (as `rope`) at `head_dim`: from the server's caches
// when it has one, keyed by head_dim, the bucket of the sequence length the
// scaling reads (core/rope_scaling.h RopeSeqLenBucket) and the spec's
// bytes; built for this call alone otherwise. An error is returned, never
// cached.
absl::StatusOr<std::shared_ptr<const RopePlan>> RopePlanFor(const HandlerContext& context,
                                                           const RopeSpec& rope,
                                                           const v1::RopeSpec& wire,
                                                           int64_t head_dim,
                                                           const Positions& positions) {
  const int64_t seq_len = RopeSeqLen(wire, positions);
  const int64_t length_key = RopeSeqLenBucket(rope.scaling, seq_len);
  std::string key(2 * sizeof(int64_t), '\0');
  std::memcpy(key.data(), &head_dim, sizeof(int64_t));
  std::memcpy(key.data() + sizeof(int64_t), &length_key, sizeof(int64_t));
  if (!wire.AppendToString(&key)) {
    return InvalidField(kRopePrefix, "could not serialise the spec");
  }
  SpecCache<RopePlan>* plans =
      context.caches != nullptr ? &context.caches->rope_plans : nullptr;
  if (plans != nullptr) {
    if (std::shared_ptr<const RopePlan> plan = plans->Find(key)) return plan;
  }
  // Built outside the cache's lock.
  PHASOR_ASSIGN_OR_RETURN(RopeFrequencies frequencies,
                          RopeFrequenciesFor(rope, head_dim, seq_len));
  auto plan = std::make_shared<const RopePlan>(MakeRopePlan(std::move(frequencies)));
  if (plans != nullptr) {
    plans->Insert(key, plan,
                  plan->frequencies.inv_freq.size() * sizeof(double) +
                      plan->angles.size() * sizeof(ExactAngle));
  }
  return plan;
}

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

// core/rope_scaling.h keeps max_position_embeddings inside the scaling
// variants that read it (spec.rope.scaling.<variant>.max_position_embeddings);
// on the wire it is spec.rope.max_position_embeddings, which RopeFromProto
// copies in: that path is renamed (core/errors.h RenameFieldPath).
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
                          CheckTensor(request.query(), "query", kFloatDTypes, rank,
                                      context.limits));
  const RopeShape q = RopeShapeOf(query_view, layout);
  TensorView key_view;
  if (request.has_key()) {
    PHASOR_ASSIGN_OR_RETURN(key_view, CheckTensor(request.key(), "key", kFloatDTypes,
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
  // The rotated query and key are the response, as large as the inputs,
  // unless they are written into caller memory; the positions are
  // materialised at 8 bytes per token and axis.
  auto response_bytes = [&](const TensorView& view, const v1::Tensor* out) -> int64_t {
    return WritesToDestination(context, view.dtype, out, /*written_as_dtype=*/true)
               ? 0
               : static_cast<int64_t>(view.bytes.size());
  };
  PHASOR_RETURN_IF_ERROR(ReserveMemory(
      context, response_bytes(query_view, response->mutable_query()) +
                   (request.has_key() ? response_bytes(key_view, response->mutable_key()) : 0) +
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

  // The rotated tensors are written straight into the response's bytes,
  // or into the caller's memory when the call supplied some (shared memory).
  auto make_operand = [&](const TensorView& view, v1::Tensor* out) -> absl::StatusOr<RopeOperand> {
    const RopeShape shape = RopeShapeOf(view, layout);
    RopeOperand operand;
    operand.dtype = view.dtype;
    operand.num_tokens = shape.batch * shape.seq;
    operand.num_heads = shape.heads;
    operand.head_dim = shape.head_dim;
    operand.seq_len = shape.heads_first ? shape.seq : 0;
    operand.in = absl::MakeConstSpan(
        reinterpret_cast<const uint8_t*>(view.bytes.data()), view.bytes.size());
    PHASOR_ASSIGN_OR_RETURN(
        absl::Span<char> bytes,
        DestinationOf(context, view.shape, view.dtype, out, /*written_as_dtype=*/true));
    if (bytes.empty()) bytes = AllocateTensor(view.shape, view.dtype, out);
    operand.out = absl::MakeSpan(reinterpret_cast<uint8_t*>(bytes.data()), bytes.size());
    return operand;
  };
  PHASOR_ASSIGN_OR_RETURN(
      const std::shared_ptr<const RopePlan> plan,
      RopePlanFor(context, rope, spec->rope(), q.head_dim, positions));
  const RopeFrequencies& frequencies = plan->frequencies;
  // Core numbers positions flat over the (repeated) rows; the wire index is
  // the same unless rows were repeated.
  PHASOR_RETURN_IF_ERROR(PositionsErrorAtWire(
      ValidateRopePositions(positions, frequencies, "positions"),
      request.positions(), "positions"));

  PHASOR_ASSIGN_OR_RETURN(const RopeOperand query,
                          make_operand(query_view, response->mutable_query()));
  RopeOperand key;
  if (request.has_key()) {
    PHASOR_ASSIGN_OR_RETURN(key, make_operand(key_view, response->mutable_key()));
  }
  PHASOR_RETURN_IF_ERROR(ValidateRopeOperands(
      query, request.has_key() ? &key : nullptr, positions.size() / axes));

  PHASOR_RETURN_IF_ERROR(context.check_alive());
  ApplyRope(rope, *plan, positions, context.execution, query,
            request.has_key() ? &key : nullptr);
  response->set_attention_factor(frequencies.attention_factor);
  CountEncoded(context, EncodedKind::kRope, query_view.num_elements + key_view.num_elements);
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
      OutputDType(request.output_dtype(), "output_dtype", kFloatDTypes));
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
  PHASOR_RETURN_IF_ERROR(ReserveOutputMemory(context, both_shape, output_dtype, nullptr,
                                             /*extra_bytes=*/width * 8));
  PHASOR_ASSIGN_OR_RETURN(
      const PositionsInput positions_input,
      DecodePositions(request.positions(), "positions", context.limits,
                      /*max_rank=*/static_cast<int>(axes) + 1));
  const Positions positions = positions_input.view();
  PHASOR_RETURN_IF_ERROR(context.check_alive());
  PHASOR_ASSIGN_OR_RETURN(
      const std::shared_ptr<const RopePlan> plan,
      RopePlanFor(context, rope, spec->rope(), rope.rotary_dim, positions));
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
  CountEncoded(context, EncodedKind::kRopeTables, 2 * rows * width);
  return absl::OkStatus();
}

}  // namespace phasor::server
