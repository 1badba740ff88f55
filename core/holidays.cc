#include "core/holidays.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"
#include "core/errors.h"

namespace phasor {
namespace {

bool Digits(absl::string_view text, int* out) {
  int value = 0;
  for (char ch : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(ch))) return false;
    value = value * 10 + (ch - '0');
  }
  *out = value;
  return true;
}

// A date text quoted for an error (a client may send a megabyte where a
// date belongs).
std::string QuoteDateText(absl::string_view text) {
  return QuoteForError(text, /*max_bytes=*/32);
}

}  // namespace

absl::StatusOr<absl::CivilDay> ParseIsoDate(absl::string_view text) {
  int year = 0;
  int month = 0;
  int day = 0;
  if (text.size() != 10 || text[4] != '-' || text[7] != '-' ||
      !Digits(text.substr(0, 4), &year) || !Digits(text.substr(5, 2), &month) ||
      !Digits(text.substr(8, 2), &day)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a YYYY-MM-DD date: ", QuoteDateText(text)));
  }
  const absl::CivilDay civil(year, month, day);
  // CivilDay normalizes (2026-02-30 becomes 2026-03-02): a changed field
  // means the date does not exist.
  if (civil.year() != year || civil.month() != month || civil.day() != day) {
    return absl::InvalidArgumentError(
        absl::StrCat("no such date: ", QuoteDateText(text)));
  }
  return civil;
}

absl::Status ValidateHolidaysBlock(const HolidaysBlock& block,
                                   absl::string_view field_prefix) {
  if (block.dates.empty()) {
    return InvalidField(absl::StrCat(field_prefix, ".dates"),
                        "empty; give at least one YYYY-MM-DD date");
  }
  for (size_t i = 0; i < block.dates.size(); ++i) {
    absl::StatusOr<absl::CivilDay> day = ParseIsoDate(block.dates[i]);
    if (!day.ok()) {
      return InvalidField(absl::StrCat(field_prefix, ".dates[", i, "]"),
                          day.status().message());
    }
  }
  if (block.kernel != HolidayKernel::kIndicator &&
      (!std::isfinite(block.alpha) || block.alpha <= 0)) {
    return InvalidField(absl::StrCat(field_prefix, ".alpha"),
                        absl::StrCat("must be finite and > 0, got ",
                                     block.alpha));
  }
  return absl::OkStatus();
}

HolidayCalendar::HolidayCalendar(const HolidaysBlock& block)
    : kernel_(block.kernel), alpha_(block.alpha) {
  days_.reserve(block.dates.size());
  for (const std::string& date : block.dates) {
    absl::StatusOr<absl::CivilDay> day = ParseIsoDate(date);
    assert(day.ok());
    if (day.ok()) days_.push_back(*day);
  }
  std::sort(days_.begin(), days_.end());
  days_.erase(std::unique(days_.begin(), days_.end()), days_.end());
}

int64_t HolidayCalendar::SignedDistanceDays(absl::CivilDay day) const {
  assert(!days_.empty());
  const auto next = std::lower_bound(days_.begin(), days_.end(), day);
  if (next != days_.end() && *next == day) return 0;
  const bool has_past = next != days_.begin();
  const bool has_future = next != days_.end();
  const int64_t after_past = has_past ? day - *(next - 1) : 0;
  const int64_t before_future = has_future ? *next - day : 0;
  if (has_past && (!has_future || after_past <= before_future)) {
    return after_past;
  }
  return -before_future;
}

double HolidayCalendar::KernelValue(HolidayKernel kernel, double alpha,
                                    int64_t distance_days) {
  const auto d = static_cast<double>(distance_days);
  switch (kernel) {
    case HolidayKernel::kIndicator:
      return distance_days == 0 ? 1.0 : 0.0;
    case HolidayKernel::kExponential:
      return std::exp(-alpha * std::fabs(d));
    case HolidayKernel::kSquaredExponential:
      return std::exp(-alpha * d * d);
  }
  return 0.0;
}

}  // namespace phasor
