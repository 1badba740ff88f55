#include "core/rope.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/errors.h"
#include "core/status_macros.h"

namespace phasor {
namespace {

// ---------------------------------------------------------------------------
// Layer 1: the scalar formula. One position's cos/sin row, in double from the
// exact position, rounded once to float. `scale` is the attention factor or 1.
void FillTrigRow(const double* inv_freq, int64_t half, double position,
                 double scale, float* cos_row, float* sin_row) {
  for (int64_t i = 0; i < half; ++i) {
    const double angle = position * inv_freq[i];
    cos_row[i] = static_cast<float>(std::cos(angle) * scale);
    sin_row[i] = static_cast<float>(std::sin(angle) * scale);
  }
}

// ---------------------------------------------------------------------------
// Layer 3: the inner rotate loops, float32 only. `__restrict` lets g++ -O3
// vectorise without runtime alias checks; callers never pass overlapping
// arrays (in-place rotation is staged through a scratch row, see below).
// The body runs kLanes pairs at a time (8 floats = one AVX register, two SSE
// registers), the tail finishes the rest one pair at a time.
constexpr int64_t kLanes = 8;

// HALF: pairs (i, i + half).
inline void RotateHalf(const float* __restrict x, const float* __restrict c,
                       const float* __restrict s, int64_t half,
                       float* __restrict out) {
  const float* __restrict x_hi = x + half;
  float* __restrict out_hi = out + half;
  int64_t i = 0;
  for (; i + kLanes <= half; i += kLanes) {
    for (int64_t j = i; j < i + kLanes; ++j) {
      const float lo = x[j];
      const float hi = x_hi[j];
      out[j] = lo * c[j] - hi * s[j];
      out_hi[j] = hi * c[j] + lo * s[j];
    }
  }
  for (; i < half; ++i) {
    const float lo = x[i];
    const float hi = x_hi[i];
    out[i] = lo * c[i] - hi * s[i];
    out_hi[i] = hi * c[i] + lo * s[i];
  }
}

// INTERLEAVED: pairs (2i, 2i + 1).
inline void RotateInterleaved(const float* __restrict x,
                              const float* __restrict c,
                              const float* __restrict s, int64_t half,
                              float* __restrict out) {
  int64_t i = 0;
  for (; i + kLanes <= half; i += kLanes) {
    for (int64_t j = i; j < i + kLanes; ++j) {
      const float even = x[2 * j];
      const float odd = x[2 * j + 1];
      out[2 * j] = even * c[j] - odd * s[j];
      out[2 * j + 1] = odd * c[j] + even * s[j];
    }
  }
  for (; i < half; ++i) {
    const float even = x[2 * i];
    const float odd = x[2 * i + 1];
    out[2 * i] = even * c[i] - odd * s[i];
    out[2 * i + 1] = odd * c[i] + even * s[i];
  }
}

inline void Rotate(RopeLayout layout, const float* __restrict x,
                   const float* __restrict c, const float* __restrict s,
                   int64_t half, float* __restrict out) {
  if (layout == RopeLayout::kHalf) {
    RotateHalf(x, c, s, half, out);
  } else {
    RotateInterleaved(x, c, s, half, out);
  }
}

// Storage formats. Arithmetic is always float32; 16-bit formats are widened
// on load and narrowed (round to nearest even) once on store.
struct Float32Storage {
  using Elem = float;
  static constexpr bool kNeedsWidening = false;
};
struct Float16Storage {
  using Elem = uint16_t;
  static constexpr bool kNeedsWidening = true;
  static float Widen(uint16_t bits) { return HalfToFloat(bits); }
  static uint16_t Narrow(float value) { return FloatToHalf(value); }
};
struct BFloat16Storage {
  using Elem = uint16_t;
  static constexpr bool kNeedsWidening = true;
  static float Widen(uint16_t bits) { return BFloat16ToFloat(bits); }
  static uint16_t Narrow(float value) { return FloatToBFloat16(value); }
};

// Per-chunk scratch, allocated once per ParallelFor chunk, never per element.
struct RowScratch {
  explicit RowScratch(int64_t rotary_dim)
      : cos(static_cast<size_t>(rotary_dim / 2)),
        sin(static_cast<size_t>(rotary_dim / 2)),
        row_in(static_cast<size_t>(rotary_dim)),
        row_out(static_cast<size_t>(rotary_dim)),
        narrow(static_cast<size_t>(rotary_dim)) {}
  std::vector<float> cos;
  std::vector<float> sin;
  std::vector<float> row_in;
  std::vector<float> row_out;
  std::vector<uint16_t> narrow;
};

bool AlignedFor(const void* pointer, size_t alignment) {
  return reinterpret_cast<uintptr_t>(pointer) % alignment == 0;
}

// Rotates every head of token `token` of `operand` with the token's cos/sin.
// Rows are addressed as bytes and moved with memcpy where alignment is not
// known, so no misaligned typed access can happen.
template <class Storage>
void RotateToken(const RopeOperand& operand, int64_t token, RopeLayout layout,
                 int64_t rotary_dim, RowScratch& scratch) {
  using Elem = typename Storage::Elem;
  constexpr size_t kElemBytes = sizeof(Elem);
  const int64_t half = rotary_dim / 2;
  const int64_t head_dim = operand.head_dim;
  const size_t row_bytes = static_cast<size_t>(head_dim) * kElemBytes;
  const size_t rotary_bytes = static_cast<size_t>(rotary_dim) * kElemBytes;
  const float* c = scratch.cos.data();
  const float* s = scratch.sin.data();
  for (int64_t head = 0; head < operand.num_heads; ++head) {
    const size_t offset =
        static_cast<size_t>(token * operand.num_heads + head) * row_bytes;
    const uint8_t* src = operand.in.data() + offset;
    uint8_t* dst = operand.out.data() + offset;
    const bool in_place = src == dst;
    if constexpr (!Storage::kNeedsWidening) {
      if (!in_place && AlignedFor(src, kElemBytes) && AlignedFor(dst, kElemBytes)) {
        Rotate(layout, reinterpret_cast<const float*>(src), c, s, half,
               reinterpret_cast<float*>(dst));
      } else {
        // Same arithmetic through scratch rows: in-place output is bytewise
        // equal to out-of-place output.
        std::memcpy(scratch.row_in.data(), src, rotary_bytes);
        Rotate(layout, scratch.row_in.data(), c, s, half,
               scratch.row_out.data());
        std::memcpy(dst, scratch.row_out.data(), rotary_bytes);
      }
    } else {
      uint16_t* narrow = scratch.narrow.data();
      std::memcpy(narrow, src, rotary_bytes);
      float* row_in = scratch.row_in.data();
      for (int64_t j = 0; j < rotary_dim; ++j) row_in[j] = Storage::Widen(narrow[j]);
      Rotate(layout, row_in, c, s, half, scratch.row_out.data());
      const float* row_out = scratch.row_out.data();
      for (int64_t j = 0; j < rotary_dim; ++j) narrow[j] = Storage::Narrow(row_out[j]);
      std::memcpy(dst, narrow, rotary_bytes);
    }
    if (!in_place && head_dim > rotary_dim) {
      std::memcpy(dst + rotary_bytes, src + rotary_bytes, row_bytes - rotary_bytes);
    }
  }
}

// Layers 2 and 4: per token, one cos/sin row shared by all query and key
// heads; ParallelFor over tokens, one writer per token.
template <class Storage>
void ApplyRopeTyped(const RopeSpec& spec, const RopeFrequencies& frequencies,
                    const Positions& positions, const ExecutionOptions& options,
                    const RopeOperand& query, const RopeOperand* key) {
  const int64_t rotary_dim = RopeRotaryDim(spec, query.head_dim);
  const int64_t half = rotary_dim / 2;
  const double scale =
      spec.fold_attention_factor ? frequencies.attention_factor : 1.0;
  const int64_t heads = query.num_heads + (key != nullptr ? key->num_heads : 0);
  ParallelFor(options, query.num_tokens, heads * query.head_dim,
              [&](int64_t begin, int64_t end) {
                RowScratch scratch(rotary_dim);
                for (int64_t token = begin; token < end; ++token) {
                  FillTrigRow(frequencies.inv_freq.data(), half,
                              positions.at(token), scale, scratch.cos.data(),
                              scratch.sin.data());
                  RotateToken<Storage>(query, token, spec.layout, rotary_dim,
                                       scratch);
                  if (key != nullptr) {
                    RotateToken<Storage>(*key, token, spec.layout, rotary_dim,
                                         scratch);
                  }
                }
              });
}

// Shortest text that reads back as the same double ("0.9", not
// "0.90000000000000002"), so messages show what the caller sent.
std::string Fmt(double value) {
  char buffer[32];
  const std::to_chars_result result =
      std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

bool IsRopeStorage(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16;
}

absl::Status ValidateOperand(const RopeOperand& operand,
                             absl::string_view field) {
  if (!IsRopeStorage(operand.dtype)) {
    return InvalidField(absl::StrCat(field, ".dtype"),
                        absl::StrCat("must be float32, float16 or bfloat16, got ",
                                     DTypeName(operand.dtype)));
  }
  if (operand.num_tokens < 0 || operand.num_heads < 0 || operand.head_dim <= 0) {
    return InvalidField(
        absl::StrCat(field, ".shape"),
        absl::StrCat("must be [tokens, heads, head_dim] with head_dim > 0, got [",
                     operand.num_tokens, ", ", operand.num_heads, ", ",
                     operand.head_dim, "]"));
  }
  const int64_t bytes = RopeOperandBytes(operand.dtype, operand.num_tokens,
                                         operand.num_heads, operand.head_dim);
  if (bytes < 0) {
    return InvalidField(absl::StrCat(field, ".shape"),
                        absl::StrCat("element count overflows int64: [",
                                     operand.num_tokens, ", ", operand.num_heads,
                                     ", ", operand.head_dim, "]"));
  }
  if (static_cast<int64_t>(operand.in.size()) != bytes) {
    return InvalidField(
        absl::StrCat(field, ".data"),
        absl::StrCat("must hold ", bytes, " bytes for shape [",
                     operand.num_tokens, ", ", operand.num_heads, ", ",
                     operand.head_dim, "] ", DTypeName(operand.dtype), ", got ",
                     operand.in.size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRopeSpec(const RopeSpec& spec, int64_t head_dim,
                              absl::string_view field_prefix) {
  const std::string rotary_field = absl::StrCat(field_prefix, ".rotary_dim");
  if (spec.rotary_dim < 0) {
    return InvalidField(rotary_field,
                        absl::StrCat("must be >= 0 (0 means head_dim), got ",
                                     spec.rotary_dim));
  }
  const int64_t rotary_dim = RopeRotaryDim(spec, head_dim);
  if (rotary_dim <= 0) {
    return InvalidField(rotary_field,
                        absl::StrCat("must be > 0 (head_dim is ", head_dim,
                                     "), got ", rotary_dim));
  }
  if (rotary_dim % 2 != 0 || rotary_dim > head_dim) {
    return InvalidField(
        rotary_field,
        absl::StrCat("must be even and <= head_dim ", head_dim, ", got ",
                     rotary_dim, spec.rotary_dim == 0 ? " (0 means head_dim)" : ""));
  }
  if (!std::isfinite(spec.base) || spec.base <= 0.0) {
    return InvalidField(absl::StrCat(field_prefix, ".base"),
                        absl::StrCat("must be finite and > 0, got ", Fmt(spec.base)));
  }
  return ValidateRopeScaling(spec.scaling, spec.base, rotary_dim, field_prefix);
}

int64_t DefaultRopeSeqLen(const Positions& positions) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t seq_len = 1;
  if (positions.is_real()) {
    double max_position = -std::numeric_limits<double>::infinity();
    for (double p : positions.reals()) max_position = std::max(max_position, p);
    // 2^62 keeps the cast exact and far above any context length.
    const double length = std::floor(max_position) + 1.0;
    if (length >= 0x1p62) return int64_t{1} << 62;
    if (length > 1.0) seq_len = static_cast<int64_t>(length);
  } else {
    for (int64_t p : positions.integers()) {
      const int64_t length = p == kMax ? kMax : p + 1;
      seq_len = std::max(seq_len, length);
    }
  }
  return seq_len;
}

absl::StatusOr<RopeFrequencies> ComputeRopeFrequencies(
    const RopeSpec& spec, int64_t head_dim, int64_t seq_len,
    absl::string_view field_prefix) {
  PHASOR_RETURN_IF_ERROR(ValidateRopeSpec(spec, head_dim, field_prefix));
  if (seq_len < 1) {
    return InvalidField("seq_len", absl::StrCat("must be >= 1, got ", seq_len));
  }
  const int64_t rotary_dim = RopeRotaryDim(spec, head_dim);
  RopeFrequencies frequencies =
      ScaledRopeFrequencies(spec.scaling, spec.base, rotary_dim, seq_len);
  // Valid fields can still combine into an unusable result (e.g. base 1e300
  // with a tiny longrope factor); refuse it rather than emit NaN.
  for (size_t i = 0; i < frequencies.inv_freq.size(); ++i) {
    if (!std::isfinite(frequencies.inv_freq[i]) || frequencies.inv_freq[i] < 0.0) {
      return InvalidField(
          field_prefix,
          absl::StrCat("scaled inverse frequency ", i, " is not a finite "
                       "non-negative number (", Fmt(frequencies.inv_freq[i]),
                       "); check base and scaling"));
    }
  }
  if (!std::isfinite(frequencies.attention_factor) ||
      frequencies.attention_factor <= 0.0) {
    return InvalidField(
        absl::StrCat(field_prefix, ".scaling"),
        absl::StrCat("attention factor must be finite and > 0, got ",
                     Fmt(frequencies.attention_factor)));
  }
  return frequencies;
}

absl::Status ValidateRopePositions(const Positions& positions,
                                   const RopeFrequencies& frequencies,
                                   absl::string_view field) {
  double max_abs_position = 0.0;
  if (positions.is_real()) {
    const absl::Span<const double> reals = positions.reals();
    for (size_t i = 0; i < reals.size(); ++i) {
      if (!std::isfinite(reals[i])) {
        return InvalidField(absl::StrCat(field, "[", i, "]"),
                            absl::StrCat("must be finite, got ", Fmt(reals[i])));
      }
      max_abs_position = std::max(max_abs_position, std::fabs(reals[i]));
    }
  } else {
    for (int64_t p : positions.integers()) {
      max_abs_position =
          std::max(max_abs_position, std::fabs(static_cast<double>(p)));
    }
  }
  double max_inv_freq = 0.0;
  for (double theta : frequencies.inv_freq) max_inv_freq = std::max(max_inv_freq, theta);
  if (!std::isfinite(max_abs_position * max_inv_freq)) {
    return InvalidField(
        field, absl::StrCat("angle |position|·θ overflows: max |position| ",
                            Fmt(max_abs_position), " times max θ ",
                            Fmt(max_inv_freq)));
  }
  return absl::OkStatus();
}

void ComputeRopeTables(const RopeFrequencies& frequencies,
                       bool fold_attention_factor, const Positions& positions,
                       const ExecutionOptions& options, absl::Span<float> cos,
                       absl::Span<float> sin) {
  const int64_t half = static_cast<int64_t>(frequencies.inv_freq.size());
  const int64_t num_positions = positions.size();
  // REQUIRES: output spans sized [positions, rd/2].
  assert(static_cast<int64_t>(cos.size()) == num_positions * half);
  assert(static_cast<int64_t>(sin.size()) == num_positions * half);
  const double scale = fold_attention_factor ? frequencies.attention_factor : 1.0;
  ParallelFor(options, num_positions, 2 * half, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      FillTrigRow(frequencies.inv_freq.data(), half, positions.at(n), scale,
                  cos.data() + n * half, sin.data() + n * half);
    }
  });
}

int64_t RopeOperandBytes(DType dtype, int64_t num_tokens, int64_t num_heads,
                         int64_t head_dim) {
  if (num_tokens < 0 || num_heads < 0 || head_dim < 0) return -1;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t total = static_cast<int64_t>(DTypeSize(dtype));
  for (int64_t extent : {num_tokens, num_heads, head_dim}) {
    if (extent != 0 && total > kMax / extent) return -1;
    total *= extent;
  }
  return total;
}

absl::Status ValidateRopeOperands(const RopeOperand& query,
                                  const RopeOperand* key,
                                  int64_t num_positions) {
  PHASOR_RETURN_IF_ERROR(ValidateOperand(query, "query"));
  if (query.num_tokens != num_positions) {
    return InvalidField("positions",
                        absl::StrCat("must have one position per query token (",
                                     query.num_tokens, "), got ", num_positions));
  }
  if (key == nullptr) return absl::OkStatus();
  if (key->dtype != query.dtype) {
    return InvalidField("key.dtype",
                        absl::StrCat("must equal query.dtype ",
                                     DTypeName(query.dtype), ", got ",
                                     DTypeName(key->dtype)));
  }
  if (key->num_tokens != query.num_tokens || key->head_dim != query.head_dim) {
    return InvalidField(
        "key.shape",
        absl::StrCat("must be [", query.num_tokens, ", heads, ", query.head_dim,
                     "] to match query, got [", key->num_tokens, ", ",
                     key->num_heads, ", ", key->head_dim, "]"));
  }
  return ValidateOperand(*key, "key");
}

void ApplyRope(const RopeSpec& spec, const RopeFrequencies& frequencies,
               const Positions& positions, const ExecutionOptions& options,
               const RopeOperand& query, const RopeOperand* key) {
  // REQUIRES: see rope.h; the spans were validated against the shapes.
  assert(static_cast<int64_t>(frequencies.inv_freq.size()) ==
         RopeTableWidth(spec, query.head_dim));
  assert(positions.size() == query.num_tokens);
  assert(query.out.size() == query.in.size());
  assert(key == nullptr || key->out.size() == key->in.size());
  switch (query.dtype) {
    case DType::kFloat32:
      ApplyRopeTyped<Float32Storage>(spec, frequencies, positions, options,
                                     query, key);
      return;
    case DType::kFloat16:
      ApplyRopeTyped<Float16Storage>(spec, frequencies, positions, options,
                                     query, key);
      return;
    case DType::kBFloat16:
      ApplyRopeTyped<BFloat16Storage>(spec, frequencies, positions, options,
                                      query, key);
      return;
    default:
      assert(false && "ValidateRopeOperands rejects other dtypes");
      return;
  }
}

}  // namespace phasor
