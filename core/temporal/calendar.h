// -----------------------------------------------------------------------------
// File: core/temporal/calendar.h
// -----------------------------------------------------------------------------
//
// Calendar features of an instant in an IANA time zone ("calendar" block).
//
// Civil time = F(absolute time, time zone) through absl::TimeZone and the
// system tzdata (core/temporal/local_time.h; zones by name in
// core/temporal/time_zone.h). The zone defaults to UTC; the server's local
// zone is never used ("", "UTC" mean UTC; "localtime", paths and names with
// ".." are rejected).
//
// Fields, their civil value v (INDEX), zero-based x, GluonTS n and the
// calendar-true CYCLIC period P:
//   second_of_minute  v = second 0..59        x = v     n = 60   P = 60
//   minute_of_hour    v = minute 0..59        x = v     n = 60   P = 60
//   hour_of_day       v = hour 0..23          x = v     n = 24   P = 24
//   day_of_week       v = 0..6, Monday = 0    x = v     n = 7    P = 7
//   day_of_month      v = 1..31               x = v−1   n = 31   P = days in that month
//   day_of_year       v = 1..366              x = v−1   n = 366  P = 365 or 366 (that year)
//   week_of_year      v = ISO week 1..53      x = v−1   n = 53   P = 52 or 53 (ISO weeks in the ISO year)
//   month_of_year     v = 1..12               x = v−1   n = 12   P = 12
//   quarter           v = 1..4                x = v−1   n = 4    P = 4
//   year              v = year (local)        x = v − min_year, n − 1 = max_year − min_year
//   iso_year          v = ISO-8601 year       x = v − min_year, n − 1 = max_year − min_year
// and the flags, one 0/1 column under every encoding, as pandas' Series.dt
// accessors define them on the local date (pandas/_libs/tslibs/fields.pyx
// get_start_end_field; is_weekend as sktime's DateTimeFeatures, weekday ≥ 5):
//   is_weekend        Saturday or Sunday
//   is_month_start    day 1                   is_month_end    last day of the month
//   is_quarter_start  day 1 of Jan/Apr/Jul/Oct
//   is_quarter_end    last day of Mar/Jun/Sep/Dec
// The years have no period: under CYCLIC they take their LINEAR column.
// Their LINEAR column needs the stated range [min_year, max_year] (min_year
// → −0.5, max_year → +0.5, extrapolated beyond it, never clipped).
// Encodings:
//   CYCLIC  sin(2π·x/P), cos(2π·x/P)   (2 columns)
//   LINEAR  x/(n−1) − 0.5              (1 column; GluonTS
//           gluonts/time_feature/_base.py, e.g. DayOfMonth (day − 1)/30 − 0.5;
//           quarter, absent there, follows the same rule)
//   INDEX   v                          (1 column; integer, for embedding tables;
//           the raw numbering of Informer's time_features(timeenc=0));
//           with zero_based_index x instead, GluonTS's *_index features
//           (gluonts/time_feature/_base.py, e.g. DayOfMonthIndex = day − 1;
//           year − min_year for the years)
// Fourier order K of a cyclic field (CYCLIC only): 2K columns, harmonics
//   k = 1..K: sin(2π·k·x/P), cos(2π·k·x/P), as Prophet's seasonalities
//   (prophet/forecaster.py fourier_series) and statsmodels'
//   CalendarFourier (statsmodels/tsa/deterministic.py) write them; K = 1 is
//   the plain CYCLIC pair. The angle is 2π·((k·x) mod P)/P, the same value.
// With `fractional`, CYCLIC and LINEAR add the elapsed part of the field's unit
// by the local clock: hour 9:30 → 9.5, day_of_week Tuesday 18:00 → 1.75,
// month_of_year on day d at clock time h → m−1 + (d−1 + h/24)/days_in_month.
// Then the UTC offset in hours (e.g. −5, +5.75) and a DST flag (tzdata's
// is_dst) when asked, and the holiday kernel (holidays.h) of the local date.
//
// Accuracy: with SinusoidAccuracy::kFloat64 (float64 outputs) a CYCLIC
// field's phase x/P is an exact ratio of integers (fractional ones counted
// in nanoseconds of the local clock: hour 9:30 is 34200e9 ns of a 86400e9 ns
// day), rounded to 2^-65 turn and turned into sin, cos by
// ExactAngle::CosSinOfTurns (core/math/exact_angle.h): within 1.7e-16 of
// sin(2π·x/P) exactly (tests/calendar_test.cc checks ≤ 4e-16 against
// __float128). kFloat32 forms 2π·x/P in double (up to ~1e-15 off near a
// full turn), invisible in float32. LINEAR is x/(n−1) − 0.5 in double (a
// few ulp), INDEX, the DST flag exact, the UTC offset correctly rounded.
//
// Combine SUM (compose.h) uses Informer's fixed embedding instead
// (Zhou et al. 2021, models/embed.py FixedEmbedding/TemporalEmbedding): each
// field adds the sinusoid row PE(v) of width d_model,
//   PE(v)[2i] = sin(v·ω_i), PE(v)[2i+1] = cos(v·ω_i), ω_i = 10000^(−2i/d_model).
//
// Speed: calendar conversion is the hot path. A Writer's LocalTimeCursor
// (core/temporal/local_time.h) costs one absl::TimeZone lookup per zone
// transition and a date computation per local day on a non-decreasing run
// of timestamps; the Writer further caches every
// day-level encoded column per local day, and takes the sin/cos of the
// fractional CYCLIC fields of many rows together (calendar_angles.h).
//
// Units: instants are int64 nanoseconds since the Unix epoch (UTC); UTC
// offsets are written in hours.
//
// Thread-safety: CalendarEncoder is immutable and may be shared; a Writer
// belongs to one thread.
//
// Example:
//
//   CalendarBlock block;
//   block.time_zone = "Europe/Berlin";
//   block.fields = {CalendarField::kHourOfDay, CalendarField::kDayOfWeek};
//   const CalendarEncoder encoder(block, *LoadIanaTimeZone(block.time_zone, "zone"),
//                                 /*sum_d_model=*/0);
//   CalendarEncoder::Writer writer(encoder);
//   std::vector<double> row(encoder.width());
//   writer.Encode(t_ns, row.data());
#ifndef PHASOR_CORE_TEMPORAL_CALENDAR_H_
#define PHASOR_CORE_TEMPORAL_CALENDAR_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/math/sincos.h"
#include "core/temporal/calendar_angles.h"
#include "core/temporal/calendar_fields.h"
#include "core/temporal/holidays.h"
#include "core/temporal/local_time.h"

