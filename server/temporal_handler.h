// File: server/temporal_handler.h
//
// EncodeObservations and EncodeObservationsStream: a temporal spec (inline
// or a profile's) and a series or panel of observations in, the features
// core/compose.h computes, their schema and each series' SeriesState out.
// The request is converted by server/observations_convert.h and validated
// once by core (ValidatePanel); the spec, its feature layout and its
// blocks' encoders come from the server's caches (server/server_caches.h)
// when the spec repeats.
//
// Thread-safety: reentrant; a HandlerContext is per call and an
// ObservationStream per stream.
#ifndef PHASOR_SERVER_TEMPORAL_HANDLER_H_
#define PHASOR_SERVER_TEMPORAL_HANDLER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/temporal/compose.h"
#include "core/temporal/observations.h"
#include "phasor/v1/encoder.pb.h"
#include "server/handler_context.h"
#include "server/profiles.h"

namespace phasor::server {

// What one EncodeObservationsStream remembers between chunks: the spec its
// first message fixed, and the series states after the last chunk.
struct ObservationStream {
  bool started = false;
  // The first message's spec or profile (other fields cleared), that spec
  // converted for core, and its key in ServerCaches.
  v1::EncodeObservationsRequest config;
  std::shared_ptr<const TemporalSpec> spec;
  std::string config_key;
  // Whether the stream carries a panel; every message then has as many
  // series as `states`.
  bool panel = false;
  // One state per series (one for a single-series stream).
  std::vector<SeriesState> states;
};

// Whether the response carries the series' states (`state`, `states`).
// The native RPC always does; a ModelInfer whose requested outputs leave
// them out skips computing them. A stream always keeps them.
enum class StatesReply { kInclude, kOmit };

// `stream` is null for the unary RPC (the state then comes from
// request.state) and the stream's memory otherwise.
absl::Status HandleEncodeObservations(const HandlerContext& context,
                                      const v1::EncodeObservationsRequest& request,
                                      ObservationStream* stream,
                                      v1::EncodeObservationsResponse* response,
                                      StatesReply states = StatesReply::kInclude);

// Checks a temporal spec from a profile (blocks, zone, named parameters).
absl::Status ValidateTemporalProfile(const ProfileRegistry& profiles,
                                     const v1::TemporalSpec& spec);

}  // namespace phasor::server

#endif  // PHASOR_SERVER_TEMPORAL_HANDLER_H_
