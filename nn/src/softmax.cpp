// Softmax and LogSoftmax: the modules and their functional forms. The kernels are core's ops over
// one dim (core/src/ops/softmax.cpp: one max-shifted pass per line, one node whose backward uses
// only the saved output); they are written once, there, and called from here.
#include "tapegrad/nn/softmax.hpp"

#include "tapegrad/nn/functional.hpp"

namespace tg::nn {

Tensor functional::softmax(const Tensor& x, int64_t dim) { return tg::softmax(x, dim); }
Tensor functional::log_softmax(const Tensor& x, int64_t dim) { return tg::log_softmax(x, dim); }

Tensor Softmax::forward(const Tensor& x) { return functional::softmax(x, dim); }
Tensor LogSoftmax::forward(const Tensor& x) { return functional::log_softmax(x, dim); }

}  // namespace tg::nn
