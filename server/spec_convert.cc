#include "server/spec_convert.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "server/convert.h"

namespace phasor::server {

SinusoidalSpec SinusoidalFromProto(const v1::SinusoidalSpec& spec) {
  SinusoidalSpec out;
  out.dim = spec.dim();
  if (spec.has_base()) out.base = spec.base();
  switch (spec.layout()) {
    case v1::SinusoidalSpec::SPLIT_SIN_COS:
      out.layout = SinusoidalLayout::kSplitSinCos;
      break;
    case v1::SinusoidalSpec::SPLIT_COS_SIN:
      out.layout = SinusoidalLayout::kSplitCosSin;
      break;
    default:  // LAYOUT_UNSPECIFIED, INTERLEAVED
      out.layout = SinusoidalLayout::kInterleaved;
      break;
  }
  out.frequencies = spec.frequencies() == v1::SinusoidalSpec::TENSOR2TENSOR
                        ? FrequencyScheme::kTensor2Tensor
                        : FrequencyScheme::kVaswani;
  return out;
}

namespace {

absl::StatusOr<RopeScaling> ScalingFromProto(const v1::RopeScaling& scaling,
                                             int64_t max_position_embeddings) {
  const std::optional<int64_t> max_positions =
      max_position_embeddings > 0 ? std::optional<int64_t>(max_position_embeddings)
                                  : std::nullopt;
  switch (scaling.kind_case()) {
    case v1::RopeScaling::kLinear:
      return LinearRopeScaling{scaling.linear().factor()};
    case v1::RopeScaling::kNtk:
      return NtkRopeScaling{scaling.ntk().factor()};
    case v1::RopeScaling::kDynamic:
      return DynamicNtkRopeScaling{scaling.dynamic().factor(),
                                   max_position_embeddings};
    case v1::RopeScaling::kYarn: {
      const v1::RopeScaling::Yarn& in = scaling.yarn();
      YarnRopeScaling out;
      if (in.has_factor()) out.factor = in.factor();
      if (in.has_original_max_position_embeddings()) {
        out.original_max_position_embeddings = in.original_max_position_embeddings();
      }
      out.max_position_embeddings = max_positions;
      if (in.has_beta_fast()) out.beta_fast = in.beta_fast();
      if (in.has_beta_slow()) out.beta_slow = in.beta_slow();
      if (in.has_mscale()) out.mscale = in.mscale();
      if (in.has_mscale_all_dim()) out.mscale_all_dim = in.mscale_all_dim();
      if (in.has_attention_factor()) out.attention_factor = in.attention_factor();
      if (in.has_truncate()) out.truncate = in.truncate();
      return out;
    }
    case v1::RopeScaling::kLongrope: {
      const v1::RopeScaling::LongRope& in = scaling.longrope();
      LongRopeScaling out;
      out.short_factor.assign(in.short_factor().begin(), in.short_factor().end());
      out.long_factor.assign(in.long_factor().begin(), in.long_factor().end());
      if (in.has_original_max_position_embeddings()) {
        out.original_max_position_embeddings = in.original_max_position_embeddings();
      }
      out.max_position_embeddings = max_positions;
      if (in.has_factor()) out.factor = in.factor();
      if (in.has_attention_factor()) out.attention_factor = in.attention_factor();
      return out;
    }
    case v1::RopeScaling::kLlama3: {
      const v1::RopeScaling::Llama3& in = scaling.llama3();
      Llama3RopeScaling out;
      if (in.has_factor()) out.factor = in.factor();
      if (in.has_low_freq_factor()) out.low_freq_factor = in.low_freq_factor();
      if (in.has_high_freq_factor()) out.high_freq_factor = in.high_freq_factor();
      if (in.has_original_max_position_embeddings()) {
        out.original_max_position_embeddings = in.original_max_position_embeddings();
      }
      out.max_position_embeddings = max_positions;
      return out;
    }
    case v1::RopeScaling::kProportional: {
      const v1::RopeScaling::Proportional& in = scaling.proportional();
      ProportionalRopeScaling out;
      if (in.has_factor()) out.factor = in.factor();
      if (in.has_partial_rotary_factor()) {
        out.partial_rotary_factor = in.partial_rotary_factor();
      }
      return out;
    }
    case v1::RopeScaling::KIND_NOT_SET:
      break;
  }
  return NoRopeScaling{};
}

}  // namespace

absl::StatusOr<RopeSpec> RopeFromProto(const v1::RopeSpec& spec) {
  RopeSpec out;
  if (spec.rotary_dim() < 0) {
    return InvalidField(absl::StrCat(kRopePrefix, ".rotary_dim"),
                        absl::StrCat("must be >= 0 (0 = head dimension), got ",
                                     spec.rotary_dim()));
  }
  if (spec.max_position_embeddings() < 0) {
    return InvalidField(absl::StrCat(kRopePrefix, ".max_position_embeddings"),
                        absl::StrCat("must be >= 0, got ",
                                     spec.max_position_embeddings()));
  }
  if (spec.seq_len() < 0) {
    return InvalidField(absl::StrCat(kRopePrefix, ".seq_len"),
                        absl::StrCat("must be >= 0 (0 = from the positions), got ",
                                     spec.seq_len()));
  }
  if (spec.mrope_section_size() != 0 && spec.mrope_section_size() != 3) {
    return InvalidField(absl::StrCat(kRopePrefix, ".mrope_section"),
                        absl::StrCat("must have 3 sizes (temporal, height, width), got ",
                                     spec.mrope_section_size()));
  }
  out.mrope_section.assign(spec.mrope_section().begin(), spec.mrope_section().end());
  out.mrope_interleaved = spec.mrope_interleaved();
  out.rotary_dim = spec.rotary_dim();
  if (spec.has_base()) out.base = spec.base();
  switch (spec.layout()) {
    case v1::RopeSpec::LAYOUT_UNSPECIFIED:
    case v1::RopeSpec::HALF:
      out.layout = RopeLayout::kHalf;
      break;
    case v1::RopeSpec::INTERLEAVED:
      out.layout = RopeLayout::kInterleaved;
      break;
    default:
      return InvalidField(absl::StrCat(kRopePrefix, ".layout"),
                          absl::StrCat("unknown layout ", spec.layout()));
  }
  absl::StatusOr<RopeScaling> scaling =
      ScalingFromProto(spec.scaling(), spec.max_position_embeddings());
  if (!scaling.ok()) return scaling.status();
  out.scaling = *std::move(scaling);
  out.fold_attention_factor =
      spec.has_fold_attention_factor() ? spec.fold_attention_factor() : true;
  return out;
}

}  // namespace phasor::server

