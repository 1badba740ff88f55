#include "server/memory_limit.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <vector>
#include <filesystem>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/base/file.h"

namespace phasor::server {
namespace {

// `path` (absolute) under `root`.
std::string UnderRoot(const std::string& root, absl::string_view path) {
  absl::string_view base = root;
  while (!base.empty() && base.back() == '/') base.remove_suffix(1);
  return absl::StrCat(base, path);
}

std::optional<std::string> ReadFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return std::nullopt;
  return *std::move(text);
}

// mountinfo escapes space, tab, newline and backslash in paths as \ooo
// (proc(5), /proc/pid/mountinfo).
std::string UnescapeMountPath(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size()) {
      const absl::string_view digits = text.substr(i + 1, 3);
      if (digits.size() == 3 && std::all_of(digits.begin(), digits.end(), [](char c) {
            return c >= '0' && c <= '7';
          })) {
        out.push_back(static_cast<char>((digits[0] - '0') * 64 + (digits[1] - '0') * 8 +
                                        (digits[2] - '0')));
        i += 3;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

enum class CgroupVersion { kV1, kV2 };

// A cgroup hierarchy's mount: where it is mounted and which of its
// directories the mount shows as its root.
struct CgroupMount {
  std::string mount_point;
  std::string mount_root;
};

// The first mount of the memory hierarchy of `version` in mountinfo:
// "<id> <parent> <dev> <root> <mount point> <options> [optional...] -
// <fstype> <source> <super options>" (proc(5)).
std::optional<CgroupMount> FindMount(absl::string_view mountinfo, CgroupVersion version) {
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n')) {
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    const auto separator = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 5 || separator == fields.end() || fields.end() - separator < 4) {
      continue;
    }
    const absl::string_view fstype = separator[1];
    const absl::string_view super_options = separator[3];
    const bool match =
        version == CgroupVersion::kV2
            ? fstype == "cgroup2"
            : fstype == "cgroup" &&
                  absl::c_linear_search(
                      std::vector<absl::string_view>(absl::StrSplit(super_options, ',')),
                      "memory");
    if (match) return CgroupMount{UnescapeMountPath(fields[4]), UnescapeMountPath(fields[3])};
  }
  return std::nullopt;
}

// The process's cgroup path in the hierarchy of `version`, from
// /proc/self/cgroup lines "<id>:<controllers>:<path>".
std::optional<std::string> CgroupPath(absl::string_view cgroup, CgroupVersion version) {
  for (absl::string_view line : absl::StrSplit(cgroup, '\n')) {
    const std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    const bool match =
        version == CgroupVersion::kV2
            ? fields[0] == "0" && fields[1].empty()
            : absl::c_linear_search(
                  std::vector<absl::string_view>(absl::StrSplit(fields[1], ',')), "memory");
    if (match) return std::string(fields[2]);
  }
  return std::nullopt;
}

// A limit file's value: bytes, or none for "max" (v2), absurd values
// (v1's unlimited is 2^63 rounded down to a page) and anything unreadable.
std::optional<int64_t> ParseLimit(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value <= 0 || value >= (int64_t{1} << 62)) {
    return std::nullopt;
  }
  return value;
}

struct FoundLimit {
  int64_t bytes = 0;
  std::string file;
};

// The cgroup's directory: the mount point plus the cgroup path below the
// mount's root. When the path is not below it (a namespace the mount does
// not match) or the directory is missing, the mount point alone, as JVMs
// do.
struct CgroupDirectory {
  std::string mount_point;  // Under the root.
  std::string relative;     // "" or "/a/b".
};

CgroupDirectory Locate(const std::string& root, const CgroupMount& mount,
                       const std::string& cgroup_path) {
  CgroupDirectory directory{UnderRoot(root, mount.mount_point), ""};
  const std::string mount_root = mount.mount_root == "/" ? "" : mount.mount_root;
  if (absl::StartsWith(cgroup_path, mount_root) &&
      (cgroup_path.size() == mount_root.size() || cgroup_path[mount_root.size()] == '/')) {
    directory.relative = cgroup_path.substr(mount_root.size());
  }
  while (!directory.relative.empty() && directory.relative.back() == '/') {
    directory.relative.pop_back();
  }
  std::error_code error;
  if (!std::filesystem::is_directory(directory.mount_point + directory.relative, error)) {
    directory.relative.clear();
  }
  return directory;
}

// The lowest `file_name` limit from the cgroup's directory up to the mount
// point: a parent's limit binds its children.
std::optional<FoundLimit> LowestLimit(CgroupDirectory directory, absl::string_view file_name) {
  std::optional<FoundLimit> lowest;
  for (;;) {
    const std::string file =
        absl::StrCat(directory.mount_point, directory.relative, "/", file_name);
    if (const std::optional<std::string> text = ReadFile(file)) {
      if (const std::optional<int64_t> bytes = ParseLimit(*text)) {
        if (!lowest || *bytes < lowest->bytes) lowest = FoundLimit{*bytes, file};
      }
    }
    if (directory.relative.empty()) break;
    directory.relative.erase(directory.relative.rfind('/'));
  }
  return lowest;
}

