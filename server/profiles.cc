#include "server/profiles.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"
#include "core/base/file.h"
#include "core/base/status_macros.h"
#include "core/io/tensor_file.h"
#include "core/temporal/holidays.h"
#include "core/temporal/time2vec.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace phasor::server {
namespace {

std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path.front() == '/' || base_dir.empty()) return path;
  return absl::StrCat(base_dir, "/", path);
}

bool ValidName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// Prefixes a load error with the entry it came from, keeping the code.
absl::Status InEntry(const absl::Status& status, absl::string_view entry) {
  return absl::Status(status.code(), absl::StrCat(entry, ": ", status.message()));
}

absl::StatusOr<std::vector<double>> ReadVector(const v1::TensorFile& file,
                                               const std::string& base_dir) {
  absl::StatusOr<HostArray> array =
      ReadArrayFile(Resolve(base_dir, file.path()), file.tensor());
  if (!array.ok()) return array.status();
  if (array->shape.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.path(), ": expected a 1-D tensor, got ",
                     array->shape.size(), " dimensions"));
  }
  return std::move(array->values);
}

// Parses the text-format file at `path` into `out`; errors start with
// "<what>: <path>: ".
absl::Status ParseTextFile(const std::string& path, absl::string_view what,
                           google::protobuf::Message* out) {
  PHASOR_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path, what));
  // Collect parse errors instead of letting protobuf print them.
  class Collector final : public google::protobuf::io::ErrorCollector {
   public:
    void AddError(int line, int column, const std::string& message) override {
      if (error.empty()) {
        error = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
      }
    }
    std::string error;
  } collector;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  if (!parser.ParseFromString(text, out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", path, ": ", collector.error));
  }
  return absl::OkStatus();
}

// Parses and sorts a calendar's dates; errors name `entry` dates[i].
absl::StatusOr<HolidayDayList> ParseCalendarDates(
    const google::protobuf::RepeatedPtrField<std::string>& dates,
    absl::string_view entry) {
  std::vector<absl::CivilDay> days;
  days.reserve(static_cast<size_t>(dates.size()));
  for (int i = 0; i < dates.size(); ++i) {
    absl::StatusOr<absl::CivilDay> day = ParseIsoDate(dates.Get(i));
    if (!day.ok()) {
      return InEntry(day.status(), absl::StrCat(entry, " dates[", i, "]"));
    }
    days.push_back(*day);
  }
  return MakeHolidayDayList(std::move(days));
}

}  // namespace

std::string DefaultBuiltinHolidaysPath() {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return "";
  const std::string path(exe, static_cast<size_t>(n));
  const std::string dir = path.substr(0, path.rfind('/'));
  for (const std::string& candidate :
       {absl::StrCat(dir, "/", kBuiltinHolidaysFile),
        absl::StrCat(dir, "/../share/phasor/", kBuiltinHolidaysFile)}) {
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return "";
}

absl::Status ProfileRegistry::LoadBuiltinHolidayCalendars(
    const std::string& path) {
  v1::BuiltinHolidayCalendars file;
  PHASOR_RETURN_IF_ERROR(ParseTextFile(path, "builtin_holidays", &file));
  for (const v1::BuiltinHolidayCalendar& calendar : file.calendars()) {
    const std::string entry =
        absl::StrCat("builtin_holidays: ", path, ": calendar '", calendar.name(), "'");
    if (!ValidName(calendar.name())) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry, ": name must match [A-Za-z0-9._-]+"));
    }
    PHASOR_ASSIGN_OR_RETURN(HolidayDayList days,
                            ParseCalendarDates(calendar.dates(), entry));
    // Lookups ignore case, so names may not differ in case alone.
    if (!builtin_names_folded_
             .emplace(absl::AsciiStrToLower(calendar.name()), calendar.name())
             .second) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry, ": duplicate name (names are case-insensitive)"));
    }
    builtin_calendars_.emplace(calendar.name(), std::move(days));
  }
  builtin_holidays_source_ =
      absl::StrCat(path, " (", file.library_version(), ", ", file.first_year(),
                   "-", file.last_year(), ", ", file.calendars_size(), " calendars)");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ProfileRegistry>> ProfileRegistry::Load(
    const std::string& path) {
  v1::ProfileSet set;
  PHASOR_RETURN_IF_ERROR(ParseTextFile(path, "profiles", &set));
  const size_t slash = path.rfind('/');
  const std::string base_dir =
      slash == std::string::npos ? std::string(".") : path.substr(0, slash);
  return FromProto(set, base_dir);
}

