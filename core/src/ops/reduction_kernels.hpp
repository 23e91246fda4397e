// The reduction kernel, compiled once per vector level (reduction_kernels.cpp,
// cpu/vector_isa.hpp); reduce_sum (reduction.hpp) calls the chosen level's. Private to core.
#pragma once

#include <cstdint>

#include "cpu/vector_isa.hpp"

namespace tg::detail {

template <typename T>
struct ReductionKernels {
  // in: [A, R, B] contiguous -> out: [A, B], out[a, b] = scale · Σ_r in[a, r, b], in double.
  void (*sum)(const T* in, T* out, int64_t A, int64_t R, int64_t B, double scale);
};

TG_DECLARE_ISA_KERNELS(DtypeKernels<ReductionKernels>, reduction_kernels)

}  // namespace tg::detail
