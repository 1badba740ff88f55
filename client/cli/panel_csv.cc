#include "client/cli/panel_csv.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/csv_reader.h"
#include "client/tensor_io.h"
#include "core/base/status_macros.h"

namespace phasor::cli {
namespace {

bool IsDigits(absl::string_view text) {
  if (text.empty()) return false;
  for (const char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Decimal digits below the unit that still name whole nanoseconds: 9 for
// seconds, 6 for milliseconds, 3 for microseconds, 0 for nanoseconds.
int FractionDigits(int64_t nanos_per_unit) {
  int digits = 0;
  for (int64_t n = nanos_per_unit; n >= 10; n /= 10) ++digits;
  return digits;
}

// "[+-]digits[.digits]" units, exactly; false when the text is not of that
// form.
absl::StatusOr<bool> ParseDecimal(absl::string_view text, int64_t nanos_per_unit,
                                  int64_t* ns) {
  bool negative = false;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  const size_t dot = text.find('.');
  absl::string_view whole = text.substr(0, dot);
  absl::string_view fraction =
      dot == absl::string_view::npos ? "" : text.substr(dot + 1);
  if (whole.empty()) whole = "0";
  if (!IsDigits(whole) || (!fraction.empty() && !IsDigits(fraction))) {
    return false;
  }
  const size_t kept = static_cast<size_t>(FractionDigits(nanos_per_unit));
  if (fraction.size() > kept &&
      fraction.substr(kept).find_first_not_of('0') != absl::string_view::npos) {
    return absl::InvalidArgumentError("finer than a nanosecond");
  }
  int64_t units;
  if (!absl::SimpleAtoi(whole, &units) ||
      units > (std::numeric_limits<int64_t>::max() - nanos_per_unit) / nanos_per_unit) {
    return absl::InvalidArgumentError("out of the int64 nanosecond range");
  }
  int64_t sub = 0;
  for (size_t i = 0; i < kept; ++i) {
    sub = sub * 10 + (i < fraction.size() ? fraction[i] - '0' : 0);
  }
  *ns = units * nanos_per_unit + sub;
  if (negative) *ns = -*ns;
  return true;
}

}  // namespace

absl::StatusOr<TimeUnit> ParseTimeUnit(absl::string_view text, absl::string_view flag) {
  const std::string unit = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (unit.empty()) return TimeUnit::kUnspecified;
  if (unit == "s") return TimeUnit::kSeconds;
  if (unit == "ms") return TimeUnit::kMilliseconds;
  if (unit == "us") return TimeUnit::kMicroseconds;
  if (unit == "ns") return TimeUnit::kNanoseconds;
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": '", text, "' is not one of s, ms, us, ns"));
}

int64_t NanosPerUnit(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kSeconds:
      return 1000000000;
    case TimeUnit::kMilliseconds:
      return 1000000;
    case TimeUnit::kMicroseconds:
      return 1000;
    case TimeUnit::kUnspecified:
    case TimeUnit::kNanoseconds:
      break;
  }
  return 1;
}

