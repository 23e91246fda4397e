// float32 GELU's kernels, compiled once per vector level (gelu_kernels.cpp, cpu/vector_isa.hpp);
// Tensor::gelu (unary_math.cpp) calls the chosen level's. Private to core.
#pragma once

#include <cstdint>

#include "cpu/vector_isa.hpp"

namespace tg::detail {

// GELU's two forms, PyTorch's `approximate` = "none" (exact, with erf) and "tanh".
enum class GeluApproximation { none, tanh };

struct GeluKernels {
  // x: [n] -> y: [n], y = gelu(x); unless derivative is null, also derivative: [n] = gelu'(x),
  // from the exponential and erfc it shares with gelu(x): what backward needs, at a fraction of
  // recomputing it there.
  void (*forward)(const float* x, float* y, float* derivative, int64_t n, GeluApproximation approximation);
  // grad, derivative: [n] -> grad_input: [n] = grad · derivative, backward's product at the
  // level's vector width.
  void (*backward)(const float* grad, const float* derivative, float* grad_input, int64_t n);
};

TG_DECLARE_ISA_KERNELS(GeluKernels, gelu_kernels)

}  // namespace tg::detail
