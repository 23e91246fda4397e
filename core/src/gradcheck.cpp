// gradcheck: the analytic Jacobian (one backward per output element) against the numeric one
// (central differences, two evaluations per input element), compared element by element.
#include "tapegrad/gradcheck.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "out_of_memory.hpp"
#include "tapegrad/autograd.hpp"
#include "tensor_impl.hpp"

namespace tg {

namespace {

// Fresh leaves with the inputs' values, so that the user's tensors and their .grad are untouched.
std::vector<Tensor> private_copies(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> copies;
  NoGradGuard no_grad;
  for (const Tensor& input : inputs) {
    Tensor copy = input.detach().clone();
    if (input.requires_grad()) copy.requires_grad_();
    copies.push_back(copy);
  }
  return copies;
}

// One call of fn. `expected_shape` is the first call's output shape (null for the first call): the
// Jacobian is laid out by it, so a function whose output shape changes cannot be checked.
Tensor evaluate(const DifferentiableFunction& fn, const std::vector<Tensor>& inputs, const Shape* expected_shape) {
  Tensor out = fn(inputs);
  check(out.defined(), "gradcheck", "the function returned an undefined tensor");
  check(out.dtype() == kFloat64, "gradcheck", "the function must return a float64 tensor, got ", out.dtype());
  if (expected_shape != nullptr)
    check(out.shape() == *expected_shape, "gradcheck", "the function returned shape ", out.shape(),
          " after returning ", *expected_shape, " for the first call; its output shape must not depend on the "
          "input values or on earlier calls");
  return out;
}

// Largest Jacobian gradcheck holds, summed over the inputs: 1 GiB of doubles. One backward per
// output element and two evaluations per input element make a larger check impractical anyway.
constexpr int64_t kMaxJacobianElements = int64_t{1} << 27;

// Refuses, before anything is allocated, a Jacobian over kMaxJacobianElements.
void check_jacobian_size(const std::vector<Tensor>& x, int64_t outputs, const Shape& out_shape) {
  int64_t total = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t n = x[i].numel();
    const bool fits = n == 0 || outputs <= (kMaxJacobianElements - total) / n;
    check(fits, "gradcheck", "the Jacobian of the output (shape ", out_shape, ", ", outputs,
          " elements) with respect to input ", i, " (shape ", x[i].shape(), ", ", n, " elements) has ",
          static_cast<double>(outputs) * static_cast<double>(n), " elements (",
          static_cast<double>(outputs) * static_cast<double>(n) * 8.0,
          " bytes), more than gradcheck holds (2^27 elements in all); check a smaller case");
    total += outputs * n;
  }
}

// How well one Jacobian entry agrees, ordered worst-last: its |diff| relative to its tolerance, its
// |diff|, then |numeric|.
struct Closeness {
  double ratio;
  double error;
  double magnitude;
  bool operator<(const Closeness& other) const {
    if (ratio != other.ratio) return ratio < other.ratio;
    if (error != other.error) return error < other.error;
    return magnitude < other.magnitude;
  }
};

// Element `flat` of a row-major tensor of `shape` as its index: 5 in [3, 4] is "[1, 1]".
std::string index_in(int64_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] > 0 ? flat % shape[d] : 0;
    flat = shape[d] > 0 ? flat / shape[d] : 0;
  }
  std::string text = "[";
  for (size_t d = 0; d < index.size(); ++d) text += (d ? ", " : "") + std::to_string(index[d]);
  return text + "]";
}

}  // namespace

