// tg::gradcheck — compare a function's analytic gradients with central finite differences.
//
//   auto f = [](const std::vector<tg::Tensor>& in) { return (in[0] * in[1]).exp().sum({-1}); };
//   auto a = tg::randn({3, 4}, tg::kFloat64).requires_grad_();
//   auto b = tg::randn({4}, tg::kFloat64).requires_grad_();
//   tg::GradcheckResult r = tg::gradcheck(f, {a, b});
//   if (!r) std::cerr << r.message;
//
// For every input that requires grad, every element x_j is perturbed by ±eps and the output is
// evaluated twice; (f(x+eps) - f(x-eps)) / 2eps is column j of the numeric Jacobian. The analytic
// Jacobian comes from one backward per output element. An element passes when
// |analytic - numeric| <= atol + rtol * |numeric| (PyTorch's rule and defaults). Inputs must be
// float64: in float32 the finite differences themselves are too noisy to judge anything.
//
// Every evaluation of fn, the finite differences' included, runs in the caller's grad mode (as
// PyTorch's gradcheck), so fn may do what needs grad mode, such as registering a hook on an
// intermediate result; calling gradcheck while a NoGradGuard is alive is an error.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tg {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

struct GradcheckResult {
  bool passed = true;
  // The worst element — the largest |analytic - numeric| relative to its tolerance
  // atol + rtol·|numeric| (ties: the largest |diff|, then the largest |numeric|): which input,
  // which of its elements (row-major), which output element. The message names it by index.
  int64_t input = -1;
  int64_t element = -1;
  int64_t output_element = -1;
  double analytic = 0.0;
  double numeric = 0.0;
  std::vector<double> max_abs_error;  // per input; 0 for inputs that do not require grad
  std::string message;                // a one-paragraph human summary
  explicit operator bool() const { return passed; }
};

using DifferentiableFunction = std::function<Tensor(const std::vector<Tensor>&)>;

GradcheckResult gradcheck(const DifferentiableFunction& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace tg
