// Deterministic chunked parallelism over oneTBB.
#pragma once

#include <algorithm>
#include <cstdint>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

namespace tg::detail {

// Work below this many elements per chunk costs more to schedule than to do (~10 us a chunk).
inline constexpr int64_t kElementwiseGrain = 32768;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Calls body(begin, end) for the chunks [0, grain), [grain, 2*grain), ... of [0, n), in parallel
// when there is more than one chunk. The chunks depend only on n and grain — never on the number
// of threads — so a kernel that writes one result slot per chunk is deterministic.
template <typename Body>
void parallel_for(int64_t n, int64_t grain, const Body& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = ceil_div(n, grain);
  if (chunks == 1) {
    body(int64_t{0}, n);
    return;
  }
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, chunks, 1),
      [&](const tbb::blocked_range<int64_t>& range) {
        for (int64_t chunk = range.begin(); chunk != range.end(); ++chunk)
          body(chunk * grain, std::min(n, (chunk + 1) * grain));
      },
      tbb::simple_partitioner());
}

}  // namespace tg::detail
