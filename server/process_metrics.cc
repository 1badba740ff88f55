#include "server/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace phasor::server {
namespace {

prometheus::MetricFamily Family(const char* name, const char* help,
                                prometheus::MetricType type, double value) {
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(metric);
  return family;
}

bool ReadFile(const char* path, std::string* text) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *text = buffer.str();
  return true;
}

// /proc/self/stat fields (proc(5)), numbered from 1 as the man page does.
// The command name (field 2) is in parentheses and may hold spaces, so the
// fields are split after its last ')'.
struct ProcStat {
  uint64_t utime_ticks = 0;      // 14
  uint64_t stime_ticks = 0;      // 15
  uint64_t starttime_ticks = 0;  // 22, since boot
  uint64_t vsize_bytes = 0;      // 23
  uint64_t rss_pages = 0;        // 24
};

bool ReadProcStat(ProcStat* stat) {
  std::string text;
  if (!ReadFile("/proc/self/stat", &text)) return false;
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return false;
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(text).substr(paren + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state).
  const auto field = [&fields](int number, uint64_t* out) {
    const size_t index = static_cast<size_t>(number - 3);
    return index < fields.size() && absl::SimpleAtoi(fields[index], out);
  };
  return field(14, &stat->utime_ticks) && field(15, &stat->stime_ticks) &&
         field(22, &stat->starttime_ticks) && field(23, &stat->vsize_bytes) &&
         field(24, &stat->rss_pages);
}

// Boot time, seconds since the epoch: the "btime" line of /proc/stat.
bool ReadBootTime(uint64_t* seconds) {
  std::string text;
  if (!ReadFile("/proc/stat", &text)) return false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ")) return absl::SimpleAtoi(line, seconds);
  }
  return false;
}

// Entries of /proc/self/fd, the directory's own descriptor included, as
// client_golang counts them.
bool CountOpenFds(int64_t* count) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  int64_t n = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++n;
  }
  closedir(dir);
  *count = n;
  return true;
}

}  // namespace

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> families;
  const long ticks_per_second = sysconf(_SC_CLK_TCK);
  const long page_bytes = sysconf(_SC_PAGESIZE);
  ProcStat stat;
  if (ticks_per_second > 0 && page_bytes > 0 && ReadProcStat(&stat)) {
    const double ticks = static_cast<double>(ticks_per_second);
    families.push_back(Family("process_cpu_seconds_total",
                              "Total user and system CPU time spent in seconds.",
                              MetricType::Counter,
                              static_cast<double>(stat.utime_ticks + stat.stime_ticks) / ticks));
    families.push_back(Family("process_virtual_memory_bytes",
                              "Virtual memory size in bytes.", MetricType::Gauge,
                              static_cast<double>(stat.vsize_bytes)));
    families.push_back(Family("process_resident_memory_bytes",
                              "Resident memory size in bytes.", MetricType::Gauge,
                              static_cast<double>(stat.rss_pages) *
                                  static_cast<double>(page_bytes)));
    uint64_t boot_seconds = 0;
    if (ReadBootTime(&boot_seconds)) {
      families.push_back(Family(
          "process_start_time_seconds",
          "Start time of the process since unix epoch in seconds.", MetricType::Gauge,
          static_cast<double>(boot_seconds) + static_cast<double>(stat.starttime_ticks) / ticks));
    }
  }
  int64_t open_fds = 0;
  if (CountOpenFds(&open_fds)) {
    families.push_back(Family("process_open_fds", "Number of open file descriptors.",
                              MetricType::Gauge, static_cast<double>(open_fds)));
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    families.push_back(Family("process_max_fds", "Maximum number of open file descriptors.",
                              MetricType::Gauge,
                              limit.rlim_cur == RLIM_INFINITY
                                  ? static_cast<double>(INT64_MAX)
                                  : static_cast<double>(limit.rlim_cur)));
  }
  return families;
}

}  // namespace phasor::server
