#include "core/positional/learned.h"

#include <cassert>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace phasor {

absl::StatusOr<LearnedTable> LearnedTable::FromArray(const HostArray& array,
                                                     absl::string_view name) {
  if (array.shape.size() != 2 || array.shape[0] <= 0 || array.shape[1] <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": a learned table must be 2-D [rows, dim] with rows, dim > 0"));
  }
  std::vector<float> values(array.values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(array.values[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": value ", i, " is not finite"));
    }
    values[i] = static_cast<float>(array.values[i]);
  }
  return LearnedTable(array.shape[0], array.shape[1], std::move(values));
}

absl::StatusOr<LearnedTable> LearnedTable::FromFile(const std::string& path,
                                                    absl::string_view tensor_name) {
  PHASOR_ASSIGN_OR_RETURN(const HostArray array, ReadArrayFile(path, tensor_name));
  return FromArray(array, path);
}

namespace {

absl::Status CheckLearnedInputs(int64_t rows, int64_t dim, const Positions& positions,
                                size_t content_size, bool scale_finite) {
  for (int64_t i = 0; i < positions.size(); ++i) {
    const double p = positions.at(i);
    const std::string field = absl::StrCat("positions[", i, "]");
    if (positions.is_real() && (!std::isfinite(p) || p != std::floor(p))) {
      return InvalidField(field, absl::StrCat("a learned table needs whole-number positions, got ", p));
    }
    if (p < 0 || p >= static_cast<double>(rows)) {
      return FieldError(absl::StatusCode::kOutOfRange, field,
                        absl::StrCat("position ", p, " is outside the learned table of ",
                                     rows, " rows (valid: 0..", rows - 1, ")"));
    }
  }
  if (content_size != 0) {
    const int64_t expected = positions.size() * dim;
    if (static_cast<int64_t>(content_size) != expected) {
      return InvalidField("content", absl::StrCat("must have ", positions.size(), " x ",
                                                  dim, " = ", expected, " values, got ",
                                                  content_size));
    }
    if (!scale_finite) return InvalidField("content_scale", "must be finite");
  }
  return absl::OkStatus();
}

// out[t] = content[t]·scale + E[p_t] in T (E's float rows widened for double).
template <typename T>
void LookUp(absl::Span<const float> values, int64_t dim, const Positions& positions,
            absl::Span<const T> content, T content_scale,
            const ExecutionOptions& options, absl::Span<T> out) {
  assert(static_cast<int64_t>(out.size()) == positions.size() * dim);
  ParallelFor(options, positions.size(), dim, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t row = static_cast<int64_t>(positions.at(t));
      assert(row >= 0 && row * dim < static_cast<int64_t>(values.size()));
      const float* src = values.data() + row * dim;
      T* dst = out.data() + t * dim;
      if (content.empty()) {
        for (int64_t c = 0; c < dim; ++c) dst[c] = src[c];
      } else {
        const T* x = content.data() + t * dim;
        for (int64_t c = 0; c < dim; ++c) dst[c] = x[c] * content_scale + src[c];
      }
    }
  });
}

}  // namespace

absl::Status LearnedTable::ValidateInputs(const Positions& positions,
                                          absl::Span<const float> content,
                                          float content_scale) const {
  return CheckLearnedInputs(rows_, dim_, positions, content.size(),
                            std::isfinite(content_scale));
}

absl::Status LearnedTable::ValidateInputs(const Positions& positions,
                                          absl::Span<const double> content,
                                          double content_scale) const {
  return CheckLearnedInputs(rows_, dim_, positions, content.size(),
                            std::isfinite(content_scale));
}

void LearnedTable::Encode(const Positions& positions, absl::Span<const float> content,
                          float content_scale, const ExecutionOptions& options,
                          absl::Span<float> out) const {
  LookUp(absl::MakeConstSpan(values_), dim_, positions, content, content_scale,
         options, out);
}

void LearnedTable::Encode(const Positions& positions, absl::Span<const double> content,
                          double content_scale, const ExecutionOptions& options,
                          absl::Span<double> out) const {
  LookUp(absl::MakeConstSpan(values_), dim_, positions, content, content_scale,
         options, out);
}

}  // namespace phasor
