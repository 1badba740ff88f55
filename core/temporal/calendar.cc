#include "core/temporal/calendar.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/math/exact_angle.h"
#include "core/math/sincos.h"
#include "core/temporal/calendar_angles.h"
#include "core/temporal/calendar_fields.h"
#include "core/temporal/elapsed_time.h"
#include "core/temporal/holidays.h"
#include "core/temporal/local_time.h"
#include "core/temporal/time_zone.h"

namespace phasor {

using calendar_internal::CivilValue;
using calendar_internal::ClockCycles;
using calendar_internal::ClockOf;
using calendar_internal::CyclePeriod;
using calendar_internal::ExactCycle;
using calendar_internal::FieldBase;
using calendar_internal::FieldFraction;
using calendar_internal::FixedDayCycles;
using calendar_internal::HarmonicAngle;
using calendar_internal::IsClockField;
using calendar_internal::IsCyclicField;
using calendar_internal::IsFlagField;
using calendar_internal::IsYearField;
using calendar_internal::LinearCount;
using calendar_internal::MaxCivilValue;
using calendar_internal::TableHarmonics;
using calendar_internal::kNanosPerSecond;
using calendar_internal::kNumFieldKinds;

namespace {

constexpr int64_t kNanosPerDay = 86400 * int64_t{1000000000};

// The CYCLIC phase x/P of `field` at `local` as numerator/denominator in
// nanoseconds of the local clock: the ratio FieldFraction and CyclePeriod
// give in double, here exact (each denominator < 2^55: 53 ISO weeks).
void CyclePhase(CalendarField field, const LocalTime& t, bool fractional,
                int64_t* numerator, int64_t* denominator) {
  const int64_t clock_ns =
      fractional ? (t.hour * int64_t{3600} + t.minute * 60 + t.second) *
                           kNanosPerSecond +
                       t.subsecond_ns
                 : 0;
  const int64_t day = kNanosPerDay;
  switch (field) {
    case CalendarField::kSecondOfMinute:
      *numerator = t.second * kNanosPerSecond + (fractional ? t.subsecond_ns : 0);
      *denominator = 60 * kNanosPerSecond;
      return;
    case CalendarField::kMinuteOfHour:
      *numerator = (t.minute * int64_t{60} + (fractional ? t.second : 0)) *
                       kNanosPerSecond +
                   (fractional ? t.subsecond_ns : 0);
      *denominator = 3600 * kNanosPerSecond;
      return;
    case CalendarField::kHourOfDay:
      *numerator = fractional ? clock_ns : t.hour * 3600 * kNanosPerSecond;
      *denominator = day;
      return;
    case CalendarField::kDayOfWeek:
      *numerator = t.weekday * day + clock_ns;
      *denominator = 7 * day;
      return;
    case CalendarField::kDayOfMonth:
      *numerator = (t.date.day() - 1) * day + clock_ns;
      *denominator = t.days_in_month * day;
      return;
    case CalendarField::kDayOfYear:
      *numerator = (t.day_of_year - 1) * day + clock_ns;
      *denominator = t.days_in_year * day;
      return;
    case CalendarField::kWeekOfYear:
      *numerator = (t.iso_week - 1) * 7 * day +
                   (fractional ? t.weekday * day + clock_ns : 0);
      *denominator = t.iso_weeks_in_year * 7 * day;
      return;
    case CalendarField::kMonthOfYear: {
      const int64_t month_ns = t.days_in_month * day;
      *numerator = (t.date.month() - 1) * month_ns +
                   (fractional ? (t.date.day() - 1) * day + clock_ns : 0);
      *denominator = 12 * month_ns;
      return;
    }
    case CalendarField::kQuarter: {
      const int64_t month_ns = t.days_in_month * day;
      const int quarter = (t.date.month() - 1) / 3;
      *numerator =
          quarter * 3 * month_ns +
          (fractional ? ((t.date.month() - 1) % 3) * month_ns +
                            (t.date.day() - 1) * day + clock_ns
                      : 0);
      *denominator = 12 * month_ns;
      return;
    }
    default:  // Not cyclic.
      break;
  }
  *numerator = 0;
  *denominator = 1;
}

}  // namespace


namespace {

// Years' range, zero-based INDEX and Fourier orders.
absl::Status ValidateCalendarAdditions(const CalendarBlock& block,
                                       absl::string_view field_prefix) {
  const auto path = [&](absl::string_view name) {
    return absl::StrCat(field_prefix, ".", name);
  };
  if (block.zero_based_index && block.encoding != CalendarEncoding::kIndex) {
    return InvalidField(path("zero_based_index"),
                        "applies to INDEX encoding only");
  }
  // |year| <= 2^31 keeps x = year − min_year and the span exact.
  constexpr int64_t kYearLimit = int64_t{1} << 31;
  for (const auto& [name, year] : {std::pair{"min_year", block.min_year},
                                   std::pair{"max_year", block.max_year}}) {
    if (year.has_value() && (*year < -kYearLimit || *year > kYearLimit)) {
      return InvalidField(path(name), absl::StrCat("must be in [", -kYearLimit,
                                                   ", ", kYearLimit, "], got ", *year));
    }
  }
  if (block.max_year.has_value() && !block.min_year.has_value()) {
    return InvalidField(path("min_year"), "must be set with max_year");
  }
  if (block.min_year.has_value() && block.max_year.has_value() &&
      *block.max_year <= *block.min_year) {
    return InvalidField(path("max_year"),
                        absl::StrCat("must be > min_year (", *block.min_year,
                                     "), got ", *block.max_year));
  }
  for (size_t i = 0; i < block.fields.size(); ++i) {
    const CalendarField field = block.fields[i];
    if (!IsYearField(field)) continue;
    if (block.encoding != CalendarEncoding::kIndex && !block.max_year.has_value()) {
      return InvalidField(
          path(block.min_year.has_value() ? "max_year" : "min_year"),
          absl::StrCat("must be set: fields[", i, "] ", CalendarFieldName(field),
                       " is encoded LINEAR on the range [min_year, max_year]"));
    }
    if (block.zero_based_index && !block.min_year.has_value()) {
      return InvalidField(
          path("min_year"),
          absl::StrCat("must be set: the zero-based INDEX of fields[", i, "] ",
                       CalendarFieldName(field), " is year − min_year"));
    }
  }
  if (!block.fourier_orders.empty() &&
      block.fourier_orders.size() != block.fields.size()) {
    return InvalidField(path("fourier_orders"),
                        absl::StrCat("has ", block.fourier_orders.size(),
                                     " entries; fields has ", block.fields.size(),
                                     " (give one per field, or none)"));
  }
  for (size_t i = 0; i < block.fourier_orders.size(); ++i) {
    const int64_t order = block.fourier_orders[i];
    const std::string field = absl::StrCat(field_prefix, ".fourier_orders[", i, "]");
    if (order < 0 || order > kMaxFourierOrder) {
      return InvalidField(field, absl::StrCat("must be in [0, ", kMaxFourierOrder,
                                              "] (0 means 1), got ", order));
    }
    if (order > 1 && block.encoding != CalendarEncoding::kCyclic) {
      return InvalidField(field, absl::StrCat("order ", order,
                                              " needs CYCLIC encoding"));
    }
    if (order > 1 && !IsCyclicField(block.fields[i])) {
      return InvalidField(field, absl::StrCat("order ", order, ": ",
                                              CalendarFieldName(block.fields[i]),
                                              " has no cycle"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateCalendarBlock(const CalendarBlock& block,
                                   absl::string_view field_prefix) {
  {
    absl::TimeZone zone;
    std::string problem;
    if (!FindIanaTimeZone(block.time_zone, &zone, &problem)) {
      return InvalidField(absl::StrCat(field_prefix, ".time_zone"), problem);
    }
  }
  bool listed[kNumFieldKinds] = {};
  for (size_t i = 0; i < block.fields.size(); ++i) {
    const int kind = static_cast<int>(block.fields[i]);
    if (kind < 0 || kind >= kNumFieldKinds) {
      return InvalidField(absl::StrCat(field_prefix, ".fields[", i, "]"),
                          absl::StrCat("unknown calendar field ", kind));
    }
    if (listed[kind]) {
      return InvalidField(absl::StrCat(field_prefix, ".fields[", i, "]"),
                          absl::StrCat(CalendarFieldName(block.fields[i]),
                                       " listed twice"));
    }
    listed[kind] = true;
  }
  if (block.fields.empty() && !block.include_utc_offset && !block.include_dst &&
      !block.holidays.has_value()) {
    return InvalidField(absl::StrCat(field_prefix, ".fields"),
                        "empty, and no utc offset, DST flag or holidays "
                        "selected: the block has no column");
  }
  if (block.fractional && block.encoding == CalendarEncoding::kIndex) {
    return InvalidField(absl::StrCat(field_prefix, ".fractional"),
                        "INDEX encoding yields integers; fractional applies "
                        "to CYCLIC and LINEAR");
  }
  PHASOR_RETURN_IF_ERROR(ValidateCalendarAdditions(block, field_prefix));
  if (block.holidays.has_value()) {
    PHASOR_RETURN_IF_ERROR(ValidateHolidaysBlock(
        *block.holidays, absl::StrCat(field_prefix, ".holidays")));
  }
  return absl::OkStatus();
}

CalendarEncoder::CalendarEncoder(const CalendarBlock& block,
                                 absl::TimeZone zone, int64_t sum_d_model,
                                 int64_t max_table_rows,
                                 SinusoidAccuracy accuracy)
    : encoding_(block.encoding),
      fractional_(block.fractional),
      exact_cycles_(accuracy == SinusoidAccuracy::kFloat64),
      include_utc_offset_(block.include_utc_offset),
      include_dst_(block.include_dst),
      zero_based_index_(block.zero_based_index),
      zone_(zone),
      sum_d_model_(sum_d_model) {
  if (block.holidays.has_value()) holidays_.emplace(*block.holidays);
  if (block.min_year.has_value()) min_year_ = *block.min_year;
  if (block.min_year.has_value() && block.max_year.has_value()) {
    year_span_ = *block.max_year - *block.min_year;
  }
  int64_t offset = 0;
  slots_.reserve(block.fields.size());
  for (size_t i = 0; i < block.fields.size(); ++i) {
    const CalendarField field = block.fields[i];
    const int64_t width = FieldWidth(block, i);
    // Flags are whole-day values even with `fractional`.
    const bool day_level =
        IsFlagField(field) || (!IsClockField(field) && !block.fractional);
    // CYCLIC angles evaluated a tile at a time (Writer::EncodeRows).
    const bool angles = !day_level && encoding_ == CalendarEncoding::kCyclic &&
                        fractional_ && !exact_cycles_ && IsCyclicField(field);
    slots_.push_back({field, offset, width, std::max<int64_t>(width / 2, 1),
                      day_level, angles});
    if (angles) row_angles_ += slots_.back().order;
    (day_level ? day_slots_ : row_slots_).push_back(slots_.back());
    offset += width;
  }
  int64_t run_end = -1;
  bool one_run = true;
  for (const Slot& slot : row_slots_) {
    if (!slot.angles) continue;
    if (run_end < 0) {
      angle_run_begin_ = slot.offset;
    } else if (slot.offset != run_end) {
      one_run = false;
    }
    run_end = slot.offset + 2 * slot.order;
  }
  if (!one_run) angle_run_begin_ = -1;
  if (include_utc_offset_) utc_offset_column_ = offset++;
  if (include_dst_) dst_column_ = offset++;
  if (holidays_.has_value()) {
    holiday_column_ = offset;
    offset += holidays_->width();
  }
  width_ = sum_d_model_ > 0 ? sum_d_model_ : offset;

  if (encoding_ == CalendarEncoding::kCyclic && !fractional_) {
    clock_cycle60_ = ClockCycles(60, exact_cycles_);
    clock_cycle24_ = ClockCycles(24, exact_cycles_);
  }
  if (sum_d_model_ > 0) {
    assert(sum_d_model_ % 2 == 0);
    const int64_t d = sum_d_model_;
    sum_omega_.resize(static_cast<size_t>(d / 2));
    for (int64_t i = 0; i < d / 2; ++i) {
      // Informer: div_term = exp(2i · −ln(10000)/d_model).
      sum_omega_[i] = std::exp(static_cast<double>(2 * i) * -(std::log(10000.0) / d));
    }
    sum_tables_.resize(kNumFieldKinds);
    int64_t table_rows = 0;
    for (const Slot& slot : slots_) {
      const int rows = MaxCivilValue(slot.field) + 1;
      if (table_rows + rows > max_table_rows) break;
      table_rows += rows;
      // Rows are built by AddInformerRow itself (0 + x == x), so a field
      // with a table and one without give the same bits.
      std::vector<double> table(static_cast<size_t>(rows) * d, 0.0);
      for (int v = 0; v < rows; ++v) AddInformerRow(slot.field, v, &table[v * d]);
      sum_tables_[static_cast<int>(slot.field)] = std::move(table);
    }
  }
}

void CalendarEncoder::AddInformerRow(CalendarField field, int value,
                                     double* out) const {
  const std::vector<double>& table = sum_tables_[static_cast<int>(field)];
  if (!table.empty()) {
    const double* row = table.data() + value * sum_d_model_;
    for (int64_t j = 0; j < sum_d_model_; ++j) out[j] += row[j];
    return;
  }
  // The row's angles value·ω_i through the vector kernel, kChunk at a time
  // (a libm call per value was most of such a row). The tables above are
  // built by this code, so a field with and without one gives the same bits.
  constexpr size_t kChunk = 64;
  double angle[kChunk];
  double sin_angle[kChunk];
  double cos_angle[kChunk];
  for (size_t i0 = 0; i0 < sum_omega_.size(); i0 += kChunk) {
    const size_t used = std::min(kChunk, sum_omega_.size() - i0);
    for (size_t j = 0; j < used; ++j) angle[j] = value * sum_omega_[i0 + j];
    SinCosOfAngles(absl::MakeConstSpan(angle, used), sin_angle, cos_angle);
    for (size_t j = 0; j < used; ++j) {
      out[2 * (i0 + j)] += sin_angle[j];
      out[2 * (i0 + j) + 1] += cos_angle[j];
    }
  }
}

int64_t CalendarEncoder::FieldWidth(const CalendarBlock& block, size_t i) {
  if (block.encoding != CalendarEncoding::kCyclic || !IsCyclicField(block.fields[i])) {
    return 1;
  }
  const int64_t order = i < block.fourier_orders.size() ? block.fourier_orders[i] : 0;
  return 2 * std::max<int64_t>(order, 1);
}

void CalendarEncoder::EncodeField(const Slot& slot, const LocalTime& local,
                                  const RowClock& clock, double* out) const {
  const CalendarField field = slot.field;
  if (IsFlagField(field)) {
    out[0] = CivilValue(field, local);
    return;
  }
  if (IsYearField(field)) {
    const int64_t x = CivilValue(field, local) - min_year_;
    if (encoding_ == CalendarEncoding::kIndex) {
      out[0] = static_cast<double>(zero_based_index_ ? x : x + min_year_);
      return;
    }
    // LINEAR (also under CYCLIC: a year has no period) on the stated range.
    const double position =
        static_cast<double>(x) + (fractional_ ? FieldFraction(field, local, clock) : 0.0);
    out[0] = position / static_cast<double>(year_span_) - 0.5;
    return;
  }
  if (exact_cycles_ && encoding_ == CalendarEncoding::kCyclic) {
    EncodeExactCycle(slot, local, out);
    return;
  }
  const int value = CivilValue(field, local);
  double x = value - FieldBase(field);
  if (fractional_) x += FieldFraction(field, local, clock);
  switch (encoding_) {
    case CalendarEncoding::kCyclic: {
      // The vector kernel, as Writer::EncodeRows (the same bits).
      const int period = CyclePeriod(field, local);
      for (int64_t k = 1; k <= slot.order; ++k) {
        const double angle = HarmonicAngle(x, period, k);
        SinCosOfAngles(absl::MakeConstSpan(&angle, 1), &out[2 * k - 2],
                       &out[2 * k - 1]);
      }
      return;
    }
    case CalendarEncoding::kLinear:
      out[0] = x / (LinearCount(field) - 1) - 0.5;
      return;
    case CalendarEncoding::kIndex:
      out[0] = zero_based_index_ ? value - FieldBase(field) : value;
      return;
  }
}

void CalendarEncoder::EncodeExactCycle(const Slot& slot, const LocalTime& local,
                                       double* out) const {
  int64_t numerator = 0;
  int64_t denominator = 1;
  CyclePhase(slot.field, local, fractional_, &numerator, &denominator);
  const auto reduced = static_cast<unsigned __int128>(numerator % denominator);
  for (int64_t k = 1; k <= slot.order; ++k) {
    // (k·x mod P): exact in 128 bits (x < 2^63, k <= kMaxFourierOrder).
    const auto phase = static_cast<int64_t>(reduced * static_cast<uint64_t>(k) %
                                            static_cast<uint64_t>(denominator));
    ExactCycle(phase, denominator, out + 2 * (k - 1));
  }
}

// CalendarEncoder::Writer: one per thread, holding the local-time cursor and
// the per-day cache of the day-level columns.

CalendarEncoder::Writer::Writer(const CalendarEncoder& encoder)
    : encoder_(encoder),
      cursor_(encoder.zone_),
      day_columns_(static_cast<size_t>(encoder.width_), 0.0) {
  if (encoder.row_angles_ > 0) {
    // Whole vectors of rows where a few rows' angles fill the batch (the
    // angles are computed for many rows at once, calendar_angles.h).
    rows_per_batch_ = std::max<int64_t>(kBatchAngles / encoder.row_angles_, 1);
    if (rows_per_batch_ >= kBatchRowMultiple) {
      rows_per_batch_ = (rows_per_batch_ + kBatchRowMultiple - 1) / kBatchRowMultiple *
                        kBatchRowMultiple;
    }
    const auto angles = static_cast<size_t>(rows_per_batch_ * encoder.row_angles_);
    angles_.resize(angles);
    batch_ = calendar_internal::ClockRows(rows_per_batch_);
    sin_.resize(angles);
    cos_.resize(angles);
  }
  if (encoder.holidays_.has_value()) {
    holiday_brackets_.resize(static_cast<size_t>(encoder.holidays_->num_sets()));
    if (encoder.holidays_->clock_dependent()) {
      holidays_after_midnight_.resize(static_cast<size_t>(encoder.holidays_->width()));
    }
  }
}

void CalendarEncoder::Writer::FillDay(const LocalTime& local) {
  const CalendarEncoder& e = encoder_;
  if (e.sum_d_model_ > 0) {
    std::fill(day_columns_.begin(), day_columns_.end(), 0.0);  // A sum.
    for (const Slot& slot : e.day_slots_) {
      e.AddInformerRow(slot.field, CivilValue(slot.field, local),
                       day_columns_.data());
    }
  } else {
    // CONCAT: EncodeRow reads the day-level slots' and the holidays'
    // columns only, and each is written here. Day-level slots are flags or
    // not fractional: none reads the clock.
    const RowClock no_clock{0.0, 0.0};
    for (const Slot& slot : e.day_slots_) {
      double* column = &day_columns_[slot.offset];
      // CYCLIC, not fractional (as for the clock tables): a table lookup.
      const double* table = e.clock_cycle60_ == nullptr
                                ? nullptr
                                : FixedDayCycles(slot.field, e.exact_cycles_);
      if (table != nullptr) {
        const int x = CivilValue(slot.field, local) - FieldBase(slot.field);
        TableHarmonics(table, x, LinearCount(slot.field), slot.order, column);
      } else {
        e.EncodeField(slot, local, no_clock, column);
      }
    }
    if (e.holiday_column_ >= 0) {
      holidays_differ_after_midnight_ =
          e.holidays_->Write(local.day_number, /*at_local_midnight=*/true,
                             &day_columns_[e.holiday_column_],
                             absl::MakeSpan(holiday_brackets_));
      holidays_after_midnight_filled_ = false;
    }
  }
  day_number_ = local.day_number;
  has_day_ = true;
}

void CalendarEncoder::Writer::Encode(int64_t unix_ns, double* out) {
  EncodeRows(absl::MakeConstSpan(&unix_ns, 1), out, encoder_.width_);
}

void CalendarEncoder::Writer::KeepForAngles(int64_t r, const LocalTime& t,
                                            const RowClock& clock) {
  using B = calendar_internal::ClockRows;
  batch_.ints(B::kSecond)[r] = t.second;
  batch_.ints(B::kSubsecondNs)[r] = static_cast<int32_t>(t.subsecond_ns);
  batch_.ints(B::kMinute)[r] = t.minute;
  batch_.ints(B::kHour)[r] = t.hour;
  batch_.ints(B::kWeekday)[r] = t.weekday;
  batch_.ints(B::kDayIndex)[r] = t.date.day() - 1;
  batch_.ints(B::kDayOfYearIndex)[r] = t.day_of_year - 1;
  batch_.ints(B::kIsoWeekIndex)[r] = t.iso_week - 1;
  const int month_index = t.date.month() - 1;
  batch_.ints(B::kMonthIndex)[r] = month_index;
  batch_.ints(B::kQuarterIndex)[r] = month_index / 3;
  batch_.ints(B::kMonthInQuarter)[r] = month_index % 3;
  batch_.ints(B::kDaysInMonth)[r] = t.days_in_month;
  batch_.ints(B::kDaysInYear)[r] = t.days_in_year;
  batch_.ints(B::kIsoWeeksInYear)[r] = t.iso_weeks_in_year;
  batch_.reals(B::kSeconds)[r] = clock.seconds;
  batch_.reals(B::kDayFraction)[r] = clock.day_fraction;
}

void CalendarEncoder::Writer::EncodeRows(absl::Span<const int64_t> times_ns,
                                         double* out, int64_t row_stride) {
  const CalendarEncoder& e = encoder_;
  const auto rows = static_cast<int64_t>(times_ns.size());
  if (e.row_angles_ == 0) {
    for (int64_t r = 0; r < rows; ++r) {
      EncodeRow(times_ns[r], out + r * row_stride, /*batch_row=*/-1);
    }
    return;
  }
  // The rows' CYCLIC angles first (rows_per_batch_ rows at a time), then all
  // their sin/cos through the vector kernel together (a libm call per
  // value was most of a fractional calendar row), then scattered. A value
  // depends on its angle alone, so the batching changes no bit.
  const int64_t per_row = e.row_angles_;
  for (int64_t r0 = 0; r0 < rows; r0 += rows_per_batch_) {
    const int64_t n = std::min(rows_per_batch_, rows - r0);
    for (int64_t r = 0; r < n; ++r) {
      EncodeRow(times_ns[r0 + r], out + (r0 + r) * row_stride, /*batch_row=*/r);
    }
    // The angles a field at a time (harmonics of slot j at a_j in a row).
    int64_t a = 0;
    for (const Slot& slot : e.row_slots_) {
      if (!slot.angles) continue;
      assert(IsCyclicField(slot.field));
      calendar_internal::FieldAngles(static_cast<int>(slot.field), batch_, n, slot.order,
                                     angles_.data() + a, per_row);
      a += slot.order;
    }
    // In [0, 2π] (2π·(k·x mod P)/P): straight through the vector kernel.
    SinCosOfSmallAngles(absl::MakeConstSpan(angles_.data(), n * per_row), sin_.data(),
                        cos_.data());
    if (e.angle_run_begin_ >= 0) {
      // One run of (sin, cos) pairs per row: a plain interleave.
      for (int64_t r = 0; r < n; ++r) {
        double* pairs = out + (r0 + r) * row_stride + e.angle_run_begin_;
        const double* s = sin_.data() + r * per_row;
        const double* c = cos_.data() + r * per_row;
        for (int64_t j = 0; j < per_row; ++j) {
          pairs[2 * j] = s[j];
          pairs[2 * j + 1] = c[j];
        }
      }
      continue;
    }
    for (int64_t r = 0; r < n; ++r) {
      double* row = out + (r0 + r) * row_stride;
      const double* s = sin_.data() + r * per_row;
      const double* c = cos_.data() + r * per_row;
      for (const Slot& slot : e.row_slots_) {
        if (!slot.angles) continue;
        double* column = row + slot.offset;
        for (int64_t k = 0; k < slot.order; ++k) {
          column[2 * k] = s[k];
          column[2 * k + 1] = c[k];
        }
        s += slot.order;
        c += slot.order;
      }
    }
  }
}

void CalendarEncoder::Writer::EncodeRow(int64_t unix_ns, double* out,
                                        int64_t batch_row) {
  const CalendarEncoder& e = encoder_;
  const LocalTime& local = cursor_.At(unix_ns);
  if (!has_day_ || local.day_number != day_number_) FillDay(local);
  if (e.sum_d_model_ > 0) {
    std::memcpy(out, day_columns_.data(), day_columns_.size() * sizeof(double));
    for (const Slot& slot : e.slots_) {
      if (slot.day_level) continue;
      e.AddInformerRow(slot.field, CivilValue(slot.field, local), out);
    }
    return;
  }
  // CONCAT: every column is written once, the day-level ones copied from the
  // day's cache (column by column: a memcpy of a few doubles was a library
  // call, ~3 ns of a ~20 ns row).
  // Day-level and per-row slots are kept apart (no test per slot and row).
  const double* day = day_columns_.data();
  for (const Slot& slot : e.day_slots_) {
    const double* from = day + slot.offset;
    double* column = out + slot.offset;
    column[0] = from[0];
    if (slot.width > 1) {
      column[1] = from[1];
      for (int64_t j = 2; j < slot.width; ++j) column[j] = from[j];  // Harmonics.
    }
  }
  if (e.clock_cycle60_ != nullptr) {
    // CYCLIC integer clock fields: precomputed sin/cos. (Without
    // `fractional` the clock fields are the only per-row ones.)
    for (const Slot& slot : e.row_slots_) {
      const int x = slot.field == CalendarField::kHourOfDay     ? local.hour
                    : slot.field == CalendarField::kMinuteOfHour ? local.minute
                                                                 : local.second;
      const bool hour = slot.field == CalendarField::kHourOfDay;
      TableHarmonics(hour ? e.clock_cycle24_ : e.clock_cycle60_, x, hour ? 24 : 60,
                     slot.order, out + slot.offset);
    }
  } else {
    // Fractional fields share the row's clock (computed once, not per field).
    const RowClock clock = e.fractional_ ? ClockOf(local) : RowClock{0, 0};
    if (batch_row >= 0) KeepForAngles(batch_row, local, clock);
    for (const Slot& slot : e.row_slots_) {
      if (slot.angles && batch_row >= 0) continue;  // EncodeRows' FieldAngles.
      e.EncodeField(slot, local, clock, out + slot.offset);
    }
  }
  if (e.utc_offset_column_ >= 0) {
    out[e.utc_offset_column_] = local.utc_offset_seconds / 3600.0;
  }
  if (e.dst_column_ >= 0) out[e.dst_column_] = local.is_dst ? 1.0 : 0.0;
  if (e.holiday_column_ >= 0) {
    const bool later = holidays_differ_after_midnight_ &&
                       (local.hour != 0 || local.minute != 0 ||
                        local.second != 0 || local.subsecond_ns != 0);
    if (later && !holidays_after_midnight_filled_) {
      // Once per local day whose later rows differ (GLUONTS: a holiday
      // exactly 200 days back) and that has such a row.
      e.holidays_->Write(day_number_, /*at_local_midnight=*/false,
                         holidays_after_midnight_.data());
      holidays_after_midnight_filled_ = true;
    }
    const double* holidays =
        later ? holidays_after_midnight_.data() : day + e.holiday_column_;
    std::copy_n(holidays, e.holidays_->width(), out + e.holiday_column_);
  }
}

}  // namespace phasor
