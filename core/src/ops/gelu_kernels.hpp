// float32 GELU's kernels, compiled once per vector level (gelu_kernels.cpp, cpu/vector_isa.hpp);
// Tensor::gelu (unary_math.cpp) calls the chosen level's. Private to core.
#pragma once

#include <cstdint>

#include "cpu/vector_isa.hpp"

namespace tg::detail {

// GELU's two forms, PyTorch's `approximate` = "none" (exact, with erf) and "tanh".
enum class GeluApproximation { none, tanh };

struct GeluKernels {
  // x: [n] -> y: [n], y = gelu(x).
  void (*forward)(const float* x, float* y, int64_t n, GeluApproximation approximation);
  // x: [n] -> y: [n], derivative: [n], y = gelu(x) and derivative = gelu'(x), from the one
  // exponential and erfc they share: what backward needs, at a fraction of recomputing it there.
  void (*forward_and_derivative)(const float* x, float* y, float* derivative, int64_t n,
                                 GeluApproximation approximation);
};

TG_DECLARE_ISA_KERNELS(GeluKernels, gelu_kernels)

}  // namespace tg::detail
