// -----------------------------------------------------------------------------
// File: core/temporal/calendar_angles.h
// -----------------------------------------------------------------------------
//
// The angles of the calendar's fractional CYCLIC fields for a batch of rows,
// in vectors of the widest unit the CPU has (Highway's runtime dispatch).
//
// Per row and field these are two or three divisions (the elapsed part of
// the field's unit, then 2π·x/P), which one row at a time were most of a
// fractional calendar row. Here a field's divisions for many rows are one
// vector division. Every lane is computed alone by the IEEE operations of
// the scalar CalendarEncoder::EncodeField in the same order, and the file
// is compiled without multiply-add contraction: the same bits on every
// target (tests/calendar_test.cc).
//
// Thread-safety: FieldAngles is a pure function; a ClockRows belongs to one
// thread (its Writer's).
//
// Example:
//
//   calendar_internal::ClockRows batch(/*capacity=*/64);  // Writer fills it.
//   calendar_internal::FieldAngles(/*field=*/2, batch, rows, /*order=*/1,
//                                  angles.data(), /*stride=*/1);
#ifndef PHASOR_CORE_TEMPORAL_CALENDAR_ANGLES_H_
#define PHASOR_CORE_TEMPORAL_CALENDAR_ANGLES_H_

#include <cstddef>
#include <cstdint>
#include <vector>


namespace phasor::calendar_internal {

// A batch's rows column by column: the local-time parts the angles read.
class ClockRows {
 public:
  enum Int {
    kSecond,          // 0..59 (60 in a leap second is not produced).
    kSubsecondNs,     // 0..999'999'999.
    kMinute,
    kHour,
    kWeekday,         // Monday = 0.
    kDayIndex,        // Day of month − 1.
    kDayOfYearIndex,  // Day of year − 1.
    kIsoWeekIndex,    // ISO week − 1.
    kMonthIndex,      // Month − 1.
    kQuarterIndex,    // (month − 1) / 3.
    kMonthInQuarter,  // (month − 1) % 3.
    kDaysInMonth,
    kDaysInYear,
    kIsoWeeksInYear,
    kNumInts,
  };
  enum Real {
    kSeconds,      // RowClock::seconds.
    kDayFraction,  // RowClock::day_fraction.
    kNumReals,
  };

  explicit ClockRows(int64_t capacity = 0)
      : capacity_(capacity),
        ints_(static_cast<size_t>(capacity * kNumInts)),
        reals_(static_cast<size_t>(capacity * kNumReals)) {}

  int64_t capacity() const { return capacity_; }
  // Column `column`, row r at [r] (CalendarEncoder::Writer fills them).
  int32_t* ints(Int column) { return ints_.data() + column * capacity_; }
  double* reals(Real column) { return reals_.data() + column * capacity_; }
  const int32_t* ints(Int column) const { return ints_.data() + column * capacity_; }
  const double* reals(Real column) const { return reals_.data() + column * capacity_; }

 private:
  int64_t capacity_;
  std::vector<int32_t> ints_;
  std::vector<double> reals_;
};

// For rows [0, rows) of `batch`, the angles of harmonics k = 1..order of the
// fractional CYCLIC field `field` (2π·((k·x) mod P)/P, what EncodeField
// takes the sin/cos of): row r's at angles + r·stride + k − 1.
// REQUIRES: field is a cyclic CalendarField's number (second of minute = 0
// .. quarter = 8); rows <= batch.capacity().
void FieldAngles(int field, const ClockRows& batch, int64_t rows, int64_t order,
                 double* angles, int64_t stride);

}  // namespace phasor::calendar_internal

#endif  // PHASOR_CORE_TEMPORAL_CALENDAR_ANGLES_H_
