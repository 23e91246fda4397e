// BatchNorm's channel kernels, compiled once per vector level (batch_norm_kernels.cpp,
// cpu/vector_isa.hpp); batch_norm.cpp calls the chosen level's table. Private to nn/.
#pragma once

#include <cstdint>

#include "cpu/vector_isa.hpp"

namespace tg::detail {

// The input viewed as [N, C, S]: N the batch, C the channels (dim 1), S the product of the
// spatial dims (1 for [N, C]). A channel is N rows of S contiguous elements, C·S apart.
struct BatchNormShape {
  int64_t N = 0, C = 0, S = 1;
};

template <typename T>
struct BatchNormKernels {
  // x: [N, C, S]; gamma, beta: [C] or null (ones, zeros) -> mean, var: [C] the batch's mean and
  // biased variance, and y: [N, C, S] = (x − mean)·rstd·γ + β, rstd = 1/√(var + eps).
  void (*train_forward)(const T* x, const T* gamma, const T* beta, T* y, double* mean, double* var,
                        BatchNormShape shape, double eps);
  // x: [N, C, S]; scale, shift: [C] -> y: [N, C, S] = x·scale + shift (eval mode's affine map).
  void (*affine_forward)(const T* x, const T* scale, const T* shift, T* y, BatchNormShape shape);
  // dy, x: [N, C, S]; gamma: [C] or null; mean, rstd: [C] the statistics forward normalised with ->
  // dx (or null), dgamma, dbeta: [C] (or null). batch_stats: mean and rstd are the batch's own (training),
  // so dx has the terms through them; else they are constants (eval) and dx = dy·γ·rstd.
  void (*backward)(const T* dy, const T* x, const T* gamma, const double* mean, const double* rstd, T* dx,
                   T* dgamma, T* dbeta, BatchNormShape shape, bool batch_stats);
};

TG_DECLARE_ISA_KERNELS(DtypeKernels<BatchNormKernels>, batch_norm_kernels)

}  // namespace tg::detail
