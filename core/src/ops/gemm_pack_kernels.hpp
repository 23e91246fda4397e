// The packing of the large-product GEMM's operands into BLIS's micro-panel layout, compiled once
// per vector level (gemm_pack_kernels.cpp, cpu/vector_isa.hpp); ops/gemm_blocked.cpp calls the
// chosen level's. Private to core.
#pragma once

#include <cstdint>

#include "cpu/vector_isa.hpp"

namespace tg::detail {

template <typename T>
struct GemmPackKernels {
  // Packs rows [0, rows), columns [0, depth) of the strided matrix `source` (element (i, p) at
  // source[i·row_step + p·col_step]) into micro-panels of `panel_rows` rows: panel q holds rows
  // q·panel_rows.., element (r, p) at packed[q·panel_step + p·pack_rows + r]. The rows beyond
  // `rows` in the last panel (up to pack_rows) are zero, so the micro-kernel may run on full panels.
  // A copy: the same bits at every level.
  void (*pack_panels)(const T* source, int64_t row_step, int64_t col_step, int64_t rows, int64_t depth,
                      int64_t panel_rows, int64_t pack_rows, int64_t panel_step, T* packed);
};

TG_DECLARE_ISA_KERNELS(DtypeKernels<GemmPackKernels>, gemm_pack_kernels)

}  // namespace tg::detail
