// LayerNorm: one fused forward kernel, one closed-form backward kernel, one tape node.
//
// The input is viewed as M rows of N normalised elements (N = Π normalized_shape, M = the
// product of the leading dims); the row kernels, and the maths, are in layer_norm_kernels.cpp.
#include "tapegrad/nn/layer_norm.hpp"

#include <algorithm>

#include "autograd/node.hpp"
#include "dispatch.hpp"
#include "layer_norm_kernels.hpp"
#include "tapegrad/nn/functional.hpp"

namespace tg::nn {

namespace functional {

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  check(x.defined(), "layer_norm", "undefined input");
  check(!normalized_shape.empty(), "layer_norm", "expected a non-empty normalized_shape, got ", normalized_shape);
  const size_t lead = x.shape().size() - std::min(x.shape().size(), normalized_shape.size());
  check(x.shape().size() >= normalized_shape.size() &&
            Shape(x.shape().begin() + static_cast<std::ptrdiff_t>(lead), x.shape().end()) == normalized_shape,
        "layer_norm", "expected an input whose trailing dims are normalized_shape ", normalized_shape,
        ", got an input of shape ", x.shape());
  for (const auto& [parameter, what] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
    if (!parameter->defined()) continue;
    check(parameter->shape() == normalized_shape, "layer_norm", "expected ", what,
          " of shape normalized_shape ", normalized_shape, ", got ", parameter->shape());
    check(parameter->dtype() == x.dtype(), "layer_norm", "dtypes differ: input ", x.dtype(), ", ", what, " ",
          parameter->dtype());
  }
  int64_t M = 1, N = 1;
  for (size_t d = 0; d < x.shape().size(); ++d) (d < lead ? M : N) *= x.shape()[d];

  // An absent γ is ones and an absent β zeros (N elements each), so one kernel serves both
  // cases; such constants do not require grad, so the node sends them nothing.
  const Tensor gamma = weight.defined() ? weight : ones(normalized_shape, x.dtype());
  const Tensor beta = bias.defined() ? bias.detach() : zeros(normalized_shape, x.dtype());
  const Tensor& weight_input = weight.defined() ? weight : gamma;
  const Tensor& bias_input = bias.defined() ? bias : beta;
  const bool record = autograd::needs_grad(x, weight_input, bias_input);
  Tensor y = make_tensor(x.shape(), x.dtype(), "layer_norm");
  // stats: [M, kStatsPerRow] in x's dtype, saved for backward (none without one).
  Tensor stats = record ? make_tensor({M, detail::kStatsPerRow}, x.dtype()) : Tensor();
  tg::detail::dispatch_floating("layer_norm", x.dtype(), [&]<typename T>() {
    const auto forward = detail::layer_norm_kernels_for_cpu().of<T>().forward;
    forward(x.data<T>(), gamma.data<T>(), beta.data<T>(), y.mutable_data<T>(),
            record ? stats.mutable_data<T>() : nullptr, M, N, eps);
  });

  if (record)
    autograd::record(y, "LayerNormBackward", {x, weight_input, bias_input},
                     [saved_x = autograd::SavedTensor(x), saved_gamma = autograd::SavedTensor(gamma), stats, M, N](
                         const Tensor& dy, autograd::GradInputs& grads) {
                       const Tensor &x = grads.unpack(saved_x), &gamma = grads.unpack(saved_gamma);
                       Tensor dx = make_tensor(x.shape(), x.dtype());
                       Tensor dgamma = make_tensor(gamma.shape(), x.dtype());
                       Tensor dbeta = make_tensor(gamma.shape(), x.dtype());
                       tg::detail::dispatch_floating("LayerNormBackward", x.dtype(), [&]<typename T>() {
                         const auto backward = detail::layer_norm_kernels_for_cpu().of<T>().backward;
                         backward(dy.data<T>(), x.data<T>(), gamma.data<T>(), stats.data<T>(), dx.mutable_data<T>(),
                                  dgamma.mutable_data<T>(), dbeta.mutable_data<T>(), M, N);
                       });
                       if (grads.needed(0)) grads.set(0, dx);
                       if (grads.needed(1)) grads.set(1, dgamma);
                       if (grads.needed(2)) grads.set(2, dbeta);
                     });
  return y;
}

}  // namespace functional

LayerNorm::LayerNorm(Shape normalized_shape, LayerNormOptions options)
    : weight("LayerNorm.weight", options.elementwise_affine ? ones(normalized_shape) : Tensor()),
      bias("LayerNorm.bias", options.elementwise_affine ? zeros(normalized_shape) : Tensor()),
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
