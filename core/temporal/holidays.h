// -----------------------------------------------------------------------------
// File: core/temporal/holidays.h
// -----------------------------------------------------------------------------
//
// Holiday features of a row's local date: per holiday set, a kernel of the
// signed distance in whole local days to a holiday of the set, and
// optionally the raw distances since the last and until the next holiday.
//
// Kernel distance d (positive after the holiday), by distance mode:
//   NEAREST  d = local_date − nearest holiday of the set at any distance;
//            when a past and a future holiday are equally near, the past one
//            wins (d > 0). No holiday at all: the kernel is 0.
//   GLUONTS  GluonTS's distance_to_holiday
//            (gluonts/time_feature/holiday.py, MAX_WINDOW = 183 + 17):
//            d = local_date − the EARLIEST holiday in the window
//            [instant − 200 days, instant + 200 days], so a day between two
//            holidays may see the farther, earlier one. Holidays are at
//            local midnight, so the window is local dates [D − 200, D + 200]
//            for a row at local midnight and [D − 199, D + 200] for a row
//            later that day (pandas compares timestamps, not dates). No
//            holiday in the window (GluonTS asserts): the kernel is 0.
//            EXPONENTIAL and SQUARED_EXPONENTIAL values ≤ 1e-9 become 0
//            (GluonTS's kernels' tol = 1e-9).
// Kernels (gluonts/time_feature/holiday.py: indicator, exponential_kernel,
// squared_exponential_kernel):
//   INDICATOR            1 if d = 0, else 0
//   EXPONENTIAL          exp(−α·|d|)
//   SQUARED_EXPONENTIAL  exp(−α·d²)      (d² formed exactly, as GluonTS's
//                                         integer |d|**2)
// Raw distance columns (independent of the mode), in whole local days:
//   days_since  local_date − latest holiday ≤ local_date (0 on a holiday)
//   days_until  earliest holiday ≥ local_date − local_date (0 on a holiday)
//   Only holidays within max_distance_days count; with none, the column
//   holds −1 (kNoHolidayInWindow), which no real distance equals.
//
// Columns, per set, in order: the kernel, then days_since, then days_until
// (those two when asked). Sets: the unnamed one (`dates` plus `calendars`)
// first, then `sets` in order.
//
// Dates are ISO-8601 civil dates "YYYY-MM-DD"; named calendars (a profile's
// or a built-in country calendar) reach core/ as shared, parsed day lists,
// so naming a calendar copies no dates. The local date comes from the
// calendar block's time zone (calendar.h); this file knows only civil days.
//
// Thread-safety: HolidayCalendar is immutable after construction; concurrent
// calls are safe.
//
// Example:
//
//   HolidaysBlock block;
//   block.dates = {"2026-01-01", "2026-12-25"};
//   const HolidayCalendar calendar(block);
//   const double value = calendar.Value(absl::CivilDay(2026, 12, 24));
#ifndef PHASOR_CORE_TEMPORAL_HOLIDAYS_H_
#define PHASOR_CORE_TEMPORAL_HOLIDAYS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"
#include "absl/types/span.h"
#include "core/temporal/civil_date.h"

namespace phasor {

enum class HolidayKernel { kIndicator, kExponential, kSquaredExponential };
enum class HolidayDistanceMode { kNearest, kGluonTs };

// A named calendar's dates as days since 1970-01-01 (integer compares and
// differences on the per-day path): sorted, unique, immutable, shared by
// every request that names it.
using HolidayDayList = std::shared_ptr<const std::vector<int64_t>>;

// Sorts and deduplicates `days` into a shared list.
HolidayDayList MakeHolidayDayList(std::vector<absl::CivilDay> days);

// GluonTS's MAX_WINDOW (183 days, half a year both ways, plus 17 for
// Easter's range from March 22 to April 25).
inline constexpr int64_t kGluonTsWindowDays = 183 + 17;
// GluonTS's kernels' tol: values not above it are 0.
inline constexpr double kGluonTsKernelTolerance = 1e-9;
// days_since / days_until with no holiday within max_distance_days.
inline constexpr double kNoHolidayInWindow = -1.0;
// At most this many named sets in one block (each adds up to 3 columns).
inline constexpr int64_t kMaxHolidaySets = 256;

// One column per set: its dates are the union of `dates` and `calendars`.
struct HolidaySet {
  std::string name;                     // [A-Za-z0-9_]+, at most 64 bytes.
  std::vector<std::string> dates;       // "YYYY-MM-DD"; any order.
  std::vector<HolidayDayList> calendars = {};
};

struct HolidaysBlock {
  std::vector<std::string> dates;  // "YYYY-MM-DD", local dates; any order.
  HolidayKernel kernel = HolidayKernel::kIndicator;
  // Decay per day (EXPONENTIAL) or per day² (SQUARED_EXPONENTIAL); > 0.
  // Unused by INDICATOR.
  double alpha = 1.0;
  HolidayDistanceMode distance_mode = HolidayDistanceMode::kNearest;
  // The unnamed set: `dates` plus these calendars. Without it only `sets`
  // give columns (at least one set is then required).
  bool include_unnamed_set = true;
  std::vector<HolidayDayList> calendars = {};
  std::vector<HolidaySet> sets = {};
  bool include_days_since = false;
  bool include_days_until = false;
  // Window of the raw distance columns, days; ≥ 0. 366: a yearly holiday
  // is always found.
  int64_t max_distance_days = 366;
};

// Errors name `field_prefix`.dates[i] (not a date), .alpha, .sets[i].name,
// .sets[i].dates[j], .sets, .max_distance_days. An empty date list is valid:
// its kernel column is 0 everywhere.
absl::Status ValidateHolidaysBlock(const HolidaysBlock& block,
                                   absl::string_view field_prefix);

// Parses exactly "YYYY-MM-DD" (four-digit year, a day that exists).
absl::StatusOr<absl::CivilDay> ParseIsoDate(absl::string_view text);

// The block's columns in output order: the schema name under the calendar
// block ("holidays", "holidays.days_since", "holidays.christmas", ...) and
// what the column holds.
struct HolidayColumn {
  std::string name;
  std::string meaning;
};
std::vector<HolidayColumn> HolidayColumns(const HolidaysBlock& block);

class HolidayCalendar final {
 public:
  // REQUIRES: ValidateHolidaysBlock(block, ...).ok().
  explicit HolidayCalendar(const HolidaysBlock& block);

