// The large-product GEMM: GotoBLAS's blocked loops and our own packing around one micro-kernel,
// tapegrad's own or BLIS's (ops/gemm_blocked.cpp). Private to core.
#pragma once

#include <cstdint>

#include "cpu/gemm_kernel.hpp"

namespace tg::detail {

// C[M, N] (+)= op(A)[M, K] · op(B)[K, N] on the calling thread, with ops/gemm.hpp's conventions
// (row-major; lda, ldb, ldc the stored matrices' row strides; `accumulate` adds to C). The
// arithmetic is `kernel`'s micro-kernel (kernel.blis's, or tapegrad's own of the CPU's vector
// level), the block sizes that kernel's table: nothing here is tuned to a CPU. On tapegrad's
// kernel each C[i, j] is one chain of multiply-adds over k = 0..K−1 starting from C (accumulating)
// or zero, whatever the blocks (ops/gemm_micro_kernels.hpp); on BLIS's, a sum over k in blocks of
// its KC. Either way the bits depend on the kernel and the sizes only.
template <typename T>
void blocked_gemm(const GemmKernel& kernel, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A,
                  int64_t lda, const T* B, int64_t ldb, T* C, int64_t ldc, bool accumulate);

// The same product on the threads of the current oneTBB arena: the operand the threads share is
// packed once, ahead, and the other dimension is split into pieces that run in parallel. The
// pieces keep the serial call's micro-tile grid and K blocks, so the bits are blocked_gemm's, at
// any thread count.
template <typename T>
void parallel_blocked_gemm(const GemmKernel& kernel, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                           const T* A, int64_t lda, const T* B, int64_t ldb, T* C, int64_t ldc, bool accumulate);

}  // namespace tg::detail
