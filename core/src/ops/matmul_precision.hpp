// The precision of float32 products in force (tapegrad/matmul_precision.hpp), for the GEMM entry
// points (ops/gemm.cpp). Private to core.
#pragma once

namespace tg::detail {

enum class MatmulPrecision { highest, high, medium };

// Read by every float32 product when it runs (one relaxed atomic load).
MatmulPrecision float32_matmul_precision();

// The products of bfloat16 tensors: their operands widened to float32 (bfloat16_compute.hpp) and
// multiplied at "medium" whatever the setting, so on the bf16 kernels. The rounding of a factor is
// then exact (it is a bf16 value already; a denormal is flushed, as vdpbf16ps does), and the
// product is the bf16 GEMM's: exact products summed in float32. This thread's flag; a node
// recorded under it runs its backward under it (autograd/engine.cpp), and parallel loops carry it
// to their workers (parallel.cpp).
bool bf16_products_forced();
class ForceBf16Products {
 public:
  explicit ForceBf16Products(bool force = true);
  ~ForceBf16Products();
  ForceBf16Products(const ForceBf16Products&) = delete;
  ForceBf16Products& operator=(const ForceBf16Products&) = delete;

 private:
  bool before_;
};

// Whether float32 products multiply bf16-rounded factors: "medium", or products of bfloat16
// tensors. ("high" is bf16x3 or float32, whichever the CPU runs faster; without AMX kernels that
// is float32 on every CPU.)
inline bool float32_products_in_bf16() {
  return bf16_products_forced() || float32_matmul_precision() == MatmulPrecision::medium;
}

}  // namespace tg::detail
