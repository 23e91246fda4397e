// ReLU: the module and its functional form. The kernel is core's elementwise ReLU (tg::relu:
// one map over the tensor, one ReluBackward node whose backward masks the gradient by the saved
// output); it is written once, there, and called from here.
#include "tapegrad/nn/activation.hpp"
#include "tapegrad/nn/functional.hpp"

namespace tg::nn {

Tensor functional::relu(const Tensor& x) {
  check(x.defined(), "relu", "undefined input");
  return tg::relu(x);
}

Tensor ReLU::forward(const Tensor& x) { return functional::relu(x); }

}  // namespace tg::nn
