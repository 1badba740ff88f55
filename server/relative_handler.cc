#include "server/relative_handler.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/relative/alibi.h"
#include "core/relative/relative_bias.h"
#include "server/spec_convert.h"

namespace phasor::server {
namespace {

// The spec a request configures: inline or the named profile's, which must
// be a relative_bias one.
absl::StatusOr<const v1::RelativeBiasSpec*> ResolveRelativeSpec(
    const HandlerContext& context, const v1::RelativeBiasRequest& request) {
  const v1::EncoderSpec* spec = nullptr;
  switch (request.config_case()) {
    case v1::RelativeBiasRequest::kSpec:
      spec = &request.spec();
      if (!spec->has_relative_bias()) {
        return InvalidField(kRelativeBiasPrefix, "RelativeBias needs spec.relative_bias");
      }
      return &spec->relative_bias();
    case v1::RelativeBiasRequest::kProfile: {
      PHASOR_ASSIGN_OR_RETURN(const v1::Profile* profile,
                              context.profiles->FindProfile(request.profile(), "profile"));
      if (!profile->spec().has_relative_bias()) {
        return InvalidField("profile",
                            absl::StrCat("profile ", QuoteForError(request.profile(), 64),
                                         " is not a relative_bias encoder"));
      }
      return &profile->spec().relative_bias();
    }
    case v1::RelativeBiasRequest::CONFIG_NOT_SET:
      break;
  }
  return InvalidField("spec", "set spec or profile");
}

// Integer positions (token indices or ns): FLOAT64 values are refused,
// from the wire dtype (CountPositions allowed INT64 and FLOAT64).
absl::Status RequireIntegers(const v1::Positions& positions, absl::string_view field) {
  if (!positions.has_values() || positions.values().dtype() != v1::FLOAT64) {
    return absl::OkStatus();
  }
  return InvalidField(absl::StrCat(field, ".values.dtype"),
                      "must be INT64 (token indices, or ns since the Unix epoch for "
                      "time_buckets and time_alibi)");
}

template <typename Fill>
absl::Status WriteBias(const HandlerContext& context, absl::Span<const int64_t> shape,
                       DType dtype, v1::Tensor* out, Fill&& fill) {
  absl::Span<char> bytes = AllocateTensor(shape, dtype, out);
  switch (dtype) {
    case DType::kFloat32:
      fill(FloatData(out));
      break;
    case DType::kFloat64:
      fill(DoubleData(out));
      break;
    default:
      // std::string's heap buffer is aligned for any scalar (as FloatData).
      fill(absl::MakeSpan(reinterpret_cast<uint16_t*>(bytes.data()), bytes.size() / 2));
      break;
  }
  return context.check_alive();
}

}  // namespace

absl::Status HandleAlibiBias(const HandlerContext& context,
                             const v1::AlibiBiasRequest& request,
                             v1::AlibiBiasResponse* response) {
  PHASOR_RETURN_IF_ERROR(
      ValidateAlibi(request.num_heads(), request.q_len(), request.k_len()));
  PHASOR_ASSIGN_OR_RETURN(
      const DType output_dtype,
      OutputDType(request.output_dtype(), "output_dtype", kFloatDTypes));
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
    PHASOR_RETURN_IF_ERROR(ReserveOutputMemory(context, bias_shape, output_dtype, nullptr));
  }
  PHASOR_RETURN_IF_ERROR(ReserveOutputMemory(context, slopes_shape, slopes_dtype, nullptr));

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
    CountEncoded(context, EncodedKind::kAlibi, values);
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
  CountEncoded(context, EncodedKind::kAlibi, values);
  return absl::OkStatus();
}

