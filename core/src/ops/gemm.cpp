// Row-major GEMM: large products in our blocked loops around tapegrad's micro-kernel (BLIS's at v2
// or when forced), split across the threads inside those loops (ops/gemm_blocked.cpp); the rest on
// our per-level small-product kernel, or Eigen, serially on at most two tiles of C run in parallel
// by oneTBB. A batch of many products is one parallel loop over (matrix, tile) pieces: one
// dispatch, one parallel_for.
// At "medium" matmul precision (ops/matmul_precision.hpp) a float32 product runs on
// bf16_gemm_kernel(): the same loops and tiles, on bf16-rounded factors (ops/gemm_bf16.hpp).
#include "ops/gemm.hpp"

#include <Eigen/Core>
#include <algorithm>

#include "cpu/gemm_kernel.hpp"
#include "kernel_buffer.hpp"
#include "ops/gemm_bf16.hpp"
#include "ops/gemm_blocked.hpp"
#include "ops/matmul_precision.hpp"
#include "ops/small_gemm_kernels.hpp"
#include "parallel_for.hpp"

namespace tg::detail {

namespace {
// Below this many multiply-adds a product runs as one tile: splitting costs more than it saves.
constexpr int64_t kParallelFlops = int64_t{1} << 20;
// About this many multiply-adds per tile once a product is split (4 Mi: enough work that handing a
// tile to another thread costs little next to it)...
constexpr int64_t kFlopsPerTile = int64_t{1} << 22;
// ...but no more than this many tiles. A whole-matrix product is the serial kernel's fastest;
// every extra tile re-packs a shared operand. Two tiles keep two cores busy; each further tile
// slows a product run on fewer threads by its re-packing, and thin tiles (a few rows) the most. It
// cannot follow the thread count: the tiling must depend on the sizes only, for bitwise
// reproducibility.
constexpr int64_t kMaxTiles = 2;
// Each tile re-packs the operand it shares with its neighbours (all of op(B) for a row tile), so
// tiles stay large: the packing then costs ~1/kMinTileSize of the multiply.
constexpr int64_t kMinTileSize = 256;

// The kernel of a product of T at the matmul precision in force.
template <typename T>
const GemmKernel& product_kernel() {
  if constexpr (std::is_same_v<T, float>) {
    if (forced_bf16_products() == Bf16Products::factors_exact) return bf16_values_gemm_kernel();
    if (float32_products_in_bf16()) return bf16_gemm_kernel();
  }
  return gemm_kernel();
}

bool in_blocked_loops(const GemmKernel& kernel, bool trans_b, int64_t work) {
  return kernel.packed && work >= (trans_b ? kernel.packed_from_trans_b : kernel.packed_from);
}

// A stored matrix (rows × cols, row stride ld) rounded to bf16 values, contiguous (ops/gemm_bf16.hpp).
struct RoundedToBf16 {
  KernelBuffer<float> values;
  int64_t ld;
  RoundedToBf16(const float* matrix, int64_t rows, int64_t cols, int64_t ld_matrix) : values(rows * cols), ld(cols) {
    round_matrix_to_bf16(matrix, ld_matrix, rows, cols, values.data(), cols);
  }
};

// serial_gemm of a bf16 product (kernel.flush_denormals): the blocked loops round the factors as they
// pack them (on AVX512-BF16 into bf16 panels, else in float32 panels); the small-product kernel
// takes rounded copies. Both run with FTZ and DAZ: the same bits either way (ops/gemm_bf16.hpp).
void serial_bf16_gemm(const GemmKernel& kernel, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                      const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  if (in_blocked_loops(kernel, trans_b, M * N * K)) {
    blocked_gemm(kernel, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    return;
  }
  if (kernel.factors_bf16) {
    const FlushDenormals flushed;
    small_gemm_kernels_for_cpu().of<float>().gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    return;
  }
  const RoundedToBf16 a(A, trans_a ? K : M, trans_a ? M : K, lda);
  const RoundedToBf16 b(B, trans_b ? N : K, trans_b ? K : N, ldb);
  const FlushDenormals flushed;
  small_gemm_kernels_for_cpu().of<float>().gemm(trans_a, trans_b, M, N, K, a.values.data(), a.ld, b.values.data(), b.ld,
                                                C, ldc, accumulate);
}

// C[M, N] (+)= op(A)·op(B) on one thread, on the kernel that `kernel` gives this product's size.
// lda/ldb/ldc are the row strides of the stored matrices.
template <typename T>
void serial_gemm(const GemmKernel& kernel, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A,
                 int64_t lda, const T* B, int64_t ldb, T* C, int64_t ldc, bool accumulate) {
  if constexpr (std::is_same_v<T, float>)
    if (kernel.flush_denormals) {
      serial_bf16_gemm(kernel, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
      return;
    }
  const int64_t work = M * N * K;
  if (in_blocked_loops(kernel, trans_b, work)) {
    // The micro-kernel does the arithmetic, inside our blocked loops and packing
    // (ops/gemm_blocked.cpp). One serial call per tile computes the same sums for the same sizes,
    // whatever the thread count.
    blocked_gemm(kernel, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    return;
  }
  if (kernel.small_on_vector_kernel) {
    small_gemm_kernels_for_cpu().of<T>().gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    return;
  }
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::OuterStride<>;
  Eigen::Map<Matrix, 0, Stride> c(C, M, N, Stride(ldc));
  const Eigen::Map<const Matrix, 0, Stride> a(A, trans_a ? K : M, trans_a ? M : K, Stride(lda));
  const Eigen::Map<const Matrix, 0, Stride> b(B, trans_b ? N : K, trans_b ? K : N, Stride(ldb));
  auto run = [&](const auto& op_a, const auto& op_b) {
    if (accumulate) c.noalias() += op_a * op_b;
    else c.noalias() = op_a * op_b;
  };
  if (trans_a) {
    if (trans_b) run(a.transpose(), b.transpose());
    else run(a.transpose(), b);
  } else {
    if (trans_b) run(a, b.transpose());
    else run(a, b);
  }
}

// A batch shorter than this has its large matrices split into tiles as well (gemm's tiling of one
// product): with a few big matrices, whole-matrix pieces would leave a thread idle for a large
// share of the time; from this many on, the batch itself balances the threads well enough.
constexpr int64_t kTiledBelowBatch = 2 * kMaxTiles;
// Consecutive small matrices are grouped into chunks of about this many multiply-adds (the work
// below which a product is not split): a chunk handed to another thread must outweigh the hand-off.
constexpr int64_t kFlopsPerChunk = kParallelFlops;

}  // namespace

template <typename T>
void batched_gemm(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K, const T* A,
                  int64_t stride_a, const T* B, int64_t stride_b, T* C, int64_t stride_c, bool accumulate) {
  if (batch <= 0 || M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < batch; ++i) std::fill(C + i * stride_c, C + i * stride_c + M * N, T(0));
    return;
  }
  const GemmKernel& kernel = product_kernel<T>();  // may throw tg::Error (a bad TG_GEMM_KERNEL): before any work
  const int64_t lda = trans_a ? M : K, ldb = trans_b ? K : N;
  // The pieces are a function of batch, M, N and K only, never of the thread count: each element
  // of C is computed by one serial call with the whole K, so results are bitwise identical at any
  // thread count. Within a matrix, rows first (a row tile of C needs only its rows of op(A));
  // columns when M is too short.
  const int64_t work = M * N * K;
  const int64_t tiles = batch >= kTiledBelowBatch || work < kParallelFlops
                            ? 1
                            : std::clamp<int64_t>(work / kFlopsPerTile, 1, kMaxTiles);
  // A few large products on the blocked loops, each large enough to split: one after the other,
  // each split by the loops themselves (ops/gemm_blocked.cpp), which pack the operand the threads
  // share once and keep the micro-tile grid and K blocks of a serial run, so the bits are the
  // serial kernel's at any thread count.
  if (tiles > 1 && in_blocked_loops(kernel, trans_b, work)) {
    for (int64_t i = 0; i < batch; ++i)
      parallel_blocked_gemm(kernel, trans_a, trans_b, M, N, K, A + i * stride_a, lda, B + i * stride_b, ldb,
                            C + i * stride_c, N, accumulate);
    return;
  }
  const int64_t row_tiles = std::clamp<int64_t>(M / kMinTileSize, 1, tiles);
  const int64_t col_tiles = std::clamp<int64_t>(N / kMinTileSize, 1, ceil_div(tiles, row_tiles));
  const int64_t rows_per_tile = ceil_div(M, row_tiles), cols_per_tile = ceil_div(N, col_tiles);
  const int64_t row_count = ceil_div(M, rows_per_tile), col_count = ceil_div(N, cols_per_tile);
  const int64_t tiles_per_matrix = row_count * col_count;
  // Pieces: (matrix, tile) in order; consecutive small matrices run together in one chunk.
  const int64_t pieces = batch * tiles_per_matrix;
  const int64_t piece_work = ceil_div(work, tiles_per_matrix);
  const int64_t grain = std::clamp<int64_t>(kFlopsPerChunk / piece_work, 1, pieces);
  parallel_for(pieces, grain, [&](int64_t begin, int64_t end) {
    for (int64_t piece = begin; piece < end; ++piece) {
      const int64_t i = piece / tiles_per_matrix, tile = piece % tiles_per_matrix;
      const int64_t m0 = tile / col_count * rows_per_tile, n0 = tile % col_count * cols_per_tile;
      const int64_t m1 = std::min(M, m0 + rows_per_tile), n1 = std::min(N, n0 + cols_per_tile);
      // op(A) rows m0..m1: rows of A, or columns of a transposed A; likewise op(B) columns n0..n1.
      const T* a_matrix = A + i * stride_a;
      const T* b_matrix = B + i * stride_b;
      const T* a_tile = trans_a ? a_matrix + m0 : a_matrix + m0 * lda;
      const T* b_tile = trans_b ? b_matrix + n0 * ldb : b_matrix + n0;
      serial_gemm<T>(kernel, trans_a, trans_b, m1 - m0, n1 - n0, K, a_tile, lda, b_tile, ldb,
                     C + i * stride_c + m0 * N + n0, N, accumulate);
    }
  });
}

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C, bool accumulate) {
  batched_gemm<T>(trans_a, trans_b, 1, M, N, K, A, 0, B, 0, C, 0, accumulate);
}

template <typename T>
void gemm_on_calling_thread(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda,
                            const T* B, int64_t ldb, T* C, int64_t ldc, bool accumulate) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, T(0));
    return;
  }
  serial_gemm<T>(product_kernel<T>(), trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, const float*, const float*, float*, bool);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, const double*, const double*, double*, bool);
template void gemm_on_calling_thread<float>(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t,
                                            const float*, int64_t, float*, int64_t, bool);
template void gemm_on_calling_thread<double>(bool, bool, int64_t, int64_t, int64_t, const double*, int64_t,
                                             const double*, int64_t, double*, int64_t, bool);
template void batched_gemm<float>(bool, bool, int64_t, int64_t, int64_t, int64_t, const float*, int64_t, const float*,
                                  int64_t, float*, int64_t, bool);
template void batched_gemm<double>(bool, bool, int64_t, int64_t, int64_t, int64_t, const double*, int64_t,
                                   const double*, int64_t, double*, int64_t, bool);

}  // namespace tg::detail
