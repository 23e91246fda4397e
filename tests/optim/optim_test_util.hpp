// Helpers shared by the optim tests: names and leaves for the SGD trajectory fixtures.
#pragma once

#include <string>

#include "support/fixtures.hpp"

namespace tg::optim_test {

// The name of the fixture's parameter after `step` steps: "p1" ... "p5". (Spelt out because GCC 12
// reports a false -Wrestrict on "p" + std::to_string(step) at -O3.)
inline std::string after_step(int step) {
  std::string name = std::to_string(step);
  name.insert(name.begin(), 'p');
  return name;
}

// A fresh leaf parameter holding a copy of `values` (fixture tensors are shared: never mark them).
inline Tensor parameter(const Tensor& values) {
  Tensor param = values.detach().clone();
  param.requires_grad_();
  return param;
}

// The fixtures' loss: sum(c * p^2) + sum(d * p), so grad = 2 c p + d.
inline Tensor quadratic_loss(const Tensor& p, const Tensor& c, const Tensor& d) {
  return (c * p.pow(2)).sum() + (d * p).sum();
}

}  // namespace tg::optim_test
