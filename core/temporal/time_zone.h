// -----------------------------------------------------------------------------
// File: core/temporal/time_zone.h
// -----------------------------------------------------------------------------
//
// IANA time zones by name, from the system tzdata (absl::LoadTimeZone), for
// the calendar block and per-series zones. The zone defaults to UTC; the
// server's local zone is never used ("", "UTC" mean UTC; "localtime", paths
// and names with ".." are rejected), and only names on the tzdata's own zone
// list reach absl, whose zone cache keeps every name it is asked for.
//
// Thread-safety: the functions are thread-safe; the zone list is read once
// per process and immutable afterwards.
//
// Example:
//
//   const absl::StatusOr<absl::TimeZone> zone =
//       LoadIanaTimeZone("Europe/London", "spec.temporal.calendar.time_zone");
#ifndef PHASOR_CORE_TEMPORAL_TIME_ZONE_H_
#define PHASOR_CORE_TEMPORAL_TIME_ZONE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace phasor {

// Loads an IANA zone from the system tzdata; "" and "UTC" give UTC. Unknown
// or unsafe names are INVALID_ARGUMENT on `field`:
//   spec.temporal.calendar.time_zone: unknown IANA time zone "Mars/Base" ...
// A name reaches absl::LoadTimeZone (which caches every name it sees, for
// good) only when it is on the zone list of the tzdata absl reads
// ($TZDIR or /usr/share/zoneinfo): the zones and links of its tzdata.zi, or,
// without that file, the compiled zone files of the tree. The list is read
// once per process. Names over 64 bytes are rejected unread, and errors
// quote at most 64 bytes of a name. Thread-safe.
absl::StatusOr<absl::TimeZone> LoadIanaTimeZone(absl::string_view name,
                                                absl::string_view field);

// The zone list LoadIanaTimeZone reads from `zoneinfo_dir`, sorted: zone and
// link names of its tzdata.zi, else the TZif files under it. For tests.
std::vector<std::string> ReadZoneNames(const std::string& zoneinfo_dir);

// The zone `name` names, or false with the reason in `problem` (no field
// path: callers add theirs, so the success path builds no string). The same
// checks as LoadIanaTimeZone.
bool FindIanaTimeZone(absl::string_view name, absl::TimeZone* zone,
                      std::string* problem);

}  // namespace phasor

#endif  // PHASOR_CORE_TEMPORAL_TIME_ZONE_H_