namespace phasor {

enum class CalendarEncoding { kCyclic, kLinear, kIndex };

struct CalendarBlock {
  std::string time_zone = "UTC";  // IANA name; "" means UTC.
  std::vector<CalendarField> fields;  // Output in this order; no repeats.
  CalendarEncoding encoding = CalendarEncoding::kCyclic;
  bool fractional = false;          // CYCLIC/LINEAR only.
  bool include_utc_offset = false;  // One column, hours east of UTC.
  bool include_dst = false;         // One column, 1 while DST is in effect.
  std::optional<HolidaysBlock> holidays;  // holidays.h columns.
  // The years' stated range: needed by their LINEAR column (and CYCLIC,
  // which uses it) and by a zero-based INDEX (min_year only); min < max.
  std::optional<int64_t> min_year;
  std::optional<int64_t> max_year;
  bool zero_based_index = false;  // INDEX only: x instead of v.
  // Empty, or one entry per field: its Fourier order K (0 means 1);
  // K > 1 only for the nine cyclic fields under CYCLIC.
  std::vector<int64_t> fourier_orders;
};

// Zone, fields (no repeats), encoding/fractional, holidays; a block selecting
// no column is an error. Errors name `field_prefix`.time_zone, .fields[i], ...
absl::Status ValidateCalendarBlock(const CalendarBlock& block,
                                   absl::string_view field_prefix);

// The calendar block, prepared once per request.
class CalendarEncoder final {
 public:
  // `sum_d_model` > 0 selects Informer's fixed tables summed at that width
  // (combine SUM); 0 selects CONCAT columns. A SUM field's table of PE(v)
  // (one row of d_model per civil value, 5 to 367 rows) is precomputed while
  // the tables' total row count stays within `max_table_rows`; later fields
  // compute PE(v) when used, to the same bits. Pass the number of instants
  // to encode, so the tables never outgrow the output (a one-row request at
  // d_model 65536 would otherwise build 326 MB of tables).
  // `accuracy` selects the CYCLIC columns' path (see the file comment).
  // REQUIRES: ValidateCalendarBlock(block, ...).ok(); zone is its zone; for
  // SUM no fractional, offset, DST or holidays, and sum_d_model even.
  CalendarEncoder(const CalendarBlock& block, absl::TimeZone zone,
                  int64_t sum_d_model,
                  int64_t max_table_rows = std::numeric_limits<int64_t>::max(),
                  SinusoidAccuracy accuracy = SinusoidAccuracy::kFloat32);

  // Columns written per row: the CONCAT width, or d_model for SUM.
  int64_t width() const { return width_; }
  // Columns of fields[i]: 2K for a cyclic field under CYCLIC, else 1.
  static int64_t FieldWidth(const CalendarBlock& block, size_t i);

  // A row's local clock, shared by its fractional fields.
  using RowClock = calendar_internal::RowClock;

