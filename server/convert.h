// Conversions between phasor.v1 messages and core/ types, and the checks a
// request's raw tensors need before core/ may look at them.
//
// Every check returns an absl::Status built with core/errors.h, so its field
// path ("query.data", "positions.range.count") reaches the client as a
// google.rpc.BadRequest violation. Tensor checks, in order: dtype allowed,
// rank, every dimension >= 0, element count within the request limit, byte
// count equal to product(shape)·sizeof(dtype).
//
// Tensor bytes are read in place when they are float32/int64/float64 and
// suitably aligned (protobuf's heap strings are); otherwise they are copied
// once into an aligned buffer. Wire data is little-endian, as is every host
// Phasor builds for (checked at compile time).
//
// Thread-safety: pure functions; the buffer classes are not shared.
#ifndef PHASOR_SERVER_CONVERT_H_
#define PHASOR_SERVER_CONVERT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/adapters/dtype.h"
#include "core/base/positions.h"
#include "phasor/v1/encoder.pb.h"

namespace phasor::server {

using Shape = absl::InlinedVector<int64_t, 4>;

// Limits that apply to one request (from ServerOptions).
struct RequestLimits {
  int64_t max_elements = int64_t{1} << 24;
  int64_t max_message_bytes = int64_t{4} << 20;
};

// DTYPE_UNSPECIFIED and unknown values are INVALID_ARGUMENT at `field`.
absl::StatusOr<DType> DTypeFromProto(v1::DType dtype, absl::string_view field);
v1::DType DTypeToProto(DType dtype);
// "[2,4,128]"; beyond 8 dimensions the first 8 and the count,
// "[1,1,1,1,1,1,1,1,...(10000 dims)]", so a message quoting a client's shape
// stays short.
std::string ShapeString(absl::Span<const int64_t> shape);

// A request tensor whose dtype, shape and byte count were checked.
struct TensorView {
  DType dtype = DType::kFloat32;
  Shape shape;
  int64_t num_elements = 0;
  absl::string_view bytes;
};

// Request tensors whose elements are read where they lie rather than from
// their `data` field: the Open Inference Protocol's shared-memory inputs
// (server/inference_shared_memory.h), which the kernels read in place.
// While a ScopedTensorBytes over a list is alive on a thread, TensorBytes --
// through which every reader of a request tensor's elements goes -- takes a
// listed tensor's bytes from the list on that thread. The list and the memory it names
// must outlive the scope; scopes nest (the innermost is consulted).
class TensorBytesList final {
 public:
  void Add(const v1::Tensor* tensor, absl::string_view bytes) {
    entries_.push_back({tensor, bytes});
  }
  // The bytes listed for `tensor`, or null.
  const absl::string_view* Find(const v1::Tensor* tensor) const;

 private:
  struct Entry {
    const v1::Tensor* tensor;
    absl::string_view bytes;
  };
  absl::InlinedVector<Entry, 4> entries_;
};

class ScopedTensorBytes final {
 public:
  explicit ScopedTensorBytes(const TensorBytesList* list);
  ScopedTensorBytes(const ScopedTensorBytes&) = delete;
  ScopedTensorBytes& operator=(const ScopedTensorBytes&) = delete;
  ~ScopedTensorBytes();

 private:
  const TensorBytesList* const outer_;
};

// The bytes of a request tensor's elements: those a ScopedTensorBytes in
// scope lists for it, else its `data` field. Every reader of a request
// tensor's elements goes through this (CheckTensor, DecodePositions).
absl::string_view TensorBytes(const v1::Tensor& tensor);

// Checks `tensor` (see the file comment). `rank` < 0 accepts any rank.
absl::StatusOr<TensorView> CheckTensor(const v1::Tensor& tensor,
                                       absl::string_view field,
                                       absl::Span<const DType> allowed,
                                       int rank, const RequestLimits& limits);

// The values of a FLOAT32/FLOAT16/BFLOAT16/FLOAT64 tensor as float32: a view
// of the request bytes for aligned float32, otherwise a converted copy.
class FloatInput final {
 public:
  FloatInput() = default;
  explicit FloatInput(const TensorView& view);
  FloatInput(FloatInput&&) = default;
  FloatInput& operator=(FloatInput&&) = default;

  absl::Span<const float> span() const { return span_; }

 private:
  std::vector<float> storage_;
  absl::Span<const float> span_;
};

// The values of a FLOAT32/FLOAT16/BFLOAT16/FLOAT64 tensor as double (exact
// widening): a view of the request bytes for aligned FLOAT64, otherwise a
// converted copy.
class DoubleInput final {
 public:
  DoubleInput() = default;
  explicit DoubleInput(const TensorView& view);
  DoubleInput(DoubleInput&&) = default;
  DoubleInput& operator=(DoubleInput&&) = default;

  absl::Span<const double> span() const { return span_; }

 private:
  std::vector<double> storage_;
  absl::Span<const double> span_;
};

// Aligned view (or copy) of an INT64 / FLOAT64 / INT32 tensor's values.
template <typename T>
class TypedInput final {
 public:
  TypedInput() = default;
  explicit TypedInput(const TensorView& view);
  TypedInput(TypedInput&&) = default;
  TypedInput& operator=(TypedInput&&) = default;

