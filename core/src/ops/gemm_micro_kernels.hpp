// tapegrad's GEMM micro-kernel, compiled once per vector level (gemm_micro_kernels.cpp,
// cpu/vector_isa.hpp): the kernel under every large product at v3 and avx512
// (ops/gemm_blocked.cpp), in the batch-reduce form C += Σᵢ Aᵢ·Bᵢ over operand pairs, for a caller
// with several pairs per tile of C (the blocked loops pass one). Private to core.
#pragma once

#include <cstdint>

#include "cpu/vector_isa.hpp"

namespace tg::detail {

template <typename T>
struct GemmMicroKernels {
  // The tile of C the kernel keeps in registers: mr rows × nr columns.
  int64_t mr, nr;
  // The blocked loops' block sizes for this tile (ops/gemm_blocked.cpp): kc deep, so that one
  // packed B panel (kc × nr) stays in L1 while the A panels stream past it; mc rows of A (mc × kc
  // in L2); nc columns of B. Results never depend on them (below).
  int64_t kc, mc, nc;
  // C[mr, nr] = (load_c ? C : 0) + Σ_{i < count} Σ_{p < depth} A_i[r, p] · B_i[p, j], with
  // A_i[r, p] = a[i][r·a_row_step + p·a_col_step] (a packed panel of mr rows: a_row_step = 1,
  // a_col_step = mr; a matrix read in place: its strides) and B_i[p, j] = b[i][p·b_step + j] (a
  // packed panel: b_step = nr; a row-major matrix read in place: its row stride); C has row
  // stride ldc. Each C[r, j] is one chain of multiply-adds in the order i, then p, starting from
  // C or zero: fused on the levels with FMA (v3, avx512), a rounded product then a rounded sum on
  // v2. A product split into K blocks, each continuing from the C the last one stored, therefore
  // gets the bits of one unsplit chain: the bits depend on K's order only, not on the blocks, the
  // tile or the vector width — the same at v3 and avx512, and the same as the small-product kernel
  // (ops/small_gemm_kernels.hpp), which sums in that order too.
  void (*tile)(int64_t count, const T* const* a, int64_t a_row_step, int64_t a_col_step, const T* const* b,
               int64_t b_step, int64_t depth, T* c, int64_t ldc, bool load_c);
};

TG_DECLARE_ISA_KERNELS(DtypeKernels<GemmMicroKernels>, gemm_micro_kernels)

}  // namespace tg::detail