  // Columns Write fills.
  int64_t width() const { return width_; }
  // True when a row's columns may depend on more than its local date
  // (GLUONTS: local midnight or not); otherwise Write ignores
  // `at_local_midnight`.
  bool clock_dependent() const {
    return distance_mode_ == HolidayDistanceMode::kGluonTs;
  }
  // A set's nearest holidays around the last day Write looked up, kept by
  // the caller (one per set, per thread). No holiday lies strictly between
  // them, so they stay the nearest for every day in between: a run of
  // days then searches about twice per holiday passed (on the holiday and
  // the day after), not once per day.
  struct Bracket {
    int64_t past = 0;     // The latest holiday ≤ that day (or kNoPast).
    int64_t future = -1;  // The earliest ≥ it (or kNoFuture); past > future: unset.
  };
  int64_t num_sets() const { return static_cast<int64_t>(sets_.size()); }

  // Writes width() values for a row on the local date `day`, in days since
  // 1970-01-01. Returns whether a row at the other `at_local_midnight` of
  // that day gets other values (only GLUONTS, only with a holiday exactly
  // 200 days back). `brackets`: empty, or num_sets() of them, read and
  // updated (NEAREST; the values do not depend on them).
  bool Write(int64_t day, bool at_local_midnight, double* out,
             absl::Span<Bracket> brackets = {}) const;

  // Of the first set: NEAREST's d, ties to the past.
  // REQUIRES: the first set has a holiday.
  int64_t SignedDistanceDays(absl::CivilDay day) const;
  // Of the first set: its kernel column for a row at local midnight.
  double Value(absl::CivilDay day) const;
  static double KernelValue(HolidayKernel kernel, double alpha,
                            int64_t distance_days);

 private:
  // One set's holidays: its own sorted dates plus shared calendar lists.
  struct Set {
    std::vector<int64_t> own;  // Days since 1970-01-01, sorted, unique.
    std::vector<HolidayDayList> calendars;
    // Calls fn(absl::Span<const int64_t>) for each sorted list.
    template <typename Fn>
    void ForEachList(Fn&& fn) const;
  };
  // Days are days since 1970-01-01 from here on. The latest holiday ≤ day
  // (kNoPast without one) and the earliest ≥ day (kNoFuture without one):
  // ~2^61 days away, so any distance to them is beyond every window, and
  // no difference with a real day overflows.
  static constexpr int64_t kNoPast = -(int64_t{1} << 61);
  static constexpr int64_t kNoFuture = int64_t{1} << 61;
  static int64_t AtOrBefore(const Set& set, int64_t day);
  static int64_t AtOrAfter(const Set& set, int64_t day);
  // Both, out of line: Write's common case reuses a bracket instead.
  [[gnu::noinline]] static Bracket Search(const Set& set, int64_t day);
  // NEAREST's kernel from the holidays at or before / at or after `day`.
  double NearestKernel(int64_t day, int64_t past, int64_t future) const;
  // GLUONTS's kernel, clip included.
  // Sets *window_edge when the earliest holiday in the midnight window is
  // on its first day (so the window after midnight misses it).
  double GluonTsKernel(const Set& set, int64_t day, bool at_local_midnight,
                       bool* window_edge) const;

  std::vector<Set> sets_;
  HolidayKernel kernel_;
  double alpha_;
  HolidayDistanceMode distance_mode_;
  bool include_days_since_;
  bool include_days_until_;
  int64_t max_distance_days_;
  int64_t width_;
};

}  // namespace phasor

#endif  // PHASOR_CORE_TEMPORAL_HOLIDAYS_H_
