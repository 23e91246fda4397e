// Row-major GEMM: a serial kernel (BLIS for large products, a per-level kernel or Eigen for the rest) on a few large tiles of the
// result, in parallel with oneTBB.
#pragma once

#include <cstdint>

namespace tg::detail {

// C[M, N] (+)= op(A)[M, K] · op(B)[K, N], all row-major and contiguous.
// op(A) = A stored [M, K], or Aᵀ of A stored [K, M] when trans_a (likewise B: [K, N] or [N, K]).
// With `accumulate` the product is added to C, otherwise C is overwritten.
// The split into tiles depends only on M, N and K, so results do not depend on threads.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C, bool accumulate);

}  // namespace tg::detail
