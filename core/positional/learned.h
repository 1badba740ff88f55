// -----------------------------------------------------------------------------
// File: core/positional/learned.h
// -----------------------------------------------------------------------------
//
// Learned absolute position embeddings (GPT-2/BERT style): a trained table
// E[rows, dim] looked up by integer position, out[t] = content[t]·scale + E[p_t].
//
// A position outside [0, rows) is OUT_OF_RANGE naming the position and the
// table length — never a clamp. Real-valued positions must be whole numbers.
//
// Thread-safety: a LearnedTable is immutable after construction; any number
// of threads may call Encode concurrently.
//
// Example:
//
//   absl::StatusOr<LearnedTable> table = LearnedTable::FromFile("wpe.safetensors", "wpe");
//   std::vector<float> out(positions.size() * table->dim());
//   table->Encode(Positions::Integers(positions), {}, 1.0f, ExecutionOptions(),
//                 absl::MakeSpan(out));
#ifndef PHASOR_CORE_POSITIONAL_LEARNED_H_
#define PHASOR_CORE_POSITIONAL_LEARNED_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/adapters/parallel.h"
#include "core/base/positions.h"
#include "core/io/tensor_file.h"

namespace phasor {

class LearnedTable final {
 public:
  // From a [rows, dim] array (e.g. ReadArrayFile's result).
  static absl::StatusOr<LearnedTable> FromArray(const HostArray& array,
                                                absl::string_view name);
  // From a .npy or .safetensors file (`tensor_name` for safetensors).
  static absl::StatusOr<LearnedTable> FromFile(const std::string& path,
                                               absl::string_view tensor_name = "");

  int64_t rows() const { return rows_; }
  int64_t dim() const { return dim_; }
  absl::Span<const float> values() const { return values_; }

  // Positions in range and integral; content empty or positions·dim values.
  absl::Status ValidateInputs(const Positions& positions,
                              absl::Span<const float> content,
                              float content_scale) const;
  absl::Status ValidateInputs(const Positions& positions,
                              absl::Span<const double> content,
                              double content_scale) const;

  // Writes [positions.size(), dim] into `out`.
  // REQUIRES: ValidateInputs(...).ok(); out.size() == positions.size()·dim.
  void Encode(const Positions& positions, absl::Span<const float> content,
              float content_scale, const ExecutionOptions& options,
              absl::Span<float> out) const;
  // The same in double: the table's float32 rows widened exactly, content
  // added in double.
  void Encode(const Positions& positions, absl::Span<const double> content,
              double content_scale, const ExecutionOptions& options,
              absl::Span<double> out) const;

 private:
  LearnedTable(int64_t rows, int64_t dim, std::vector<float> values)
      : rows_(rows), dim_(dim), values_(std::move(values)) {}

  int64_t rows_;
  int64_t dim_;
  std::vector<float> values_;
};

}  // namespace phasor

#endif  // PHASOR_CORE_POSITIONAL_LEARNED_H_
