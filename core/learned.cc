#include "core/learned.h"

#include <cassert>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/errors.h"
#include "core/status_macros.h"

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

absl::Status LearnedTable::ValidateInputs(const Positions& positions,
                                          absl::Span<const float> content,
                                          float content_scale) const {
  for (int64_t i = 0; i < positions.size(); ++i) {
    const double p = positions.at(i);
    const std::string field = absl::StrCat("positions[", i, "]");
    if (positions.is_real() && (!std::isfinite(p) || p != std::floor(p))) {
      return InvalidField(field, absl::StrCat("a learned table needs whole-number positions, got ", p));
    }
    if (p < 0 || p >= static_cast<double>(rows_)) {
      return FieldError(absl::StatusCode::kOutOfRange, field,
                        absl::StrCat("position ", p, " is outside the learned table of ",
                                     rows_, " rows (valid: 0..", rows_ - 1, ")"));
    }
  }
  if (!content.empty()) {
    const int64_t expected = positions.size() * dim_;
    if (static_cast<int64_t>(content.size()) != expected) {
      return InvalidField("content", absl::StrCat("must have ", positions.size(), " x ",
                                                  dim_, " = ", expected, " values, got ",
                                                  content.size()));
    }
    if (!std::isfinite(content_scale)) return InvalidField("content_scale", "must be finite");
  }
  return absl::OkStatus();
}

void LearnedTable::Encode(const Positions& positions, absl::Span<const float> content,
                          float content_scale, const ExecutionOptions& options,
                          absl::Span<float> out) const {
  assert(static_cast<int64_t>(out.size()) == positions.size() * dim_);
  ParallelFor(options, positions.size(), dim_, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t row = static_cast<int64_t>(positions.at(t));
      assert(row >= 0 && row < rows_);
      const float* src = values_.data() + row * dim_;
      float* dst = out.data() + t * dim_;
      if (content.empty()) {
        for (int64_t c = 0; c < dim_; ++c) dst[c] = src[c];
      } else {
        const float* x = content.data() + t * dim_;
        for (int64_t c = 0; c < dim_; ++c) dst[c] = x[c] * content_scale + src[c];
      }
    }
  });
}

}  // namespace phasor
