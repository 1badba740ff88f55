// Holiday proximity features: a kernel of the signed distance, in whole local
// days, from a row's local date to the nearest holiday.
//
//   d = local_date − nearest_holiday  (positive after the holiday; when a past
//       and a future holiday are equally near, the past one wins: d > 0)
//   INDICATOR            1 if d = 0, else 0
//   EXPONENTIAL          exp(−α·|d|)
//   SQUARED_EXPONENTIAL  exp(−α·d²)
//
// The kernels are GluonTS's holiday-feature kernels
// (gluonts/time_feature/holiday.py: indicator, exponential_kernel,
// squared_exponential_kernel). GluonTS's distance_to_holiday takes the
// earliest holiday date within ±MAX_WINDOW (183) days; here it is the nearest
// holiday at any distance, so a day between two holidays sees the closer one
// (DESIGN §2). The local date comes from the calendar
// block's time zone (calendar.h); this file knows only civil days.
//
// Dates are ISO-8601 civil dates "YYYY-MM-DD" (named calendars from a profile
// file are expanded to dates by the server before they reach core/).
//
// Thread-safety: HolidayCalendar is immutable after construction; concurrent
// calls are safe.
#ifndef PHASOR_CORE_HOLIDAYS_H_
#define PHASOR_CORE_HOLIDAYS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"

namespace phasor {

enum class HolidayKernel { kIndicator, kExponential, kSquaredExponential };

struct HolidaysBlock {
  std::vector<std::string> dates;  // "YYYY-MM-DD", local dates; any order.
  HolidayKernel kernel = HolidayKernel::kIndicator;
  // Decay per day (EXPONENTIAL) or per day² (SQUARED_EXPONENTIAL); > 0.
  // Unused by INDICATOR.
  double alpha = 1.0;
};

// Errors name `field_prefix`.dates[i] (not a date), .dates (empty), .alpha.
absl::Status ValidateHolidaysBlock(const HolidaysBlock& block,
                                   absl::string_view field_prefix);

// Parses exactly "YYYY-MM-DD" (four-digit year, a day that exists).
absl::StatusOr<absl::CivilDay> ParseIsoDate(absl::string_view text);

class HolidayCalendar final {
 public:
  // REQUIRES: ValidateHolidaysBlock(block, ...).ok().
  explicit HolidayCalendar(const HolidaysBlock& block);

  // d = day − nearest holiday, ties to the past (see above).
  int64_t SignedDistanceDays(absl::CivilDay day) const;
  // The kernel at `day`.
  double Value(absl::CivilDay day) const {
    return KernelValue(kernel_, alpha_, SignedDistanceDays(day));
  }
  static double KernelValue(HolidayKernel kernel, double alpha,
                            int64_t distance_days);

 private:
  std::vector<absl::CivilDay> days_;  // Sorted, unique.
  HolidayKernel kernel_;
  double alpha_;
};

}  // namespace phasor

#endif  // PHASOR_CORE_HOLIDAYS_H_
