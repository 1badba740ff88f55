// File: client/panel_split.h
//
// The plan behind EncoderClient::EncodeObservationsPanel: how one
// EncodeObservations request too large for one message is cut into
// sub-calls ("pieces") whose responses, joined, are the response of one call
// with the whole panel, bytewise. Pure functions of the request and the
// limits: no channel, no threads (client/panel_calls.h sends the pieces,
// client/panel_wire.h encodes them).
//
// A piece is series [series_begin, series_end) and rows [row_begin, row_end)
// of the panel (SubCall). A plan (PlanSubCalls) is a list of pieces with
// these invariants:
//  - In row order, covering every row exactly once: piece k+1 begins where
//    piece k ends, the first at row 0, the last ends at row R.
//  - Within the budget: each piece's request and response fit
//    Budget::request_limit and Budget::response_limit — the call's byte
//    limit less the fixed parts every sub-call carries and a framing slack,
//    and, for the features, the server's element limit.
//  - Whole series where they fit: a piece holds one or more whole series,
//    except a series that fits no piece alone, whose rows are cut into
//    consecutive chunks (pieces of that one series). Every chunk but the
//    first `continues`: it is sent with the SeriesState the chunk before it
//    returned, so it can start only once that chunk has finished.
//  - Joined equal one call: features rows in row order, each series' state
//    from the last piece that holds rows of it, the offsets as sent. Equal
//    bytewise because the server's features of a row depend only on the
//    series' rows before it, which the carried state summarises (the
//    server's EncodeObservations contract, Observations.states), and on the
//    configuration, which every piece carries unchanged (TemplateRequest).
//
// Example:
//   const PanelShape shape = InspectPanel(request);
//   if (!shape.ok) { /* send the request as it is */ }
//   const Budget budget = MakeBudget(request, shape, TemplateRequest(request, shape),
//                                    probe_bytes, width, element_bytes, limit,
//                                    max_call_elements);
//   absl::StatusOr<std::vector<SubCall>> plan = PlanSubCalls(shape, budget);
//
// Thread-safety: every function here is pure; safe from any thread.
#ifndef PHASOR_CLIENT_PANEL_SPLIT_H_
#define PHASOR_CLIENT_PANEL_SPLIT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "phasor/v1/encoder.pb.h"

namespace phasor {
namespace panel {

// One piece of a panel: series [series_begin, series_end) and rows
// [row_begin, row_end). `continues` marks a chunk that starts inside
// series_begin: it needs the state the previous piece returned.
struct SubCall {
  int64_t series_begin = 0;
  int64_t series_end = 0;
  int64_t row_begin = 0;
  int64_t row_end = 0;
  bool continues = false;
};

// How series s's time zone travels (the Observations.time_zones comment).
enum class TimeZoneMode { kShared, kIndexed, kPerSeries };

// What the planner knows about a panel it can cut. `ok` is false when the
// request is malformed (it is then sent as it is, for the server to name
// the field).
struct PanelShape {
  bool ok = false;
  bool single = false;             // No series_offsets: one series.
  int64_t rows = 0;                // R
  std::vector<int64_t> offsets;    // [S+1]
  int64_t request_row_bytes = 0;   // Sum over row tensors of one row's bytes.
  int64_t channels = 0;            // C, for the state size bound.
  bool set_num_channels = false;   // Long layout: pin C in every sub-call.
  TimeZoneMode time_zone_mode = TimeZoneMode::kShared;
  std::vector<v1::SeriesState> states;  // [S] or empty.
};

// The panel's shape, or `ok` false when its offsets, row tensors, states or
// time zone index are malformed.
PanelShape InspectPanel(const v1::EncodeObservationsRequest& request);

// Every per-row tensor of Observations, wide and long; a piece carries rows
// [row_begin, row_end) of each one present.
struct RowTensor {
  int field_number;
  bool (v1::Observations::*has)() const;
  const v1::Tensor& (v1::Observations::*get)() const;
};
absl::Span<const RowTensor> RowTensors();

// Bytes of one row of `tensor` (shape[0] = rows).
int64_t RowBytes(const v1::Tensor& tensor);

// Protobuf framing (tags, length prefixes, shape varints) is a few bytes per
// tensor and per field; this much per call covers it with room to spare.
inline constexpr int64_t kFramingSlackBytes = 4096;

// An upper bound on the encoded size of a SeriesState with `channels`
// channels: two int64 times (at most 11 bytes each with the tag) plus, per
// channel, two int64 times and two doubles (at most 42 bytes with framing),
// rounded up.
inline int64_t SeriesStateBytesBound(int64_t channels) {
  return 32 + 48 * channels;
}

// Per-call costs, bytes, and what one call may carry.
struct Budget {
  int64_t request_limit = 0;   // For rows and per-series parts of a request.
  int64_t response_limit = 0;  // Likewise for a response.
  int64_t request_per_row = 0;
  int64_t response_per_row = 0;
  int64_t request_per_series = 0;   // Offset, time zone; plus the state in.
  int64_t response_per_series = 0;  // Offset and the state out.
};

// The framing slack of a call of at most `limit_bytes`: kFramingSlackBytes
// plus 1/128 of the limit, for estimates that are a little low.
inline int64_t SlackBytes(int64_t limit_bytes) {
  return kFramingSlackBytes + limit_bytes / 128;
}

// The budget of sub-calls of at most `limit_bytes`, whose features are
// `width` elements of `element_bytes` per row, at most `max_call_elements`
// per call (0 = no element limit). `shared` is TemplateRequest(request,
// shape); `probe_response_bytes` the size of the zero-row response (the
// schema and every other fixed part of a response).
// REQUIRES: shape.ok.
Budget MakeBudget(const v1::EncodeObservationsRequest& request,
                  const PanelShape& shape,
                  const v1::EncodeObservationsRequest& shared,
                  int64_t probe_response_bytes, int64_t width,
                  int64_t element_bytes, int64_t limit_bytes,
                  int64_t max_call_elements);

// Whether the whole panel goes in one call of at most `limit_bytes`.
// REQUIRES: shape.ok.
bool FitsOneCall(const v1::EncodeObservationsRequest& request,
                 const PanelShape& shape, const Budget& budget,
                 int64_t limit_bytes);

// Cuts the panel greedily, in row order: whole series while both the
// request and the response fit, and a series that fits no call alone into
// chunks of as many rows as fit (see the file comment for the invariants).
// RESOURCE_EXHAUSTED when not even one row fits.
// REQUIRES: shape.ok.
absl::StatusOr<std::vector<SubCall>> PlanSubCalls(const PanelShape& shape,
                                                  const Budget& budget);

// How many series `plan` cuts into chunks.
int64_t SeriesSplit(absl::Span<const SubCall> plan);

// The request without rows, offsets, time zone indices or states: what
// every sub-call shares.
v1::EncodeObservationsRequest TemplateRequest(
    const v1::EncodeObservationsRequest& request, const PanelShape& shape);

// The sub-call's request without its rows: `shared` plus its offsets, time
// zones and states. `carried` is the previous chunk's state for a
// continuing chunk, else null. The rows are added on the wire
// (client/panel_wire.h, EncodeSubRequest).
v1::EncodeObservationsRequest BuildSubRequest(
    const v1::EncodeObservationsRequest& request,
    const v1::EncodeObservationsRequest& shared, const PanelShape& shape,
    const SubCall& call, const v1::SeriesState* carried);

}  // namespace panel
}  // namespace phasor

#endif  // PHASOR_CLIENT_PANEL_SPLIT_H_
