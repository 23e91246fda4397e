// The GEMM kernel of small products (below the blocked loops' break-even, cpu/gemm_kernel.cpp),
// compiled once per vector level
// (small_gemm_kernels.cpp, cpu/vector_isa.hpp); ops/gemm.cpp calls the chosen level's. Private to
// core.
#pragma once

#include <cstdint>

#include "cpu/vector_isa.hpp"

namespace tg::detail {

template <typename T>
struct SmallGemmKernels {
  // C[M, N] (+)= op(A)[M, K] · op(B)[K, N] on the calling thread, with ops/gemm.hpp's conventions
  // (row-major; lda, ldb, ldc the stored matrices' row strides). Each C[i, j] is one chain over k
  // in order 0..K−1 starting from C when accumulating, else from zero, each step a fused
  // multiply-add on the levels with FMA (v3, avx512) and a rounded product then a rounded sum on
  // v2: the bits of the plain triple loop written that way (the same at v3 and avx512; v2's differ
  // in the last bits), and those of the micro-kernel (ops/gemm_micro_kernels.hpp).
  void (*gemm)(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
               int64_t ldb, T* C, int64_t ldc, bool accumulate);
};

TG_DECLARE_ISA_KERNELS(DtypeKernels<SmallGemmKernels>, small_gemm_kernels)

}  // namespace tg::detail