namespace phasor::server {
namespace {

absl::StatusOr<OriginKind> OriginFromProto(v1::TimeBlock::Origin origin,
                                           absl::string_view field) {
  switch (origin) {
    case v1::TimeBlock::ORIGIN_UNSPECIFIED:
    case v1::TimeBlock::FIRST_OBSERVATION:
      return OriginKind::kFirstObservation;
    case v1::TimeBlock::UNIX_EPOCH:
      return OriginKind::kUnixEpoch;
    case v1::TimeBlock::EXPLICIT:
      return OriginKind::kExplicit;
    default:
      break;
  }
  return InvalidField(field, absl::StrCat("unknown origin ", origin));
}

absl::StatusOr<Time2VecBlock> Time2VecFromProto(const v1::Time2VecBlock& block,
                                                const ProfileRegistry& profiles,
                                                absl::string_view prefix) {
  Time2VecBlock out;
  const bool inline_parameters = block.omega_size() > 0 || block.phi_size() > 0;
  if (!block.parameters().empty()) {
    if (inline_parameters) {
      return InvalidField(absl::StrCat(prefix, ".parameters"),
                          "set either parameters or omega/phi, not both");
    }
    PHASOR_ASSIGN_OR_RETURN(
        const Time2VecParameters* parameters,
        profiles.FindTime2Vec(block.parameters(), absl::StrCat(prefix, ".parameters")));
    out.omega = parameters->omega;
    out.phi = parameters->phi;
  } else {
    out.omega.assign(block.omega().begin(), block.omega().end());
    out.phi.assign(block.phi().begin(), block.phi().end());
  }
  if (block.has_unit_seconds()) out.unit_seconds = block.unit_seconds();
  PHASOR_ASSIGN_OR_RETURN(out.origin,
                          OriginFromProto(block.origin(), absl::StrCat(prefix, ".origin")));
  out.origin_ns = block.origin_ns();
  return out;
}

absl::StatusOr<GapsBlock> GapsFromProto(const v1::GapsBlock& block, bool sum_model,
                                        absl::string_view prefix) {
  GapsBlock out;
  if (block.has_global_delta()) out.global_delta = block.global_delta();
  if (block.has_per_channel_delta()) out.per_channel_delta = block.per_channel_delta();
  switch (block.first_observation()) {
    case v1::GapsBlock::FIRST_OBSERVATION_UNSPECIFIED:
    case v1::GapsBlock::ZERO:
      out.first_observation = FirstObservationPolicy::kZero;
      break;
    case v1::GapsBlock::SINCE_ORIGIN:
      out.first_observation = FirstObservationPolicy::kSinceOrigin;
      break;
    case v1::GapsBlock::FLAG:
      out.first_observation = FirstObservationPolicy::kFlag;
      break;
    default:
      return InvalidField(absl::StrCat(prefix, ".first_observation"),
                          absl::StrCat("unknown policy ", block.first_observation()));
  }
  switch (block.transform()) {
    case v1::GapsBlock::TRANSFORM_UNSPECIFIED:
    case v1::GapsBlock::RAW:
      out.transform = GapTransform::kRaw;
      break;
    case v1::GapsBlock::LOG1P:
      out.transform = GapTransform::kLog1p;
      break;
    case v1::GapsBlock::SINUSOIDAL:
      out.transform = GapTransform::kSinusoidal;
      break;
    default:
      return InvalidField(absl::StrCat(prefix, ".transform"),
                          absl::StrCat("unknown transform ", block.transform()));
  }
  if (block.has_unit_seconds()) out.unit_seconds = block.unit_seconds();
  out.include_mask = block.include_mask();
  out.include_last_value = block.include_last_value();
  if (block.sinusoidal_dim() != 0 || sum_model) out.sinusoidal_dim = block.sinusoidal_dim();
  if (block.sinusoidal_min_period_seconds() != 0) {
    out.sinusoidal_min_period_seconds = block.sinusoidal_min_period_seconds();
  }
  if (block.sinusoidal_max_period_seconds() != 0) {
    out.sinusoidal_max_period_seconds = block.sinusoidal_max_period_seconds();
  }
  PHASOR_ASSIGN_OR_RETURN(out.origin,
                          OriginFromProto(block.origin(), absl::StrCat(prefix, ".origin")));
  out.origin_ns = block.origin_ns();
  return out;
}

absl::StatusOr<CalendarField> CalendarFieldFromProto(v1::CalendarBlock::Field field,
                                                     absl::string_view path) {
  switch (field) {
    case v1::CalendarBlock::SECOND_OF_MINUTE: return CalendarField::kSecondOfMinute;
    case v1::CalendarBlock::MINUTE_OF_HOUR: return CalendarField::kMinuteOfHour;
    case v1::CalendarBlock::HOUR_OF_DAY: return CalendarField::kHourOfDay;
    case v1::CalendarBlock::DAY_OF_WEEK: return CalendarField::kDayOfWeek;
    case v1::CalendarBlock::DAY_OF_MONTH: return CalendarField::kDayOfMonth;
    case v1::CalendarBlock::DAY_OF_YEAR: return CalendarField::kDayOfYear;
    case v1::CalendarBlock::WEEK_OF_YEAR: return CalendarField::kWeekOfYear;
    case v1::CalendarBlock::MONTH_OF_YEAR: return CalendarField::kMonthOfYear;
    case v1::CalendarBlock::QUARTER: return CalendarField::kQuarter;
    case v1::CalendarBlock::YEAR: return CalendarField::kYear;
    case v1::CalendarBlock::ISO_YEAR: return CalendarField::kIsoYear;
    case v1::CalendarBlock::IS_WEEKEND: return CalendarField::kIsWeekend;
    case v1::CalendarBlock::IS_MONTH_START: return CalendarField::kIsMonthStart;
    case v1::CalendarBlock::IS_MONTH_END: return CalendarField::kIsMonthEnd;
    case v1::CalendarBlock::IS_QUARTER_START: return CalendarField::kIsQuarterStart;
    case v1::CalendarBlock::IS_QUARTER_END: return CalendarField::kIsQuarterEnd;
    default: break;
  }
  return InvalidField(path, field == v1::CalendarBlock::FIELD_UNSPECIFIED
                                ? std::string("must be a calendar field, got FIELD_UNSPECIFIED")
                                : absl::StrCat("unknown field ", field));
}

absl::StatusOr<CalendarBlock> CalendarFromProto(const v1::CalendarBlock& block,
                                                const ProfileRegistry& profiles,
                                                absl::string_view prefix) {
  CalendarBlock out;
  out.time_zone = block.time_zone().empty() ? "UTC" : block.time_zone();
  for (int i = 0; i < block.fields_size(); ++i) {
    PHASOR_ASSIGN_OR_RETURN(
        const CalendarField field,
        CalendarFieldFromProto(block.fields(i), absl::StrCat(prefix, ".fields[", i, "]")));
    out.fields.push_back(field);
  }
  switch (block.encoding()) {
    case v1::CalendarBlock::ENCODING_UNSPECIFIED:
    case v1::CalendarBlock::CYCLIC:
      out.encoding = CalendarEncoding::kCyclic;
      break;
    case v1::CalendarBlock::LINEAR:
      out.encoding = CalendarEncoding::kLinear;
      break;
    case v1::CalendarBlock::INDEX:
      out.encoding = CalendarEncoding::kIndex;
      break;
    default:
      return InvalidField(absl::StrCat(prefix, ".encoding"),
                          absl::StrCat("unknown encoding ", block.encoding()));
  }
  out.fractional = block.fractional();
  out.include_utc_offset = block.include_utc_offset();
  out.include_dst = block.include_dst();
  if (block.has_min_year()) out.min_year = block.min_year();
  if (block.has_max_year()) out.max_year = block.max_year();
  out.zero_based_index = block.zero_based_index();
  out.fourier_orders.assign(block.fourier_orders().begin(), block.fourier_orders().end());
  if (block.has_holidays()) {
    const v1::HolidayFeatures& in = block.holidays();
    const std::string hp = absl::StrCat(prefix, ".holidays");
    HolidaysBlock holidays;
    holidays.dates.assign(in.dates().begin(), in.dates().end());
    if (!in.calendar().empty()) {
      PHASOR_ASSIGN_OR_RETURN(
          HolidayDayList days,
          profiles.FindHolidayCalendar(in.calendar(), absl::StrCat(hp, ".calendar")));
      holidays.calendars.push_back(std::move(days));
    }
    // Sets alone give only their own columns; a block with nothing else
    // keeps its one (then all-zero) unnamed column.
    holidays.include_unnamed_set =
        in.sets().empty() || !in.dates().empty() || !in.calendar().empty();
    if (in.sets_size() > kMaxHolidaySets) {
      return InvalidField(absl::StrCat(hp, ".sets"),
                          absl::StrCat("at most ", kMaxHolidaySets,
                                       " sets, got ", in.sets_size()));
    }
    for (int i = 0; i < in.sets_size(); ++i) {
      const v1::HolidaySet& set_in = in.sets(i);
      HolidaySet set;
      set.name = set_in.name();
      set.dates.assign(set_in.dates().begin(), set_in.dates().end());
      if (!set_in.calendar().empty()) {
        PHASOR_ASSIGN_OR_RETURN(
            HolidayDayList days,
            profiles.FindHolidayCalendar(
                set_in.calendar(), absl::StrCat(hp, ".sets[", i, "].calendar")));
        set.calendars.push_back(std::move(days));
      }
      holidays.sets.push_back(std::move(set));
    }
    switch (in.kernel()) {
      case v1::HolidayFeatures::KERNEL_UNSPECIFIED:
      case v1::HolidayFeatures::INDICATOR:
        holidays.kernel = HolidayKernel::kIndicator;
        break;
      case v1::HolidayFeatures::EXPONENTIAL:
        holidays.kernel = HolidayKernel::kExponential;
        break;
      case v1::HolidayFeatures::SQUARED_EXPONENTIAL:
        holidays.kernel = HolidayKernel::kSquaredExponential;
        break;
      default:
        return InvalidField(absl::StrCat(hp, ".kernel"),
                            absl::StrCat("unknown kernel ", in.kernel()));
    }
    switch (in.distance_mode()) {
      case v1::HolidayFeatures::DISTANCE_MODE_UNSPECIFIED:
      case v1::HolidayFeatures::NEAREST:
        holidays.distance_mode = HolidayDistanceMode::kNearest;
        break;
      case v1::HolidayFeatures::GLUONTS:
        holidays.distance_mode = HolidayDistanceMode::kGluonTs;
        break;
      default:
        return InvalidField(absl::StrCat(hp, ".distance_mode"),
                            absl::StrCat("unknown distance mode ", in.distance_mode()));
    }
    if (in.has_alpha()) holidays.alpha = in.alpha();
    holidays.include_days_since = in.include_days_since();
    holidays.include_days_until = in.include_days_until();
    if (in.has_max_distance_days()) holidays.max_distance_days = in.max_distance_days();
    out.holidays = std::move(holidays);
  }
  return out;
}

}  // namespace

absl::StatusOr<TimeBlock> TimeBlockFromProto(const v1::TimeBlock& block,
                                             absl::string_view field_prefix,
                                             bool sum_model) {
  TimeBlock out;
  if (block.dim() != 0 || sum_model) out.dim = block.dim();
  if (block.min_period_seconds() != 0) out.min_period_seconds = block.min_period_seconds();
  if (block.max_period_seconds() != 0) out.max_period_seconds = block.max_period_seconds();
  if (block.periods_size() > 0) {
    if (block.min_period_seconds() != 0 || block.max_period_seconds() != 0) {
      return InvalidField(absl::StrCat(field_prefix, block.min_period_seconds() != 0
                                                         ? ".min_period_seconds"
                                                         : ".max_period_seconds"),
                          "must be unset with periods (the explicit periods "
                          "replace the ladder)");
    }
    int64_t orders = 0;
    for (const v1::TimeBlock::Period& period : block.periods()) {
      const int64_t order = period.order() == 0 ? 1 : period.order();
      out.periods.push_back({period.period_seconds(), order});
      orders += order;
    }
    if (block.dim() == 0 && !sum_model) out.dim = 2 * orders;
  }
  PHASOR_ASSIGN_OR_RETURN(
      out.origin, OriginFromProto(block.origin(), absl::StrCat(field_prefix, ".origin")));
  out.origin_ns = block.origin_ns();
  return out;
}

absl::StatusOr<TemporalSpec> TemporalFromProto(const v1::TemporalSpec& spec,
                                               const ProfileRegistry& profiles) {
  TemporalSpec out;
  switch (spec.combine()) {
    case v1::TemporalSpec::COMBINE_UNSPECIFIED:
    case v1::TemporalSpec::CONCAT:
      out.combine = CombineMode::kConcat;
      break;
    case v1::TemporalSpec::SUM:
      out.combine = CombineMode::kSum;
      break;
    default:
      return InvalidField(absl::StrCat(kTemporalPrefix, ".combine"),
                          absl::StrCat("unknown combine mode ", spec.combine()));
  }
  const bool sum = out.combine == CombineMode::kSum;
  out.d_model = spec.d_model();
  if (spec.has_content()) {
    ContentBlock content;
    if (spec.content().has_scale()) content.scale = spec.content().scale();
    out.content = content;
  }
  if (spec.has_time()) {
    PHASOR_ASSIGN_OR_RETURN(
        out.time,
        TimeBlockFromProto(spec.time(), absl::StrCat(kTemporalPrefix, ".time"), sum));
  }
  if (spec.has_time2vec()) {
    PHASOR_ASSIGN_OR_RETURN(
        out.time2vec, Time2VecFromProto(spec.time2vec(), profiles,
                                        absl::StrCat(kTemporalPrefix, ".time2vec")));
  }
  if (spec.has_gaps()) {
    PHASOR_ASSIGN_OR_RETURN(
        out.gaps,
        GapsFromProto(spec.gaps(), sum, absl::StrCat(kTemporalPrefix, ".gaps")));
  }
  if (spec.has_calendar()) {
    PHASOR_ASSIGN_OR_RETURN(
        out.calendar, CalendarFromProto(spec.calendar(), profiles,
                                        absl::StrCat(kTemporalPrefix, ".calendar")));
  }
  return out;
}

}  // namespace phasor::server

