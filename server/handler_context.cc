#include "server/handler_context.h"

namespace phasor::server {

void CountEncoded(const HandlerContext& context, EncodedKind kind, int64_t values) {
  if (context.metrics != nullptr) context.metrics->RecordEncodedValues(kind, values);
}

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

absl::StatusOr<absl::Span<char>> DestinationOf(const HandlerContext& context,
                                               absl::Span<const int64_t> shape, DType dtype,
                                               v1::Tensor* out, bool written_as_dtype) {
  for (const OutputDestination& destination : context.output_destinations) {
    if (destination.tensor != out) continue;
    int64_t bytes = static_cast<int64_t>(DTypeSize(dtype));
    for (int64_t extent : shape) bytes *= extent;  // CheckOutputSize passed.
    if (bytes > static_cast<int64_t>(destination.bytes.size())) {
      return InvalidField(
          destination.field,
          absl::StrCat("shared_memory_byte_size is ", destination.bytes.size(),
                       " bytes; the output needs ", bytes, " (", ShapeString(shape), ")"));
    }
    const size_t alignment = DTypeSize(dtype);
    const bool direct =
        (written_as_dtype || dtype == DType::kFloat32 || dtype == DType::kFloat64) &&
        reinterpret_cast<uintptr_t>(destination.bytes.data()) % alignment == 0;
    if (!direct) return absl::Span<char>();
    out->clear_shape();
    for (int64_t extent : shape) out->add_shape(extent);
    out->set_dtype(DTypeToProto(dtype));
    out->clear_data();
    return destination.bytes.subspan(0, static_cast<size_t>(bytes));
  }
  return absl::Span<char>();
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
