// The argument checks that LayerNorm and RMSNorm share.
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

}  // namespace tg::nn::detail
