// The precision of float32 products in force (tapegrad/matmul_precision.hpp), for the GEMM entry
// points (ops/gemm.cpp). Private to core.
#pragma once

#include <cstdint>

namespace tg::detail {

enum class MatmulPrecision { highest, high, medium };

// Read by every float32 product when it runs (one relaxed atomic load).
MatmulPrecision float32_matmul_precision();

// The products of bfloat16 tensors: their operands widened to float32 (bfloat16_compute.hpp) and
// multiplied at "medium" whatever the setting, so on the bf16 kernels: exact products summed in
// float32, the bf16 GEMM. `factors_exact` when every factor of every product, forward and backward,
// is a widened bf16 value (matmul, bmm, Linear, convolution): the emulated kernel then skips the
// rounding, which would change nothing but flush denormals, as its DAZ does anyway (the same bits).
// `round_factors` when an op multiplies float32 intermediates too (attention's probabilities).
// This thread's mode; a node recorded under it runs its backward under it (autograd/engine.cpp),
// and parallel loops carry it to their workers (parallel.cpp).
enum class Bf16Products : uint8_t { off, round_factors, factors_exact };
Bf16Products forced_bf16_products();
class ForceBf16Products {
 public:
  explicit ForceBf16Products(Bf16Products mode);
  ~ForceBf16Products();
  ForceBf16Products(const ForceBf16Products&) = delete;
  ForceBf16Products& operator=(const ForceBf16Products&) = delete;

 private:
  Bf16Products before_;
};

// Whether float32 products multiply bf16-rounded factors: "medium", or products of bfloat16
// tensors. ("high" is bf16x3 or float32, whichever the CPU runs faster; without AMX kernels that
// is float32 on every CPU.)
inline bool float32_products_in_bf16() {
  return forced_bf16_products() != Bf16Products::off || float32_matmul_precision() == MatmulPrecision::medium;
}

}  // namespace tg::detail
