// libFuzzer target: phasor-client's panel table reader
// (client/cli/panel_csv.h, over the RFC 4180 reader client/csv_reader.h),
// which turns a user's CSV file into one EncodeObservations panel. The first
// input byte picks the options (layout, time unit, a time-zone column, fixed
// channel names); the rest is the file. Seeds are in corpus/panel_csv/
// (gen_corpus.py).
//
// Besides crashes and sanitizer reports, a panel read OK must be consistent:
// series offsets [S + 1] from 0 to the row count, non-decreasing; one file
// line and one time cell per row, lines past the header; a tensor's bytes
// matching its shape.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "client/cli/panel_csv.h"
#include "phasor/v1/encoder.pb.h"

namespace {

void Fail(const char* what) {
  std::fprintf(stderr, "fuzz_panel_csv: %s\n", what);
  std::abort();
}

// The int64 values of an INT64 tensor whose bytes match its shape.
std::vector<int64_t> Int64s(const phasor::v1::Tensor& tensor) {
  int64_t elements = 1;
  for (const int64_t extent : tensor.shape()) elements *= extent;
  if (tensor.dtype() != phasor::v1::INT64 ||
      tensor.data().size() != static_cast<size_t>(elements) * sizeof(int64_t)) {
    Fail("an INT64 tensor's bytes do not match its shape");
  }
  std::vector<int64_t> values(static_cast<size_t>(elements));
  if (elements > 0) std::memcpy(values.data(), tensor.data().data(), tensor.data().size());
  return values;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  const absl::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  phasor::cli::PanelCsvOptions options;
  options.layout = static_cast<phasor::cli::PanelCsvLayout>(selector % 3);
  options.time_unit = static_cast<phasor::cli::TimeUnit>((selector / 3) % 5);
  if (selector & 0x40) options.time_zone_column = "zone";
  if (selector & 0x80) options.channel_names = {"hr", "spo2"};

  const auto panel = phasor::cli::ReadPanelCsv(text, "fuzz.csv", options);
  if (!panel.ok()) {
    if (panel.status().message().empty()) Fail("an error without a message");
    return 0;
  }
  const phasor::v1::Observations& observations = panel->observations;
  const std::vector<int64_t> offsets = Int64s(observations.series_offsets());
  const std::vector<int64_t> times = Int64s(
      panel->long_layout ? observations.event_times() : observations.timestamps());
  const int64_t rows = static_cast<int64_t>(times.size());
  if (offsets.size() != panel->series_keys.size() + 1 || offsets.front() != 0 ||
      offsets.back() != rows) {
    Fail("series offsets do not span the rows");
  }
  for (size_t s = 1; s < offsets.size(); ++s) {
    if (offsets[s] < offsets[s - 1]) Fail("series offsets decrease");
  }
  if (panel->row_lines.size() != times.size() || panel->row_times.size() != times.size()) {
    Fail("not one line and one time cell per row");
  }
  for (const int64_t line : panel->row_lines) {
    if (line < 2) Fail("a row on the header's line");
  }
  return 0;
}
