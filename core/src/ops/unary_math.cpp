// Unary math and activations: log1p, tanh, sigmoid, gelu, abs, clamp. Each forward is one map
// over the tensor and sits right above its backward, one map2 of the output gradient with the one
// tensor the derivative needs (the input or the output). Formulas and the operation order are
// PyTorch's CPU kernels' (ATen's UnaryOpsKernel.cpp, Activation.cpp), and so are the gradient
// conventions at kinks: abs'(0) = 0, clamp passes the gradient where min <= x <= max.
#include <cmath>
#include <numbers>
#include <optional>
#include <string_view>

#include "autograd/node.hpp"
#include "ops/elementwise.hpp"
#include "ops/gelu_kernels.hpp"
#include "out_of_memory.hpp"

namespace tg {
namespace {

// What a unary op's backward reads besides the output gradient.
enum class Saved { Input, Output };

// <cmath>'s M_SQRT2, M_SQRT1_2 and M_2_SQRTPI (exact: scaling by 2 does not round), which
// PyTorch's GELU kernels multiply in this order.
constexpr double kSqrt2 = std::numbers::sqrt2;
constexpr double kSqrtHalf = std::numbers::sqrt2 / 2;
constexpr double k2OverSqrtPi = 2 * std::numbers::inv_sqrtpi;
// The tanh form's β = √(2/π) (as PyTorch rounds it: M_SQRT2 · M_2_SQRTPI · 0.5) and κ.
constexpr double kGeluBeta = kSqrt2 * k2OverSqrtPi * 0.5;
constexpr double kGeluKappa = 0.044715;

// y = forward(x) elementwise; the gradient is g → derivative(g, s) elementwise, where s is the
// saved input or output. float32 and float64.
template <typename Forward, typename Derivative>
Tensor unary_op(const Tensor& x, const char* op, const char* node_name, const Forward& forward, Saved saved,
                const Derivative& derivative) try {
  check(x.defined(), op, "undefined tensor");
  detail::check_dtype<detail::FloatingDTypes>(op, x.dtype());
  Tensor out = detail::map(x, forward);
  if (autograd::needs_grad(x))
    autograd::record(out, node_name, {x},
                     [saved_tensor = autograd::SavedTensor(saved == Saved::Input ? x : out), derivative](
                         const Tensor& g, autograd::GradInputs& grads) {
                       grads.set(0, detail::map2(g, grads.unpack(saved_tensor), derivative));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as(op);
}

// float32 GELU: one vectorised pass (ops/gelu_kernels.cpp), where glibc's scalar erf and tanh
// would not vectorise. When a gradient is needed, that pass also writes gelu'(x), which costs
// little beside the exp and erfc it shares with gelu(x), and backward is one product with it
// instead of running the exp and erfc a second time. It is saved in place of the input, and has
// its size: where nothing else keeps the input alive, the memory is the same. The same bits as
// computing gelu'(x) in backward.
Tensor gelu_float32(const Tensor& x, detail::GeluApproximation approximation) {
  Tensor out = make_tensor(x.shape(), kFloat32, "gelu");
  const detail::GeluKernels& kernels = detail::gelu_kernels_for_cpu();
  if (!autograd::needs_grad(x)) {
    kernels.forward(x.data<float>(), out.mutable_data<float>(), nullptr, x.numel(), approximation);
    return out;
  }
  Tensor derivative = make_tensor(x.shape(), kFloat32, "gelu");
  kernels.forward(x.data<float>(), out.mutable_data<float>(), derivative.mutable_data<float>(), x.numel(),
                  approximation);
  autograd::record(out, "GeluBackward", {x},
                   [saved_derivative = autograd::SavedTensor(derivative)](const Tensor& g, autograd::GradInputs& grads) {
                     const Tensor& derivative = grads.unpack(saved_derivative);
                     grads.set(0, detail::map2(g, derivative, [](auto gv, auto dv) { return gv * dv; }));
                   });
  return out;
}

}  // namespace

Tensor Tensor::log1p() const {
  return unary_op(
      *this, "log1p", "Log1pBackward", [](auto v) { return std::log1p(v); }, Saved::Input,
      [](auto g, auto x) { return g / (x + decltype(x)(1)); });  // d log(1 + x)/dx = 1 / (1 + x)
}

Tensor Tensor::tanh() const {
  return unary_op(
      *this, "tanh", "TanhBackward", [](auto v) { return std::tanh(v); }, Saved::Output,
      [](auto g, auto y) { return g * (decltype(y)(1) - y * y); });  // d tanh/dx = 1 − tanh²
}

Tensor Tensor::sigmoid() const {
  return unary_op(
      *this, "sigmoid", "SigmoidBackward",
      [](auto v) {
        using T = decltype(v);
        return T(1) / (T(1) + std::exp(-v));  // σ(x) = 1 / (1 + e^−x)
      },
      Saved::Output, [](auto g, auto y) { return g * (decltype(y)(1) - y) * y; });  // σ' = (1 − σ) σ
}

Tensor Tensor::abs() const {
  return unary_op(
      *this, "abs", "AbsBackward", [](auto v) { return std::abs(v); }, Saved::Input,
      [](auto g, auto x) {
        using T = decltype(x);
        return g * static_cast<T>((T(0) < x) - (x < T(0)));  // g · sign(x): 0 at x = 0 and for NaN
      });
}

// GELU, PyTorch's kernels (Activation.cpp) operation for operation:
//   "none": y = x · ½ (1 + erf(x / √2)),                  y' = Φ(x) + x φ(x)
//   "tanh": y = ½ x (1 + tanh(u)), u = β (x + κ x³),      y' = ½ (1 + tanh u) + ½ x (1 − tanh² u) β (1 + 3κ x²)
// with β = √(2/π), κ = 0.044715. One pass forward; the backward's one pass recomputes the inner
// terms from the saved input rather than saving them (reading x costs less than writing them).
// float64 runs these formulas with glibc's erf and tanh; float32 runs gelu_float32 above.
Tensor Tensor::gelu(std::string_view approximate) const try {
  const bool tanh_form = approximate == "tanh";
  check(tanh_form || approximate == "none", "gelu", "approximate must be \"none\" or \"tanh\", got \"", approximate,
        "\"");
  if (defined() && dtype() == kFloat32)
    return gelu_float32(*this, tanh_form ? detail::GeluApproximation::tanh : detail::GeluApproximation::none);
  if (tanh_form)
    return unary_op(
        *this, "gelu", "GeluBackward",
        [](auto x) {
          using T = decltype(x);
          const T beta = T(kGeluBeta), kappa = T(kGeluKappa);
          const T inner = beta * (x + kappa * (x * x * x));
          return T(0.5) * x * (T(1) + std::tanh(inner));
        },
        Saved::Input,
        [](auto g, auto x) {
          using T = decltype(x);
          const T beta = T(kGeluBeta), kappa = T(kGeluKappa);
          const T x_squared = x * x;
          const T tanh_inner = std::tanh(beta * (x + kappa * (x_squared * x)));
          const T left_derivative = T(0.5) * (T(1) + tanh_inner);
          const T inner_derivative = beta * (T(1) + T(3) * kappa * x_squared);
          const T right_derivative = T(0.5) * x * (T(1) - tanh_inner * tanh_inner) * inner_derivative;
          return g * (left_derivative + right_derivative);
        });
  return unary_op(
      *this, "gelu", "GeluBackward",
      [](auto x) {
        using T = decltype(x);
        return x * T(0.5) * (T(1) + std::erf(x * T(kSqrtHalf)));
      },
      Saved::Input,
      [](auto g, auto x) {
        using T = decltype(x);
        const T pdf_scale = T(k2OverSqrtPi * kSqrtHalf * 0.5);  // 1/√(2π)
        const T cdf = T(0.5) * (T(1) + std::erf(x * T(kSqrtHalf)));
        const T pdf = pdf_scale * std::exp(x * x * T(-0.5));
        return g * (cdf + x * pdf);
      });
} catch (...) {
  detail::rethrow_out_of_memory_as("gelu");
}

// PyTorch's clamp: min(max(x, min), max) with the bounds rounded to the tensor's dtype, so
// min > max gives max everywhere; NaN in x stays NaN, and a NaN bound makes everything NaN when
// both bounds are given (alone, a NaN bound compares false and leaves x as it is, as in PyTorch).
// The gradient passes where min <= x <= max (both ends included) and is 0 elsewhere and at NaN.
Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const {
  check(min || max, "clamp", "at least one of min and max must be given");
  const double low = min.value_or(-INFINITY), high = max.value_or(INFINITY);
  const bool nan_bounds = min && max && (std::isnan(low) || std::isnan(high));
  return unary_op(
      *this, "clamp", "ClampBackward",
      [low, high, nan_bounds](auto x) {
        using T = decltype(x);
        const T lower = static_cast<T>(low), upper = static_cast<T>(high);
        const T raised = x < lower ? lower : x;
        return nan_bounds ? T(NAN) : (upper < raised ? upper : raised);
      },
      Saved::Input,
      [low, high](auto g, auto x) {
        using T = decltype(x);
        return x >= static_cast<T>(low) && x <= static_cast<T>(high) ? g : T(0);
      });
}

Tensor Tensor::clamp_min(double min) const { return clamp(min, std::nullopt); }
Tensor Tensor::clamp_max(double max) const { return clamp(std::nullopt, max); }

Tensor log1p(const Tensor& x) { return x.log1p(); }
Tensor tanh(const Tensor& x) { return x.tanh(); }
Tensor sigmoid(const Tensor& x) { return x.sigmoid(); }
Tensor gelu(const Tensor& x, std::string_view approximate) { return x.gelu(approximate); }
Tensor abs(const Tensor& x) { return x.abs(); }
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) { return x.clamp(min, max); }

}  // namespace tg
