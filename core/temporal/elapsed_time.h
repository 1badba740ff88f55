// -----------------------------------------------------------------------------
// File: core/temporal/elapsed_time.h
// -----------------------------------------------------------------------------
//
// Elapsed time, the axis every continuous-time encoding is a function of:
//
//   τ = t − origin      in integer nanoseconds, exact
//
// t and the origin are int64 nanoseconds since the Unix epoch (UTC); their
// difference needs 65 bits (1900 → 2200 is ~9.47e18 ns, past int64's
// 9.22e18), so it is formed in 128-bit integers and no instant is rounded
// before a kernel forms its phase (core/math/exact_phase.h). The origin is
// the series' first observation, the epoch, or a given instant.
//
// Also the bounds every temporal block is held to: the widest encoding and
// the highest Fourier order a request may ask for.
//
// Thread-safety: constants and pure functions.
//
// Example:
//
//   const int64_t origin_ns = ResolveOriginNs(OriginKind::kFirstObservation,
//                                             /*explicit_origin_ns=*/0,
//                                             /*first_observation_ns=*/times[0]);
//   const __int128 elapsed_ns = ElapsedNs(times[i], origin_ns);
#ifndef PHASOR_CORE_TEMPORAL_ELAPSED_TIME_H_
#define PHASOR_CORE_TEMPORAL_ELAPSED_TIME_H_

#include <cstdint>

namespace phasor {

// τ is measured from this instant.
enum class OriginKind {
  kFirstObservation,  // The series' first row (carried across chunks in SeriesState).
  kUnixEpoch,         // 1970-01-01T00:00:00Z.
  kExplicit,          // origin_ns.
};

// REQUIRES: origin_ns is used only for kExplicit.
inline int64_t ResolveOriginNs(OriginKind kind, int64_t explicit_origin_ns,
                               int64_t first_observation_ns) {
  switch (kind) {
    case OriginKind::kFirstObservation:
      return first_observation_ns;
    case OriginKind::kUnixEpoch:
      return 0;
    case OriginKind::kExplicit:
      return explicit_origin_ns;
  }
  return 0;
}

// Exact t − origin: both fit int64, the difference needs 65 bits.
inline __int128 ElapsedNs(int64_t t_ns, int64_t origin_ns) {
  return static_cast<__int128>(t_ns) - static_cast<__int128>(origin_ns);
}

// Largest dim, Time2Vec width and d_model accepted: far above any model
// width, low enough that a request cannot make a table allocation explode.
inline constexpr int64_t kMaxEncodingWidth = 65536;
// Largest Fourier order of a time-block period or a calendar field.
inline constexpr int64_t kMaxFourierOrder = 1024;

}  // namespace phasor

#endif  // PHASOR_CORE_TEMPORAL_ELAPSED_TIME_H_
