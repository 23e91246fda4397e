// The kernels of the losses of a difference d = input − target (mse_loss, l1_loss, smooth_l1_loss,
// huber_loss), compiled once per vector level (difference_loss_kernels.cpp, cpu/vector_isa.hpp);
// regression_losses.cpp calls the chosen level's. Private to nn.
#pragma once

#include <cmath>
#include <cstdint>

#include "cpu/vector_isa.hpp"

namespace tg::detail {

// Which loss of d, and its parameter (smooth_l1's beta, huber's delta; unused by the others).
struct DifferenceShape {
  enum Kind { squared, absolute, smooth_l1, huber } kind;
  double parameter = 0.0;
};

// The shapes, each a value and a slope of d, in double.
struct SquaredError {
  double value(double d) const { return d * d; }
  double slope(double d) const { return 2.0 * d; }
};

struct AbsoluteError {
  double value(double d) const { return std::fabs(d); }
  // Torch's sign: 0 at 0.
  double slope(double d) const { return static_cast<double>((d > 0.0) - (d < 0.0)); }
};

// Quadratic inside |d| < beta, scaled so that the two pieces meet with slope ±1; beta = 0 is |d|.
struct SmoothL1 {
  double beta;
  double value(double d) const { return std::fabs(d) < beta ? 0.5 * d * d / beta : std::fabs(d) - 0.5 * beta; }
  // ±1 from |d| = beta on (so −1 at d = 0 when beta = 0), as PyTorch's kernel
  double slope(double d) const { return d <= -beta ? -1.0 : d >= beta ? 1.0 : d / beta; }
};

// Quadratic inside |d| < delta, linear with slope ±delta outside.
struct Huber {
  double delta;
  double value(double d) const { return std::fabs(d) < delta ? 0.5 * d * d : delta * (std::fabs(d) - 0.5 * delta); }
  double slope(double d) const { return d <= -delta ? -delta : d >= delta ? delta : d; }
};

// Serial kernels over [n] elements; the callers split large tensors into chunks.
template <typename T>
struct DifferenceLossKernels {
  // input, target: [n] -> Σ_i shape.value(input[i] − target[i]) in double, the terms added as
  // tg::detail::lane_sum adds them (so the order depends on n only).
  double (*sum)(DifferenceShape shape, const T* input, const T* target, int64_t n);
  // input, target: [n] -> out: [n], out[i] = shape.value(input[i] − target[i]).
  void (*values)(DifferenceShape shape, const T* input, const T* target, T* out, int64_t n);
  // input, target: [n]; grad: [n] the gradient reaching each term, or null when every term gets
  // grad_scalar -> dinput[i] = grad_i · slope(input[i] − target[i]) and
  // dtarget[i] = grad_i · slope(target[i] − input[i]) (PyTorch's form; they differ from −dinput
  // only at d = 0 for smooth_l1 with beta = 0). A null output is not computed.
  void (*backward)(DifferenceShape shape, const T* input, const T* target, const T* grad, double grad_scalar,
                   T* dinput, T* dtarget, int64_t n);
};

TG_DECLARE_ISA_KERNELS(DtypeKernels<DifferenceLossKernels>, difference_loss_kernels)

}  // namespace tg::detail
