// Tests for client/csv_reader (RFC 4180 records) and the panel table reader
// of phasor-client (client/cli/panel_csv): quoting, line breaks, errors with
// line and column, the time forms and --time_unit, stable grouping of
// series, long and wide layouts, per-series time zones, the file line of
// each panel row.
#include "client/csv_reader.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "client/cli/panel_csv.h"
#include "client/tensor_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phasor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::vector<std::string>> Fields(absl::string_view text) {
  auto records = ParseCsv(text, "t.csv");
  EXPECT_TRUE(records.ok()) << records.status();
  std::vector<std::vector<std::string>> fields;
  if (!records.ok()) return fields;
  for (const CsvRecord& record : *records) fields.push_back(record.fields);
  return fields;
}

TEST(CsvReaderTest, PlainQuotedAndEmptyFields) {
  EXPECT_THAT(Fields("a,b,c\n1,,3\n"),
              ElementsAre(ElementsAre("a", "b", "c"), ElementsAre("1", "", "3")));
  EXPECT_THAT(Fields("\"x,y\",\"say \"\"hi\"\"\",\"\"\n"),
              ElementsAre(ElementsAre("x,y", "say \"hi\"", "")));
  // Line breaks inside quotes, CRLF records, no final newline, a BOM.
  EXPECT_THAT(Fields("\xEF\xBB\xBF" "a,\"two\nlines\"\r\nb,c"),
              ElementsAre(ElementsAre("a", "two\nlines"), ElementsAre("b", "c")));
  // A trailing comma is an empty last field; blank lines are skipped.
  EXPECT_THAT(Fields("a,\n\n\nb\n"),
              ElementsAre(ElementsAre("a", ""), ElementsAre("b")));
}

TEST(CsvReaderTest, RecordsKnowTheirLine) {
  auto records = ParseCsv("h\n\"a\nb\"\nc\n", "t.csv");
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 3u);
  EXPECT_EQ((*records)[1].line, 2);
  EXPECT_EQ((*records)[2].line, 4);
}

TEST(CsvReaderTest, MalformedQuotesNameLineAndColumn) {
  auto unterminated = ParseCsv("a,b\nc,\"open\nmore", "t.csv");
  EXPECT_THAT(unterminated.status().message(),
              HasSubstr("t.csv: line 2 column 3: unterminated quoted field"));
  auto after = ParseCsv("\"a\"b,c\n", "t.csv");
  EXPECT_THAT(after.status().message(),
              HasSubstr("line 1 column 4: text after a closing quote"));
  auto inside = ParseCsv("ab\"c\n", "t.csv");
  EXPECT_THAT(inside.status().message(), HasSubstr("line 1 column 3"));
}

