// Row chunks for the nn kernels: an [M, N] problem is cut into blocks of whole rows whose size
// depends only on M and N — never on the thread count — so a kernel that keeps one partial-sum
// slot per chunk and adds the slots in chunk order is bitwise deterministic. Private to nn/.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "parallel_for.hpp"

namespace tg::nn::detail {

// A chunk holds at least this many elements (~10 us of work), so that tiny shapes ([2, 4],
// [64, 8]) form a single chunk and run inline without touching oneTBB.
inline constexpr int64_t kMinChunkElements = 16384;
// At most this many chunks: enough to keep every core busy, few enough that per-chunk partial
// buffers (kMaxChunks x N doubles) stay small.
inline constexpr int64_t kMaxChunks = 64;

struct RowChunks {
  int64_t rows_per_chunk = 1;
  int64_t count = 0;  // chunks that run: 0 for M = 0, and a reduction over them gives 0
};

// min_chunk_elements: a kernel whose chunks carry more fixed cost (e.g. partial sums of N
// columns) may ask for larger ones; it must pass a constant, so chunks still depend on M, N only.
inline RowChunks row_chunks(int64_t M, int64_t N, int64_t min_chunk_elements = kMinChunkElements) {
  using tg::detail::ceil_div;
  RowChunks chunks;
  chunks.rows_per_chunk =
      std::max<int64_t>({1, ceil_div(min_chunk_elements, std::max<int64_t>(N, 1)), ceil_div(M, kMaxChunks)});
  chunks.count = ceil_div(M, chunks.rows_per_chunk);
  return chunks;
}

// Calls body(chunk, row_begin, row_end) for every chunk, in parallel when there are several.
template <typename Body>
void for_each_chunk(const RowChunks& chunks, int64_t M, const Body& body) {
  tg::detail::parallel_for(M, chunks.rows_per_chunk, [&](int64_t begin, int64_t end) {
    body(begin / chunks.rows_per_chunk, begin, end);
  });
}

// Independent accumulators for a sum along a row: lets the compiler vectorise the loop without
// reassociating floating-point adds (no -ffast-math), and fixes the order of the final adds.
inline constexpr int64_t kLanes = 8;

// Σ_{i<n} term(i) in double, in kLanes interleaved partial sums added in a fixed order.
template <typename Term>
double lane_sum(int64_t n, const Term& term) {
  std::array<double, kLanes> lanes{};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] += term(i + j);
  double total = 0.0;
  for (double lane : lanes) total += lane;
  for (; i < n; ++i) total += term(i);
  return total;
}

}  // namespace tg::nn::detail