// v1's memory.stat "hierarchical_memory_limit <bytes>": the lowest limit of
// the cgroup and every ancestor, including ones the mount does not show.
std::optional<FoundLimit> HierarchicalLimit(const CgroupDirectory& directory) {
  const std::string file =
      absl::StrCat(directory.mount_point, directory.relative, "/memory.stat");
  const std::optional<std::string> text = ReadFile(file);
  if (!text) return std::nullopt;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (!absl::ConsumePrefix(&line, "hierarchical_memory_limit ")) continue;
    if (const std::optional<int64_t> bytes = ParseLimit(line)) {
      return FoundLimit{*bytes, absl::StrCat(file, " hierarchical_memory_limit")};
    }
  }
  return std::nullopt;
}

// The cgroup's memory limit, v1 when the memory controller is mounted
// there (it cannot be on both), else v2.
std::optional<FoundLimit> CgroupLimit(const std::string& root) {
  const std::optional<std::string> cgroup = ReadFile(UnderRoot(root, "/proc/self/cgroup"));
  const std::optional<std::string> mountinfo =
      ReadFile(UnderRoot(root, "/proc/self/mountinfo"));
  if (!cgroup || !mountinfo) return std::nullopt;
  const std::optional<std::string> v1_path = CgroupPath(*cgroup, CgroupVersion::kV1);
  const std::optional<CgroupMount> v1_mount = FindMount(*mountinfo, CgroupVersion::kV1);
  if (v1_path && v1_mount) {
    const CgroupDirectory directory = Locate(root, *v1_mount, *v1_path);
    std::optional<FoundLimit> limit = LowestLimit(directory, "memory.limit_in_bytes");
    const std::optional<FoundLimit> hierarchical = HierarchicalLimit(directory);
    if (hierarchical && (!limit || hierarchical->bytes < limit->bytes)) limit = hierarchical;
    if (limit) limit->file = absl::StrCat("cgroup v1 ", limit->file);
    return limit;
  }
  const std::optional<std::string> v2_path = CgroupPath(*cgroup, CgroupVersion::kV2);
  const std::optional<CgroupMount> v2_mount = FindMount(*mountinfo, CgroupVersion::kV2);
  if (v2_path && v2_mount) {
    std::optional<FoundLimit> limit =
        LowestLimit(Locate(root, *v2_mount, *v2_path), "memory.max");
    if (limit) limit->file = absl::StrCat("cgroup v2 ", limit->file);
    return limit;
  }
  return std::nullopt;
}

// MemTotal from /proc/meminfo ("MemTotal:  24683772 kB").
std::optional<int64_t> PhysicalMemory(const std::string& root) {
  const std::optional<std::string> text = ReadFile(UnderRoot(root, "/proc/meminfo"));
  if (!text) return std::nullopt;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (!absl::ConsumePrefix(&line, "MemTotal:")) continue;
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumeSuffix(&line, "kB")) return std::nullopt;
    int64_t kib = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib) || kib <= 0 ||
        kib > (int64_t{1} << 52)) {
      return std::nullopt;
    }
    return kib * 1024;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<MemoryLimit> DetectMemoryLimit(const std::string& root) {
  const std::optional<FoundLimit> cgroup = CgroupLimit(root);
  const std::optional<int64_t> physical = PhysicalMemory(root);
  if (cgroup && (!physical || cgroup->bytes < *physical)) {
    return MemoryLimit{cgroup->bytes, cgroup->file};
  }
  if (physical) {
    return MemoryLimit{*physical, UnderRoot(root, "/proc/meminfo MemTotal")};
  }
  return absl::NotFoundError(absl::StrCat(
      "no cgroup memory limit applies and ", UnderRoot(root, "/proc/meminfo"),
      " has no MemTotal"));
}

MemoryBudgetSize ChooseMemoryBudget(int64_t configured_bytes, const std::string& root) {
  if (configured_bytes > 0) {
    return MemoryBudgetSize{configured_bytes, "--memory_budget_bytes"};
  }
  MemoryLimit limit;
  if (absl::StatusOr<MemoryLimit> detected = DetectMemoryLimit(root); detected.ok()) {
    limit = *std::move(detected);
  } else {
    limit.bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
    limit.source = "sysconf(_SC_PHYS_PAGES)";
  }
  const int64_t bytes =
      std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(limit.bytes) *
                                                kMemoryBudgetFraction));
  return MemoryBudgetSize{
      bytes, absl::StrCat(kMemoryBudgetFraction, " x ", limit.bytes, " bytes (",
                          limit.source, ")")};
}

}  // namespace phasor::server
