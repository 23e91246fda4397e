// What LayerNorm and RMSNorm share (normalized_rows.hpp).
#include "normalized_rows.hpp"

#include <algorithm>

namespace tg::nn::detail {

NormalizedRows check_normalized_input(const char* op, const Tensor& x, const Shape& normalized_shape,
                                      std::initializer_list<std::pair<const Tensor*, const char*>> parameters) {
  check(x.defined(), op, "undefined input");
  check(!normalized_shape.empty(), op, "expected a non-empty normalized_shape, got ", normalized_shape);
  const size_t lead = x.shape().size() - std::min(x.shape().size(), normalized_shape.size());
  check(x.shape().size() >= normalized_shape.size() &&
            Shape(x.shape().begin() + static_cast<std::ptrdiff_t>(lead), x.shape().end()) == normalized_shape,
        op, "expected an input whose trailing dims are normalized_shape ", normalized_shape,
        ", got an input of shape ", x.shape());
  for (const auto& [parameter, what] : parameters) {
    if (!parameter->defined()) continue;
    check(parameter->shape() == normalized_shape, op, "expected ", what, " of shape normalized_shape ",
          normalized_shape, ", got ", parameter->shape());
    check(parameter->dtype() == x.dtype(), op, "dtypes differ: input ", x.dtype(), ", ", what, " ",
          parameter->dtype());
  }
  NormalizedRows rows;
  for (size_t d = 0; d < x.shape().size(); ++d) (d < lead ? rows.M : rows.N) *= x.shape()[d];
  return rows;
}

void normalized_rows_backward_differentiable(const Tensor& dy, const Tensor& x, const Tensor& gamma, double eps,
                                             bool centered, NormalizedRows rows, autograd::GradInputs& grads) {
  const Tensor x_rows = x.reshape({rows.M, rows.N}), dy_rows = dy.reshape({rows.M, rows.N});
  const Tensor centered_x = centered ? x_rows - x_rows.mean({1}, true) : x_rows;    // x − μ
  const Tensor rstd = ((centered_x * centered_x).mean({1}, true) + eps).rsqrt();  // [M, 1]
  const Tensor x_hat = centered_x * rstd;
  if (grads.needed(0)) {
    const Tensor g = dy_rows * gamma.reshape({rows.N});
    Tensor inner = g - x_hat * (g * x_hat).mean({1}, true);
    if (centered) inner = inner - g.mean({1}, true);
    grads.set(0, (rstd * inner).reshape(x.shape()));
  }
  if (grads.needed(1)) grads.set(1, (dy_rows * x_hat).sum({0}).reshape(gamma.shape()));
  if (centered && grads.needed(2)) grads.set(2, dy_rows.sum({0}).reshape(gamma.shape()));
}

}  // namespace tg::nn::detail
