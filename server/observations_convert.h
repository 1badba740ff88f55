// File: server/observations_convert.h
//
// EncodeObservations' request -> core: the observation tensors into a core
// ObservationsView (float64 seconds into int64 ns, unaligned bytes copied
// once), the panel's series offsets, states and time zones; and a core
// SeriesState back into the response's. Each check before core may look at
// the data -- dtypes, ranks, shapes against each other, the channel count
// against the limits -- returns a field-path error (core/errors.h); what is
// left (values, ordering, states against rows) is core's ValidatePanel.
//
// Thread-safety: pure functions; the decoded structs are per call.
#ifndef PHASOR_SERVER_OBSERVATIONS_CONVERT_H_
#define PHASOR_SERVER_OBSERVATIONS_CONVERT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/temporal/compose.h"
#include "core/temporal/observations.h"
#include "phasor/v1/encoder.pb.h"
#include "server/convert.h"

namespace phasor::server {

// A channel's record in the response's SeriesState once it has been
// observed: 2 bytes of framing, last_seen_ns (tag + varint, up to 11) and
// last_value (tag + 8).
inline constexpr int64_t kStateBytesPerChannel = 22;

// Everything an ObservationsView points into.
struct DecodedObservations {
  ObservationsView view;
  // Times given as float64 seconds, converted to ns.
  std::vector<int64_t> converted_times;
  TypedInput<int64_t> times;
  TypedInput<double> values_f64;
  TypedInput<float> values_f32;
  TypedInput<int32_t> channels;
  FloatInput content;
  TypedInput<double> content_f64;
};

// Checks `in` and points out->view into it. `state` (may be null) is a
// state the request continues from, for the long layout's channel count;
// `state_field` names it.
absl::Status DecodeObservations(const v1::Observations& in,
                                const SeriesState* state,
                                absl::string_view state_field,
                                const RequestLimits& limits,
                                DecodedObservations* out);

// `field` names the state in errors ("state", "states[3]").
absl::Status StateFromProto(const v1::SeriesState& in, absl::string_view field,
                            SeriesState* state);
void StateToProto(const SeriesState& in, v1::SeriesState* out);

// The panel parts of a request: series offsets, time zones, states in.
struct DecodedPanel {
  TypedInput<int64_t> offsets_input;
  std::vector<int64_t> offsets_storage;  // The single series' {0, rows}.
  absl::Span<const int64_t> offsets;
  std::vector<absl::TimeZone> zones;
  TypedInput<int32_t> zone_index_input;
  std::vector<int32_t> zone_index_storage;  // When derived from the list.
  absl::Span<const int32_t> zone_index;
  std::vector<SeriesState> states;
  // S entries (null for a new series), or empty when every series is new.
  std::vector<const SeriesState*> state_ptrs;

  int64_t num_series() const {
    return static_cast<int64_t>(offsets.size()) - 1;
  }
};

// observations.series_offsets: checked as an INT64 [S + 1] tensor, S >= 1
// (their values are core's ValidatePanel's).
absl::Status DecodeSeriesOffsets(const v1::Observations& in,
                                 const RequestLimits& limits, DecodedPanel* out);

// request.states: none, or one per series (an empty entry is a new series).
absl::Status DecodeStates(const v1::EncodeObservationsRequest& request,
                          int64_t num_series, DecodedPanel* out);

// observations.time_zones and time_zone_index: loaded zones and one index
// per series (the index's length and range are checked with the panel,
// core's ValidateZoneIndex).
absl::Status DecodeZones(const v1::Observations& in, const TemporalSpec& spec,
                         int64_t num_series, const RequestLimits& limits,
                         DecodedPanel* out);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_OBSERVATIONS_CONVERT_H_
