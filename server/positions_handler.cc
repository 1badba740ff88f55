#include "server/positions_handler.h"

#include <cstdint>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/positional/learned.h"
#include "core/positional/sinusoidal.h"
#include "server/spec_convert.h"

namespace phasor::server {

absl::Status HandleEncodePositions(const HandlerContext& context,
                                   const v1::EncodePositionsRequest& request,
                                   v1::EncodePositionsResponse* response) {
  PHASOR_ASSIGN_OR_RETURN(const v1::EncoderSpec* spec, ResolveSpec(context, request));
  PHASOR_RETURN_IF_ERROR(
      RequireKind(request, *spec, v1::EncoderSpec::kPositional, "EncodePositions"));
  const v1::PositionalSpec& positional = spec->positional();
  PHASOR_ASSIGN_OR_RETURN(
      const DType output_dtype,
      OutputDType(request.output_dtype(), "output_dtype", kFloatDTypes));
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
  PHASOR_RETURN_IF_ERROR(
      ReserveOutputMemory(context, output_shape, output_dtype, response->mutable_encodings()));

  // Content in the arithmetic's precision: float32, or double for FLOAT64.
  const bool in_double = output_dtype == DType::kFloat64;
  FloatInput content;
  DoubleInput content64;
  if (request.has_content()) {
    PHASOR_ASSIGN_OR_RETURN(const TensorView view,
                            CheckTensor(request.content(), "content", kFloatDTypes,
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
  CountEncoded(context, table != nullptr ? EncodedKind::kLearned : EncodedKind::kSinusoidal,
               rows * dim);
  return absl::OkStatus();
}

}  // namespace phasor::server