absl::StatusOr<std::unique_ptr<ProfileRegistry>> ProfileRegistry::FromProto(
    const v1::ProfileSet& set, const std::string& base_dir) {
  auto registry = std::make_unique<ProfileRegistry>();
  for (int p = 0; p < set.profile_size(); ++p) {
    const v1::Profile& profile = set.profile(p);
    const std::string entry = absl::StrCat("profile[", p, "] '", profile.name(), "'");
    if (!ValidName(profile.name())) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry, ": name must match [A-Za-z0-9._-]+"));
    }
    if (!registry->profiles_.emplace(profile.name(), profile).second) {
      return absl::InvalidArgumentError(absl::StrCat(entry, ": duplicate profile name"));
    }
    for (const v1::LearnedTableFile& table : profile.learned_tables()) {
      const std::string table_entry =
          absl::StrCat(entry, " learned_tables '", table.name(), "'");
      if (!ValidName(table.name())) {
        return absl::InvalidArgumentError(
            absl::StrCat(table_entry, ": name must match [A-Za-z0-9._-]+"));
      }
      absl::StatusOr<LearnedTable> loaded = LearnedTable::FromFile(
          Resolve(base_dir, table.file().path()), table.file().tensor());
      if (!loaded.ok()) return InEntry(loaded.status(), table_entry);
      if (!registry->learned_tables_.emplace(table.name(), std::move(*loaded))
               .second) {
        return absl::InvalidArgumentError(
            absl::StrCat(table_entry, ": duplicate learned table name"));
      }
    }
    for (const v1::Time2VecFile& t2v : profile.time2vec()) {
      const std::string t2v_entry = absl::StrCat(entry, " time2vec '", t2v.name(), "'");
      if (!ValidName(t2v.name())) {
        return absl::InvalidArgumentError(
            absl::StrCat(t2v_entry, ": name must match [A-Za-z0-9._-]+"));
      }
      Time2VecParameters parameters;
      absl::StatusOr<std::vector<double>> frequencies =
          ReadVector(t2v.omega(), base_dir);
      if (!frequencies.ok()) return InEntry(frequencies.status(), t2v_entry);
      absl::StatusOr<std::vector<double>> phases = ReadVector(t2v.phi(), base_dir);
      if (!phases.ok()) return InEntry(phases.status(), t2v_entry);
      if (frequencies->empty() || frequencies->size() != phases->size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            t2v_entry, ": omega and phi must be non-empty and of equal "
                       "length, got ", frequencies->size(), " and ", phases->size()));
      }
      // Checked here, as any request naming the set would check it, so a
      // request's errors never point into a file it did not send.
      Time2VecBlock block;
      block.omega = *frequencies;
      block.phi = *phases;
      if (absl::Status valid = ValidateTime2VecBlock(block, "time2vec"); !valid.ok()) {
        return InEntry(valid, t2v_entry);
      }
      parameters.omega = std::move(*frequencies);
      parameters.phi = std::move(*phases);
      if (!registry->time2vec_.emplace(t2v.name(), std::move(parameters)).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(t2v_entry, ": duplicate time2vec name"));
      }
    }
    for (const v1::HolidayCalendar& calendar : profile.holiday_calendars()) {
      const std::string calendar_entry =
          absl::StrCat(entry, " holiday_calendars '", calendar.name(), "'");
      if (!ValidName(calendar.name())) {
        return absl::InvalidArgumentError(
            absl::StrCat(calendar_entry, ": name must match [A-Za-z0-9._-]+"));
      }
      PHASOR_ASSIGN_OR_RETURN(HolidayDayList days,
                              ParseCalendarDates(calendar.dates(), calendar_entry));
      if (!registry->calendars_.emplace(calendar.name(), std::move(days)).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(calendar_entry, ": duplicate holiday calendar name"));
      }
    }
  }
  return registry;
}

namespace {

// A client-sent name quoted for an error (core/errors.h).
std::string QuoteName(absl::string_view name) {
  return QuoteForError(name, /*max_bytes=*/64, "'");
}

// The first `max_names` names of `calendars`, for an error message, which
// the server cuts at kMaxStatusMessageBytes (512).
template <typename Map>
std::string CalendarNames(const Map& calendars, size_t max_names) {
  std::vector<std::string> names;
  for (const auto& [name, days] : calendars) {
    if (names.size() == max_names) break;
    names.push_back(name);  // Checked against [A-Za-z0-9._-]+ at load.
  }
  std::string out = absl::StrJoin(names, ", ");
  if (calendars.size() > max_names) {
    absl::StrAppend(&out, ", ... (", calendars.size() - max_names,
                    " more; ListProfiles lists them all)");
  }
  return out;
}

}  // namespace