absl::Status HandleRelativeBias(const HandlerContext& context,
                                const v1::RelativeBiasRequest& request,
                                v1::RelativeBiasResponse* response) {
  PHASOR_ASSIGN_OR_RETURN(const v1::RelativeBiasSpec* wire,
                          ResolveRelativeSpec(context, request));
  PHASOR_ASSIGN_OR_RETURN(RelativeSpec spec, RelativeFromProto(*wire, context.limits));
  PHASOR_ASSIGN_OR_RETURN(
      const DType output_dtype,
      OutputDType(request.output_dtype(), "output_dtype", kFloatDTypes));
  PHASOR_ASSIGN_OR_RETURN(
      const int64_t q_len,
      CountPositions(request.query_positions(), "query_positions", context.limits));
  PHASOR_ASSIGN_OR_RETURN(
      const int64_t k_len,
      CountPositions(request.key_positions(), "key_positions", context.limits));
  PHASOR_RETURN_IF_ERROR(RequireIntegers(request.query_positions(), "query_positions"));
  PHASOR_RETURN_IF_ERROR(RequireIntegers(request.key_positions(), "key_positions"));

  // The table: inline, or the spec's named one, or none.
  const int64_t num_buckets = spec.time_alibi ? 0 : spec.bucketing.NumBuckets();
  std::optional<TensorView> inline_table;
  const LearnedTable* named_table = nullptr;
  int64_t heads = spec.alibi_heads;
  if (request.has_table()) {
    if (spec.time_alibi) {
      return InvalidField("table", "time_alibi has no learned table");
    }
    PHASOR_ASSIGN_OR_RETURN(inline_table,
                            CheckTensor(request.table(), "table", kFloatDTypes,
                                        /*rank=*/2, context.limits));
    if (inline_table->shape[0] != num_buckets || inline_table->shape[1] <= 0) {
      return InvalidField("table.shape",
                          absl::StrCat("must be [", num_buckets,
                                       ", num_heads > 0] (one row per bucket), got ",
                                       ShapeString(inline_table->shape)));
    }
    heads = inline_table->shape[1];
  } else if (!wire->table().empty()) {
    const std::string field = absl::StrCat(kRelativeBiasPrefix, ".table");
    PHASOR_ASSIGN_OR_RETURN(named_table,
                            context.profiles->FindLearnedTable(wire->table(), field));
    if (named_table->rows() != num_buckets) {
      return InvalidField(field, absl::StrCat("table ", QuoteForError(wire->table(), 64),
                                              " has ", named_table->rows(),
                                              " rows; the spec has ", num_buckets,
                                              " buckets"));
    }
    heads = named_table->dim();
  }
  const bool with_bias = heads > 0;
  const bool with_ids = !spec.time_alibi && (!with_bias || request.include_bucket_ids());

  // Both outputs against the limits, before anything they imply exists.
  const int64_t ids_shape[] = {q_len, k_len};
  const int64_t bias_shape[] = {heads, q_len, k_len};
  int64_t ids_bytes = 0;
  if (with_ids) {
    PHASOR_RETURN_IF_ERROR(
        CheckOutputSize(ids_shape, DType::kInt32, "key_positions", context.limits));
    ids_bytes = q_len * k_len * 4;  // Within the message limit: checked above.
    PHASOR_RETURN_IF_ERROR(ReserveOutputMemory(context, ids_shape, DType::kInt32, nullptr));
  }
  if (with_bias) {
    PHASOR_RETURN_IF_ERROR(CheckOutputSize(bias_shape, output_dtype, "key_positions",
                                           context.limits, /*extra_bytes=*/ids_bytes));
    // Written in its dtype directly (WriteBias): no float32 scratch.
    PHASOR_RETURN_IF_ERROR(ReserveMemory(
        context, heads * q_len * k_len * static_cast<int64_t>(DTypeSize(output_dtype))));
    int64_t elements = 0;
    if (with_ids && (!CheckedMultiply(heads + 1, q_len * k_len, &elements) ||
                     elements > context.limits.max_elements)) {
      return FieldError(absl::StatusCode::kResourceExhausted, "key_positions",
                        absl::StrCat("bucket ids and bias are ", heads + 1, " x ", q_len,
                                     " x ", k_len, " values, over the server's limit of ",
                                     context.limits.max_elements,
                                     " per request (phasor-server "
                                     "--max_elements_per_request raises it)"));
    }
  }

  response->set_num_buckets(num_buckets);
  if (q_len == 0 || k_len == 0) {
    // Nothing to compute: the other side's positions are not materialised
    // (a range of 2^24 would cost 128 MiB for an empty answer).
    if (with_ids) AllocateTensor(ids_shape, DType::kInt32, response->mutable_bucket_ids());
    if (with_bias) AllocateTensor(bias_shape, output_dtype, response->mutable_bias());
    return absl::OkStatus();
  }
  PHASOR_ASSIGN_OR_RETURN(
      const PositionsInput query_input,
      DecodePositions(request.query_positions(), "query_positions", context.limits));
  PHASOR_ASSIGN_OR_RETURN(
      const PositionsInput key_input,
      DecodePositions(request.key_positions(), "key_positions", context.limits));
  const Positions query = query_input.view();
  const Positions key = key_input.view();
  PHASOR_RETURN_IF_ERROR(context.check_alive());

  if (with_ids) {
    AllocateTensor(ids_shape, DType::kInt32, response->mutable_bucket_ids());
    std::string* data = response->mutable_bucket_ids()->mutable_data();
    ComputeBucketIds(spec.bucketing, query.integers(), key.integers(), context.execution,
                     absl::MakeSpan(reinterpret_cast<int32_t*>(data->data()),
                                    data->size() / sizeof(int32_t)));
    PHASOR_RETURN_IF_ERROR(context.check_alive());
  }
  if (!with_bias) {
    CountEncoded(context, EncodedKind::kRelativeBias, q_len * k_len);
    return absl::OkStatus();
  }

  if (spec.time_alibi) {
    const auto& alibi = wire->time_alibi();
    if (alibi.slopes_size() > 0) {
      spec.slopes.assign(alibi.slopes().begin(), alibi.slopes().end());
    } else {
      spec.slopes.resize(static_cast<size_t>(heads));
      AlibiSlopes(heads, absl::MakeSpan(spec.slopes));
    }
    PHASOR_RETURN_IF_ERROR(WriteBias(
        context, bias_shape, output_dtype, response->mutable_bias(), [&](auto out) {
          if constexpr (std::is_same_v<decltype(out), absl::Span<uint16_t>>) {
            ComputeTimeAlibiBias(spec.alibi, spec.slopes, query.integers(), key.integers(),
                                 output_dtype, context.execution, out);
          } else {
            ComputeTimeAlibiBias(spec.alibi, spec.slopes, query.integers(), key.integers(),
                                 context.execution, out);
          }
        }));
  } else {
    // The table in double (exact for every input dtype).
    std::vector<double> table_values;
    DoubleInput inline_values;
    absl::Span<const double> table;
    if (inline_table) {
      inline_values = DoubleInput(*inline_table);
      table = inline_values.span();
    } else {
      table_values.assign(named_table->values().begin(), named_table->values().end());
      table = table_values;
    }
    PHASOR_RETURN_IF_ERROR(WriteBias(
        context, bias_shape, output_dtype, response->mutable_bias(), [&](auto out) {
          if constexpr (std::is_same_v<decltype(out), absl::Span<uint16_t>>) {
            ComputeRelativeBias(spec.bucketing, query.integers(), key.integers(), table,
                                heads, output_dtype, context.execution, out);
          } else {
            ComputeRelativeBias(spec.bucketing, query.integers(), key.integers(), table,
                                heads, context.execution, out);
          }
        }));
  }
  CountEncoded(context, EncodedKind::kRelativeBias,
               heads * q_len * k_len + (with_ids ? q_len * k_len : 0));
  return absl::OkStatus();
}

