#include "tapegrad/optim/optimizer.hpp"

#include <utility>

namespace tg::optim {

Optimizer::Optimizer(std::vector<Tensor> params, const char* op) : params_(std::move(params)) {
  check(!params_.empty(), op, "expected at least one parameter, got an empty list");
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& param = params_[i];
    check(param.defined(), op, "parameter ", i, " is an undefined tensor");
    check(param.is_leaf(), op, "expected parameter ", i, " (shape ", param.shape(),
          ") to be a leaf, got the result of ", param.grad_fn_name());
    check(param.requires_grad(), op, "expected parameter ", i, " (shape ", param.shape(),
          ") to require grad, got requires_grad = false");
    // Quadratic, but parameter lists are short and this runs once.
    for (size_t j = 0; j < i; ++j)
      check(params_[j].impl() != param.impl(), op, "parameter ", i, " (shape ", param.shape(),
            ") is the same tensor as parameter ", j, "; each parameter must be listed once");
  }
}

void Optimizer::zero_grad() {
  for (Tensor& param : params_) param.set_grad(Tensor());
}

}  // namespace tg::optim