absl::StatusOr<const v1::Profile*> ProfileRegistry::FindProfile(
    absl::string_view name, absl::string_view field) const {
  auto it = profiles_.find(name);
  if (it == profiles_.end()) {
    return FieldError(absl::StatusCode::kNotFound, field,
                      absl::StrCat("unknown profile ", QuoteName(name),
                                   " (ListProfiles shows the available ones)"));
  }
  return &it->second;
}

absl::StatusOr<const LearnedTable*> ProfileRegistry::FindLearnedTable(
    absl::string_view name, absl::string_view field) const {
  auto it = learned_tables_.find(name);
  if (it == learned_tables_.end()) {
    return FieldError(absl::StatusCode::kNotFound, field,
                      absl::StrCat("unknown learned table ", QuoteName(name)));
  }
  return &it->second;
}

absl::StatusOr<const Time2VecParameters*> ProfileRegistry::FindTime2Vec(
    absl::string_view name, absl::string_view field) const {
  auto it = time2vec_.find(name);
  if (it == time2vec_.end()) {
    return FieldError(absl::StatusCode::kNotFound, field,
                      absl::StrCat("unknown Time2Vec parameter set ", QuoteName(name)));
  }
  return &it->second;
}

absl::StatusOr<HolidayDayList> ProfileRegistry::FindHolidayCalendar(
    absl::string_view name, absl::string_view field) const {
  // A profile's calendar shadows a built-in one of the same name.
  if (auto it = calendars_.find(name); it != calendars_.end()) return it->second;
  if (auto folded = builtin_names_folded_.find(absl::AsciiStrToLower(name));
      folded != builtin_names_folded_.end()) {
    const std::string& builtin = folded->second;
    if (auto it = calendars_.find(builtin); it != calendars_.end()) return it->second;
    return builtin_calendars_.find(builtin)->second;
  }
  std::string message = absl::StrCat("unknown holiday calendar ", QuoteName(name));
  // The built-in ones first, all 34 of the generated file (about 140
  // bytes); then up to 16 of the profiles', which may be many and long.
  if (!builtin_calendars_.empty()) {
    absl::StrAppend(&message, "; built-in calendars (any case): ",
                    CalendarNames(builtin_calendars_, /*max_names=*/64));
  }
  if (!calendars_.empty()) {
    absl::StrAppend(&message, "; the profiles' calendars: ",
                    CalendarNames(calendars_, /*max_names=*/16));
  }
  if (calendars_.empty() && builtin_calendars_.empty()) {
    absl::StrAppend(&message,
                    "; this server has none (phasor-server --builtin_holidays, or "
                    "holiday_calendars in --profiles)");
  }
  return FieldError(absl::StatusCode::kNotFound, field, message);
}

std::vector<const v1::Profile*> ProfileRegistry::profiles() const {
  std::vector<const v1::Profile*> out;
  out.reserve(profiles_.size());
  for (const auto& [name, profile] : profiles_) out.push_back(&profile);
  return out;
}

void ProfileRegistry::ListInto(v1::ListProfilesResponse* response) const {
  for (const auto& [name, days] : builtin_calendars_) {
    response->add_builtin_holiday_calendars(name);
  }
  for (const auto& [name, profile] : profiles_) {
    v1::ProfileInfo* info = response->add_profiles();
    info->set_name(profile.name());
    info->set_description(profile.description());
    *info->mutable_spec() = profile.spec();
    for (const v1::LearnedTableFile& table : profile.learned_tables()) {
      v1::LearnedTableInfo* table_info = info->add_learned_tables();
      table_info->set_name(table.name());
      auto it = learned_tables_.find(table.name());
      if (it != learned_tables_.end()) {
        table_info->set_rows(it->second.rows());
        table_info->set_dim(it->second.dim());
      }
    }
    for (const v1::Time2VecFile& t2v : profile.time2vec()) {
      info->add_time2vec(t2v.name());
    }
    for (const v1::HolidayCalendar& calendar : profile.holiday_calendars()) {
      info->add_holiday_calendars(calendar.name());
    }
  }
}

}  // namespace phasor::server
