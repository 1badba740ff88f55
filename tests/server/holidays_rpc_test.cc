// Built-in holiday calendars through a real server: the generated file
// (server/holidays/gen_builtin_holidays.py) loads, a request names a
// country in any case, a profile's calendar of the same name wins, an unknown
// name lists the known ones, and a bad file stops the server at startup
// naming the file.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "phasor/v1/encoder.grpc.pb.h"
#include "server/profiles.h"
#include "server/server.h"
#include "tests/server/test_util.h"

namespace phasor::server {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using testing::Context;
using testing::Int64Tensor;
using testing::StartTestServer;
using testing::TempDir;
using testing::TestOptions;
using testing::TestServer;

// Noon UTC of each day of [first, last].
std::vector<int64_t> Noons(absl::CivilDay first, absl::CivilDay last) {
  std::vector<int64_t> out;
  for (absl::CivilDay day = first; day <= last; ++day) {
    out.push_back(absl::ToUnixNanos(
        absl::FromCivil(absl::CivilSecond(day) + 12 * 3600, absl::UTCTimeZone())));
  }
  return out;
}

// The days of [first, last] whose indicator column is 1 for `calendar`.
std::vector<absl::CivilDay> HolidaysIn(v1::Encoder::Stub& stub,
                                       const std::string& calendar,
                                       absl::CivilDay first, absl::CivilDay last,
                                       grpc::Status* status) {
  const std::vector<int64_t> noons = Noons(first, last);
  v1::EncodeObservationsRequest request;
  *request.mutable_observations()->mutable_timestamps() =
      Int64Tensor(noons, {static_cast<int64_t>(noons.size())});
  request.mutable_spec()->mutable_temporal()->mutable_calendar()
      ->mutable_holidays()->set_calendar(calendar);
  request.set_output_dtype(v1::FLOAT64);
  v1::EncodeObservationsResponse response;
  *status = stub.EncodeObservations(Context().get(), request, &response);
  std::vector<absl::CivilDay> out;
  if (!status->ok()) return out;
  const std::string& bytes = response.features().data();
  EXPECT_EQ(bytes.size(), noons.size() * sizeof(double));
  for (size_t i = 0; i < noons.size() && (i + 1) * sizeof(double) <= bytes.size(); ++i) {
    double value;
    std::memcpy(&value, bytes.data() + i * sizeof(double), sizeof(double));
    if (value == 1.0) out.push_back(first + static_cast<int64_t>(i));
  }
  return out;
}

TEST(BuiltinHolidays, CountryCalendarsLoadAndServe) {
  ServerOptions options = TestOptions();
  options.builtin_holidays_path = PHASOR_BUILTIN_HOLIDAYS_FILE;
  TestServer server = StartTestServer(options);
  ASSERT_NE(server.server, nullptr);
  EXPECT_THAT(server.server->profiles().builtin_holidays_source(),
              HasSubstr("python3-holidays"));

  v1::ListProfilesResponse listed;
  ASSERT_TRUE(server.stub->ListProfiles(Context().get(), v1::ListProfilesRequest(),
                                        &listed).ok());
  EXPECT_GE(listed.builtin_holiday_calendars_size(), 20);
  for (const char* name : {"US", "DE", "GB", "FR", "JP", "IN", "BR"}) {
    EXPECT_THAT(listed.builtin_holiday_calendars(), Contains(name));
  }

  grpc::Status status;
  // US federal holidays of 2026 (New Year, MLK, Presidents, Memorial,
  // Juneteenth, Independence Day observed on Friday July 3, Labor,
  // Columbus, Veterans, Thanksgiving, Christmas): python3-holidays 0.10.1.
  const std::vector<absl::CivilDay> us = HolidaysIn(
      *server.stub, "US", absl::CivilDay(2026, 1, 1), absl::CivilDay(2026, 12, 31),
      &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(us, Contains(absl::CivilDay(2026, 7, 4)));
  EXPECT_THAT(us, Contains(absl::CivilDay(2026, 11, 26)));  // Thanksgiving
  EXPECT_THAT(us, Contains(absl::CivilDay(2026, 12, 25)));
  EXPECT_GE(us.size(), 10u);
  EXPECT_LE(us.size(), 14u);
  // Both ends of the range are covered.
  EXPECT_THAT(HolidaysIn(*server.stub, "GB", absl::CivilDay(1900, 12, 20),
                         absl::CivilDay(1900, 12, 31), &status),
              Contains(absl::CivilDay(1900, 12, 25)));
  EXPECT_THAT(HolidaysIn(*server.stub, "FR", absl::CivilDay(2200, 7, 1),
                         absl::CivilDay(2200, 7, 31), &status),
              Contains(absl::CivilDay(2200, 7, 14)));

  // Built-in names in any case are the same calendar.
  for (const char* spelling : {"us", "Us", "uS"}) {
    EXPECT_EQ(HolidaysIn(*server.stub, spelling, absl::CivilDay(2026, 1, 1),
                         absl::CivilDay(2026, 12, 31), &status),
              us)
        << spelling;
    EXPECT_TRUE(status.ok()) << spelling << ": " << status.error_message();
  }

  // Unknown names are NOT_FOUND naming the field and the names there are.
  HolidaysIn(*server.stub, "XX", absl::CivilDay(2026, 1, 1),
             absl::CivilDay(2026, 1, 2), &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(),
              HasSubstr("spec.temporal.calendar.holidays.calendar"));
  EXPECT_THAT(status.error_message(),
              HasSubstr("unknown holiday calendar 'XX'; built-in calendars (any "
                        "case): AR, AT, "));
  for (const std::string& name : listed.builtin_holiday_calendars()) {
    EXPECT_THAT(status.error_message(), HasSubstr(absl::StrCat(" ", name)));
  }
}

TEST(BuiltinHolidays, UnknownNameWithoutCalendarsSaysThereAreNone) {
  TestServer server = StartTestServer(TestOptions());
  ASSERT_NE(server.server, nullptr);
  grpc::Status status;
  HolidaysIn(*server.stub, "de", absl::CivilDay(2026, 1, 1),
             absl::CivilDay(2026, 1, 2), &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("this server has none"));
}

TEST(BuiltinHolidays, ProfileCalendarOfTheSameNameWins) {
  TempDir dir;
  ServerOptions options = TestOptions();
  options.builtin_holidays_path = PHASOR_BUILTIN_HOLIDAYS_FILE;
  options.profiles_path = dir.WriteFile("profiles.txtpb", R"pb(
    profile { name: "p" spec { rope { rotary_dim: 8 } }
              holiday_calendars { name: "US" dates: "2026-03-03" } }
  )pb");
  TestServer server = StartTestServer(options);
  ASSERT_NE(server.server, nullptr);
  grpc::Status status;
  // Under every spelling the built-in one answers to.
  for (const char* spelling : {"US", "us"}) {
    EXPECT_THAT(HolidaysIn(*server.stub, spelling, absl::CivilDay(2026, 1, 1),
                           absl::CivilDay(2026, 12, 31), &status),
                ::testing::ElementsAre(absl::CivilDay(2026, 3, 3)))
        << spelling;
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  // Unknown names list the profiles' calendars too.
  HolidaysIn(*server.stub, "nowhere", absl::CivilDay(2026, 1, 1),
             absl::CivilDay(2026, 1, 2), &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(),
              HasSubstr("; built-in calendars (any case): AR, AT, "));
  EXPECT_THAT(status.error_message(), HasSubstr(", ZA; the profiles' calendars: US"));
}

TEST(BuiltinHolidays, UnknownNameListsAtMost16ProfileCalendars) {
  TempDir dir;
  std::string profiles = R"pb(profile { name: "p" spec { rope { rotary_dim: 8 } })pb";
  for (int i = 0; i < 20; ++i) {
    absl::StrAppend(&profiles, " holiday_calendars { name: \"c", 100 + i,
                    "\" dates: \"2026-03-03\" }");
  }
  absl::StrAppend(&profiles, " }");
  ServerOptions options = TestOptions();
  options.profiles_path = dir.WriteFile("profiles.txtpb", profiles);
  TestServer server = StartTestServer(options);
  ASSERT_NE(server.server, nullptr);
  grpc::Status status;
  HolidaysIn(*server.stub, "nowhere", absl::CivilDay(2026, 1, 1),
             absl::CivilDay(2026, 1, 2), &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(),
              HasSubstr("calendars: c100, c101, c102, c103, c104, c105, c106, "
                        "c107, c108, c109, c110, c111, c112, c113, c114, c115, "
                        "... (4 more; ListProfiles lists them all)"));
}

TEST(BuiltinHolidays, NamesDifferingInCaseAloneStopStartup) {
  TempDir dir;
  ServerOptions options = TestOptions();
  options.builtin_holidays_path = dir.WriteFile("twins.textpb", R"pb(
    calendars { name: "US" dates: "2026-01-01" }
    calendars { name: "us" dates: "2026-01-02" }
  )pb");
  absl::StatusOr<std::unique_ptr<PhasorServer>> server = PhasorServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr("'us': duplicate name"));
}

TEST(BuiltinHolidays, BadFileStopsStartupNamingIt) {
  TempDir dir;
  ServerOptions options = TestOptions();
  options.builtin_holidays_path = dir.WriteFile("bad.textpb", R"pb(
    calendars { name: "US" dates: ["2026-01-01", "2026-02-30"] }
  )pb");
  absl::StatusOr<std::unique_ptr<PhasorServer>> server = PhasorServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr("bad.textpb"));
  EXPECT_THAT(server.status().message(), HasSubstr("'US' dates[1]"));

  options.builtin_holidays_path = dir.WriteFile("garbled.textpb", "calendars {");
  server = PhasorServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr("builtin_holidays: "));

  options.builtin_holidays_path = absl::StrCat(dir.path(), "/absent.textpb");
  server = PhasorServer::Start(options);
  EXPECT_FALSE(server.ok());
}

}  // namespace
}  // namespace phasor::server
