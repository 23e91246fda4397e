// float32 kernels of the activations whose formulas need e^x (SiLU, ELU, Softplus, Mish), compiled
// once per vector level (activation_kernels.cpp, cpu/vector_isa.hpp); activation.cpp calls the
// chosen level's table. Private to nn/.
#pragma once

#include <cstdint>

#include "cpu/vector_isa.hpp"

namespace tg::detail {

// An activation's options in float, as the float formulas round them (activation.cpp): ELU's α,
// Softplus's β and threshold; the others take none.
struct ActivationOptions {
  float alpha = 1, beta = 1, threshold = 20;
};

// One activation f, elementwise over contiguous arrays, parallel over fixed chunks.
struct PointwiseActivationKernels {
  // x: [n] -> y: [n] = f(x).
  void (*forward)(const float* x, float* y, int64_t n, const ActivationOptions& options);
  // g, x: [n] -> dx: [n] = g · f'(x).
  void (*backward)(const float* g, const float* x, float* dx, int64_t n, const ActivationOptions& options);
};

struct ActivationKernels {
  PointwiseActivationKernels silu, elu, softplus, mish;
};

TG_DECLARE_ISA_KERNELS(ActivationKernels, activation_kernels)

}  // namespace tg::detail
