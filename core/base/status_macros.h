// -----------------------------------------------------------------------------
// File: core/base/status_macros.h
// -----------------------------------------------------------------------------
//
// Small helpers for absl::Status plumbing.
//
// Debian 12's Abseil (20220623) ships neither RETURN_IF_ERROR nor
// ASSIGN_OR_RETURN, so Phasor defines its own, once, here.
//
// Thread-safety: macros over their arguments only.
//
// Example:
//
//   PHASOR_RETURN_IF_ERROR(ValidateObservations(obs));
//   PHASOR_ASSIGN_OR_RETURN(const FeatureLayout layout,
//                           TemporalFeatureLayout(spec, obs.num_channels, 0));
#ifndef PHASOR_CORE_BASE_STATUS_MACROS_H_
#define PHASOR_CORE_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PHASOR_STATUS_CONCAT_INNER_(a, b) a##b
#define PHASOR_STATUS_CONCAT_(a, b) PHASOR_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function
// when it is not OK.
#define PHASOR_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    const ::absl::Status phasor_status_ = (expr);    \
    if (!phasor_status_.ok()) return phasor_status_; \
  } while (0)

// `lhs` = value of `rexpr` (an absl::StatusOr<T>), or return its status.
#define PHASOR_ASSIGN_OR_RETURN(lhs, rexpr)                                   \
  PHASOR_ASSIGN_OR_RETURN_IMPL_(                                              \
      PHASOR_STATUS_CONCAT_(phasor_statusor_, __LINE__), lhs, rexpr)
#define PHASOR_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                  \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()

#endif  // PHASOR_CORE_BASE_STATUS_MACROS_H_
