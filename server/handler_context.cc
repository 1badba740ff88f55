#include "server/handler_context.h"

namespace phasor::server {

void CountEncoded(const HandlerContext& context, EncodedKind kind, int64_t values) {
  if (context.metrics != nullptr) context.metrics->RecordEncodedValues(kind, values);
}

absl::Status ReserveMemory(const HandlerContext& context, int64_t bytes) {
  if (context.memory == nullptr) return absl::OkStatus();
  return context.memory->Reserve(bytes, context.check_alive);
}

namespace {

// The destination the call gives `out`, or null.
const OutputDestination* DestinationFor(const HandlerContext& context, const v1::Tensor* out) {
  for (const OutputDestination& destination : context.output_destinations) {
    if (destination.tensor == out) return &destination;
  }
  return nullptr;
}

bool IsDirect(const OutputDestination& destination, DType dtype, bool written_as_dtype) {
  return (written_as_dtype || dtype == DType::kFloat32 || dtype == DType::kFloat64) &&
         reinterpret_cast<uintptr_t>(destination.bytes.data()) % DTypeSize(dtype) == 0;
}

}  // namespace

absl::Status ReserveOutputMemory(const HandlerContext& context, absl::Span<const int64_t> shape,
                                 DType dtype, const v1::Tensor* out, int64_t extra_bytes) {
  int64_t elements = 1;
  for (int64_t extent : shape) elements *= extent;
  const int64_t dtype_bytes = static_cast<int64_t>(DTypeSize(dtype));
  const int64_t own_bytes = WritesToDestination(context, dtype, out) ? 0 : elements * dtype_bytes;
  // 16-bit outputs are computed in float32 first (WriteFloatOutput).
  const int64_t scratch = dtype_bytes < 4 ? elements * 4 : 0;
  return ReserveMemory(context, own_bytes + kOtherFieldCopies * extra_bytes + scratch);
}

bool WritesToDestination(const HandlerContext& context, DType dtype, const v1::Tensor* out,
                         bool written_as_dtype) {
  const OutputDestination* destination = out == nullptr ? nullptr : DestinationFor(context, out);
  return destination != nullptr && IsDirect(*destination, dtype, written_as_dtype);
}

absl::StatusOr<absl::Span<char>> DestinationOf(const HandlerContext& context,
                                               absl::Span<const int64_t> shape, DType dtype,
                                               v1::Tensor* out, bool written_as_dtype) {
  const OutputDestination* destination = DestinationFor(context, out);
  if (destination == nullptr) return absl::Span<char>();
  int64_t bytes = static_cast<int64_t>(DTypeSize(dtype));
  for (int64_t extent : shape) bytes *= extent;  // CheckOutputSize passed.
  if (bytes > static_cast<int64_t>(destination->bytes.size())) {
    return InvalidField(
        destination->field,
        absl::StrCat("shared_memory_byte_size is ", destination->bytes.size(),
                     " bytes; the output needs ", bytes, " (", ShapeString(shape), ")"));
  }
  if (!IsDirect(*destination, dtype, written_as_dtype)) return absl::Span<char>();
  out->clear_shape();
  for (int64_t extent : shape) out->add_shape(extent);
  out->set_dtype(DTypeToProto(dtype));
  out->clear_data();
  return destination->bytes.subspan(0, static_cast<size_t>(bytes));
}

const char* SpecKindName(v1::EncoderSpec::KindCase kind) {
  switch (kind) {
    case v1::EncoderSpec::kPositional: return "positional";
    case v1::EncoderSpec::kRope: return "rope";
    case v1::EncoderSpec::kTemporal: return "temporal";
    case v1::EncoderSpec::kRelativeBias: return "relative_bias";
    case v1::EncoderSpec::KIND_NOT_SET: break;
  }
  return "empty";
}

}  // namespace phasor::server
