// Adam's and AdamW's fused update, compiled once per vector level (adam_kernels.cpp,
// cpu/vector_isa.hpp); adam.cpp calls the chosen level's. Private to optim.
#pragma once

#include <cstdint>

#include "cpu/vector_isa.hpp"

namespace tg::detail {

// The scalars of one step as T. Each is computed in double, then rounded once, as PyTorch computes
// them in Python and its kernels round a Scalar to the tensor's dtype.
template <typename T>
struct AdamCoefficients {
  T grad_sign;  // -1 to maximize: -g is exactly -1 * g
  T beta1, one_minus_beta1;
  T beta2, one_minus_beta2;
  T weight_decay;           // Adam's L2 penalty (used only when l2: 0 * p is NaN for an infinite p)
  T decay_factor;           // AdamW's 1 - lr * weight_decay; 1 for Adam (p * 1 is p, even inf or NaN)
  T bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  T eps;
  T neg_step_size;          // -lr / (1 - beta1^t)
};

template <typename T>
struct AdamKernels {
  // One step of one parameter, in place. param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq: [numel],
  // distinct buffers; max_exp_avg_sq is read and written only when amsgrad (else may be null).
  // l2: Adam's weight decay folded into the gradient.
  void (*update)(int64_t numel, T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq,
                 const AdamCoefficients<T>& coefficients, bool l2, bool amsgrad);
};

TG_DECLARE_ISA_KERNELS(DtypeKernels<AdamKernels>, adam_kernels)

}  // namespace tg::detail
