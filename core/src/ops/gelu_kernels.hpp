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
  // grad_output, x: [n] -> grad_input: [n], grad_input = grad_output · gelu'(x).
  void (*backward)(const float* grad_output, const float* x, float* grad_input, int64_t n,
                   GeluApproximation approximation);
};

TG_DECLARE_ISA_KERNELS(GeluKernels, gelu_kernels)

}  // namespace tg::detail
