// ProfileRegistry: the named encoder configurations a server was started
// with (--profiles, a text-format phasor.v1.ProfileSet), plus the learned
// tables, Time2Vec parameters and holiday calendars they declare.
//
// Relative file paths in the profiles file are resolved against the file's
// directory. Names of profiles, tables, Time2Vec sets and calendars must each
// be unique across the file; any request may refer to any of them. Loading
// fails (and the server does not start) on the first bad entry, with a
// message naming the entry.
//
// Thread-safety: immutable after Load; concurrent lookups are safe.
#ifndef PHASOR_SERVER_PROFILES_H_
#define PHASOR_SERVER_PROFILES_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/positional/learned.h"
#include "core/temporal/holidays.h"
#include "phasor/v1/encoder.pb.h"

namespace phasor::server {

// Time2Vec ω and φ, k+1 values each.
struct Time2VecParameters {
  std::vector<double> omega;
  std::vector<double> phi;
};

// The file name gen_builtin_holidays.py writes at build time and CMake
// installs under share/phasor/.
inline constexpr absl::string_view kBuiltinHolidaysFile = "builtin_holidays.textpb";

// The built-in calendars file beside the running binary (the build tree) or
// in ../share/phasor/ from it (the install layout), whichever is readable
// first; "" when neither is.
std::string DefaultBuiltinHolidaysPath();

class ProfileRegistry final {
 public:
  // No profiles.
  ProfileRegistry() = default;
  ProfileRegistry(const ProfileRegistry&) = delete;
  ProfileRegistry& operator=(const ProfileRegistry&) = delete;

  // Parses the text-format file at `path` and loads every file it names.
  static absl::StatusOr<std::unique_ptr<ProfileRegistry>> Load(
      const std::string& path);
  // As Load, from a parsed set; relative paths resolve against `base_dir`.
  static absl::StatusOr<std::unique_ptr<ProfileRegistry>> FromProto(
      const v1::ProfileSet& set, const std::string& base_dir);

  // Lookups; an unknown name is NOT_FOUND naming `field`.
  absl::StatusOr<const v1::Profile*> FindProfile(absl::string_view name,
                                                 absl::string_view field) const;
  absl::StatusOr<const LearnedTable*> FindLearnedTable(
      absl::string_view name, absl::string_view field) const;
  absl::StatusOr<const Time2VecParameters*> FindTime2Vec(
      absl::string_view name, absl::string_view field) const;
  // A profile's calendar, else a built-in one of that name in any case
  // ("de" is "DE": built-in names are ISO country codes, which users write
  // either way). A profile's calendar named like a built-in one shadows it
  // under every spelling the built-in answers to. NOT_FOUND lists the names
  // there are.
  absl::StatusOr<HolidayDayList> FindHolidayCalendar(
      absl::string_view name, absl::string_view field) const;

  // Adds the built-in calendars of a text-format
  // phasor.v1.BuiltinHolidayCalendars file (server/holidays/); call before
  // the registry is shared. Errors name the file and the calendar.
  absl::Status LoadBuiltinHolidayCalendars(const std::string& path);
  // "<path> (<library version>, <years>, <n> calendars)", or "" when none
  // were loaded; for the startup log.
  const std::string& builtin_holidays_source() const {
    return builtin_holidays_source_;
  }

  // All profiles, sorted by name.
  std::vector<const v1::Profile*> profiles() const;
  // Fills a ListProfiles response (no file paths).
  void ListInto(v1::ListProfilesResponse* response) const;

 private:
  std::map<std::string, v1::Profile, std::less<>> profiles_;
  std::map<std::string, LearnedTable, std::less<>> learned_tables_;
  std::map<std::string, Time2VecParameters, std::less<>> time2vec_;
  std::map<std::string, HolidayDayList, std::less<>> calendars_;
  std::map<std::string, HolidayDayList, std::less<>> builtin_calendars_;
  // Lower-cased built-in name -> its name in builtin_calendars_.
  std::map<std::string, std::string, std::less<>> builtin_names_folded_;
  std::string builtin_holidays_source_;
};

}  // namespace phasor::server

#endif  // PHASOR_SERVER_PROFILES_H_
