/// @file
/// tg::gradcheck — compare a function's analytic gradients with central finite differences.
///
/// @code
///   auto f = [](const std::vector<tg::Tensor>& in) { return (in[0] * in[1]).exp().sum({-1}); };
///   auto a = tg::randn({3, 4}, tg::kFloat64).requires_grad_();
///   auto b = tg::randn({4}, tg::kFloat64).requires_grad_();
///   tg::GradcheckResult r = tg::gradcheck(f, {a, b});
///   if (!r) std::cerr << r.message;
/// @endcode
///
/// For every input that requires grad, every element x_j is perturbed by ±eps and the output is
/// evaluated twice; (f(x+eps) - f(x-eps)) / 2eps is column j of the numeric Jacobian. The analytic
/// Jacobian comes from one backward per output element. An element passes when
/// |analytic - numeric| <= atol + rtol * |numeric| (PyTorch's rule and defaults). Inputs must be
/// float64: in float32 the finite differences themselves are too noisy to judge anything.
///
/// Every evaluation of fn, the finite differences' included, runs in the caller's grad mode (as
/// PyTorch's gradcheck), so fn may do what needs grad mode, such as registering a hook on an
/// intermediate result; calling gradcheck while a NoGradGuard is alive is an error.
///
/// tg::gradgradcheck checks second derivatives the same way, as torch.autograd.gradgradcheck: it
/// draws a random grad_output v (N(0, 1), float64, requiring grad) of fn's output shape, then
/// gradchecks the function (inputs, v) -> the gradients of sum(fn(inputs) · v) with respect to the
/// inputs that require grad, taken by autograd::grad with create_graph and flattened into one
/// vector. Its analytic Jacobian is a backward through the recorded backward (a double backward),
/// its numeric one finite differences of first gradients:
///
/// @code
///   auto f = [](const std::vector<tg::Tensor>& in) { return in[0].tanh() * in[1]; };
///   tg::GradcheckResult r = tg::gradgradcheck(f, {a, b});  // a, b: float64, requires_grad
/// @endcode
///
/// An op whose backward cannot be differentiated (once_differentiable) makes it throw tg::Error
/// naming that op; one whose recorded backward is wrong makes it fail with the worst element.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tg {

/// gradcheck's step and tolerances, PyTorch's defaults.
struct GradcheckOptions {
  double eps = 1e-6;   ///< the finite-difference step: x ± eps
  double atol = 1e-5;  ///< absolute tolerance
  double rtol = 1e-3;  ///< relative tolerance, times |numeric|
};

/// What gradcheck found; true when every element passed.
struct GradcheckResult {
  bool passed = true;  ///< every element within atol + rtol·|numeric|
  /// The worst element — the largest |analytic - numeric| relative to its tolerance
  /// atol + rtol·|numeric| (ties: the largest |diff|, then the largest |numeric|): which input,
  /// which of its elements (row-major), which output element. The message names it by index.
  int64_t input = -1;
  int64_t element = -1;         ///< the worst element's index in that input (row-major)
  int64_t output_element = -1;  ///< the output element whose gradient it is (row-major)
  double analytic = 0.0;        ///< the worst element's analytic derivative
  double numeric = 0.0;         ///< and its finite-difference estimate
  std::vector<double> max_abs_error;  ///< per input; 0 for inputs that do not require grad
  std::string message;                ///< a one-paragraph human summary
  explicit operator bool() const { return passed; }  ///< passed
};

/// A function of tensors that gradcheck can differentiate: inputs to one output tensor.
using DifferentiableFunction = std::function<Tensor(const std::vector<Tensor>&)>;

/// Compares the analytic gradients of fn at `inputs` with central finite differences (gradcheck.hpp).
GradcheckResult gradcheck(const DifferentiableFunction& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

/// Compares the second derivatives of fn at `inputs` with finite differences of its first ones,
/// as torch.autograd.gradgradcheck: gradcheck of (inputs, v) -> the inputs' gradients of
/// sum(fn(inputs) · v), taken with create_graph, for a random v (gradcheck.hpp). In the result,
/// input `inputs.size()` is v, and an output element is one element of the first gradients
/// concatenated in input order (the message names which input's gradient it is).
GradcheckResult gradgradcheck(const DifferentiableFunction& fn, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& options = {});

/// gradgradcheck with the grad_output given (torch's `grad_outputs`): fn's output shape, float64.
/// Its second derivatives are checked too when it requires grad; otherwise it is a constant.
GradcheckResult gradgradcheck(const DifferentiableFunction& fn, const std::vector<Tensor>& inputs,
                              const Tensor& grad_output, const GradcheckOptions& options = {});

}  // namespace tg