absl::StatusOr<int64_t> ParseTimeCell(absl::string_view cell, TimeUnit unit,
                                      bool* unitless_integer) {
  if (unitless_integer != nullptr) *unitless_integer = false;
  cell = absl::StripAsciiWhitespace(cell);
  if (cell.empty()) return absl::InvalidArgumentError("empty time");
  const int64_t per_unit = NanosPerUnit(unit);
  int64_t ns;
  if (absl::SimpleAtoi(cell, &ns)) {
    if (unit == TimeUnit::kUnspecified && unitless_integer != nullptr) {
      *unitless_integer = true;
    }
    if (ns > std::numeric_limits<int64_t>::max() / per_unit ||
        ns < std::numeric_limits<int64_t>::min() / per_unit) {
      return absl::InvalidArgumentError("out of the int64 nanosecond range");
    }
    return ns * per_unit;
  }
  // ISO 8601 dates have '-' after four digits; numbers never do.
  const bool iso = cell.size() >= 10 && cell[4] == '-' && cell[7] == '-';
  if (!iso) {
    double value;
    const bool decimal_form = absl::SimpleAtod(cell, &value) && std::isfinite(value);
    if (unit == TimeUnit::kUnspecified) {
      return absl::InvalidArgumentError(
          decimal_form ? absl::StrCat("a decimal time has no unit; ", kTimeUnitHint)
                       : "not a number or an ISO 8601 time");
    }
    PHASOR_ASSIGN_OR_RETURN(const bool decimal, ParseDecimal(cell, per_unit, &ns));
    if (decimal) return ns;
    const double nanos = value * static_cast<double>(per_unit);
    if (decimal_form && std::isfinite(nanos) && std::abs(nanos) < 9.2e18) {
      return static_cast<int64_t>(std::llround(nanos));
    }
    return absl::InvalidArgumentError(
        decimal_form ? "out of the int64 nanosecond range"
                     : "not a number of --time_unit or an ISO 8601 time");
  }
  std::string text(cell);
  if (text.size() == 10) text += "T00:00:00";
  if (text[10] == ' ' || text[10] == 't') text[10] = 'T';
  // No offset after the time of day: UTC.
  const absl::string_view time_of_day = absl::string_view(text).substr(11);
  if (!absl::EndsWith(text, "Z") && !absl::EndsWith(text, "z") &&
      time_of_day.find_first_of("+-") == absl::string_view::npos) {
    text += "Z";
  }
  if (text.back() == 'z') text.back() = 'Z';
  absl::Time time;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, text, &time, &error) &&
      !absl::ParseTime("%Y-%m-%d%ET%H:%M%Ez", text, &time, &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an ISO 8601 time (", error, ")"));
  }
  return absl::ToUnixNanos(time);
}

