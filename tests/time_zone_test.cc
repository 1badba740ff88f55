// IANA zones by name (core/temporal/time_zone.h): unknown, unsafe and
// overlong names rejected with bounded messages, every zone and link of the
// tzdata list loads, "" is UTC and the local zone is never used.
#include "core/temporal/time_zone.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "core/temporal/calendar.h"
#include "core/temporal/compose.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/calendar_test_data.h"
#include "tests/status_matchers.h"

namespace phasor {
namespace {

using ::testing::HasSubstr;

using testing::EncodeCalendar;
using testing::UtcNs;

TEST(LoadIanaTimeZone, UnknownAndUnsafeNamesAreRejected) {
  const std::string field = "spec.temporal.calendar.time_zone";
  const absl::StatusOr<absl::TimeZone> mars = LoadIanaTimeZone("Mars/Base", field);
  EXPECT_THAT(mars.status(), IsFieldError(absl::StatusCode::kInvalidArgument, field));
  EXPECT_THAT(std::string(mars.status().message()),
              HasSubstr("unknown IANA time zone \"Mars/Base\""));
  for (const char* name : {"localtime", "/etc/localtime", "../../etc/passwd",
                           "America/../../etc", "Europe/London\n", "UTC "}) {
    EXPECT_THAT(LoadIanaTimeZone(name, field).status(),
                IsFieldError(absl::StatusCode::kInvalidArgument, field))
        << name;
  }
}

// Guards the zone cache bound: a name must be on the tzdata zone list before
// absl::LoadTimeZone (which caches every name it is given, failures
// included) sees it, overlong names are rejected unread, and no error quotes
// more than 64 bytes of a name.
TEST(LoadIanaTimeZone, OverlongNamesAreRejectedWithABoundedMessage) {
  const std::string field = "spec.temporal.calendar.time_zone";
  const std::string huge = "Europe/" + std::string(1 << 20, 'A');
  const absl::Status status = LoadIanaTimeZone(huge, field).status();
  EXPECT_THAT(status, IsFieldError(absl::StatusCode::kInvalidArgument, field));
  EXPECT_LT(status.message().size(), 300u) << status.message().substr(0, 400);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(absl::StrCat("...(", huge.size(), " bytes)")));
  EXPECT_THAT(std::string(status.message()), HasSubstr("\"Europe/AAAA"));
  // Unsafe bytes are escaped and cut too.
  const std::string unsafe = std::string(100000, '\n') + "Europe/London";
  const absl::Status escaped = LoadIanaTimeZone(unsafe, field).status();
  EXPECT_LT(escaped.message().size(), 400u);
  EXPECT_THAT(std::string(escaped.message()), HasSubstr("\\n\\n"));
  // 65 bytes of valid characters: longer than any IANA name.
  EXPECT_FALSE(LoadIanaTimeZone(std::string(65, 'A'), field).ok());
  // Unknown names of normal length are quoted whole.
  EXPECT_THAT(std::string(LoadIanaTimeZone("Europe/Atlantis", field).status().message()),
              HasSubstr("\"Europe/Atlantis\""));
}

TEST(LoadIanaTimeZone, ZonesAndLinksOfTheTzdataListLoad) {
  const absl::Time july = absl::FromCivil(absl::CivilSecond(2026, 7, 1, 12, 0, 0),
                                          absl::UTCTimeZone());
  const auto offset_hours = [&](const char* name) {
    const absl::StatusOr<absl::TimeZone> zone = LoadIanaTimeZone(name, "zone");
    EXPECT_TRUE(zone.ok()) << name << ": " << zone.status();
    return zone.ok() ? zone->At(july).offset / 3600.0 : 99.0;
  };
  EXPECT_EQ(offset_hours("America/New_York"), -4.0);
  EXPECT_EQ(offset_hours("US/Eastern"), -4.0);  // A link ("L" line).
  EXPECT_EQ(offset_hours("Etc/GMT+5"), -5.0);   // POSIX sign: 5 h west.
  EXPECT_EQ(offset_hours("Europe/London"), 1.0);
  EXPECT_EQ(offset_hours("Asia/Kolkata"), 5.5);
  EXPECT_EQ(offset_hours("Etc/UTC"), 0.0);
  EXPECT_EQ(offset_hours("GMT"), 0.0);
}

// The list comes from tzdata.zi ("Z name" zones, "L target name" links), or,
// when that file is missing, from the TZif files of the tree.
TEST(ReadZoneNames, TzdataZiThenTheZoneinfoTree) {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/zoneinfo_", getpid());
  ASSERT_EQ(std::system(absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir,
                                     "/Mars'").c_str()),
            0);
  {
    std::ofstream zi(dir + "/tzdata.zi");
    zi << "# version test\nR Mars 2000 max - Mar 1 0 1 S\n"
          "Z Mars/Olympus 0 - MOT\nL Mars/Olympus Mars/Base\n"
          "Z Etc/GMT+5 -5 - %z\n";
  }
  EXPECT_EQ(ReadZoneNames(dir),
            (std::vector<std::string>{"Etc/GMT+5", "Mars/Base", "Mars/Olympus"}));
  std::remove((dir + "/tzdata.zi").c_str());
  {
    std::ofstream(dir + "/Mars/Olympus") << "TZif2 rest of a zone file";
    std::ofstream(dir + "/zone.tab") << "# not a zone file\n";
  }
  EXPECT_EQ(ReadZoneNames(dir), (std::vector<std::string>{"Mars/Olympus"}));
  std::system(absl::StrCat("rm -rf '", dir, "'").c_str());
  // The system list holds the usual names.
  const std::vector<std::string> system = ReadZoneNames("/usr/share/zoneinfo");
  for (const char* name : {"America/New_York", "US/Eastern", "Etc/GMT+5", "UTC"}) {
    EXPECT_TRUE(std::binary_search(system.begin(), system.end(), name)) << name;
  }
}

TEST(LoadIanaTimeZone, EmptyMeansUtcAndTheLocalZoneIsNeverUsed) {
  // Point the process' local zone elsewhere; the default must stay UTC.
  ASSERT_EQ(setenv("TZ", "Asia/Tokyo", 1), 0);
  CalendarBlock block;
  block.time_zone = "";
  block.fields = {CalendarField::kHourOfDay};
  block.encoding = CalendarEncoding::kIndex;
  int64_t width = 0;
  EXPECT_EQ(EncodeCalendar(block, {UtcNs(2026, 1, 1, 3)}, &width)[0], 3.0f);
  block.time_zone = "UTC";
  EXPECT_EQ(EncodeCalendar(block, {UtcNs(2026, 1, 1, 3)}, &width)[0], 3.0f);
  block.time_zone = "Asia/Tokyo";
  EXPECT_EQ(EncodeCalendar(block, {UtcNs(2026, 1, 1, 3)}, &width)[0], 12.0f);
  unsetenv("TZ");
}

}  // namespace
}  // namespace phasor
