// The large-product GEMM: GotoBLAS's blocked loops and our own packing around the micro-kernel of
// a BLIS context (ops/gemm_blocked.cpp). Private to core; only with BLIS.
#pragma once

#ifdef TG_HAVE_BLIS
#include <blis.h>

#include <cstdint>

namespace tg::detail {

// C[M, N] (+)= op(A)[M, K] · op(B)[K, N] on the calling thread, with ops/gemm.hpp's conventions
// (row-major; lda, ldb, ldc the stored matrices' row strides; `accumulate` adds to C). The
// arithmetic is the micro-kernel of `context`, the block sizes (MR, NR, KC, MC, NC) are that
// context's table: nothing here is tuned to a CPU. Each C[i, j] is the micro-kernel's sum over k in
// blocks of KC, so the bits depend on the context and the sizes only.
template <typename T>
void blocked_gemm(cntx_t* context, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A,
                  int64_t lda, const T* B, int64_t ldb, T* C, int64_t ldc, bool accumulate);

// The same product on the threads of the current oneTBB arena: the operand the threads share is
// packed once, ahead, and the other dimension is split into pieces that run in parallel. The
// pieces keep the serial call's micro-tile grid and K blocks, so the bits are blocked_gemm's, at
// any thread count.
template <typename T>
void parallel_blocked_gemm(cntx_t* context, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A,
                           int64_t lda, const T* B, int64_t ldb, T* C, int64_t ldc, bool accumulate);

}  // namespace tg::detail
#endif
