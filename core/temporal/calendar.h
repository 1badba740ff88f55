// -----------------------------------------------------------------------------
// File: core/temporal/calendar.h
// -----------------------------------------------------------------------------
//
// Calendar features of an instant in an IANA time zone ("calendar" block).
//
// Civil time = F(absolute time, time zone) through absl::TimeZone and the
// system tzdata (core/temporal/local_time.h; zones by name in
// core/temporal/time_zone.h, which rejects "localtime", paths and "..").
//
// What each field, encoding, flag and option means — civil value v,
// zero-based x, GluonTS n, calendar-true period P, fractional parts,
// Fourier harmonics, year ranges, DST days — is stated once, in
// proto/phasor/v1/encoder.proto (message CalendarBlock and its fields);
// this encoder computes exactly that. Its C++ contract:
// ValidateCalendarBlock checks a CalendarBlock (a Status naming the field),
// width() is the number of columns, and Writer::Encode writes one row's
// columns in the proto's order (fields as given, then UTC offset in hours, DST flag,
// holiday columns of holidays.h). Under combine SUM (compose.h) each field
// adds Informer's fixed embedding row PE(v) of width d_model instead (Zhou
// et al. 2021, models/embed.py FixedEmbedding).
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
