// gradcheck: the analytic Jacobian (one backward per output element) against the numeric one
// (central differences, two evaluations per input element), compared element by element.
// gradgradcheck: gradcheck of the function that returns the first gradients, taken with
// create_graph, so that its analytic Jacobian is a double backward.
#include "tapegrad/gradcheck.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "out_of_memory.hpp"
#include "tapegrad/autograd.hpp"
#include "tapegrad/autograd/grad.hpp"
#include "tensor_impl.hpp"

namespace tg {

namespace {

// Every input defined and float64 (finite differences need it), and at least one requiring grad.
void check_inputs(const std::vector<Tensor>& inputs, const char* op) {
  bool any_requires_grad = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check(inputs[i].defined(), op, "input ", i, " is undefined");
    check(inputs[i].dtype() == kFloat64, op, "input ", i, " (shape ", inputs[i].shape(), ") is ", inputs[i].dtype(),
          "; finite differences need float64 inputs (use .to(tg::kFloat64))");
    any_requires_grad |= inputs[i].requires_grad();
  }
  check(any_requires_grad, op, "no input requires grad; call requires_grad_() on the inputs to check");
}

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
  check_inputs(inputs, "gradcheck");
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

namespace {

// The message of a gradcheck run on first gradients, retold for gradgradcheck: its own name, and
// which input's first gradient the worst output element belongs to (the output is the
// concatenation of the flattened first gradients of the inputs that require grad, in input order).
void retell_for_gradgradcheck(GradcheckResult& result, const std::vector<Tensor>& inputs) {
  const std::string prefix = "gradcheck";
  if (result.message.compare(0, prefix.size(), prefix) == 0) result.message.insert(0, "grad");
  result.message += " [the function checked: (inputs, grad_output) -> the inputs' first gradients of "
                    "sum(fn(inputs) * grad_output), taken with create_graph";
  if (result.input == static_cast<int64_t>(inputs.size())) result.message += "; input " + std::to_string(result.input) + " is grad_output";
  if (result.output_element >= 0) {
    int64_t offset = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].requires_grad()) continue;
      const int64_t n = inputs[i].numel();
      if (result.output_element < offset + n) {
        result.message += "; output element " + std::to_string(result.output_element) +
                          " is the first gradient of input " + std::to_string(i) + " (shape " +
                          to_string(inputs[i].shape()) + ") at " + index_in(result.output_element - offset, inputs[i].shape());
        break;
      }
      offset += n;
    }
  }
  result.message += "]";
}

}  // namespace

GradcheckResult gradgradcheck(const DifferentiableFunction& fn, const std::vector<Tensor>& inputs,
                              const Tensor& grad_output, const GradcheckOptions& options) {
  check_inputs(inputs, "gradgradcheck");
  check(is_grad_enabled(), "gradgradcheck",
        "grad mode is off on this thread (a NoGradGuard is alive), so neither fn nor its backward is recorded; "
        "call gradgradcheck outside the NoGradGuard");
  check(grad_output.defined(), "gradgradcheck", "grad_output is undefined");
  check(grad_output.dtype() == kFloat64, "gradgradcheck", "grad_output (shape ", grad_output.shape(), ") is ",
        grad_output.dtype(), "; it must be float64 as the inputs");

  const size_t n = inputs.size();
  // (inputs..., v) -> cat(flatten(d sum(fn(inputs) · v) / d input_i) for the inputs requiring grad).
  // gradcheck hands it private leaves that require grad exactly where the originals do.
  const DifferentiableFunction first_gradients = [&fn, n](const std::vector<Tensor>& args) {
    const std::vector<Tensor> x(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(n));
    const Tensor& v = args[n];
    const Tensor out = fn(x);
    check(out.defined(), "gradgradcheck", "the function returned an undefined tensor");
    check(out.shape() == v.shape(), "gradgradcheck", "the function returned shape ", out.shape(),
          " but grad_output has shape ", v.shape(), "; they must match");
    std::vector<Tensor> wrt;
    for (const Tensor& input : x)
      if (input.requires_grad()) wrt.push_back(input);
    std::vector<Tensor> pieces;
    if (out.requires_grad()) {
      // An input the output does not reach has a zero gradient (torch drops it; zeros keep the
      // output's layout the same at every evaluation).
      pieces = autograd::grad({out}, wrt, {v},
                              {.create_graph = true, .allow_unused = true, .materialize_grads = true});
    } else {
      for (const Tensor& input : wrt) pieces.push_back(zeros_like(input));
    }
    for (Tensor& piece : pieces) piece = piece.reshape({-1});
    return cat(pieces, 0);
  };
  std::vector<Tensor> args = inputs;
  args.push_back(grad_output);
  GradcheckResult result = gradcheck(first_gradients, args, options);
  retell_for_gradgradcheck(result, inputs);
  return result;
}

GradcheckResult gradgradcheck(const DifferentiableFunction& fn, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& options) {
  check(is_grad_enabled(), "gradgradcheck",
        "grad mode is off on this thread (a NoGradGuard is alive), so neither fn nor its backward is recorded; "
        "call gradgradcheck outside the NoGradGuard");
  for (size_t i = 0; i < inputs.size(); ++i)
    check(inputs[i].defined(), "gradgradcheck", "input ", i, " is undefined");
  // As torch: one evaluation for the output's shape, then v ~ N(0, 1) of that shape, requiring
  // grad so that the first gradients' linearity in v is checked too.
  const Tensor out = fn(inputs);
  check(out.defined(), "gradgradcheck", "the function returned an undefined tensor");
  check(out.dtype() == kFloat64, "gradgradcheck", "the function must return a float64 tensor, got ", out.dtype());
  Tensor v = randn(out.shape(), kFloat64);
  v.requires_grad_();
  return gradgradcheck(fn, inputs, v, options);
}

}  // namespace tg
