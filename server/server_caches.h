// File: server/server_caches.h
//
// ServerCaches: what one server keeps across calls, so that calls repeating
// a spec -- the common case: a client sends the same spec with every chunk
// of its data, or every batch of a model -- skip converting and validating
// it and building what it implies. Each cache is a SpecCache
// (server/spec_cache.h): bounded in entries and bytes, keys holding client
// bytes, values shared immutable. A hit must mean "same result", so a key
// holds everything its value depends on:
//
//   specs       EncodeObservations' TemporalSpec, converted and validated,
//               under the request's config (an inline spec's bytes, or a
//               profile's name: profiles do not change while a server runs);
//   layouts     its FeatureLayout, under the config plus the channel count
//               and the content width;
//   encoders    its TemporalEncoders (ladder phases, Time2Vec, gaps, the
//               spec zone's calendar), under the config plus the channel
//               count and the output's precision;
//   rope_plans  ApplyRope's and RopeTables' RopePlan (θ_i and their
//               exact-reduction constants), under the RoPE spec's bytes, the
//               head dimension and the bucket of the sequence length its
//               scaling reads (core/rope_scaling.h RopeSeqLenBucket).
//
// One per server: EncoderService owns it and every call's HandlerContext
// points to it (server/handler_context.h); a handler without one builds
// everything for its call alone.
//
// Thread-safety: every member may be used from any thread at once.
#ifndef PHASOR_SERVER_SERVER_CACHES_H_
#define PHASOR_SERVER_SERVER_CACHES_H_

#include "core/rope/rope.h"
#include "core/temporal/compose.h"
#include "server/spec_cache.h"

namespace phasor::server {

struct ServerCaches {
  ServerCaches() = default;
  // Encoder cache limits of their own (bench/handler_bench.cc turns it off
  // with max_entries 0 to measure what it saves).
  explicit ServerCaches(SpecCacheLimits encoder_limits) : encoders(encoder_limits) {}

  SpecCache<TemporalSpec> specs{SpecCacheLimits{}};
  SpecCache<FeatureLayout> layouts{SpecCacheLimits{/*max_entries=*/1024}};
  SpecCache<TemporalEncoders> encoders{SpecCacheLimits{/*max_entries=*/256}};
  SpecCache<RopePlan> rope_plans{SpecCacheLimits{/*max_entries=*/64}};
};

}  // namespace phasor::server

#endif  // PHASOR_SERVER_SERVER_CACHES_H_