namespace {

// Appends the buckets one side of the query passes through as the distance
// n grows from `first`: [n, end) per bucket, end the first distance in the
// next one (found by bisection: buckets never decrease with n), +inf for
// the last. `scale` turns n into the response's unit.
template <typename BucketOfDistance>
void AppendRanges(BucketOfDistance bucket, uint64_t first, bool after, double scale,
                  v1::DescribeResponse* response) {
  constexpr uint64_t kLast = std::numeric_limits<uint64_t>::max();
  uint64_t n = first;
  while (true) {
    const int32_t b = bucket(n);
    v1::RelativeBucketRange* range = response->add_buckets();
    range->set_bucket(b);
    range->set_key_after_query(after);
    range->set_min_distance(static_cast<double>(n) * scale);
    if (bucket(kLast) == b) {
      range->set_end_distance(std::numeric_limits<double>::infinity());
      return;
    }
    uint64_t lo = n, hi = kLast;  // bucket(lo) == b != bucket(hi)
    while (hi - lo > 1) {
      const uint64_t mid = lo + (hi - lo) / 2;
      (bucket(mid) == b ? lo : hi) = mid;
    }
    range->set_end_distance(static_cast<double>(hi) * scale);
    n = hi;
  }
}

}  // namespace

absl::Status DescribeRelativeBias(const HandlerContext& context,
                                  const v1::RelativeBiasSpec& wire,
                                  v1::DescribeResponse* response) {
  PHASOR_ASSIGN_OR_RETURN(const RelativeSpec spec, RelativeFromProto(wire, context.limits));
  if (spec.time_alibi) {
    return InvalidField(absl::StrCat(kRelativeBiasPrefix, ".time_alibi"),
                        "Describe needs a bucketing (t5, shaw or time_buckets); "
                        "time_alibi is linear in the gap");
  }
  // At most N ranges of 4 fields each: checked against the message limit
  // before any is computed.
  const int64_t num_buckets = spec.bucketing.NumBuckets();
  const int64_t shape[] = {num_buckets, 4};
  PHASOR_RETURN_IF_ERROR(
      CheckOutputSize(shape, DType::kFloat64, absl::StrCat(kRelativeBiasPrefix), context.limits));
  const RelativeBucketing& bucketing = spec.bucketing;
  // Distance n on each side, as positions that never overflow: the key n
  // after INT64_MIN, or n before INT64_MAX.
  const auto after = [&bucketing](uint64_t n) {
    const int64_t query = std::numeric_limits<int64_t>::min();
    return BucketOf(bucketing, query, static_cast<int64_t>(static_cast<uint64_t>(query) + n));
  };
  const auto before = [&bucketing](uint64_t n) {
    const int64_t query = std::numeric_limits<int64_t>::max();
    return BucketOf(bucketing, query, static_cast<int64_t>(static_cast<uint64_t>(query) - n));
  };
  const bool seconds = bucketing.kind == RelativeBucketing::Kind::kTimeBuckets;
  const double scale = seconds ? 1e-9 : 1.0;
  AppendRanges(before, 0, /*after=*/false, scale, response);
  const bool causal = (bucketing.kind == RelativeBucketing::Kind::kT5 && !bucketing.t5.bidirectional) ||
                      (seconds && !bucketing.time.bidirectional);
  // A causal bucketing puts every later key in bucket 0 (reported with the
  // keys at distance 0).
  if (!causal) AppendRanges(after, 1, /*after=*/true, scale, response);
  response->set_unit(seconds ? "seconds" : "positions");
  PHASOR_RETURN_IF_ERROR(context.check_alive());
  CountEncoded(context, EncodedKind::kDescribe, response->buckets_size());
  return absl::OkStatus();
}

absl::Status ValidateRelativeBiasProfile(const ProfileRegistry& profiles,
                                         const v1::RelativeBiasSpec& wire) {
  PHASOR_ASSIGN_OR_RETURN(const RelativeSpec spec, RelativeFromProto(wire, RequestLimits{}));
  if (wire.table().empty() || spec.time_alibi) return absl::OkStatus();
  const std::string field = absl::StrCat(kRelativeBiasPrefix, ".table");
  PHASOR_ASSIGN_OR_RETURN(const LearnedTable* table,
                          profiles.FindLearnedTable(wire.table(), field));
  if (table->rows() != spec.bucketing.NumBuckets()) {
    return InvalidField(field, absl::StrCat("table ", QuoteForError(wire.table(), 64), " has ",
                                            table->rows(), " rows; the spec has ",
                                            spec.bucketing.NumBuckets(), " buckets"));
  }
  return absl::OkStatus();
}

}  // namespace phasor::server
