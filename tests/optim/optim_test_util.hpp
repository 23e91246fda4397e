// Helpers shared by the optim tests: names and leaves for the trajectory fixtures, bitwise equality.
#pragma once

#include <cstring>
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

inline const void* raw_data(const Tensor& t) {
  return t.dtype() == kFloat32 ? static_cast<const void*>(t.data<float>()) : t.data<double>();
}

// Bitwise equality (== would call -0 and +0 equal).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(raw_data(a), raw_data(b), static_cast<size_t>(a.numel()) * element_size(a.dtype())) == 0;
}

}  // namespace tg::optim_test
