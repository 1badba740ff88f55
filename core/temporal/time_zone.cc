#include "core/temporal/time_zone.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/base/errors.h"

namespace phasor {
namespace {

bool SafeZoneName(absl::string_view name) {
  if (name.empty() || name.front() == '/' || name == "localtime" ||
      absl::StrContains(name, "..")) {
    return false;
  }
  for (char ch : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(ch)) && ch != '/' &&
        ch != '_' && ch != '-' && ch != '+') {
      return false;
    }
  }
  return true;
}

// IANA names are short ("America/Argentina/ComodRivadavia", 32 bytes, is
// among the longest); anything longer is rejected before any lookup, and
// errors echo at most this many bytes of a name.
constexpr size_t kMaxZoneNameBytes = 64;

// `name` for an error message (core/base/errors.h).
std::string QuoteZoneName(absl::string_view name) {
  return QuoteForError(name, kMaxZoneNameBytes);
}

// The zoneinfo directory absl reads: $TZDIR when set and non-empty (as
// absl's FileZoneInfoSource does), else /usr/share/zoneinfo.
std::string ZoneinfoDir() {
  const char* tzdir = std::getenv("TZDIR");
  return tzdir != nullptr && *tzdir != '\0' ? std::string(tzdir)
                                            : std::string("/usr/share/zoneinfo");
}

// Zone and link names from tzdata.zi, the compact zic input tzdata ships
// beside the compiled files: "Z name ..." declares a zone, "L target name" a
// link (e.g. "L America/New_York US/Eastern").
void ReadTzdataZi(const std::string& path, std::set<std::string, std::less<>>* names) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() < 2 || line[1] != ' ' || (line[0] != 'Z' && line[0] != 'L')) {
      continue;
    }
    std::vector<absl::string_view> words =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    const size_t index = line[0] == 'Z' ? 1 : 2;
    if (words.size() > index) names->emplace(words[index]);
  }
}

// Without tzdata.zi: every compiled zone file under `dir` (TZif magic).
void WalkZoneinfo(const std::string& dir, std::set<std::string, std::less<>>* names) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::recursive_directory_iterator it(dir, error);
  const fs::recursive_directory_iterator end;
  for (; !error && it != end; it.increment(error)) {
    std::error_code entry_error;
    if (!it->is_regular_file(entry_error)) continue;
    std::ifstream file(it->path(), std::ios::binary);
    char magic[4] = {};
    if (!file.read(magic, sizeof(magic)) || std::memcmp(magic, "TZif", 4) != 0) {
      continue;
    }
    const std::string name = it->path().lexically_relative(dir).generic_string();
    if (!name.empty() && name.size() <= kMaxZoneNameBytes) names->insert(name);
  }
}

std::set<std::string, std::less<>> ReadZoneNamesInto(const std::string& dir) {
  std::set<std::string, std::less<>> names;
  ReadTzdataZi(dir + "/tzdata.zi", &names);
  if (names.empty()) WalkZoneinfo(dir, &names);
  return names;
}

// The zone names this process can load, read once. absl::LoadTimeZone keeps
// every name it is asked for in a process-wide map for good, failures
// included, so only names on this list may reach it: its map then holds at
// most the ~600 names tzdata has, whatever clients send.
const std::set<std::string, std::less<>>& KnownZoneNames() {
  // Thread-safe initialisation (C++11 magic statics); immutable afterwards.
  static const std::set<std::string, std::less<>>* const names =
      new std::set<std::string, std::less<>>(ReadZoneNamesInto(ZoneinfoDir()));
  return *names;
}

}  // namespace

bool FindIanaTimeZone(absl::string_view name, absl::TimeZone* zone,
                      std::string* problem) {
  if (name.empty() || name == "UTC") {
    *zone = absl::UTCTimeZone();
    return true;
  }
  if (name.size() > kMaxZoneNameBytes) {
    *problem = absl::StrCat("unknown IANA time zone ", QuoteZoneName(name),
                            ": longer than any IANA name (at most ",
                            kMaxZoneNameBytes, " bytes)");
    return false;
  }
  if (!SafeZoneName(name)) {
    *problem = absl::StrCat("unknown IANA time zone ", QuoteZoneName(name),
                            " (expected a name such as \"Europe/London\"; "
                            "the server's local zone is never used)");
    return false;
  }
  const std::set<std::string, std::less<>>& known = KnownZoneNames();
  if (known.find(name) == known.end() || !absl::LoadTimeZone(name, zone)) {
    *problem = absl::StrCat("unknown IANA time zone ", QuoteZoneName(name));
    return false;
  }
  return true;
}

std::vector<std::string> ReadZoneNames(const std::string& zoneinfo_dir) {
  const std::set<std::string, std::less<>> names = ReadZoneNamesInto(zoneinfo_dir);
  return std::vector<std::string>(names.begin(), names.end());
}

absl::StatusOr<absl::TimeZone> LoadIanaTimeZone(absl::string_view name,
                                                absl::string_view field) {
  absl::TimeZone zone;
  std::string problem;
  if (!FindIanaTimeZone(name, &zone, &problem)) return InvalidField(field, problem);
  return zone;
}

}  // namespace phasor
