// Row conversions between float32 and bfloat16, compiled once per vector level
// (bfloat16_kernels.cpp, cpu/vector_isa.hpp): Tensor::to, the bfloat16 route of every op
// (bfloat16_compute.hpp) and the bfloat16 GEMM's packing call them. Private to the library.
//
// Contract, for any n >= 0 and any values (NaN, ±inf, denormals included):
//   to_bfloat16(in, out, n):  out[i] = BFloat16(in[i]) for i < n: round to nearest, ties to even,
//                             every NaN to the quiet NaN 0x7FC0, denormals kept and rounded like
//                             any value (no flush to zero), overflow past the largest finite
//                             value to ±inf; PyTorch's round_to_nearest_even, bit for bit.
//   to_float(in, out, n):     out[i] = float(in[i]), exact (the bits shifted up by 16).
// The same bits at every vector level (integer operations only; no FTZ/DAZ, unlike the hardware
// conversions vcvtneps2bf16 and AMX, which flush denormals). Serial over one row: callers split
// large tensors into fixed chunks. `in` and `out` do not overlap.
#pragma once

#include <cstdint>

#include "cpu/vector_isa.hpp"
#include "tapegrad/bfloat16.hpp"

namespace tg::detail {

struct BFloat16Kernels {
  void (*to_bfloat16)(const float* in, BFloat16* out, int64_t n);  // in: [n] -> out: [n]
  void (*to_float)(const BFloat16* in, float* out, int64_t n);      // in: [n] -> out: [n]
};

TG_DECLARE_ISA_KERNELS(BFloat16Kernels, bfloat16_kernels)

// The chosen level's conversions (the contract above).
inline void float_to_bfloat16(const float* in, BFloat16* out, int64_t n) {
  bfloat16_kernels_for_cpu().to_bfloat16(in, out, n);
}
inline void bfloat16_to_float(const BFloat16* in, float* out, int64_t n) {
  bfloat16_kernels_for_cpu().to_float(in, out, n);
}

}  // namespace tg::detail
