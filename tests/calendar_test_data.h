// Calendar test data shared by the calendar, local-time and time-zone
// tests: the rows of tests/data/calendar_expected.tsv (written by
// tests/data/gen_calendar_expected.py from Python's zoneinfo and datetime
// over the system tzdata), and a calendar-only encoding of a time column.
#ifndef PHASOR_TESTS_CALENDAR_TEST_DATA_H_
#define PHASOR_TESTS_CALENDAR_TEST_DATA_H_

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/temporal/compose.h"
#include "gtest/gtest.h"

namespace phasor::testing {

// One line of tests/data/calendar_expected.tsv (gen_calendar_expected.py:
// Python zoneinfo + datetime over the system tzdata).
struct Expected {
  std::string zone;
  int64_t unix_ns = 0;
  int64_t year = 0;
  int month = 0, day = 0, hour = 0, minute = 0, second = 0;
  int64_t subsecond_ns = 0;
  int weekday = 0, day_of_year = 0;
  int64_t iso_year = 0;
  int iso_week = 0, iso_weeks_in_year = 0, days_in_month = 0, days_in_year = 0;
  int utc_offset_seconds = 0;
  bool is_dst = false;
};

inline const std::vector<Expected>& ExpectedRows() {
  static const std::vector<Expected>* rows = [] {
    auto* out = new std::vector<Expected>;
    std::ifstream in(std::string(PHASOR_TEST_DATA_DIR) +
                     "/calendar_expected.tsv");
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::vector<std::string> f = absl::StrSplit(line, '\t');
      if (f.size() != 18) {
        ADD_FAILURE() << "bad line: " << line;
        continue;
      }
      Expected e;
      e.zone = f[0];
      int64_t v[17];
      bool ok = true;
      for (int i = 1; i < 18; ++i) ok = ok && absl::SimpleAtoi(f[i], &v[i - 1]);
      if (!ok) {
        ADD_FAILURE() << "bad number in: " << line;
        continue;
      }
      e.unix_ns = v[0];
      e.year = v[1];
      e.month = static_cast<int>(v[2]);
      e.day = static_cast<int>(v[3]);
      e.hour = static_cast<int>(v[4]);
      e.minute = static_cast<int>(v[5]);
      e.second = static_cast<int>(v[6]);
      e.subsecond_ns = v[7];
      e.weekday = static_cast<int>(v[8]);
      e.day_of_year = static_cast<int>(v[9]);
      e.iso_year = v[10];
      e.iso_week = static_cast<int>(v[11]);
      e.iso_weeks_in_year = static_cast<int>(v[12]);
      e.days_in_month = static_cast<int>(v[13]);
      e.days_in_year = static_cast<int>(v[14]);
      e.utc_offset_seconds = static_cast<int>(v[15]);
      e.is_dst = v[16] != 0;
      out->push_back(e);
    }
    return out;
  }();
  return *rows;
}

inline std::map<std::string, std::vector<Expected>> RowsByZone() {
  std::map<std::string, std::vector<Expected>> by_zone;
  for (const Expected& e : ExpectedRows()) by_zone[e.zone].push_back(e);
  return by_zone;
}

inline int64_t UtcNs(int64_t y, int m, int d, int hh = 0, int mm = 0, int ss = 0) {
  return absl::ToUnixNanos(
      absl::FromCivil(absl::CivilSecond(y, m, d, hh, mm, ss), absl::UTCTimeZone()));
}

// Features of a calendar-only spec over `times` (non-decreasing), float32
// or (T = double) float64, the exact CYCLIC path.
template <typename T = float>
inline std::vector<T> EncodeCalendar(const CalendarBlock& block,
                              const std::vector<int64_t>& times, int64_t* width) {
  TemporalSpec spec;
  spec.calendar = block;
  ObservationsView obs;
  obs.timestamps = times;
  absl::StatusOr<FeatureLayout> layout = TemporalFeatureLayout(spec, 0, 0);
  EXPECT_TRUE(layout.ok()) << layout.status();
  *width = layout->width;
  std::vector<T> out(times.size() * layout->width);
  const absl::Status s = EncodeObservations(spec, obs, nullptr, {},
                                            absl::MakeSpan(out), nullptr);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

}  // namespace phasor::testing

#endif  // PHASOR_TESTS_CALENDAR_TEST_DATA_H_
