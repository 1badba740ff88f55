// -----------------------------------------------------------------------------
// File: core/temporal/wide_values.h
// -----------------------------------------------------------------------------
//
// Passes over a wide observations tensor ([rows, channels] values, NaN
// meaning "not observed" when there is no mask) in vectors of the widest
// unit the CPU has (Highway's runtime dispatch, as core/adapters/dtype.cc).
//
// Without a mask whether a value is observed is random, so a row loop that
// tests each value is slow; these select on lane masks instead. With a mask
// (rarer) they take the scalar path, which gives the same values.
//
// Thread-safety: pure functions.
//
// Example:
//
//   if (AnyObservedNonFinite(obs)) { ... }  // Then find the value and say which.
//   WriteValuesAndFlags(obs, /*begin=*/0, /*n=*/rows, out, /*row_stride=*/width);
#ifndef PHASOR_CORE_TEMPORAL_WIDE_VALUES_H_
#define PHASOR_CORE_TEMPORAL_WIDE_VALUES_H_

#include <cstdint>

#include "core/temporal/observations_view.h"

namespace phasor {

// Whether an observed value of the wide `obs` is not finite (±Inf; with a
// mask also NaN). ValidateWide's first pass: the offending value is looked
// for only when there is one.
// REQUIRES: obs.layout == kWide and its shapes checked.
bool AnyObservedNonFinite(const ObservationsView& obs);

// The content block without embeddings, rows [begin, begin + n) of the wide
// `obs`: row i's channel values (0 where not observed) at
// out + i·row_stride, then their observed flags (1 or 0), C values each.
// REQUIRES: obs.layout == kWide; row_stride >= 2·num_channels.
void WriteValuesAndFlags(const ObservationsView& obs, int64_t begin, int64_t n,
                         double* out, int64_t row_stride);

}  // namespace phasor

#endif  // PHASOR_CORE_TEMPORAL_WIDE_VALUES_H_
