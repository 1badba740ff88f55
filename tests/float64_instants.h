// Instants for float64 accuracy tests against __float128: random times over
// [1900, 2200) plus the edges where float64 time features are easiest to
// get wrong, and the error of a double against a quad reference.
#ifndef PHASOR_TESTS_FLOAT64_INSTANTS_H_
#define PHASOR_TESTS_FLOAT64_INSTANTS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "tests/quad_reference.h"

namespace phasor::testing {

// The bound for float64 encodings (the kernels promise 1.7e-16).
inline constexpr double kF64Bound = 4e-16;

// The instant of a civil time in `zone`, plus extra_ns.
inline int64_t CivilNs(absl::CivilSecond civil, const absl::TimeZone& zone, int64_t extra_ns = 0) {
  return absl::ToUnixNanos(absl::FromCivil(civil, zone)) + extra_ns;
}

// Instants over [1900, 2200), the boundaries, DST edges in New York (a
// nanosecond either side of 2026's changes) and the int64 extremes
// (INT64_MIN is NaT, so INT64_MIN + 1).
inline std::vector<int64_t> Instants(int random_count, uint64_t seed) {
  const absl::TimeZone utc = absl::UTCTimeZone();
  const int64_t lo = CivilNs(absl::CivilSecond(1900, 1, 1, 0, 0, 0), utc);
  const int64_t hi = CivilNs(absl::CivilSecond(2200, 1, 1, 0, 0, 0), utc);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(lo, hi - 1);
  std::vector<int64_t> out;
  for (int i = 0; i < random_count; ++i) out.push_back(pick(rng));
  const int64_t edges[] = {
      lo, hi - 1, 0, -1, 1,
      // 2026-03-08 02:00 EST -> 03:00 EDT is 07:00Z; 2026-11-01 02:00 EDT ->
      // 01:00 EST is 06:00Z.
      CivilNs(absl::CivilSecond(2026, 3, 8, 7, 0, 0), utc) - 1,
      CivilNs(absl::CivilSecond(2026, 3, 8, 7, 0, 0), utc),
      CivilNs(absl::CivilSecond(2026, 11, 1, 6, 0, 0), utc) - 1,
      CivilNs(absl::CivilSecond(2026, 11, 1, 6, 0, 0), utc),
      // Leap day, a 53-week ISO year's last day, a year's last nanosecond.
      CivilNs(absl::CivilSecond(2024, 2, 29, 23, 59, 59), utc, 999999999),
      CivilNs(absl::CivilSecond(2026, 12, 31, 12, 0, 0), utc),
      CivilNs(absl::CivilSecond(2199, 12, 31, 23, 59, 59), utc, 999999999),
      std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min() + 1,
      // 2^53 + 1 ns and 2^62 + 1 ns.
      (int64_t{1} << 53) + 1, (int64_t{1} << 62) + 1};
  out.insert(out.end(), std::begin(edges), std::end(edges));
  std::sort(out.begin(), out.end());
  return out;
}

inline double AbsDiff(double value, Quad exact) {
  return static_cast<double>(fabsl(static_cast<long double>(Quad(value) - exact)));
}

}  // namespace phasor::testing

#endif  // PHASOR_TESTS_FLOAT64_INSTANTS_H_
