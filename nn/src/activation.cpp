// ReLU, GELU, Tanh, Sigmoid, Identity and Flatten: the modules and the functional forms. The
// kernels are core's elementwise ops (core/src/ops/unary_math.cpp: one map forward, one map2
// backward, one tape node each), written once there and called from here.
#include <utility>

#include "tapegrad/nn/activation.hpp"
#include "tapegrad/nn/functional.hpp"

namespace tg::nn {

Tensor functional::relu(const Tensor& x) {
  check(x.defined(), "relu", "undefined input");
  return tg::relu(x);
}

Tensor functional::gelu(const Tensor& x, std::string_view approximate) {
  check(x.defined(), "gelu", "undefined input");
  return tg::gelu(x, approximate);
}

Tensor functional::tanh(const Tensor& x) {
  check(x.defined(), "tanh", "undefined input");
  return tg::tanh(x);
}

Tensor functional::sigmoid(const Tensor& x) {
  check(x.defined(), "sigmoid", "undefined input");
  return tg::sigmoid(x);
}

GELU::GELU(std::string approximate) : approximate(std::move(approximate)) {
  check(this->approximate == "none" || this->approximate == "tanh", "GELU",
        "approximate must be \"none\" or \"tanh\", got \"", this->approximate, "\"");
}

Tensor ReLU::forward(const Tensor& x) { return functional::relu(x); }
Tensor GELU::forward(const Tensor& x) { return functional::gelu(x, approximate); }
Tensor Tanh::forward(const Tensor& x) { return functional::tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return functional::sigmoid(x); }
Tensor Identity::forward(const Tensor& x) { return x; }

Flatten::Flatten(int64_t start_dim, int64_t end_dim) : start_dim(start_dim), end_dim(end_dim) {}

// torch.flatten: a 0-d input counts as one dim and becomes [1]; start after end is an error.
Tensor Flatten::forward(const Tensor& x) {
  check(x.defined(), "Flatten", "undefined input");
  const int64_t ndim = std::max<int64_t>(x.dim(), 1);
  const auto wrap = [&](int64_t dim, const char* which) {
    check(dim >= -ndim && dim < ndim, "Flatten", which, " ", dim, " is out of range for a tensor of shape ",
          x.shape(), " (expected a dim in [", -ndim, ", ", ndim - 1, "])");
    return dim < 0 ? dim + ndim : dim;
  };
  const int64_t first = wrap(start_dim, "start_dim"), last = wrap(end_dim, "end_dim");
  check(first <= last, "Flatten", "start_dim ", start_dim, " comes after end_dim ", end_dim, " for a tensor of shape ",
        x.shape());
  if (x.dim() == 0) return x.reshape({1});
  Shape shape(x.shape().begin(), x.shape().begin() + first);
  int64_t merged = 1;
  for (int64_t d = first; d <= last; ++d) merged *= x.shape()[d];
  shape.push_back(merged);
  shape.insert(shape.end(), x.shape().begin() + last + 1, x.shape().end());
  return x.reshape(shape);
}

}  // namespace tg::nn
