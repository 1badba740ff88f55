// A panel (many series, one EncodeObservations request) from one CSV table,
// for `phasor-client encode-observations --observations_csv FILE`.
//
// Two layouts, both with a header line naming the columns:
//   long:  series,time,channel,value      one observation per line
//   wide:  series,time,<channel>,...       one row of C values per line
// Column names for series and time (and an optional per-series time zone
// column) are options; `auto` picks long when the other columns are exactly
// `channel` and `value`. Rows of a series need not be contiguous: series
// are numbered by first appearance and their rows kept in file order (a
// stable grouping). Within a series times must not decrease; the server
// names the offending row.
//
// Cells: time is ISO 8601 / RFC 3339 ("2024-01-01T09:30:00Z",
// "2024-01-01 09:30:00.5+05:30", "2024-01-01"; a time without an offset is
// UTC) or a number of the time unit since the Unix epoch. The unit
// (--time_unit s, ms, us or ns) may be left out only for integers, which are
// then nanoseconds ("1704067200000000000"), and not when every integer of
// the column, read as nanoseconds, falls within the first day after the
// epoch: such times are seconds or milliseconds written without their unit
// (1704096000 would be 1.7 s after the epoch), so that is an error asking
// for the unit. A decimal ("1704067200.25", exact to the nanosecond; with an
// exponent via double) always needs the unit, as in the Python client: read
// as nanoseconds it would come back "OK" and wrong.
// Values: empty, "nan", "NaN" or "NA" = not observed, else a number.
// Long channels are names: --channel_names fixes their order, otherwise first
// appearance does.
//
// Every error names the 1-based line of the file (the header is line 1).
//
// Thread-safety: pure functions.
#ifndef PHASOR_CLIENT_CLI_PANEL_CSV_H_
#define PHASOR_CLIENT_CLI_PANEL_CSV_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "phasor/v1/encoder.pb.h"

namespace phasor::cli {

enum class PanelCsvLayout { kAuto, kLong, kWide };

// The unit of numeric times (--time_unit); kUnspecified: integers are
// nanoseconds, decimals an error (above).
enum class TimeUnit { kUnspecified, kSeconds, kMilliseconds, kMicroseconds, kNanoseconds };

// "s", "ms", "us", "ns" (any case); "" is kUnspecified. `flag` names the
// flag in errors.
absl::StatusOr<TimeUnit> ParseTimeUnit(absl::string_view text, absl::string_view flag);
// Nanoseconds per unit; 1 for kUnspecified.
int64_t NanosPerUnit(TimeUnit unit);

// When every unitless integer time of an input is in [0, one day) as
// nanoseconds, they are taken for seconds or milliseconds that lost their
// unit: 2024-01-01 is 1.7e9 s or 1.7e12 ms, 1.7 s or 28 min after the epoch
// as nanoseconds, while a day is 8.64e13 ns (seconds and milliseconds are
// caught up to the year 4707). Microseconds of 2024, 1.7e15, are past the
// day and are read as nanoseconds without a word: give the unit.
inline constexpr int64_t kNanosPerDay = int64_t{86400} * 1000000000;

// What to write instead, for errors about such times.
inline constexpr absl::string_view kTimeUnitHint =
    "pass --time_unit s (or ms, us; --time_unit ns if they are nanoseconds)";

struct PanelCsvOptions {
  PanelCsvLayout layout = PanelCsvLayout::kAuto;
  std::string series_column = "series";
  std::string time_column = "time";
  // Empty: no per-series time zones (the spec's calendar zone for all).
  std::string time_zone_column;
  // Long layout: channel order; empty = order of first appearance.
  std::vector<std::string> channel_names;
  TimeUnit time_unit = TimeUnit::kUnspecified;
};

struct PanelCsv {
  // Rows, series_offsets, channel names and time zones; no spec.
  v1::Observations observations;
  // The series key of each series, in panel order.
  std::vector<std::string> series_keys;
  bool long_layout = false;
  // Per panel row (wide) or event (long), in panel order: the file line it
  // came from and its time cell as written (whitespace trimmed), so that
  // output rows and server errors can point back at the file.
  std::vector<int64_t> row_lines;
  std::vector<std::string> row_times;
};

absl::StatusOr<PanelCsv> ReadPanelCsv(absl::string_view text,
                                      absl::string_view name,
                                      const PanelCsvOptions& options);

// One time cell as ns since the Unix epoch (forms above). `unitless_integer`,
// when given, is set to whether the cell was an integer read as ns for want
// of a unit (the caller checks those against kNanosPerDay as a whole).
absl::StatusOr<int64_t> ParseTimeCell(absl::string_view cell, TimeUnit unit,
                                      bool* unitless_integer = nullptr);

}  // namespace phasor::cli

#endif  // PHASOR_CLIENT_CLI_PANEL_CSV_H_