  absl::Span<const T> span() const { return span_; }

 private:
  std::vector<T> storage_;
  absl::Span<const T> span_;
};

// Positions decoded from a request, owning whatever storage they need.
class PositionsInput final {
 public:
  PositionsInput() = default;
  PositionsInput(PositionsInput&&) = default;
  PositionsInput& operator=(PositionsInput&&) = default;

  Positions view() const;
  int64_t size() const { return size_; }

 private:
  friend absl::StatusOr<PositionsInput> DecodePositions(const v1::Positions&,
                                                        absl::string_view,
                                                        const RequestLimits&, int);
  std::vector<int64_t> generated_;  // Materialised range.
  TypedInput<int64_t> integers_;
  TypedInput<double> reals_;
  bool is_real_ = false;
  int64_t size_ = 0;
};

// The number of positions, with every check DecodePositions makes on the
// range parameters or the tensor's dtype, shape and byte count, but without
// allocating anything: handlers size their outputs from it (and reject them)
// before a range is materialised.
// `max_rank` > 1 accepts values of 1 to max_rank dimensions (ApplyRope's
// [B, T] position_ids, M-RoPE's [3, ...]); the count is their product.
absl::StatusOr<int64_t> CountPositions(const v1::Positions& positions,
                                       absl::string_view field,
                                       const RequestLimits& limits, int max_rank = 1);

// `field` is the request field holding the Positions ("positions"). A range
// with step 0, a negative count, arithmetic overflow, or a count over the
// element limit is rejected; tensor values must be INT64 or FLOAT64 [N] and
// finite. A range is materialised (8 bytes per position): callers check the
// output its count implies first (CountPositions).
absl::StatusOr<PositionsInput> DecodePositions(const v1::Positions& positions,
                                               absl::string_view field,
                                               const RequestLimits& limits,
                                               int max_rank = 1);
// The positions' shape: [count] for a range, else the tensor's (checked by
// CountPositions).
std::vector<int64_t> PositionsShape(const v1::Positions& positions);

// core/ names the i-th position "positions[i]" (core/positions.h has no wire
// form). On the wire that is `field`.values[i] for a tensor, and `field`.range
// for a range, whose i-th value is start + i·step: that index is not a field,
// so it goes into the description ("element 3 of the range: ..."). Edits the
// path of a status about positions[i] (core/errors.h); returns any other
// status unchanged.
absl::Status PositionsErrorAtWire(const absl::Status& status,
                                  const v1::Positions& positions,
                                  absl::string_view field);

// `status` re-addressed to the wire field `path`: same code, same description
// (after `note`, when given), new path (core/errors.h WithFieldPath). For
// core paths that differ from the proto's; a status without a path is
// returned unchanged.
absl::Status ReplaceFieldPath(const absl::Status& status, absl::string_view path,
                              absl::string_view note = "");

// Rejects an output of `shape` values of `dtype` that exceeds the element
// or message limit; the error names `field`, the input that drives the size.
// Elements that overflow int64 are reported as such. `extra_bytes` (0..2^62)
// counts other response fields sized by the request (e.g. RopeTables'
// inv_freq) toward the message limit. Handlers call it before allocating
// anything the output implies.
absl::Status CheckOutputSize(absl::Span<const int64_t> shape, DType dtype,
                             absl::string_view field,
                             const RequestLimits& limits, int64_t extra_bytes = 0);

// A width or count from a spec (a dim, a channel count) that sizes per-request
// tables even when no row is produced: RESOURCE_EXHAUSTED at `field` above
// the element limit, or when one row of that width (2 bytes a column) would
// not fit the message limit, so a tiny request cannot ask for a huge
// allocation.
absl::Status CheckWidth(int64_t value, absl::string_view field,
                        const RequestLimits& limits);

// Output dtype for float results: FLOAT32 when unspecified; otherwise one of
// `allowed`.
absl::StatusOr<DType> OutputDType(v1::DType requested, absl::string_view field,
                                  absl::Span<const DType> allowed);

// Sets out's shape and dtype and sizes its data; returns the bytes to fill.
absl::Span<char> AllocateTensor(absl::Span<const int64_t> shape, DType dtype,
                                v1::Tensor* out);
// For FLOAT64 tensors from AllocateTensor: the data as doubles.
absl::Span<double> DoubleData(v1::Tensor* tensor);
// For FLOAT32 tensors from AllocateTensor: the data as floats.
absl::Span<float> FloatData(v1::Tensor* tensor);
// Writes float values into `out` converted to `dtype` (FLOAT32, FLOAT16,
// BFLOAT16 or FLOAT64).
void StoreFloats(absl::Span<const float> values,
                 absl::Span<const int64_t> shape, DType dtype, v1::Tensor* out);
// `values` widened/narrowed from double.
void StoreDoubles(absl::Span<const double> values,
                  absl::Span<const int64_t> shape, DType dtype, v1::Tensor* out);

// Overflow-checked a·b for sizes; false on overflow or a negative operand.
bool CheckedMultiply(int64_t a, int64_t b, int64_t* product);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_CONVERT_H_
