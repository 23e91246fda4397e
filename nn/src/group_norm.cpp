// GroupNorm: the argument checks and one tape node over the fused row kernels of
// batch_norm_kernels.cpp (where the maths is), and the module.
#include "tapegrad/nn/group_norm.hpp"

#include <cmath>
#include <string>

#include "autograd/node.hpp"
#include "bfloat16_compute.hpp"
#include "bfloat16_parameters.hpp"
#include "batch_norm_kernels.hpp"
#include "dispatch.hpp"
#include "out_of_memory.hpp"

namespace tg::nn {

namespace {

// [N, C, *] as the kernels' [N, C, S].
tg::detail::BatchNormShape channel_shape(const Shape& shape) {
  tg::detail::BatchNormShape s{shape[0], shape[1], 1};
  for (size_t d = 2; d < shape.size(); ++d) s.S *= shape[d];
  return s;
}

// The gradients of group_norm in recorded tg ops, for a backward pass that is itself differentiated
// (create_graph): the row statistics are recomputed from the connected x (batch_norm_kernels.cpp
// has the formulas). Slots: 0 x, 1 γ, 2 β. gamma: [C] (ones when absent).
void group_norm_backward_differentiable(const Tensor& dy, const Tensor& x, const Tensor& gamma, int64_t groups,
                                        double eps, autograd::GradInputs& grads) {
  const tg::detail::BatchNormShape s = channel_shape(x.shape());
  const int64_t L = s.C / groups * s.S;
  const Tensor rows = x.reshape({s.N, groups, L});
  const Tensor centered = rows - rows.mean({2}, true);                     // x − μ per row
  const Tensor rstd = ((centered * centered).mean({2}, true) + eps).rsqrt();  // [N, G, 1]
  const Tensor x_hat = centered * rstd;
  const Tensor dy3 = dy.reshape({s.N, s.C, s.S});
  if (grads.needed(0)) {
    const Tensor g = (dy3 * gamma.reshape({1, s.C, 1})).reshape({s.N, groups, L});
    const Tensor inner = g - g.mean({2}, true) - x_hat * (g * x_hat).mean({2}, true);
    grads.set(0, (rstd * inner).reshape(x.shape()));
  }
  if (grads.needed(1)) grads.set(1, (dy3 * x_hat.reshape({s.N, s.C, s.S})).sum({0, 2}));
  if (grads.needed(2)) grads.set(2, dy3.sum({0, 2}));
}

}  // namespace

namespace functional {

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) try {
  const char* op = "group_norm";
  check(input.defined(), op, "undefined input");
  if (detail::bfloat16_input_with_parameters(input, weight, bias))  // in float32, rounded once
    return tg::detail::in_float32([&](const Tensor& x, const Tensor& w, const Tensor& b) {
      return group_norm(x, num_groups, w, b, eps);
    }, input, weight, bias);
  check(input.dim() >= 2, op, "expected an input of at least 2 dims [N, C, *], got ", input.shape());
  check(is_floating_point(input.dtype()), op, "expected a float32 or float64 input, got ", input.dtype(),
        tg::detail::cast_advice<tg::detail::FloatingDTypes>(input.dtype()));
  const int64_t C = input.shape()[1];
  check(num_groups >= 1 && C % num_groups == 0, op,
        "expected number of channels in input to be divisible by num_groups, but got input of shape ",
        input.shape(), " and num_groups=", num_groups);
  for (const auto& [t, what] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
    if (!t->defined()) continue;
    check(t->shape() == Shape{C}, op, "expected ", what, " to be a vector of size equal to the number of channels in ",
          "input, but got ", what, " of shape ", t->shape(), " and input of shape ", input.shape());
    check(t->dtype() == input.dtype(), op, "dtypes differ: input ", input.dtype(), ", ", what, " ", t->dtype());
  }
  // PyTorch takes a negative ε (a NaN wherever the variance is below −ε); refused as a caller's bug,
  // as by every norm here (docs/differences-from-pytorch.md).
  check(std::isfinite(eps) && eps >= 0, op, "eps must be finite and ≥ 0, got ", eps);

  const tg::detail::BatchNormShape shape = channel_shape(input.shape());
  const int64_t groups = num_groups;
  const Tensor weight_input = weight.defined() ? weight : ones({C}, input.dtype());
  const Tensor bias_input = bias.defined() ? bias : zeros({C}, input.dtype());
  const bool record = autograd::needs_grad(input, weight_input, bias_input);
  Tensor y = make_tensor(input.shape(), input.dtype(), op);
  // stats: [N·groups, 2] float64 (μ, rstd) per row, saved for backward.
  Tensor stats = record ? make_tensor({shape.N * groups, 2}, kFloat64, op) : Tensor();
  tg::detail::dispatch_floating(op, input.dtype(), [&]<typename T>() {
    tg::detail::batch_norm_kernels_for_cpu().of<T>().group_forward(
        input.data<T>(), weight.defined() ? weight.data<T>() : nullptr, bias.defined() ? bias.data<T>() : nullptr,
        y.mutable_data<T>(), record ? stats.mutable_data<double>() : nullptr, shape, groups, eps);
  });
  if (record)
    autograd::record(y, "GroupNormBackward", {input, weight_input, bias_input},
                     [saved_x = autograd::SavedTensor(input), saved_gamma = autograd::SavedTensor(weight_input), stats,
                      has_gamma = weight.defined(), groups, eps](const Tensor& dy, autograd::GradInputs& grads) {
                       const Tensor &x = grads.unpack(saved_x), &gamma = grads.unpack(saved_gamma);
                       if (grads.create_graph())
                         return group_norm_backward_differentiable(dy, x, gamma, groups, eps, grads);
                       const tg::detail::BatchNormShape shape = channel_shape(x.shape());
                       Tensor dx = grads.needed(0) ? make_tensor(x.shape(), x.dtype()) : Tensor();
                       Tensor dgamma = grads.needed(1) ? make_tensor({shape.C}, x.dtype()) : Tensor();
                       Tensor dbeta = grads.needed(2) ? make_tensor({shape.C}, x.dtype()) : Tensor();
                       tg::detail::dispatch_floating("GroupNormBackward", x.dtype(), [&]<typename T>() {
                         tg::detail::batch_norm_kernels_for_cpu().of<T>().group_backward(
                             dy.data<T>(), x.data<T>(), has_gamma ? gamma.data<T>() : nullptr, stats.data<double>(),
                             dx.defined() ? dx.mutable_data<T>() : nullptr,
                             dgamma.defined() ? dgamma.mutable_data<T>() : nullptr,
                             dbeta.defined() ? dbeta.mutable_data<T>() : nullptr, shape, groups);
                       });
                       if (dx.defined()) grads.set(0, dx);
                       if (dgamma.defined()) grads.set(1, dgamma);
                       if (dbeta.defined()) grads.set(2, dbeta);
                     });
  return y;
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("group_norm");
}

}  // namespace functional

GroupNorm::GroupNorm(int64_t num_groups, int64_t num_channels, const GroupNormOptions& options)
    : weight("GroupNorm.weight", options.affine && num_channels >= 1 ? ones({num_channels}) : Tensor()),
      bias("GroupNorm.bias", options.affine && num_channels >= 1 ? zeros({num_channels}) : Tensor()),
      num_groups(num_groups),
      num_channels(num_channels),
      options(options) {
  check(num_groups >= 1 && num_channels >= 1 && num_channels % num_groups == 0, "GroupNorm",
        "num_channels must be divisible by num_groups (both ≥ 1), got num_groups=", num_groups,
        ", num_channels=", num_channels);
}

Tensor GroupNorm::forward(const Tensor& x) {
  return functional::group_norm(x, num_groups, weight, bias, options.eps);
}

void GroupNorm::members(Members& m) {
  m.parameter("weight", weight);
  m.parameter("bias", bias);
}

}  // namespace tg::nn
