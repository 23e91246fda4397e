// The precision of float32 products in force (tapegrad/matmul_precision.hpp), for the GEMM entry
// points (ops/gemm.cpp). Private to core.
#pragma once

namespace tg::detail {

enum class MatmulPrecision { highest, high, medium };

// Read by every float32 product when it runs (one relaxed atomic load).
MatmulPrecision float32_matmul_precision();

// Whether float32 products multiply bf16-rounded factors: "medium". ("high" is bf16x3 or float32,
// whichever the CPU runs faster; without AMX kernels that is float32 on every CPU.)
inline bool float32_products_in_bf16() { return float32_matmul_precision() == MatmulPrecision::medium; }

}  // namespace tg::detail
