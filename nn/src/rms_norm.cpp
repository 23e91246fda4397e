// RMSNorm: LayerNorm's fused row kernels without centering (layer_norm_kernels.cpp), one tape node.
#include "tapegrad/nn/rms_norm.hpp"

#include <cmath>
#include <limits>

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

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps) try {
  if (detail::bfloat16_input_with_parameters(x, weight)) {  // in float32, rounded once; eps unset is bfloat16's epsilon, 2^-7
    const double bfloat16_eps = eps.value_or(static_cast<float>(std::numeric_limits<BFloat16>::epsilon()));
    return tg::detail::in_float32(
        [&](const Tensor& xs, const Tensor& w) { return rms_norm(xs, normalized_shape, w, bfloat16_eps); }, x, weight);
  }
  const detail::NormalizedRows rows =
      detail::check_normalized_input("rms_norm", x, normalized_shape, {{&weight, "weight"}});
  const int64_t M = rows.M, N = rows.N;  // named copies: the backward closure captures them
  check(!eps || (std::isfinite(*eps) && *eps >= 0), "rms_norm", "expected a finite eps >= 0, got ",
        eps.value_or(0.0));

  // An absent γ is ones, which needs no gradient, so the node sends it nothing.
  const Tensor gamma = weight.defined() ? weight : ones(normalized_shape, x.dtype());
  const bool record = autograd::needs_grad(x, gamma);
  Tensor y = make_tensor(x.shape(), x.dtype(), "rms_norm");
  // stats: [M, kStatsPerRow] in x's dtype, saved for backward (none without one).
  Tensor stats = record ? make_tensor({M, tg::detail::kStatsPerRow}, x.dtype()) : Tensor();
  double epsilon = 0.0;  // eps, or PyTorch's default: the machine epsilon of x's dtype
  tg::detail::dispatch_floating("rms_norm", x.dtype(), [&]<typename T>() {
    epsilon = eps.value_or(std::numeric_limits<T>::epsilon());
    const auto forward = tg::detail::layer_norm_kernels_for_cpu().of<T>().rms_forward;
    forward(x.data<T>(), gamma.data<T>(), y.mutable_data<T>(), record ? stats.mutable_data<T>() : nullptr, M, N,
            epsilon);
  });

  if (record)
    autograd::record(y, "RmsNormBackward", {x, gamma},
                     [saved_x = autograd::SavedTensor(x), saved_gamma = autograd::SavedTensor(gamma), stats, M, N,
                      epsilon](const Tensor& dy, autograd::GradInputs& grads) {
                       const Tensor &x = grads.unpack(saved_x), &gamma = grads.unpack(saved_gamma);
                       if (grads.create_graph())
                         return detail::normalized_rows_backward_differentiable(dy, x, gamma, epsilon, false, {M, N},
                                                                                grads);
                       Tensor dx = make_tensor(x.shape(), x.dtype());
                       Tensor dgamma = make_tensor(gamma.shape(), x.dtype());
                       tg::detail::dispatch_floating("RmsNormBackward", x.dtype(), [&]<typename T>() {
                         const auto backward = tg::detail::layer_norm_kernels_for_cpu().of<T>().rms_backward;
                         backward(dy.data<T>(), x.data<T>(), gamma.data<T>(), stats.data<T>(), dx.mutable_data<T>(),
                                  dgamma.mutable_data<T>(), M, N);
                       });
                       if (grads.needed(0)) grads.set(0, dx);
                       if (grads.needed(1)) grads.set(1, dgamma);
                     });
  return y;
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("rms_norm");
}

}  // namespace functional

RMSNorm::RMSNorm(Shape normalized_shape, RMSNormOptions options)
    : weight("RMSNorm.weight", options.elementwise_affine ? ones(normalized_shape) : Tensor()),
      normalized_shape(std::move(normalized_shape)),
      eps(options.eps) {
  check(!this->normalized_shape.empty(), "RMSNorm", "expected a non-empty normalized_shape, got ",
        this->normalized_shape);
}

Tensor RMSNorm::forward(const Tensor& x) { return functional::rms_norm(x, normalized_shape, weight, eps); }

void RMSNorm::members(Members& m) { m.parameter("weight", weight); }

}  // namespace tg::nn
