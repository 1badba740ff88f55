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
// Cells: time is int64 nanoseconds since the Unix epoch ("1704067200000000000"),
// decimal seconds ("1704067200.25", exact to the nanosecond; with an exponent
// via double), or ISO 8601 / RFC 3339 ("2024-01-01T09:30:00Z",
// "2024-01-01 09:30:00.5+05:30", "2024-01-01"); a time without an offset is
// UTC. Values: empty, "nan", "NaN" or "NA" = not observed, else a number.
// Long channels are names: --channel_names fixes their order, otherwise first
// appearance does.
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

struct PanelCsvOptions {
  PanelCsvLayout layout = PanelCsvLayout::kAuto;
  std::string series_column = "series";
  std::string time_column = "time";
  // Empty: no per-series time zones (the spec's calendar zone for all).
  std::string time_zone_column;
  // Long layout: channel order; empty = order of first appearance.
  std::vector<std::string> channel_names;
};

struct PanelCsv {
  // Rows, series_offsets, channel names and time zones; no spec.
  v1::Observations observations;
  // The series key of each series, in panel order.
  std::vector<std::string> series_keys;
  bool long_layout = false;
};

absl::StatusOr<PanelCsv> ReadPanelCsv(absl::string_view text,
                                      absl::string_view name,
                                      const PanelCsvOptions& options);

// One time cell as ns since the Unix epoch (forms above).
absl::StatusOr<int64_t> ParseTimeCell(absl::string_view cell);

}  // namespace phasor::cli

#endif  // PHASOR_CLIENT_CLI_PANEL_CSV_H_
