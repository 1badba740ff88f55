#include "core/temporal/holidays.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

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

namespace {

absl::Status ValidateDates(const std::vector<std::string>& dates,
                           absl::string_view field_prefix) {
  for (size_t i = 0; i < dates.size(); ++i) {
    absl::StatusOr<absl::CivilDay> day = ParseIsoDate(dates[i]);
    if (!day.ok()) {
      return InvalidField(absl::StrCat(field_prefix, ".dates[", i, "]"),
                          day.status().message());
    }
  }
  return absl::OkStatus();
}

// A set's name becomes a schema name ("calendar.holidays.<name>"), so it
// has no dots and cannot be mistaken for a raw distance column.
bool ValidSetName(absl::string_view name) {
  if (name.empty() || name.size() > 64 || name == "days_since" ||
      name == "days_until") {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char ch) {
    return absl::ascii_isalnum(static_cast<unsigned char>(ch)) || ch == '_';
  });
}

}  // namespace

HolidayDayList MakeHolidayDayList(std::vector<absl::CivilDay> days) {
  std::vector<int64_t> ordinals;
  ordinals.reserve(days.size());
  for (absl::CivilDay day : days) ordinals.push_back(DayOrdinal(day));
  std::sort(ordinals.begin(), ordinals.end());
  ordinals.erase(std::unique(ordinals.begin(), ordinals.end()), ordinals.end());
  return std::make_shared<const std::vector<int64_t>>(std::move(ordinals));
}

absl::Status ValidateHolidaysBlock(const HolidaysBlock& block,
                                   absl::string_view field_prefix) {
  PHASOR_RETURN_IF_ERROR(ValidateDates(block.dates, field_prefix));
  if (block.kernel != HolidayKernel::kIndicator &&
      (!std::isfinite(block.alpha) || block.alpha <= 0)) {
    return InvalidField(absl::StrCat(field_prefix, ".alpha"),
                        absl::StrCat("must be finite and > 0, got ",
                                     block.alpha));
  }
  if (block.max_distance_days < 0) {
    return InvalidField(absl::StrCat(field_prefix, ".max_distance_days"),
                        absl::StrCat("must be >= 0, got ",
                                     block.max_distance_days));
  }
  if (static_cast<int64_t>(block.sets.size()) > kMaxHolidaySets) {
    return InvalidField(absl::StrCat(field_prefix, ".sets"),
                        absl::StrCat("at most ", kMaxHolidaySets,
                                     " sets, got ", block.sets.size()));
  }
  if (!block.include_unnamed_set && block.sets.empty()) {
    return InvalidField(absl::StrCat(field_prefix, ".sets"),
                        "empty, and no dates or calendar: the block has no "
                        "column");
  }
  absl::flat_hash_set<absl::string_view> names;
  for (size_t i = 0; i < block.sets.size(); ++i) {
    const HolidaySet& set = block.sets[i];
    const std::string entry = absl::StrCat(field_prefix, ".sets[", i, "]");
    if (!ValidSetName(set.name)) {
      return InvalidField(
          absl::StrCat(entry, ".name"),
          absl::StrCat("must match [A-Za-z0-9_]{1,64} and not be days_since "
                       "or days_until, got ",
                       QuoteForError(set.name, /*max_bytes=*/64)));
    }
    if (!names.insert(set.name).second) {
      return InvalidField(absl::StrCat(entry, ".name"),
                          absl::StrCat("duplicate set name ",
                                       QuoteForError(set.name, /*max_bytes=*/64)));
    }
    PHASOR_RETURN_IF_ERROR(ValidateDates(set.dates, entry));
  }
  return absl::OkStatus();
}

