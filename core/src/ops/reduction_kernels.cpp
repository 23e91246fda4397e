// The reduction kernel: out[a, b] = scale · Σ_r in[a, r, b] for a contiguous [A, R, B], compiled
// once per vector level by tg_add_isa_kernels (TG_ISA = v2, v3 or avx512) into
// tg::detail::<level>. The order of every add depends on A, R and B only.
#include "ops/reduction_kernels.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include "deterministic_sum.hpp"

namespace tg::detail::TG_ISA {

namespace {

// Elements one task sums before its partial result is stored (sized for L1/L2 residency).
constexpr int64_t kReduceChunk = 16384;
// Columns one task owns when B is wide enough to parallelise over columns instead.
constexpr int64_t kColumnBlock = 256;

// Σ row[0..n) in double, in a fixed order (deterministic_sum.hpp).
template <typename T>
double sum_row(const T* row, int64_t n) {
  return lane_sum(n, [row](int64_t i) { return static_cast<double>(row[i]); });
}

// acc[b] += Σ_{r in [r0, r1)} in[r, b] for a [R, B] block.
template <typename T>
void add_rows(const T* in, int64_t B, int64_t r0, int64_t r1, int64_t b0, int64_t b1, double* acc) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* row = in + r * B;
    for (int64_t b = b0; b < b1; ++b) acc[b - b0] += static_cast<double>(row[b]);
  }
}

template <typename T>
void reduce_sum(const T* in, T* out, int64_t A, int64_t R, int64_t B, double scale) {
  if (A * B == 0) return;
  if (B >= kColumnBlock) {
    // Wide rows: each task owns a block of output columns and sums all R rows for it.
    const int64_t blocks_per_a = ceil_div(B, kColumnBlock);
    const int64_t grain = ceil_div(kReduceChunk, std::max<int64_t>(R, 1) * kColumnBlock);
    parallel_for(A * blocks_per_a, grain, [&](int64_t begin, int64_t end) {
      std::array<double, kColumnBlock> acc;
      for (int64_t task = begin; task < end; ++task) {
        const int64_t a = task / blocks_per_a, b0 = (task % blocks_per_a) * kColumnBlock;
        const int64_t b1 = std::min(B, b0 + kColumnBlock);
        acc.fill(0.0);
        add_rows(in + a * R * B, B, 0, R, b0, b1, acc.data());
        for (int64_t b = b0; b < b1; ++b) out[a * B + b] = static_cast<T>(acc[b - b0] * scale);
      }
    });
    return;
  }
  // Narrow rows: split R into chunks of about kReduceChunk elements, sum each chunk into its own
  // partial slot, then add the slots in chunk order.
  const int64_t rows_per_chunk = std::max<int64_t>(1, kReduceChunk / B);
  const int64_t chunks = std::max<int64_t>(1, ceil_div(R, rows_per_chunk));
  std::vector<double> partial(static_cast<size_t>(A * chunks * B), 0.0);
  const int64_t grain = chunks > 1 ? 1 : ceil_div(kReduceChunk, std::max<int64_t>(R * B, 1));
  parallel_for(A * chunks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t a = task / chunks, chunk = task % chunks;
      const int64_t r0 = chunk * rows_per_chunk, r1 = std::min(R, r0 + rows_per_chunk);
      double* slot = partial.data() + task * B;
      if (B == 1)
        slot[0] = sum_row(in + a * R + r0, r1 - r0);
      else
        add_rows(in + a * R * B, B, r0, r1, 0, B, slot);
    }
  });
  for (int64_t a = 0; a < A; ++a)
    sum_slots_in_order(partial.data() + a * chunks * B, chunks, B,
                       [&](int64_t b, double total) { out[a * B + b] = static_cast<T>(total * scale); });
}

}  // namespace

const DtypeKernels<ReductionKernels> reduction_kernels = {
    .f32 = {.sum = reduce_sum<float>},
    .f64 = {.sum = reduce_sum<double>},
};

}  // namespace tg::detail::TG_ISA
