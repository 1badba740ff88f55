// Running a test body on every SIMD target a binary holds.
#ifndef PHASOR_TESTS_HWY_TARGETS_H_
#define PHASOR_TESTS_HWY_TARGETS_H_

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/targets.h"

namespace phasor {

// Calls body(target name) once per Highway target the binary was built for
// and the CPU runs, HWY_DYNAMIC_DISPATCH choosing that target, and goes back
// to the CPU's own targets however it ends (a failed ASSERT included).
template <typename F>
void OnEveryTarget(F&& body) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  struct ResetTargets {
    ~ResetTargets() { hwy::SetSupportedTargetsForTest(0); }
  } reset;
  for (const int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    body(hwy::TargetName(target));
  }
}

}  // namespace phasor

#endif  // PHASOR_TESTS_HWY_TARGETS_H_