  // One per thread: holds the cursor and the per-day cache.
  class Writer final {
   public:
    explicit Writer(const CalendarEncoder& encoder);
    // Writes width() values for the instant unix_ns.
    void Encode(int64_t unix_ns, double* out);
    // Encode of each times_ns[r] at out + r·row_stride; the same bits, with
    // the CYCLIC fractional fields' sin/cos of many rows evaluated together.
    void EncodeRows(absl::Span<const int64_t> times_ns, double* out,
                    int64_t row_stride);

   private:
    // Angles a Writer evaluates together (a few rows' worth), in batches of
    // a multiple of kBatchRowMultiple rows when that many fit (whole vectors
    // of 8 doubles).
    static constexpr int64_t kBatchAngles = 256;
    static constexpr int64_t kBatchRowMultiple = 8;

    void FillDay(const LocalTime& local);
    // Encode; with batch_row >= 0 (a row of EncodeRows' batch), the row's
    // local time and clock are kept in batch_ and the slots with
    // Slot::angles are left to EncodeRows.
    void EncodeRow(int64_t unix_ns, double* out, int64_t batch_row);
    // Row r of batch_: what the fractional CYCLIC angles read of `t`.
    void KeepForAngles(int64_t r, const LocalTime& t, const RowClock& clock);

    const CalendarEncoder& encoder_;
    LocalTimeCursor cursor_;
    bool has_day_ = false;
    int64_t day_number_ = 0;  // The cached day's date, days since 1970-01-01.
    std::vector<double> day_columns_;  // CONCAT: day-level columns; SUM: their sum.
    // GLUONTS holidays: their columns for rows after local midnight, when
    // they differ from midnight's, filled when the day first has such a row.
    std::vector<double> holidays_after_midnight_;
    bool holidays_differ_after_midnight_ = false;
    bool holidays_after_midnight_filled_ = false;
    std::vector<HolidayCalendar::Bracket> holiday_brackets_;  // One per set.
    // EncodeRows: rows per batch, and the batch's local times, angles,
    // sines and cosines.
    int64_t rows_per_batch_ = 1;
    calendar_internal::ClockRows batch_;
    std::vector<double> angles_;
    std::vector<double> sin_;
    std::vector<double> cos_;
  };

 private:
  struct Slot {
    CalendarField field;
    int64_t offset;   // First output column (CONCAT).
    int64_t width;    // Columns: 2·order (sin, cos per harmonic) or 1.
    int64_t order;    // Fourier order K of a cyclic field, else 1.
    bool day_level;   // Constant over a local day (and not fractional).
    bool angles;      // A per-row CYCLIC fractional field on the float32 path.
  };
  // Writes the slot's encoded column(s) for `local` at out[0..slot.width);
  // `clock` is `local`'s clock (read by fractional fields).
  void EncodeField(const Slot& slot, const LocalTime& local, const RowClock& clock,
                   double* out) const;
  // EncodeField's CYCLIC columns on the float64 path; out of line, so the
  // float32 path's code is what it was.
  [[gnu::noinline]] void EncodeExactCycle(const Slot& slot, const LocalTime& local,
                                          double* out) const;
  // Adds Informer's row PE(value) of `field` to out[0..d_model), from its
  // table when it has one.
  void AddInformerRow(CalendarField field, int value, double* out) const;

  CalendarEncoding encoding_;
  bool fractional_;
  bool exact_cycles_;  // SinusoidAccuracy::kFloat64.
  bool include_utc_offset_;
  bool include_dst_;
  bool zero_based_index_;
  int64_t min_year_ = 0;
  int64_t year_span_ = 1;  // max_year − min_year.
  std::optional<HolidayCalendar> holidays_;
  absl::TimeZone zone_;
  int64_t sum_d_model_;
  int64_t width_;
  std::vector<Slot> slots_;
  std::vector<Slot> day_slots_;  // The day_level slots_, then the others.
  std::vector<Slot> row_slots_;
  int64_t row_angles_ = 0;  // The orders of the slots with Slot::angles, summed.
  // The first column of the slots with Slot::angles when their columns are
  // one run, in row_slots_' order (sin, cos of each harmonic of each such
  // slot in turn: the usual layout); −1 otherwise.
  int64_t angle_run_begin_ = -1;
  int64_t utc_offset_column_ = -1;
  int64_t dst_column_ = -1;
  int64_t holiday_column_ = -1;
  // CYCLIC, not fractional: sin/cos of 2π·x/P for the clock fields, indexed
  // by x (x < 60), [sin, cos] pairs, in process-wide immutable tables; null
  // otherwise.
  const double* clock_cycle60_ = nullptr;
  const double* clock_cycle24_ = nullptr;
  // SUM: ω_i = 10000^(−2i/d_model), i < d_model/2.
  std::vector<double> sum_omega_;
  // SUM: per field kind, rows PE(v) for v = 0..max, row-major; empty for a
  // field without a table.
  std::vector<std::vector<double>> sum_tables_;
};

}  // namespace phasor

#endif  // PHASOR_CORE_TEMPORAL_CALENDAR_H_