std::vector<HolidayColumn> HolidayColumns(const HolidaysBlock& block) {
  const std::string d =
      block.distance_mode == HolidayDistanceMode::kGluonTs
          ? "d = local date - earliest holiday within 200 days (GluonTS), "
            "values <= 1e-9 as 0"
          : "d = local date - nearest holiday in days (ties to the past)";
  const char* kernel = block.kernel == HolidayKernel::kIndicator ? "1 if d = 0"
                       : block.kernel == HolidayKernel::kExponential
                           ? "exp(-alpha*|d|)"
                           : "exp(-alpha*d^2)";
  const std::string kernel_meaning =
      absl::StrFormat("%s, %s, alpha = %g; 0 without a holiday", kernel, d,
                      block.alpha);
  std::vector<HolidayColumn> columns;
  auto add_set = [&](const std::string& name, absl::string_view which) {
    columns.push_back({name, absl::StrCat(which, kernel_meaning)});
    if (block.include_days_since) {
      columns.push_back(
          {absl::StrCat(name, ".days_since"),
           absl::StrCat(which, "local days since the last holiday (0 on one), "
                        "-1 if none within ", block.max_distance_days)});
    }
    if (block.include_days_until) {
      columns.push_back(
          {absl::StrCat(name, ".days_until"),
           absl::StrCat(which, "local days until the next holiday (0 on one), "
                        "-1 if none within ", block.max_distance_days)});
    }
  };
  if (block.include_unnamed_set) add_set("holidays", "");
  for (const HolidaySet& set : block.sets) {
    add_set(absl::StrCat("holidays.", set.name),
            absl::StrCat("set ", set.name, ": "));
  }
  return columns;
}

HolidayCalendar::HolidayCalendar(const HolidaysBlock& block)
    : kernel_(block.kernel),
      alpha_(block.alpha),
      distance_mode_(block.distance_mode),
      include_days_since_(block.include_days_since),
      include_days_until_(block.include_days_until),
      max_distance_days_(block.max_distance_days) {
  auto add_set = [&](const std::vector<std::string>& dates,
                     const std::vector<HolidayDayList>& calendars) {
    Set set;
    set.own.reserve(dates.size());
    for (const std::string& date : dates) {
      absl::StatusOr<absl::CivilDay> day = ParseIsoDate(date);
      assert(day.ok());
      if (day.ok()) set.own.push_back(DayOrdinal(*day));
    }
    std::sort(set.own.begin(), set.own.end());
    set.own.erase(std::unique(set.own.begin(), set.own.end()), set.own.end());
    for (const HolidayDayList& list : calendars) {
      if (list != nullptr && !list->empty()) set.calendars.push_back(list);
    }
    sets_.push_back(std::move(set));
  };
  if (block.include_unnamed_set) add_set(block.dates, block.calendars);
  for (const HolidaySet& set : block.sets) add_set(set.dates, set.calendars);
  width_ = static_cast<int64_t>(sets_.size()) *
           (1 + (include_days_since_ ? 1 : 0) + (include_days_until_ ? 1 : 0));
}

template <typename Fn>
void HolidayCalendar::Set::ForEachList(Fn&& fn) const {
  fn(absl::Span<const int64_t>(own));
  for (const HolidayDayList& list : calendars) fn(absl::Span<const int64_t>(*list));
}

int64_t HolidayCalendar::AtOrBefore(const Set& set, int64_t day) {
  int64_t best = kNoPast;
  set.ForEachList([&](absl::Span<const int64_t> list) {
    auto it = std::upper_bound(list.begin(), list.end(), day);
    if (it != list.begin()) best = std::max(best, *(it - 1));
  });
  return best;
}

int64_t HolidayCalendar::AtOrAfter(const Set& set, int64_t day) {
  int64_t best = kNoFuture;
  set.ForEachList([&](absl::Span<const int64_t> list) {
    auto it = std::lower_bound(list.begin(), list.end(), day);
    if (it != list.end()) best = std::min(best, *it);
  });
  return best;
}

double HolidayCalendar::NearestKernel(int64_t day, int64_t past,
                                      int64_t future) const {
  if (past == kNoPast && future == kNoFuture) return 0.0;
  // The sentinels are ~2^61 days away, so they lose every comparison.
  const int64_t d = day - past <= future - day ? day - past : day - future;
  return KernelValue(kernel_, alpha_, d);
}

