// mse_loss, l1_loss, smooth_l1_loss, huber_loss: losses of the elementwise difference
// d = input − target, each a shape of the loss (its value at d and its slope) run through the
// shared elementwise forward and backward (elementwise_loss.hpp).
#include <cmath>

#include "elementwise_loss.hpp"
#include "out_of_memory.hpp"

namespace tg::nn {

namespace {

// Torch's sign: 0 at 0.
double sign(double d) { return static_cast<double>((d > 0.0) - (d < 0.0)); }

struct SquaredError {
  double value(double d) const { return d * d; }
  double slope(double d) const { return 2.0 * d; }
};

struct AbsoluteError {
  double value(double d) const { return std::fabs(d); }
  double slope(double d) const { return sign(d); }
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

// The elementwise rule of a difference loss: shape(d) with d = input − target, so
// d/dinput = slope(d) and d/dtarget = −slope(d), taken as slope(target − input) like PyTorch
// (the two differ only at d = 0 for smooth_l1 with beta = 0, where both slopes are −1).
template <typename Shape>
struct DifferenceOf {
  template <typename T>
  struct Rule {
    detail::ElementOperands<T> in;
    Shape shape;
    double input(int64_t i) const { return static_cast<double>(in.input[i]); }
    double target(int64_t i) const { return static_cast<double>(in.target[i]); }
    double value(int64_t i) const { return shape.value(input(i) - target(i)); }
    double dinput(int64_t i) const { return shape.slope(input(i) - target(i)); }
    double dtarget(int64_t i) const { return shape.slope(target(i) - input(i)); }
  };
};

template <typename Shape>
Tensor difference_loss(const char* op, const char* node, const Tensor& input, const Tensor& target,
                       Reduction reduction, const Shape& shape) {
  detail::check_floating(op, "input", input);
  check(target.defined(), op, "undefined target");
  detail::check_same_dtype(op, "target", input, target);
  detail::check_same_shape(op, input, target);
  return detail::elementwise_loss<DifferenceOf<Shape>::template Rule>(op, node, {input, target, {}, {}}, reduction,
                                                                      shape);
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) try {
  return difference_loss("mse_loss", "MseLossBackward", input, target, reduction, SquaredError{});
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("mse_loss");
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) try {
  return difference_loss("l1_loss", "L1LossBackward", input, target, reduction, AbsoluteError{});
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("l1_loss");
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) try {
  check(beta >= 0.0, "smooth_l1_loss", "beta must be non-negative, got ", beta);
  return difference_loss("smooth_l1_loss", "SmoothL1LossBackward", input, target, reduction, SmoothL1{beta});
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("smooth_l1_loss");
}

Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta) try {
  check(delta > 0.0, "huber_loss", "delta must be positive, got ", delta);
  return difference_loss("huber_loss", "HuberLossBackward", input, target, reduction, Huber{delta});
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("huber_loss");
}

}  // namespace tg::nn
