// LayerNorm: one fused forward kernel, one closed-form backward kernel, one tape node.
//
// The input is viewed as M rows of N normalised elements (N = Π normalized_shape, M = the
// product of the leading dims); the row kernels, and the maths, are in layer_norm_kernels.cpp.
#include "tapegrad/nn/layer_norm.hpp"

#include <cmath>

#include "autograd/node.hpp"
#include "bfloat16_compute.hpp"
#include "bfloat16_parameters.hpp"
#include "dispatch.hpp"
#include "layer_norm_kernels.hpp"
#include "normalized_rows.hpp"
#include "out_of_memory.hpp"
#include "tapegrad/nn/functional.hpp"

namespace tg::nn {

namespace functional {

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) try {
  if (detail::bfloat16_input_with_parameters(x, weight, bias))  // in float32, rounded once
    return tg::detail::in_float32([&](const Tensor& xs, const Tensor& w, const Tensor& b) {
      return layer_norm(xs, normalized_shape, w, b, eps);
    }, x, weight, bias);
  const detail::NormalizedRows rows =
      detail::check_normalized_input("layer_norm", x, normalized_shape, {{&weight, "weight"}, {&bias, "bias"}});
  const int64_t M = rows.M, N = rows.N;  // named copies: the backward closure captures them
  // PyTorch takes a negative ε; refused, as by the other norms: it is a caller's bug.
  check(std::isfinite(eps) && eps >= 0, "layer_norm", "eps must be finite and ≥ 0, got ", eps);

  // An absent γ is ones and an absent β zeros (N elements each), so one kernel serves both
  // cases; such constants do not require grad, so the node sends them nothing.
  const Tensor gamma = weight.defined() ? weight : ones(normalized_shape, x.dtype());
  const Tensor beta = bias.defined() ? bias.detach() : zeros(normalized_shape, x.dtype());
  const Tensor& weight_input = weight.defined() ? weight : gamma;
  const Tensor& bias_input = bias.defined() ? bias : beta;
  const bool record = autograd::needs_grad(x, weight_input, bias_input);
  Tensor y = make_tensor(x.shape(), x.dtype(), "layer_norm");
  // stats: [M, kStatsPerRow] in x's dtype, saved for backward (none without one).
  Tensor stats = record ? make_tensor({M, tg::detail::kStatsPerRow}, x.dtype()) : Tensor();
  tg::detail::dispatch_floating("layer_norm", x.dtype(), [&]<typename T>() {
    const auto forward = tg::detail::layer_norm_kernels_for_cpu().of<T>().forward;
    forward(x.data<T>(), gamma.data<T>(), beta.data<T>(), y.mutable_data<T>(),
            record ? stats.mutable_data<T>() : nullptr, M, N, eps);
  });

  if (record)
    autograd::record(y, "LayerNormBackward", {x, weight_input, bias_input},
                     [saved_x = autograd::SavedTensor(x), saved_gamma = autograd::SavedTensor(gamma), stats, M, N,
                      eps](const Tensor& dy, autograd::GradInputs& grads) {
                       const Tensor &x = grads.unpack(saved_x), &gamma = grads.unpack(saved_gamma);
                       if (grads.create_graph())
                         return detail::normalized_rows_backward_differentiable(dy, x, gamma, eps, true, {M, N},
                                                                                grads);
                       Tensor dx = make_tensor(x.shape(), x.dtype());
                       Tensor dgamma = make_tensor(gamma.shape(), x.dtype());
                       Tensor dbeta = make_tensor(gamma.shape(), x.dtype());
                       tg::detail::dispatch_floating("LayerNormBackward", x.dtype(), [&]<typename T>() {
                         const auto backward = tg::detail::layer_norm_kernels_for_cpu().of<T>().backward;
                         backward(dy.data<T>(), x.data<T>(), gamma.data<T>(), stats.data<T>(), dx.mutable_data<T>(),
                                  dgamma.mutable_data<T>(), dbeta.mutable_data<T>(), M, N);
                       });
                       if (grads.needed(0)) grads.set(0, dx);
                       if (grads.needed(1)) grads.set(1, dgamma);
                       if (grads.needed(2)) grads.set(2, dbeta);
                     });
  return y;
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("layer_norm");
}

}  // namespace functional

LayerNorm::LayerNorm(Shape normalized_shape, LayerNormOptions options)
    : weight("LayerNorm.weight", options.elementwise_affine ? ones(normalized_shape) : Tensor()),
      bias("LayerNorm.bias", options.elementwise_affine && options.bias ? zeros(normalized_shape) : Tensor()),
      normalized_shape(std::move(normalized_shape)),
      eps(options.eps) {
  check(!this->normalized_shape.empty(), "LayerNorm", "expected a non-empty normalized_shape, got ",
        this->normalized_shape);
}

Tensor LayerNorm::forward(const Tensor& x) { return functional::layer_norm(x, normalized_shape, weight, bias, eps); }

void LayerNorm::members(Members& m) {
  m.parameter("weight", weight);
  m.parameter("bias", bias);
}

}  // namespace tg::nn
