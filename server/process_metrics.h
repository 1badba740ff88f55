// The standard process metrics, as the Prometheus client libraries export
// them (client_golang's process collector, prometheus/process_collector.go
// and process_collector_other.go; client_python's ProcessCollector): same
// names, types, units and help text, read from /proc at every scrape.
//
//   process_cpu_seconds_total      counter  user + system CPU, seconds
//   process_resident_memory_bytes  gauge    RSS, bytes
//   process_virtual_memory_bytes   gauge    virtual memory size, bytes
//   process_open_fds               gauge    entries in /proc/self/fd
//   process_max_fds                gauge    RLIMIT_NOFILE soft limit
//   process_start_time_seconds     gauge    since the Unix epoch, seconds
//
// prometheus-cpp 1.0 (Debian 12) has no process collector, hence this one.
// Where /proc cannot be read (not Linux) the families are left out, as the
// Go collector does.
//
// Thread-safety: Collect may run on any thread; it keeps no state.
#ifndef PHASOR_SERVER_PROCESS_METRICS_H_
#define PHASOR_SERVER_PROCESS_METRICS_H_

#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace phasor::server {

class ProcessCollector final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace phasor::server

#endif  // PHASOR_SERVER_PROCESS_METRICS_H_