GradcheckResult gradcheck(const DifferentiableFunction& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) try {
  check(options.eps > 0 && options.atol >= 0 && options.rtol >= 0, "gradcheck",
        "expected eps > 0, atol >= 0, rtol >= 0, got eps = ", options.eps, ", atol = ", options.atol,
        ", rtol = ", options.rtol);
  bool any_requires_grad = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check(inputs[i].defined(), "gradcheck", "input ", i, " is undefined");
    check(inputs[i].dtype() == kFloat64, "gradcheck", "input ", i, " (shape ", inputs[i].shape(), ") is ",
          inputs[i].dtype(), "; finite differences need float64 inputs (use .to(tg::kFloat64))");
    any_requires_grad |= inputs[i].requires_grad();
  }
  check(any_requires_grad, "gradcheck", "no input requires grad; call requires_grad_() on the inputs to check");
  // The analytic Jacobian is a backward pass through what fn records.
  check(is_grad_enabled(), "gradcheck",
        "grad mode is off on this thread (a NoGradGuard is alive), so fn's operations are not recorded and "
        "there is no analytic gradient to check; call gradcheck outside the NoGradGuard");

  // Every evaluation, the finite differences' included, runs in the caller's grad mode, as PyTorch's
  // gradcheck does: fn may use what only grad mode allows (register_hook on an intermediate result).
  std::vector<Tensor> x = private_copies(inputs);
  const Shape out_shape = evaluate(fn, x, nullptr).shape();
  const int64_t outputs = checked_numel(out_shape, "gradcheck");
  check_jacobian_size(x, outputs, out_shape);

  // analytic[i][k * n_i + j] = d out_k / d x_i[j], one backward per output element k.
  std::vector<std::vector<double>> analytic(x.size());
  for (size_t i = 0; i < x.size(); ++i) analytic[i].assign(static_cast<size_t>(outputs * x[i].numel()), 0.0);
  for (int64_t k = 0; k < outputs; ++k) {
    for (Tensor& input : x) input.set_grad(Tensor());
    const Tensor out = evaluate(fn, x, &out_shape);
    if (!out.requires_grad()) break;  // the output does not depend on any input: all zeros
    Tensor selector = zeros(out_shape, kFloat64);
    selector.mutable_data<double>()[k] = 1.0;
    out.backward(selector);
    for (size_t i = 0; i < x.size(); ++i) {
      const Tensor grad = x[i].grad();
      if (!grad.defined()) continue;
      const double* g = grad.data<double>();
      for (int64_t j = 0; j < x[i].numel(); ++j) analytic[i][k * x[i].numel() + j] = g[j];
    }
  }

  GradcheckResult result;
  result.max_abs_error.assign(x.size(), 0.0);
  // The element reported is the one that agrees worst relative to its tolerance: the largest
  // |analytic − numeric| / (atol + rtol·|numeric|), then the largest |diff|, then the largest
  // |numeric| (so that an exact check names an element with a gradient rather than a zero).
  Closeness worst{-1.0, -1.0, -1.0};
  int64_t compared = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    // Written through the raw pointer: the perturbation is not an operation of the function.
    double* values = x[i].mutable_data<double>();
    for (int64_t j = 0; j < x[i].numel(); ++j) {
      const double original = values[j];
      values[j] = original + options.eps;
      const std::vector<double> plus = evaluate(fn, x, &out_shape).to_vector<double>();
      values[j] = original - options.eps;
      const std::vector<double> minus = evaluate(fn, x, &out_shape).to_vector<double>();
      values[j] = original;
      for (int64_t k = 0; k < outputs; ++k) {
        const double numeric = (plus[k] - minus[k]) / (2.0 * options.eps);
        const double a = analytic[i][k * x[i].numel() + j];
        const double error = std::fabs(a - numeric);
        const double allowed = options.atol + options.rtol * std::fabs(numeric);
        // Non-finite (NaN) errors rank as infinitely bad; a zero tolerance allows only exact agreement.
        const double ratio = !std::isfinite(error) ? INFINITY : allowed > 0 ? error / allowed : error > 0 ? INFINITY : 0.0;
        const Closeness here{ratio, std::isfinite(error) ? error : INFINITY, std::fabs(numeric)};
        result.max_abs_error[i] = std::max(result.max_abs_error[i], here.error);
        ++compared;
        if (worst < here) {
          worst = here;
          result.input = static_cast<int64_t>(i);
          result.element = j;
          result.output_element = k;
          result.analytic = a;
          result.numeric = numeric;
        }
      }
    }
  }
  result.passed = worst.ratio <= 1.0;
  std::ostringstream message;
  message.exceptions(std::ios::badbit);  // out of memory must throw, not cut the message short
  if (result.input < 0) {
    message << "gradcheck: nothing to compare (the inputs that require grad have no elements)";
  } else {
    const double allowed = options.atol + options.rtol * std::fabs(result.numeric);
    if (result.passed)
      message << "gradcheck passed: all " << compared << " Jacobian entries agree within atol + rtol*|numeric|; "
              << "the closest to its tolerance is ";
    else
      message << "gradcheck FAILED: Jacobian mismatch at ";
    message << "input " << result.input << " (shape " << to_string(inputs[result.input].shape()) << ") element "
            << index_in(result.element, inputs[result.input].shape()) << ", output element "
            << index_in(result.output_element, out_shape) << ": analytic " << std::setprecision(10) << result.analytic
            << " vs numeric " << result.numeric << std::setprecision(3) << " (|diff| " << worst.error;
    if (std::isfinite(worst.ratio)) message << ", " << worst.ratio << " times";
    message << " the allowed " << allowed << ")";
  }
  result.message = message.str();
  return result;
} catch (...) {
  detail::rethrow_out_of_memory_as("gradcheck");
}

}  // namespace tg
