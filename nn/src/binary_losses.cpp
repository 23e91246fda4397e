// binary_cross_entropy and binary_cross_entropy_with_logits: elementwise rules run through the
// shared forward and backward (elementwise_loss.hpp), with PyTorch 1.13's formulas
// (aten/src/ATen/native/Loss.cpp).
#include <algorithm>
#include <cmath>

#include "autocast_policy.hpp"
#include "elementwise_loss.hpp"
#include "ops/elementwise.hpp"
#include "out_of_memory.hpp"

namespace tg::nn {

namespace {

// PyTorch clamps each log at −100, so that an input of exactly 0 or 1 gives a finite loss.
double clamped_log(double x) { return std::max(std::log(x), -100.0); }

struct NoParams {};

// The recorded slopes times the weight, when there is one (a constant).
detail::ElementSlopes weighted(detail::ElementSlopes slopes, const Tensor& weight) {
  if (weight.defined()) slopes.dinput = slopes.dinput * weight, slopes.dtarget = slopes.dtarget * weight;
  return slopes;
}

// −w·(t·log x + (1 − t)·log(1 − x)); x in [0, 1].
template <typename T>
struct BinaryCrossEntropy {
  detail::ElementOperands<T> in;
  NoParams params;
  double x(int64_t i) const { return static_cast<double>(in.input[i]); }
  double t(int64_t i) const { return static_cast<double>(in.target[i]); }
  double w(int64_t i) const { return in.weight ? static_cast<double>(in.weight[i]) : 1.0; }
  double value(int64_t i) const {
    return w(i) * ((t(i) - 1.0) * clamped_log(1.0 - x(i)) - t(i) * clamped_log(x(i)));
  }
  // w·(x − t) / (x·(1 − x)), the denominator kept ≥ PyTorch's EPSILON, the float 1e-12
  double dinput(int64_t i) const {
    return w(i) * (x(i) - t(i)) / std::max((1.0 - x(i)) * x(i), static_cast<double>(1e-12f));
  }
  // −w·logit(x), unclamped as in PyTorch: ±inf at x = 0 and 1
  double dtarget(int64_t i) const { return -w(i) * std::log(x(i) / (1.0 - x(i))); }
  // dinput and dtarget as recorded tensors (elementwise_loss.hpp)
  static detail::ElementSlopes recorded_slopes(const detail::ElementTensors& in, NoParams) {
    const Tensor &x = in.input, &t = in.target;
    return weighted({(x - t) / ((1.0 - x) * x).clamp_min(static_cast<double>(1e-12f)), -(x / (1.0 - x)).log()},
                    in.weight);
  }
};

// w·((1 − t)·x + l·softplus(−x)) with l = 1 + (pos_weight − 1)·t, which is
// −w·(pos_weight·t·log σ(x) + (1 − t)·log(1 − σ(x))); softplus(−x) = log(1 + e^−x) computed as
// m + log(e^−m + e^(−x−m)), m = max(−x, 0), so that no exp overflows.
template <typename T>
struct BinaryCrossEntropyWithLogits {
  detail::ElementOperands<T> in;
  NoParams params;
  double x(int64_t i) const { return static_cast<double>(in.input[i]); }
  double t(int64_t i) const { return static_cast<double>(in.target[i]); }
  double w(int64_t i) const { return in.weight ? static_cast<double>(in.weight[i]) : 1.0; }
  double pos(int64_t i) const { return in.pos_weight ? static_cast<double>(in.pos_weight[i]) : 1.0; }
  double softplus_of_negative(int64_t i) const {
    const double m = std::max(-x(i), 0.0);
    return std::log(std::exp(-m) + std::exp(-x(i) - m)) + m;
  }
  double value(int64_t i) const {
    return w(i) * ((1.0 - t(i)) * x(i) + (1.0 + (pos(i) - 1.0) * t(i)) * softplus_of_negative(i));
  }
  // w·((pos·t + 1 − t)·σ(x) − pos·t): σ(x) − t without pos_weight
  double dinput(int64_t i) const {
    const double sigmoid = 1.0 / (1.0 + std::exp(-x(i)));
    const double pt = pos(i) * t(i);
    return w(i) * ((pt + 1.0 - t(i)) * sigmoid - pt);
  }
  double dtarget(int64_t i) const { return w(i) * ((pos(i) - 1.0) * softplus_of_negative(i) - x(i)); }
  // dinput and dtarget as recorded tensors (elementwise_loss.hpp). softplus(−x) as above; m is any
  // function of x there (the identity holds for every m), so m = relu(−x) needs no care at 0.
  static detail::ElementSlopes recorded_slopes(const detail::ElementTensors& in, NoParams) {
    const Tensor &x = in.input, &t = in.target;
    if (!in.pos_weight.defined()) return weighted({x.sigmoid() - t, -x}, in.weight);
    const Tensor pt = in.pos_weight * t;
    const Tensor m = (-x).relu();
    const Tensor softplus_of_negative = m + ((-m).exp() + (-x - m).exp()).log();
    return weighted({(pt + 1.0 - t) * x.sigmoid() - pt, (in.pos_weight - 1.0) * softplus_of_negative - x}, in.weight);
  }
};

// The input and target checks both losses share: floating, same dtype, same shape.
void check_input_and_target(const char* op, const Tensor& input, const Tensor& target) {
  detail::check_floating(op, "input", input);
  check(target.defined(), op, "undefined target");
  detail::check_same_dtype(op, "target", input, target);
  detail::check_same_shape(op, input, target);
}

// `weight` checked (a constant of input's dtype whose shape broadcasts to input's) and repeated to
// input's shape; undefined when absent.
Tensor broadcast_weight(const char* op, const char* what, const Tensor& input, const Tensor& weight) {
  if (!weight.defined()) return {};
  detail::check_floating(op, what, weight);
  detail::check_same_dtype(op, what, input, weight);
  detail::check_constant(op, what, weight);
  // Broadcasts when each of its dims, aligned from the right, is 1 or input's.
  const Shape& shape = weight.shape();
  bool broadcasts = shape.size() <= input.shape().size();
  for (size_t d = 1; broadcasts && d <= shape.size(); ++d) {
    const int64_t size = shape[shape.size() - d];
    broadcasts = size == 1 || size == input.shape()[input.shape().size() - d];
  }
  check(broadcasts, op, "the ", what, " of shape ", shape, " does not broadcast to input's shape ", input.shape());
  return shape == input.shape() ? weight : tg::detail::broadcast_to(weight, input.shape());
}

}  // namespace

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, Reduction reduction) try {
  const char* op = "binary_cross_entropy";
  if (tg::detail::autocast_enabled())  // autocast's float32 list (on the CPU; CUDA's autocast bans it)
    return tg::detail::autocast_to_float32([&](const Tensor& x, const Tensor& t, const Tensor& w) {
      return binary_cross_entropy(x, t, w, reduction);
    }, input, target, weight);
  check_input_and_target(op, input, target);
  const Tensor full_weight = broadcast_weight(op, "weight", input, weight);
  tg::detail::dispatch_floating(op, input.dtype(), [&]<typename T>() {
    const T* x = input.data<T>();
    for (int64_t i = 0; i < input.numel(); ++i)
      check(x[i] >= T(0) && x[i] <= T(1), op, "all elements of input should be between 0 and 1, got ", x[i],
            " at index ", i);
  });
  return detail::elementwise_loss<BinaryCrossEntropy>(op, "BinaryCrossEntropyBackward",
                                                      {input, target, full_weight, {}}, reduction, NoParams{});
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("binary_cross_entropy");
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        const Tensor& pos_weight, Reduction reduction) try {
  const char* op = "binary_cross_entropy_with_logits";
  if (tg::detail::autocast_enabled())  // autocast's float32 list
    return tg::detail::autocast_to_float32([&](const Tensor& x, const Tensor& t, const Tensor& w, const Tensor& p) {
      return binary_cross_entropy_with_logits(x, t, w, p, reduction);
    }, input, target, weight, pos_weight);
  check_input_and_target(op, input, target);
  const Tensor full_weight = broadcast_weight(op, "weight", input, weight);
  const Tensor full_pos_weight = broadcast_weight(op, "pos_weight", input, pos_weight);
  return detail::elementwise_loss<BinaryCrossEntropyWithLogits>(op, "BinaryCrossEntropyWithLogitsBackward",
                                                                {input, target, full_weight, full_pos_weight},
                                                                reduction, NoParams{});
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("binary_cross_entropy_with_logits");
}

}  // namespace tg::nn
