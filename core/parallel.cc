#include "core/parallel.h"

#include <omp.h>

#include <algorithm>

namespace phasor {

void ParallelFor(const ExecutionOptions& options, int64_t num_items,
                 int64_t elements_per_item,
                 absl::FunctionRef<void(int64_t begin, int64_t end)> body) {
  if (num_items <= 0) return;
  const int64_t per_item = std::max<int64_t>(elements_per_item, 1);
  const int64_t grain = std::max<int64_t>(options.grain_elements, 1);
  const int64_t total = num_items * per_item;
  // Number of chunks worth running in parallel: one per grain of work, capped
  // by the thread budget and by the number of items.
  int64_t chunks = std::min<int64_t>(total / grain, options.max_threads);
  chunks = std::min(chunks, num_items);
  if (chunks < 2 || options.max_threads < 2) {
    body(0, num_items);
    return;
  }
  const int64_t step = (num_items + chunks - 1) / chunks;
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * step;
    const int64_t end = std::min(num_items, begin + step);
    if (begin < end) body(begin, end);
  }
}

}  // namespace phasor