namespace phasor::server {
namespace {

bool Bidirectional(v1::RelativeBiasSpec::Direction direction) {
  return direction != v1::RelativeBiasSpec::CAUSAL;
}

absl::Status CheckDirection(v1::RelativeBiasSpec::Direction direction,
                            absl::string_view field) {
  if (v1::RelativeBiasSpec::Direction_IsValid(direction)) return absl::OkStatus();
  return InvalidField(field, absl::StrCat("unknown direction ", static_cast<int>(direction)));
}

}  // namespace

absl::StatusOr<RelativeSpec> RelativeFromProto(const v1::RelativeBiasSpec& wire,
                                               const RequestLimits& limits) {
  RelativeSpec spec;
  switch (wire.kind_case()) {
    case v1::RelativeBiasSpec::kT5: {
      const std::string prefix = absl::StrCat(kRelativeBiasPrefix, ".t5");
      const auto& t5 = wire.t5();
      PHASOR_RETURN_IF_ERROR(CheckDirection(t5.direction(), absl::StrCat(prefix, ".direction")));
      spec.bucketing.kind = RelativeBucketing::Kind::kT5;
      spec.bucketing.t5.num_buckets = t5.num_buckets() == 0 ? 32 : t5.num_buckets();
      spec.bucketing.t5.max_distance = t5.max_distance() == 0 ? 128 : t5.max_distance();
      spec.bucketing.t5.bidirectional = Bidirectional(t5.direction());
      PHASOR_RETURN_IF_ERROR(ValidateBucketing(spec.bucketing, prefix));
      return spec;
    }
    case v1::RelativeBiasSpec::kShaw:
      spec.bucketing.kind = RelativeBucketing::Kind::kShaw;
      spec.bucketing.shaw_max_relative_position = wire.shaw().max_relative_position();
      PHASOR_RETURN_IF_ERROR(ValidateBucketing(spec.bucketing, absl::StrCat(kRelativeBiasPrefix, ".shaw")));
      return spec;
    case v1::RelativeBiasSpec::kTimeBuckets: {
      const std::string prefix = absl::StrCat(kRelativeBiasPrefix, ".time_buckets");
      const auto& time = wire.time_buckets();
      PHASOR_RETURN_IF_ERROR(
          CheckDirection(time.direction(), absl::StrCat(prefix, ".direction")));
      spec.bucketing.kind = RelativeBucketing::Kind::kTimeBuckets;
      spec.bucketing.time.num_buckets = time.num_buckets() == 0 ? 32 : time.num_buckets();
      spec.bucketing.time.exact_seconds = time.exact_seconds();
      spec.bucketing.time.max_seconds = time.max_seconds();
      spec.bucketing.time.bidirectional = Bidirectional(time.direction());
      PHASOR_RETURN_IF_ERROR(ValidateBucketing(spec.bucketing, prefix));
      return spec;
    }
    case v1::RelativeBiasSpec::kTimeAlibi: {
      const std::string prefix = absl::StrCat(kRelativeBiasPrefix, ".time_alibi");
      const auto& alibi = wire.time_alibi();
      spec.time_alibi = true;
      spec.alibi.unit_seconds = alibi.has_unit_seconds() ? alibi.unit_seconds() : 1.0;
      spec.alibi.causal = alibi.causal();
      PHASOR_RETURN_IF_ERROR(ValidateTimeAlibi(spec.alibi, prefix));
      if (!wire.table().empty()) {
        return InvalidField(absl::StrCat(kRelativeBiasPrefix, ".table"),
                            "time_alibi has no learned table");
      }
      if (alibi.slopes_size() > 0) {
        if (alibi.num_heads() != 0 && alibi.num_heads() != alibi.slopes_size()) {
          return InvalidField(absl::StrCat(prefix, ".num_heads"),
                              absl::StrCat("must be 0 or the number of slopes (",
                                           alibi.slopes_size(), "), got ",
                                           alibi.num_heads()));
        }
        for (int h = 0; h < alibi.slopes_size(); ++h) {
          const double slope = alibi.slopes(h);
          if (!std::isfinite(slope) || slope < 0) {
            return InvalidField(absl::StrCat(prefix, ".slopes[", h, "]"),
                                absl::StrCat("must be finite and >= 0, got ", slope));
          }
        }
        spec.alibi_heads = alibi.slopes_size();
      } else {
        if (alibi.num_heads() <= 0) {
          return InvalidField(absl::StrCat(prefix, ".num_heads"),
                              absl::StrCat("must be > 0 (or give slopes), got ",
                                           alibi.num_heads()));
        }
        PHASOR_RETURN_IF_ERROR(
            CheckWidth(alibi.num_heads(), absl::StrCat(prefix, ".num_heads"), limits));
        spec.alibi_heads = alibi.num_heads();
      }
      return spec;
    }
    case v1::RelativeBiasSpec::KIND_NOT_SET:
      break;
  }
  return InvalidField(kRelativeBiasPrefix, "set t5, shaw, time_buckets or time_alibi");
}

}  // namespace phasor::server