TEST(CsvReaderTest, EveryPrefixParsesOrFailsCleanly) {
  const std::string text = "s,t,\"v,1\"\n\"a\"\"\",1,2\r\nb,3,\"\n\"\n";
  for (size_t n = 0; n <= text.size(); ++n) {
    auto records = ParseCsv(text.substr(0, n), "t.csv");
    if (!records.ok()) {
      EXPECT_EQ(records.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(PanelCsvTest, TimeCells) {
  using cli::ParseTimeCell;
  using cli::TimeUnit;
  // Integers without a unit are nanoseconds, and say so.
  bool unitless = false;
  EXPECT_EQ(*ParseTimeCell("1704067200000000001", TimeUnit::kUnspecified, &unitless),
            1704067200000000001);
  EXPECT_TRUE(unitless);
  EXPECT_EQ(*ParseTimeCell("1704067200", TimeUnit::kSeconds, &unitless),
            1704067200000000000);
  EXPECT_FALSE(unitless);
  EXPECT_EQ(*ParseTimeCell("1704067200123", TimeUnit::kMilliseconds),
            1704067200123000000);
  EXPECT_EQ(*ParseTimeCell("1704067200123456", TimeUnit::kMicroseconds),
            1704067200123456000);
  EXPECT_EQ(*ParseTimeCell("7", TimeUnit::kNanoseconds), 7);
  // Decimals need the unit, and are exact in it.
  EXPECT_THAT(ParseTimeCell("1704067200.5", TimeUnit::kUnspecified).status().message(),
              HasSubstr("a decimal time has no unit; pass --time_unit s"));
  EXPECT_THAT(ParseTimeCell("1.7e9", TimeUnit::kUnspecified).status().message(),
              HasSubstr("--time_unit"));
  EXPECT_EQ(*ParseTimeCell("1704067200.000000001", TimeUnit::kSeconds),
            1704067200000000001);
  EXPECT_EQ(*ParseTimeCell("1704067200.5", TimeUnit::kSeconds), 1704067200500000000);
  EXPECT_EQ(*ParseTimeCell("-1.5", TimeUnit::kSeconds), -1500000000);
  EXPECT_EQ(*ParseTimeCell("1.7e9", TimeUnit::kSeconds), 1700000000000000000);
  EXPECT_EQ(*ParseTimeCell("1704067200000.5", TimeUnit::kMilliseconds),
            1704067200000500000);
  EXPECT_EQ(*ParseTimeCell("1.5", TimeUnit::kMicroseconds), 1500);
  EXPECT_EQ(*ParseTimeCell("2.000", TimeUnit::kNanoseconds), 2);
  EXPECT_FALSE(ParseTimeCell("2.5", TimeUnit::kNanoseconds).ok());      // Below 1 ns.
  EXPECT_FALSE(ParseTimeCell("1.0000000001", TimeUnit::kSeconds).ok());
  EXPECT_FALSE(ParseTimeCell("1.0000001", TimeUnit::kMilliseconds).ok());
  EXPECT_FALSE(ParseTimeCell("9223372037", TimeUnit::kSeconds).ok());  // > int64 ns.
  EXPECT_FALSE(ParseTimeCell("9223372036854776", TimeUnit::kMilliseconds).ok());
  // ISO 8601 whatever the unit.
  for (const TimeUnit unit : {TimeUnit::kUnspecified, TimeUnit::kMilliseconds}) {
    EXPECT_EQ(*ParseTimeCell("2024-01-01T00:00:00Z", unit), 1704067200000000000);
    EXPECT_EQ(*ParseTimeCell("2024-01-01", unit), 1704067200000000000);
    EXPECT_EQ(*ParseTimeCell("2024-01-01 05:30:00.25+05:30", unit),
              1704067200250000000);
    EXPECT_EQ(*ParseTimeCell("2024-01-01T00:00:00", unit), 1704067200000000000);
  }
  EXPECT_FALSE(ParseTimeCell("yesterday", TimeUnit::kUnspecified).ok());
  EXPECT_FALSE(ParseTimeCell("yesterday", TimeUnit::kSeconds).ok());
  EXPECT_FALSE(ParseTimeCell("nan", TimeUnit::kSeconds).ok());
  EXPECT_FALSE(ParseTimeCell("", TimeUnit::kSeconds).ok());
}

TEST(PanelCsvTest, TimeUnitFlagValues) {
  EXPECT_EQ(*cli::ParseTimeUnit("", "time_unit"), cli::TimeUnit::kUnspecified);
  EXPECT_EQ(*cli::ParseTimeUnit("MS", "time_unit"), cli::TimeUnit::kMilliseconds);
  EXPECT_EQ(cli::NanosPerUnit(cli::TimeUnit::kMicroseconds), 1000);
  EXPECT_THAT(cli::ParseTimeUnit("min", "time_unit").status().message(),
              HasSubstr("--time_unit: 'min' is not one of s, ms, us, ns"));
}

std::vector<int64_t> Int64s(const v1::Tensor& tensor) {
  std::vector<int64_t> out(tensor.data().size() / sizeof(int64_t));
  std::memcpy(out.data(), tensor.data().data(), tensor.data().size());
  return out;
}

TEST(PanelCsvTest, WideGroupsSeriesStablyByFirstAppearance) {
  const std::string text =
      "series,time,hr,\"spo2\"\n"
      "b,10,1,2\n"
      "a,5,3,\n"
      "b,11,4,nan\n"
      "\"c,1\",1,5,6\n";
  cli::PanelCsvOptions options;
  options.time_unit = cli::TimeUnit::kNanoseconds;  // Times within 1 ns of 0.
  auto panel = cli::ReadPanelCsv(text, "w.csv", options);
  ASSERT_TRUE(panel.ok()) << panel.status();
  EXPECT_FALSE(panel->long_layout);
  // Each panel row knows its file line and time cell (the header is line 1).
  EXPECT_THAT(panel->row_lines, ElementsAre(2, 4, 3, 5));
  EXPECT_THAT(panel->row_times, ElementsAre("10", "11", "5", "1"));
  EXPECT_THAT(panel->series_keys, ElementsAre("b", "a", "c,1"));
  EXPECT_THAT(Int64s(panel->observations.series_offsets()),
              ElementsAre(0, 2, 3, 4));
  EXPECT_THAT(Int64s(panel->observations.timestamps()),
              ElementsAre(10, 11, 5, 1));
  EXPECT_THAT(panel->observations.channel_names(), ElementsAre("hr", "spo2"));
  auto values = TensorToDoubles(panel->observations.values());
  ASSERT_TRUE(values.ok());
  ASSERT_EQ(values->size(), 8u);
  EXPECT_EQ((*values)[0], 1);
  EXPECT_EQ((*values)[2], 4);
  EXPECT_TRUE(std::isnan((*values)[3]));
  EXPECT_TRUE(std::isnan((*values)[5]));
}

TEST(PanelCsvTest, LongWithTimeZones) {
  const std::string text =
      "series,time,channel,value,tz\n"
      "x,2024-01-01T00:00:00Z,hr,1,Asia/Kolkata\n"
      "y,1704067200.0,spo2,2,UTC\n"
      "x,2024-01-01T01:00:00Z,spo2,,Asia/Kolkata\n";
  cli::PanelCsvOptions options;
  options.time_zone_column = "tz";
  options.time_unit = cli::TimeUnit::kSeconds;  // For the decimal.
  auto panel = cli::ReadPanelCsv(text, "l.csv", options);
  ASSERT_TRUE(panel.ok()) << panel.status();
  EXPECT_TRUE(panel->long_layout);
  const v1::Observations& o = panel->observations;
  EXPECT_EQ(o.num_channels(), 2);
  EXPECT_THAT(o.channel_names(), ElementsAre("hr", "spo2"));
  EXPECT_THAT(Int64s(o.event_times()),
              ElementsAre(1704067200000000000, 1704070800000000000,
                          1704067200000000000));
  EXPECT_THAT(o.time_zones(), ElementsAre("Asia/Kolkata", "UTC"));
  EXPECT_EQ(o.time_zone_index().data().size(), 2 * sizeof(int32_t));
  EXPECT_THAT(panel->row_lines, ElementsAre(2, 4, 3));
  EXPECT_THAT(panel->row_times,
              ElementsAre("2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z",
                          "1704067200.0"));

  // One zone per series.
  const std::string mixed =
      "series,time,channel,value,tz\nx,1,a,1,UTC\nx,2,a,1,Asia/Kolkata\n";
  EXPECT_THAT(cli::ReadPanelCsv(mixed, "l.csv", options).status().message(),
              HasSubstr("line 3 column 'tz'"));
}

TEST(PanelCsvTest, UnitlessSecondsAreAnErrorNamingTheUnit) {
  // An hour apart in seconds: read as ns they would be 3.6 us apart.
  const std::string seconds =
      "series,time,v\n"
      "a,1704096000,1\n"
      "b,2024-01-01T09:00:00Z,2\n"
      "a,1704099600,2\n";
  absl::Status status =
      cli::ReadPanelCsv(seconds, "s.csv", cli::PanelCsvOptions()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("s.csv: line 2 column 'time'"));
  EXPECT_THAT(status.message(), HasSubstr("'1704096000' here"));
  EXPECT_THAT(status.message(), HasSubstr("pass --time_unit s"));

  cli::PanelCsvOptions options;
  options.time_unit = cli::TimeUnit::kSeconds;
  auto panel = cli::ReadPanelCsv(seconds, "s.csv", options);
  ASSERT_TRUE(panel.ok()) << panel.status();
  EXPECT_THAT(Int64s(panel->observations.timestamps()),
              ElementsAre(1704096000000000000, 1704099600000000000,
                          1704099600000000000));
  // Milliseconds likewise; --time_unit ns keeps small integers as they are.
  const std::string millis = "series,time,v\na,1704096000000,1\n";
  EXPECT_THAT(cli::ReadPanelCsv(millis, "m.csv", cli::PanelCsvOptions())
                  .status()
                  .message(),
              HasSubstr("within the first day after the epoch"));
  options.time_unit = cli::TimeUnit::kMilliseconds;
  EXPECT_THAT(Int64s(cli::ReadPanelCsv(millis, "m.csv", options)
                         ->observations.timestamps()),
              ElementsAre(1704096000000000000));
  options.time_unit = cli::TimeUnit::kNanoseconds;
  EXPECT_THAT(Int64s(cli::ReadPanelCsv(millis, "m.csv", options)
                         ->observations.timestamps()),
              ElementsAre(1704096000000));
  // One integer past the first day: nanoseconds, as before.
  const std::string nanos =
      "series,time,v\na,5,1\na,1704096000000000000,2\n";
  EXPECT_TRUE(cli::ReadPanelCsv(nanos, "n.csv", cli::PanelCsvOptions()).ok());
  // A decimal without a unit names its line.
  EXPECT_THAT(cli::ReadPanelCsv("series,time,v\na,2024-01-01,1\na,1704096000.5,2\n",
                                "d.csv", cli::PanelCsvOptions())
                  .status()
                  .message(),
              HasSubstr("d.csv: line 3 column 'time': '1704096000.5': a decimal "
                        "time has no unit; pass --time_unit s"));
}

TEST(PanelCsvTest, ErrorsNameLineAndColumn) {
  EXPECT_THAT(cli::ReadPanelCsv("series,time,v\na,1,x\n", "e.csv",
                                cli::PanelCsvOptions())
                  .status()
                  .message(),
              HasSubstr("e.csv: line 2 column 'v': 'x' is not a number"));
  EXPECT_THAT(cli::ReadPanelCsv("series,time,v\na,1\n", "e.csv",
                                cli::PanelCsvOptions())
                  .status()
                  .message(),
              HasSubstr("line 2: 2 fields, the header has 3"));
  EXPECT_THAT(
      cli::ReadPanelCsv("id,time,v\n", "e.csv", cli::PanelCsvOptions())
          .status()
          .message(),
      HasSubstr("no column 'series'"));
}

}  // namespace
}  // namespace phasor