absl::StatusOr<PanelCsv> ReadPanelCsv(absl::string_view text,
                                      absl::string_view name,
                                      const PanelCsvOptions& options) {
  PHASOR_ASSIGN_OR_RETURN(std::vector<CsvRecord> records,
                          ParseCsv(text, name));
  if (records.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": empty; expected a header line"));
  }
  const std::vector<std::string>& header = records.front().fields;
  auto find = [&](const std::string& column) -> int {
    for (size_t i = 0; i < header.size(); ++i) {
      if (absl::StripAsciiWhitespace(header[i]) == column) {
        return static_cast<int>(i);
      }
    }
    return -1;
  };
  const int series_at = find(options.series_column);
  const int time_at = find(options.time_column);
  const int zone_at =
      options.time_zone_column.empty() ? -1 : find(options.time_zone_column);
  for (const auto& [column, at] :
       {std::pair<std::string, int>{options.series_column, series_at},
        {options.time_column, time_at},
        {options.time_zone_column, options.time_zone_column.empty() ? 0 : zone_at}}) {
    if (at < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": the header has no column '", column, "'"));
    }
  }
  std::vector<int> channel_columns;
  std::vector<std::string> channel_headers;
  for (size_t i = 0; i < header.size(); ++i) {
    const int column = static_cast<int>(i);
    if (column == series_at || column == time_at || column == zone_at) continue;
    channel_columns.push_back(column);
    channel_headers.emplace_back(absl::StripAsciiWhitespace(header[i]));
  }
  const bool looks_long = channel_headers.size() == 2 &&
                          ((channel_headers[0] == "channel" &&
                            channel_headers[1] == "value") ||
                           (channel_headers[0] == "value" &&
                            channel_headers[1] == "channel"));
  PanelCsv panel;
  panel.long_layout = options.layout == PanelCsvLayout::kLong ||
                      (options.layout == PanelCsvLayout::kAuto && looks_long);
  const int channel_at = panel.long_layout ? find("channel") : -1;
  const int value_at = panel.long_layout ? find("value") : -1;
  if (panel.long_layout && (channel_at < 0 || value_at < 0 ||
                            channel_headers.size() != 2)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": a long table has the columns ", options.series_column, ",",
        options.time_column, ",channel,value",
        options.time_zone_column.empty() ? "" : " and the time zone column",
        " only"));
  }

  // Stable grouping: series by first appearance, rows in file order.
  std::unordered_map<std::string, size_t> series_of;
  std::vector<std::vector<size_t>> rows_of;
  for (size_t r = 1; r < records.size(); ++r) {
    const CsvRecord& record = records[r];
    if (record.fields.size() != header.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": line ", record.line, ": ", record.fields.size(),
          " fields, the header has ", header.size()));
    }
    const std::string& key = record.fields[static_cast<size_t>(series_at)];
    const auto [it, added] = series_of.emplace(key, rows_of.size());
    if (added) {
      rows_of.emplace_back();
      panel.series_keys.push_back(key);
    }
    rows_of[it->second].push_back(r);
  }
  if (rows_of.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": no rows"));
  }

  auto cell_error = [&](const CsvRecord& record, int column,
                        absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": line ", record.line, " column '",
        header[static_cast<size_t>(column)], "': ", what));
  };
  auto parse_value = [&](const CsvRecord& record,
                         int column) -> absl::StatusOr<double> {
    const absl::string_view cell = absl::StripAsciiWhitespace(
        record.fields[static_cast<size_t>(column)]);
    if (cell.empty() || absl::EqualsIgnoreCase(cell, "nan") || cell == "NA") {
      return std::numeric_limits<double>::quiet_NaN();
    }
    double value;
    if (!absl::SimpleAtod(cell, &value)) {
      return cell_error(record, column,
                        absl::StrCat("'", cell, "' is not a number"));
    }
    return value;
  };

  const int64_t rows = static_cast<int64_t>(records.size()) - 1;
  std::vector<int64_t> times;
  std::vector<double> values;
  std::vector<int32_t> channels;
  std::vector<int64_t> offsets = {0};
  std::vector<std::string> zone_names;
  std::vector<int32_t> zone_index;
  std::unordered_map<std::string, int32_t> channel_of;
  std::vector<std::string> channel_names = options.channel_names;
  for (size_t c = 0; c < channel_names.size(); ++c) {
    channel_of.emplace(channel_names[c], static_cast<int32_t>(c));
  }
  times.reserve(static_cast<size_t>(rows));
  values.reserve(static_cast<size_t>(rows) *
                 (panel.long_layout ? 1 : channel_columns.size()));
  panel.row_lines.reserve(static_cast<size_t>(rows));
  panel.row_times.reserve(static_cast<size_t>(rows));
  // The unitless integer times: are they all within the first day?
  bool any_unitless = false;
  bool all_unitless_in_first_day = true;
  const CsvRecord* first_unitless = nullptr;
  for (const std::vector<size_t>& series_rows : rows_of) {
    std::string zone;
    for (const size_t r : series_rows) {
      const CsvRecord& record = records[r];
      const absl::string_view cell = absl::StripAsciiWhitespace(
          record.fields[static_cast<size_t>(time_at)]);
      bool unitless = false;
      auto time = ParseTimeCell(cell, options.time_unit, &unitless);
      if (!time.ok()) {
        return cell_error(record, time_at,
                          absl::StrCat("'", cell, "': ", time.status().message()));
      }
      if (unitless) {
        any_unitless = true;
        all_unitless_in_first_day =
            all_unitless_in_first_day && *time >= 0 && *time < kNanosPerDay;
        if (first_unitless == nullptr || record.line < first_unitless->line) {
          first_unitless = &record;
        }
      }
      times.push_back(*time);
      panel.row_lines.push_back(record.line);
      panel.row_times.emplace_back(cell);
      if (panel.long_layout) {
        const std::string channel(absl::StripAsciiWhitespace(
            record.fields[static_cast<size_t>(channel_at)]));
        auto found = channel_of.find(channel);
        if (found == channel_of.end()) {
          if (!options.channel_names.empty()) {
            return cell_error(record, channel_at,
                              absl::StrCat("'", channel,
                                           "' is not in --channel_names"));
          }
          found = channel_of
                      .emplace(channel, static_cast<int32_t>(channel_names.size()))
                      .first;
          channel_names.push_back(channel);
        }
        channels.push_back(found->second);
        PHASOR_ASSIGN_OR_RETURN(const double value, parse_value(record, value_at));
        values.push_back(value);
      } else {
        for (const int column : channel_columns) {
          PHASOR_ASSIGN_OR_RETURN(const double value, parse_value(record, column));
          values.push_back(value);
        }
      }
      if (zone_at >= 0) {
        const std::string row_zone(absl::StripAsciiWhitespace(
            record.fields[static_cast<size_t>(zone_at)]));
        if (r == series_rows.front()) {
          zone = row_zone;
        } else if (row_zone != zone) {
          return cell_error(record, zone_at,
                            absl::StrCat("series '",
                                         record.fields[static_cast<size_t>(series_at)],
                                         "' has time zone '", zone,
                                         "' on an earlier line, '", row_zone,
                                         "' here; one zone per series"));
        }
      }
    }
    offsets.push_back(offsets.back() + static_cast<int64_t>(series_rows.size()));
    if (zone_at >= 0) {
      size_t index = 0;
      while (index < zone_names.size() && zone_names[index] != zone) ++index;
      if (index == zone_names.size()) zone_names.push_back(zone);
      zone_index.push_back(static_cast<int32_t>(index));
    }
  }

  if (any_unitless && all_unitless_in_first_day) {
    return cell_error(
        *first_unitless, time_at,
        absl::StrCat("every integer time of the column is within the first day "
                     "after the epoch as nanoseconds ('",
                     absl::StripAsciiWhitespace(
                         first_unitless->fields[static_cast<size_t>(time_at)]),
                     "' here): seconds or milliseconds without their unit? ",
                     kTimeUnitHint));
  }

  v1::Observations& observations = panel.observations;
  const int64_t series = static_cast<int64_t>(rows_of.size());
  *observations.mutable_series_offsets() =
      TensorFromInt64s(offsets, {series + 1});
  if (panel.long_layout) {
    *observations.mutable_event_times() = TensorFromInt64s(times, {rows});
    v1::Tensor* channel_tensor = observations.mutable_event_channels();
    channel_tensor->set_dtype(v1::INT32);
    channel_tensor->add_shape(rows);
    channel_tensor->set_data(reinterpret_cast<const char*>(channels.data()),
                             channels.size() * sizeof(int32_t));
    PHASOR_ASSIGN_OR_RETURN(*observations.mutable_event_values(),
                            TensorFromDoubles(values, {rows}, v1::FLOAT64));
    observations.set_num_channels(static_cast<int64_t>(channel_names.size()));
    for (const std::string& channel : channel_names) {
      observations.add_channel_names(channel);
    }
  } else {
    *observations.mutable_timestamps() = TensorFromInt64s(times, {rows});
    if (!channel_columns.empty()) {
      const int64_t width = static_cast<int64_t>(channel_columns.size());
      PHASOR_ASSIGN_OR_RETURN(
          *observations.mutable_values(),
          TensorFromDoubles(values, {rows, width}, v1::FLOAT64));
      for (const std::string& channel : channel_headers) {
        observations.add_channel_names(channel);
      }
    }
  }
  if (zone_at >= 0) {
    for (const std::string& zone : zone_names) observations.add_time_zones(zone);
    v1::Tensor* index = observations.mutable_time_zone_index();
    index->set_dtype(v1::INT32);
    index->add_shape(series);
    index->set_data(reinterpret_cast<const char*>(zone_index.data()),
                    zone_index.size() * sizeof(int32_t));
  }
  return panel;
}

}  // namespace phasor::cli
