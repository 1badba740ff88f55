// Calendar features of an instant in an IANA time zone ("calendar" block).
//
// Civil time = F(absolute time, time zone) through absl::TimeZone and the
// system tzdata (absl::LoadTimeZone). The zone defaults to UTC; the server's
// local zone is never used ("", "UTC" mean UTC; "localtime", paths and names
// with ".." are rejected).
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
// ExactAngle::CosSinOfTurns (core/exact_angle.h): within 1.7e-16 of
// sin(2π·x/P) exactly (tests/temporal_f64_test.cc checks ≤ 4e-16 against
// __float128). kFloat32 forms 2π·x/P in double (up to ~1e-15 off near a
// full turn), invisible in float32. LINEAR is x/(n−1) − 0.5 in double (a
// few ulp), INDEX, the DST flag exact, the UTC offset correctly rounded.
//
// Combine SUM (compose.h) uses Informer's fixed embedding instead
// (Zhou et al. 2021, models/embed.py FixedEmbedding/TemporalEmbedding): each
// field adds the sinusoid row PE(v) of width d_model,
//   PE(v)[2i] = sin(v·ω_i), PE(v)[2i+1] = cos(v·ω_i), ω_i = 10000^(−2i/d_model).
//
// Speed: calendar conversion is the hot path. LocalTimeCursor caches the
// current "segment", the span of UTC seconds with one civil day and one UTC
// offset (it ends at the next local midnight or the next zone transition,
// whichever is first), and the span to the zone's next transition, so a
// non-decreasing run of timestamps costs one absl::TimeZone lookup per
// transition, a date computation per local day and otherwise a range check
// and integer arithmetic; CalendarEncoder::Writer further caches every day-level encoded
// column per local day.
//
// Thread-safety: CalendarEncoder is immutable and may be shared; a
// LocalTimeCursor or Writer belongs to one thread.
#ifndef PHASOR_CORE_CALENDAR_H_
#define PHASOR_CORE_CALENDAR_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/calendar_angles.h"
#include "core/continuous_time.h"
#include "core/holidays.h"

namespace phasor {

enum class CalendarField {
  kSecondOfMinute,
  kMinuteOfHour,
  kHourOfDay,
  kDayOfWeek,
  kDayOfMonth,
  kDayOfYear,
  kWeekOfYear,
  kMonthOfYear,
  kQuarter,
  kYear,
  kIsoYear,
  kIsWeekend,
  kIsMonthStart,
  kIsMonthEnd,
  kIsQuarterStart,
  kIsQuarterEnd,
};
enum class CalendarEncoding { kCyclic, kLinear, kIndex };

// "hour_of_day", ... as the proto spells the field.
absl::string_view CalendarFieldName(CalendarField field);

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

// Loads an IANA zone from the system tzdata; "" and "UTC" give UTC. Unknown
// or unsafe names are INVALID_ARGUMENT on `field`:
//   spec.temporal.calendar.time_zone: unknown IANA time zone "Mars/Base" ...
// A name reaches absl::LoadTimeZone (which caches every name it sees, for
// good) only when it is on the zone list of the tzdata absl reads
// ($TZDIR or /usr/share/zoneinfo): the zones and links of its tzdata.zi, or,
// without that file, the compiled zone files of the tree. The list is read
// once per process. Names over 64 bytes are rejected unread, and errors
// quote at most 64 bytes of a name. Thread-safe.
absl::StatusOr<absl::TimeZone> LoadIanaTimeZone(absl::string_view name,
                                                absl::string_view field);

// The zone list LoadIanaTimeZone reads from `zoneinfo_dir`, sorted: zone and
// link names of its tzdata.zi, else the TZif files under it. For tests.
std::vector<std::string> ReadZoneNames(const std::string& zoneinfo_dir);

// Zone, fields (no repeats), encoding/fractional, holidays; a block selecting
// no column is an error. Errors name `field_prefix`.time_zone, .fields[i], ...
absl::Status ValidateCalendarBlock(const CalendarBlock& block,
                                   absl::string_view field_prefix);

// A proleptic Gregorian date whose fields are already in range: the
// accessors of absl::CivilDay without its constructor's normalisation.
class LocalDate {
 public:
  LocalDate() = default;
  LocalDate(int64_t year, int month, int day) : year_(year), month_(month), day_(day) {}
  int64_t year() const { return year_; }
  int month() const { return month_; }  // 1..12.
  int day() const { return day_; }      // 1..31.
  friend bool operator==(const LocalDate& a, const LocalDate& b) {
    return a.year_ == b.year_ && a.month_ == b.month_ && a.day_ == b.day_;
  }
  friend bool operator!=(const LocalDate& a, const LocalDate& b) { return !(a == b); }

 private:
  int64_t year_ = 1970;
  int month_ = 1;
  int day_ = 1;
};

// Everything the features need about one instant in one zone.
struct LocalTime {
  LocalDate date;           // The local date.
  int64_t day_number = 0;   // date as days since 1970-01-01.
  int hour = 0;             // 0..23 by the local clock.
  int minute = 0;
  int second = 0;
  int64_t subsecond_ns = 0; // 0..999'999'999.
  int weekday = 0;          // Monday = 0 .. Sunday = 6.
  int day_of_year = 1;      // 1..366.
  int64_t iso_year = 1970;  // ISO-8601 week-numbering year.
  int iso_week = 1;         // 1..53.
  int iso_weeks_in_year = 52;
  int days_in_month = 31;
  int days_in_year = 365;
  int utc_offset_seconds = 0;  // Local − UTC.
  bool is_dst = false;
};

// The local time of `unix_ns` in `zone`, computed from scratch (the
// reference the cursor is tested against).
LocalTime LocalTimeAt(const absl::TimeZone& zone, int64_t unix_ns);

// LocalTimeAt with the segment cache described above. Correct for any
// sequence of instants; fast for non-decreasing ones.
class LocalTimeCursor final {
 public:
  explicit LocalTimeCursor(absl::TimeZone zone) : zone_(zone) {}

  // The returned reference stays valid until the next call.
  const LocalTime& At(int64_t unix_ns);

 private:
  void Refill(int64_t unix_seconds);
  // local_'s date fields for the local date `day_number` (FillDate's), from
  // year_ when the date lies in it.
  void SetDate(int64_t day_number);

  absl::TimeZone zone_;
  bool valid_ = false;
  int64_t begin_s_ = 0;  // Segment [begin_s_, end_s_) in Unix seconds.
  int64_t end_s_ = 0;
  int64_t local_midnight_s_ = 0;  // The segment's local midnight minus its offset.
  // [offset_from_s_, offset_until_s_): from the last zone lookup to the
  // zone's next transition, the span in which local_'s UTC offset and DST
  // flag hold. A new local day inside it is plain arithmetic, so a
  // non-decreasing run costs one zone lookup per transition (about two a
  // year) instead of one per day (~0.3 µs with NextTransition: 8 ns a row
  // at hourly rows, bench/observations_bench.cc workload_p).
  int64_t offset_from_s_ = 0;
  int64_t offset_until_s_ = 0;
  LocalTime local_;
  // The calendar year of the last date FillDate filled: its January 1 (a
  // day number), its length and its ISO week count (none before the first).
  struct Year {
    int64_t year = 0;
    int64_t january1 = 0;
    int days = 0;
    int iso_weeks = 52;
  };
  Year year_;
};

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
  struct RowClock {
    double seconds;       // second + subsecond, in seconds.
    double day_fraction;  // Elapsed part of the local day.
  };

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

#endif  // PHASOR_CORE_CALENDAR_H_
