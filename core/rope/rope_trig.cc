#include "core/rope/rope_trig.h"

#include <cstdint>
#include <utility>

#include "absl/types/span.h"
#include "core/base/positions.h"
#include "core/math/angle_ladder.h"
#include "core/math/exact_angle.h"
#include "core/rope/rope_spec.h"

namespace phasor::rope_internal {

AxisRuns MropeRuns(const RopeSpec& spec, int64_t half) {
  AxisRuns runs;
  if (spec.mrope_section.empty()) {
    runs.push_back({0, half, 0});
    return runs;
  }
  auto append = [&](int64_t pair, int64_t axis) {
    if (!runs.empty() && runs.back().axis == axis &&
        runs.back().begin + runs.back().count == pair) {
      ++runs.back().count;
    } else {
      runs.push_back({pair, 1, axis});
    }
  };
  if (spec.mrope_interleaved) {
    for (int64_t i = 0; i < half; ++i) {
      int64_t axis = 0;
      if (i % 3 == 1 && i < 3 * spec.mrope_section[1]) axis = 1;
      if (i % 3 == 2 && i < 3 * spec.mrope_section[2]) axis = 2;
      append(i, axis);
    }
  } else {
    int64_t pair = 0;
    for (int64_t axis = 0; axis < 3; ++axis) {
      for (int64_t j = 0; j < spec.mrope_section[axis] && pair < half; ++j) {
        append(pair++, axis);
      }
    }
  }
  return runs;
}

TrigPlan MakeTrigPlan(const RopePlan& rope, double scale, const Positions& positions,
                      AxisRuns runs, int64_t axes, bool exact_rows) {
  TrigPlan plan;
  plan.angles = rope.angles.data();
  plan.half = static_cast<int64_t>(rope.angles.size());
  plan.scale = scale;
  plan.positions = positions;
  plan.runs = std::move(runs);
  plan.num_tokens = positions.size() / axes;
  if (!exact_rows && axes == 1 && !positions.is_real()) {
    const int64_t step = AngleLadderStep(positions.integers());
    if (step != 0) {
      plan.step = step;
      plan.step_cos.resize(plan.half);
      plan.step_sin.resize(plan.half);
      CosSinRow(plan.angles, plan.half, step, plan.step_cos.data(),
                plan.step_sin.data());
    }
  }
  return plan;
}

void PositionTrig(const TrigPlan& plan, int64_t t, double* cos_row,
                  double* sin_row) {
  for (const AxisRun& run : plan.runs) {
    const int64_t index = run.axis * plan.num_tokens + t;
    if (plan.positions.is_real()) {
      CosSinRow(plan.angles + run.begin, run.count, plan.positions.reals()[index],
                cos_row + run.begin, sin_row + run.begin);
    } else {
      CosSinRow(plan.angles + run.begin, run.count,
                plan.positions.integers()[index], cos_row + run.begin,
                sin_row + run.begin);
    }
  }
}

}  // namespace phasor::rope_internal
