// The determinism toolkit: every parallel or vectorised sum in the library adds its terms in an
// order fixed by the problem's size alone — never by the thread count, the scheduling or the
// vector width of the CPU — so results are bitwise identical at any thread count.
//
//   row_chunks, for_each_chunk   cut [M, N] rows into chunks that depend on M and N only
//   sum_slots_in_order           add per-chunk partial-sum slots in chunk order
//   lane_sum                     Σ term(i) along a row, in interleaved double lanes
//   lane_sums                    two sums along a row in SIMD lanes of T, blocks added in double
//   wide_lane_sums               two sums along a row in SIMD lanes of double
//
// Private to the library (used by core's reductions and by nn's losses and LayerNorm).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "cpu/isa_namespace.hpp"
#include "parallel_for.hpp"
#include "simd_lanes.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"  // see simd_lanes.hpp

namespace tg::detail {
inline namespace TG_ISA_HELPERS {

// --- chunks and their slots -------------------------------------------------------------------

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

// An [M, N] problem cut into blocks of whole rows. min_chunk_elements: a kernel whose chunks carry
// more fixed cost (e.g. partial sums of N columns) may ask for larger ones; it must pass a
// constant, so chunks still depend on M and N only.
inline RowChunks row_chunks(int64_t M, int64_t N, int64_t min_chunk_elements = kMinChunkElements) {
  RowChunks chunks;
  chunks.rows_per_chunk =
      std::max<int64_t>({1, ceil_div(min_chunk_elements, std::max<int64_t>(N, 1)), ceil_div(M, kMaxChunks)});
  chunks.count = ceil_div(M, chunks.rows_per_chunk);
  return chunks;
}

// Calls body(chunk, row_begin, row_end) for every chunk, in parallel when there are several.
template <typename Body>
void for_each_chunk(const RowChunks& chunks, int64_t M, const Body& body) {
  parallel_for(M, chunks.rows_per_chunk, [&](int64_t begin, int64_t end) {
    body(begin / chunks.rows_per_chunk, begin, end);
  });
}

// Columns of the slots one task adds up.
inline constexpr int64_t kSlotColumnBlock = 512;

// slots: [count, width], row c the partial sums of chunk c -> out(j, Σ_c slots[c, j]) for every
// column j, the chunks added in order from 0.0. Column blocks are independent and may run in
// parallel; within one, each chunk's slice is read contiguously.
template <typename Out>
void sum_slots_in_order(const double* slots, int64_t count, int64_t width, const Out& out) {
  parallel_for(width, kSlotColumnBlock, [&](int64_t j0, int64_t j1) {
    std::array<double, kSlotColumnBlock> totals{};
    for (int64_t chunk = 0; chunk < count; ++chunk) {
      const double* slot = slots + chunk * width;
      for (int64_t j = j0; j < j1; ++j) totals[j - j0] += slot[j];
    }
    for (int64_t j = j0; j < j1; ++j) out(j, totals[j - j0]);
  });
}

// --- sums along a row -------------------------------------------------------------------------

// Independent accumulators for a sum along a row: lets the compiler vectorise the loop without
// reassociating floating-point adds (no -ffast-math), and fixes the order of the final adds.
inline constexpr int64_t kLanes = 16;

// Σ_{i<n} term(i) in double: term i goes to lane i mod kLanes (for the whole multiples of kLanes),
// the lanes are added in order, then the remaining terms.
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

// {Σ a(i), Σ b(i)} over [0, n) in double, where terms(lane) returns the pair {a, b} for a lane
// (simd_lanes.hpp).
//
// Accumulated in T vectors, kAccumulators independent ones per sum (to hide the add latency), for
// blocks of at most kBlockSteps × kAccumulators vectors; each block's vectors are then added
// pairwise into one T and that goes into a double. So in float32 no float sum spans more than
// kBlockSteps terms per lane plus a 6-level tree (relative error ≲ 20 ulp of Σ|term| per block),
// and the blocks, however long the row, add up in double. Each piece of the tail (< one vector)
// is reduced the same way and added in double. The order of every add is fixed by n alone.
inline constexpr int64_t kAccumulators = 4;
inline constexpr int64_t kBlockSteps = 16;
static_assert(kAccumulators == 4, "lane_sums adds its four accumulators by name");

// Two double sums side by side in one register: lane_sums returns {Σa, Σb} as this, not as a
// std::pair, which GCC returned through a stack slot (a 16-byte store, then two 8-byte loads
// that wait for it: the hottest instruction of LayerNorm's forward on rows of 64 floats).
typedef double SumPair __attribute__((vector_size(16)));

// The sum of the lanes of one 64-byte vector held as Split register-wide parts in lane order
// (simd_lanes.hpp's kRegisterBytes): the adds of reduce_add's tree on the whole vector, in the same
// order — the first halves its lanes pairwise, which adds part s to part s + Split/2, and so on
// down to one part, then reduce_add within that register.
template <typename T, int64_t Split, typename V>
T reduce_parts(V (&parts)[Split]) {
  for (int64_t half = Split / 2; half >= 1; half /= 2)
    for (int64_t s = 0; s < half; ++s) parts[s] = parts[s] + parts[s + half];
  return reduce_add<T, static_cast<int64_t>(sizeof(V) / sizeof(T))>(parts[0]);
}

// (acc[0] + acc[1]) + (acc[2] + acc[3]) part by part, then its lanes' sum (reduce_parts).
template <typename T, int64_t Count, int64_t Split, typename V>
T reduce_accumulators(const V (&acc)[Count][Split]) {
  static_assert(Count == 4, "four accumulators, added by name");
  V parts[Split];
  for (int64_t s = 0; s < Split; ++s) parts[s] = (acc[0][s] + acc[1][s]) + (acc[2][s] + acc[3][s]);
  return reduce_parts<T>(parts);
}

template <typename T, typename Terms>
SumPair lane_sums(int64_t n, const Terms& terms) {
  // The lanes of the sums are those of one 64-byte vector at every level (the bits do not depend
  // on the level); each is held as kSplit vectors of the level's register width.
  constexpr int64_t W = Simd<T>::kWidth;
  using Part = VectorLane<T, kRegisterBytes>;
  using Vec = typename Part::Vec;
  constexpr int64_t kSplit = W / Part::kWidth;
  constexpr int64_t kStep = kAccumulators * W;
  SumPair sums = {0.0, 0.0};
  int64_t i = 0;
  while (i + W <= n) {
    Vec a[kAccumulators][kSplit] = {}, b[kAccumulators][kSplit] = {};
    // Adds the terms of the 64-byte vector at `at` into accumulator k.
    const auto add = [&](int64_t at, int64_t k) {
      for (int64_t s = 0; s < kSplit; ++s) {
        const auto [term_a, term_b] = terms(Part{at + s * Part::kWidth});
        a[k][s] += term_a;
        b[k][s] += term_b;
      }
    };
    const int64_t block_end = std::min(n, i + kBlockSteps * kStep);
    for (; i + kStep <= block_end; i += kStep)
      for (int64_t k = 0; k < kAccumulators; ++k) add(i + k * W, k);
    for (; i + W <= block_end; i += W) add(i, 0);  // the last < kAccumulators vectors of the row
    sums += SumPair{static_cast<double>(reduce_accumulators<T>(a)), static_cast<double>(reduce_accumulators<T>(b))};
  }
  return fold_tail_lanes<T>(i, n, sums, [&](SumPair acc, auto lane) {
    const auto [term_a, term_b] = terms(lane);
    return acc + SumPair{static_cast<double>(decltype(lane)::reduce(term_a)),
                         static_cast<double>(decltype(lane)::reduce(term_b))};
  });
}

// {Σ a(i), Σ b(i)} over [0, n), where terms(lane) returns the pair {a, b} for a lane computed in
// double lanes (from lane.wide(row): a row of T read as doubles). For sums that T lanes cannot
// hold: squares of float32 values beyond 1.8e19 overflow float, and a difference of squares
// (a variance) keeps only 24 − log2(cancellation) bits in float.
//
// Lanes of 8 elements (one AVX-512 register of doubles, two AVX2 ones), kWideAccumulators
// independent accumulators per sum, vectors dealt to them in turn; the accumulators are added
// pairwise, then each lane of 8 left over, then each piece of the tail (< 8 elements) is reduced
// and added in order. The order of every add is fixed by n alone. Rows shorter than one round
// never touch the accumulators.
inline constexpr int64_t kWideAccumulators = 4;
static_assert(kWideAccumulators == 4, "wide_lane_sums adds its four accumulators by name");

template <typename T, typename Terms>
SumPair wide_lane_sums(int64_t n, const Terms& terms) {
  // Lanes of 8 elements (one 64-byte vector of doubles), each held as kSplit register-wide parts
  // of kPart doubles: terms() sees kPart elements of T read as one register of doubles.
  constexpr int64_t W = 8;
  constexpr int64_t kPart = static_cast<int64_t>(kRegisterBytes / sizeof(double));
  constexpr int64_t kSplit = W / kPart;
  using Part = VectorLane<T, kPart * sizeof(T)>;
  using Wide = typename Part::Wide;
  constexpr int64_t kStep = kWideAccumulators * W;
  SumPair sums = {0.0, 0.0};
  int64_t i = 0;
  if (n >= kStep) {
    Wide a[kWideAccumulators][kSplit] = {}, b[kWideAccumulators][kSplit] = {};
    for (; i + kStep <= n; i += kStep)
      for (int64_t k = 0; k < kWideAccumulators; ++k)
        for (int64_t s = 0; s < kSplit; ++s) {
          const auto [term_a, term_b] = terms(Part{i + k * W + s * kPart});
          a[k][s] += term_a;
          b[k][s] += term_b;
        }
    sums = SumPair{reduce_accumulators<double>(a), reduce_accumulators<double>(b)};
  }
  for (; i + W <= n; i += W) {
    Wide a[kSplit], b[kSplit];
    for (int64_t s = 0; s < kSplit; ++s) {
      const auto [term_a, term_b] = terms(Part{i + s * kPart});
      a[s] = term_a;
      b[s] = term_b;
    }
    sums += SumPair{reduce_parts<double>(a), reduce_parts<double>(b)};
  }
  return fold_tail_lanes<T>(i, n, sums, [&](SumPair acc, auto lane) {
    const auto [term_a, term_b] = terms(lane);
    return acc + SumPair{decltype(lane)::reduce(term_a), decltype(lane)::reduce(term_b)};
  });
}

}  // namespace TG_ISA_HELPERS
}  // namespace tg::detail

#pragma GCC diagnostic pop