double HolidayCalendar::GluonTsKernel(const Set& set, int64_t day,
                                      bool at_local_midnight,
                                      bool* window_edge) const {
  // pandas' Holiday.dates(index − 200 days, index + 200 days) keeps
  // holiday midnights inside the closed window; GluonTS takes the first.
  const int64_t first =
      day - (at_local_midnight ? kGluonTsWindowDays : kGluonTsWindowDays - 1);
  const int64_t earliest = AtOrAfter(set, first);
  if (earliest == day - kGluonTsWindowDays) *window_edge = true;
  if (earliest > day + kGluonTsWindowDays) return 0.0;  // kNoFuture too.
  const double value = KernelValue(kernel_, alpha_, day - earliest);
  return kernel_ != HolidayKernel::kIndicator &&
                 !(value > kGluonTsKernelTolerance)
             ? 0.0
             : value;
}

HolidayCalendar::Bracket HolidayCalendar::Search(const Set& set, int64_t day) {
  return {AtOrBefore(set, day), AtOrAfter(set, day)};
}

bool HolidayCalendar::Write(int64_t day, bool at_local_midnight, double* out,
                            absl::Span<Bracket> brackets) const {
  assert(brackets.empty() || brackets.size() == sets_.size());
  bool window_edge = false;
  const bool gluonts = distance_mode_ == HolidayDistanceMode::kGluonTs;
  for (size_t i = 0; i < sets_.size(); ++i) {
    const Set& set = sets_[i];
    // The nearest holidays each side, searched once for every column that
    // needs them (or taken from the bracket that still holds them).
    Bracket nearest = {kNoPast, kNoFuture};
    if (gluonts) {
      if (include_days_since_) nearest.past = AtOrBefore(set, day);
      if (include_days_until_) nearest.future = AtOrAfter(set, day);
    } else if (brackets.empty()) {
      nearest = Search(set, day);
    } else {
      if (!(brackets[i].past < day && day < brackets[i].future)) {
        brackets[i] = Search(set, day);
      }
      nearest = brackets[i];
    }
    const int64_t past = nearest.past;
    const int64_t future = nearest.future;
    *out++ = gluonts ? GluonTsKernel(set, day, at_local_midnight, &window_edge)
                     : NearestKernel(day, past, future);
    if (include_days_since_) {
      *out++ = day - past <= max_distance_days_ ? static_cast<double>(day - past)
                                                : kNoHolidayInWindow;
    }
    if (include_days_until_) {
      *out++ = future - day <= max_distance_days_
                   ? static_cast<double>(future - day)
                   : kNoHolidayInWindow;
    }
  }
  // A holiday 200 days back is in the midnight window only.
  return window_edge;
}

int64_t HolidayCalendar::SignedDistanceDays(absl::CivilDay civil_day) const {
  assert(!sets_.empty());
  const int64_t day = DayOrdinal(civil_day);
  const int64_t past = AtOrBefore(sets_[0], day);
  const int64_t future = AtOrAfter(sets_[0], day);
  assert(past != kNoPast || future != kNoFuture);
  return day - past <= future - day ? day - past : day - future;
}

double HolidayCalendar::Value(absl::CivilDay civil_day) const {
  assert(!sets_.empty());
  const int64_t day = DayOrdinal(civil_day);
  if (distance_mode_ == HolidayDistanceMode::kGluonTs) {
    bool window_edge = false;
    return GluonTsKernel(sets_[0], day, /*at_local_midnight=*/true, &window_edge);
  }
  return NearestKernel(day, AtOrBefore(sets_[0], day), AtOrAfter(sets_[0], day));
}

double HolidayCalendar::KernelValue(HolidayKernel kernel, double alpha,
                                    int64_t distance_days) {
  const auto d = static_cast<double>(distance_days);
  // exp(x) rounds to +0 for x < −1075·ln 2 ≈ −745.13; below −746 the
  // result is 0 without libm's underflow path (errno: 2% of a calendar row
  // on days far from every holiday), the same bits.
  const auto underflow_safe_exp = [](double x) { return x < -746.0 ? 0.0 : std::exp(x); };
  switch (kernel) {
    case HolidayKernel::kIndicator:
      return distance_days == 0 ? 1.0 : 0.0;
    case HolidayKernel::kExponential:
      return underflow_safe_exp(-alpha * std::fabs(d));
    case HolidayKernel::kSquaredExponential:
      // d² is exact (|d| < 2^26 for any date pair), then one rounding, as
      // GluonTS's exp(−alpha · |d|**2).
      return underflow_safe_exp(-alpha * (d * d));
  }
  return 0.0;
}

}  // namespace phasor
