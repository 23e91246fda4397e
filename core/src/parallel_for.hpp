// Deterministic chunked parallelism over oneTBB.
//
// oneTBB's templates are instantiated only in parallel.cpp, which is compiled once for plain
// x86-64: a kernel source compiled per vector level (cpu/isa_namespace.hpp) must not instantiate
// them, or its AVX copy of a template that does not depend on the kernel (tbb's fold_tree, say)
// would be one of the linker's candidates for the whole library. So parallel_for hands the loop
// body over as a function pointer and a context, and the tbb loop runs behind one call.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tg::detail {

// Work below this many elements per chunk costs more to schedule than to do (~10 us a chunk).
inline constexpr int64_t kElementwiseGrain = 32768;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Calls run_chunks(context, first, last) for disjoint ranges of chunk numbers covering
// [0, chunks), in parallel on oneTBB (parallel.cpp). chunks >= 2.
void run_chunks_in_parallel(int64_t chunks, const void* context,
                            void (*run_chunks)(const void* context, int64_t first, int64_t last));

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
  struct Loop {
    const Body& body;
    int64_t n, grain;
  } loop{body, n, grain};
  run_chunks_in_parallel(chunks, &loop, [](const void* context, int64_t first, int64_t last) {
    const Loop& loop = *static_cast<const Loop*>(context);
    for (int64_t chunk = first; chunk != last; ++chunk)
      loop.body(chunk * loop.grain, std::min(loop.n, (chunk + 1) * loop.grain));
  });
}

}  // namespace tg::detail
