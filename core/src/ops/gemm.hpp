// Row-major GEMM: a large product on BLIS's micro-kernel, split across the threads inside the blocked
// loops (ops/gemm_blocked.hpp); the rest on a serial kernel (a per-level kernel or Eigen) on a few
// large tiles of the result, in parallel with oneTBB; and the batched form, parallel over the
// matrices of the batch.
#pragma once

#include <cstdint>

namespace tg::detail {

// C[M, N] (+)= op(A)[M, K] · op(B)[K, N], all row-major and contiguous.
// op(A) = A stored [M, K], or Aᵀ of A stored [K, M] when trans_a (likewise B: [K, N] or [N, K]).
// With `accumulate` the product is added to C, otherwise C is overwritten.
// Each element's sum over k is fixed by M, N and K alone (the kernel's K blocks, its micro-tile grid
// or the tiles), so results do not depend on threads.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C, bool accumulate);

// For i in 0..batch−1: C_i[M, N] (+)= op(A_i)[M, K] · op(B_i)[K, N], with A_i = A + i·stride_a,
// B_i = B + i·stride_b, C_i = C + i·stride_c, each matrix stored as for gemm. A stride of 0 shares
// one matrix across the batch (a broadcast operand); stride_c must keep the C_i disjoint
// (stride_c ≥ M·N). The batch, and each matrix when the batch is too short to keep the threads
// busy, is split into pieces by the sizes only (batch, M, N, K); each piece is one serial call of
// the kernel its size selects, with the whole K, so results are bitwise identical at any thread
// count. gemm is the batch of one.
// C[M, N] (+)= op(A)[M, K] · op(B)[K, N] on the calling thread, for a caller that runs its own
// parallel loop over many such products (convolution's tiles): the kernel gemm uses for one tile of
// this size (BLIS's packed kernel for large products, the per-level small kernel or Eigen for the
// rest). lda, ldb, ldc are the stored matrices' row strides, so A, B and C may be blocks of larger
// matrices. The bits depend on the sizes only.
template <typename T>
void gemm_on_calling_thread(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda,
                            const T* B, int64_t ldb, T* C, int64_t ldc, bool accumulate);

template <typename T>
void batched_gemm(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K, const T* A,
                  int64_t stride_a, const T* B, int64_t stride_b, T* C, int64_t stride_c, bool accumulate);

}  // namespace tg::detail
