// The activation modules and their functional forms. ReLU, GELU, Tanh and Sigmoid are core's
// elementwise ops (core/src/ops/unary_math.cpp), called from here. SiLU, LeakyReLU, ELU, Softplus,
// Hardswish and Mish are written below as one table: each is a struct holding its options and
//   value(x)          y = f(x), PyTorch's CPU kernel (Activation.cpp) operation for operation,
//   gradient(g, x)    g · f'(x), PyTorch's *_backward kernel, its conventions at the kinks included,
//   derivative_graph  f'(x) in recorded tg ops, so that a recorded backward (create_graph) can be
//                     differentiated again with derivatives.yaml's second derivatives,
// and pointwise_activation runs any of them: one map forward, one tape node that saves the input,
// one map2 backward. Those whose formula needs e^x (SiLU, ELU, Softplus, Mish) also name their
// float32 kernels (kFloatKernels, activation_kernels.cpp: the same functions in float lanes with a
// vectorised exp, where glibc's scalar exp, expm1, log1p and tanh would not vectorise); float64
// keeps value and gradient, over the C library.
#include <algorithm>
#include <concepts>
#include <cmath>
#include <utility>

#include "activation_kernels.hpp"
#include "autograd/node.hpp"
#include "bfloat16_compute.hpp"
#include "dispatch.hpp"
#include "map.hpp"
#include "out_of_memory.hpp"
#include "tapegrad/nn/activation.hpp"
#include "tapegrad/nn/functional.hpp"

namespace tg::nn {
namespace {

// f'(x) read from x's values without recording: a constant to a recorded backward. A piecewise
// op's derivative_graph takes it where f' is locally constant (or at a kink), so that there the
// second derivative is 0, as PyTorch's masks make it.
template <typename Op>
Tensor constant_derivative(const Op& op, const Tensor& x) {
  return tg::detail::map(x.detach(), [op](auto v) { return op.gradient(decltype(v)(1), v); });
}

// y = op.value(x) elementwise, float32 and float64, with one tape node whose backward is
// g · f'(x) from the saved input: op.gradient in one pass, or g · op.derivative_graph(x) when the
// backward is recorded.
// An Op with float32 kernels: kFloatKernels names its entry in the kernel table, float_options()
// gives its options in float.
template <typename Op>
concept HasFloatKernels = requires(const Op& op) {
  Op::kFloatKernels;
  { op.float_options() } -> std::same_as<tg::detail::ActivationOptions>;
};

// pointwise_activation for float32 over the op's kernels: one vectorised pass forward, one
// backward from g and the saved input (a recorded backward is the same as for float64).
template <HasFloatKernels Op>
Tensor float32_activation(const Tensor& x, const Op& op) {
  const tg::detail::PointwiseActivationKernels& kernels =
      tg::detail::activation_kernels_for_cpu().*Op::kFloatKernels;
  Tensor out = empty(x.shape(), kFloat32);
  kernels.forward(x.data<float>(), out.mutable_data<float>(), x.numel(), op.float_options());
  if (!autograd::needs_grad(x)) return out;
  autograd::record(out, Op::kNode, {x},
                   [op, &kernels, saved_x = autograd::SavedTensor(x)](const Tensor& g, autograd::GradInputs& grads) {
                     const Tensor& input = grads.unpack(saved_x);
                     if (grads.create_graph()) {
                       grads.set(0, g * op.derivative_graph(input));
                       return;
                     }
                     Tensor dx = empty(input.shape(), kFloat32);
                     const Tensor gradient = g.dtype() == kFloat32 ? g : g.to(kFloat32);
                     kernels.backward(gradient.data<float>(), input.data<float>(), dx.mutable_data<float>(),
                                      input.numel(), op.float_options());
                     grads.set(0, dx);
                   });
  return out;
}

template <typename Op>
Tensor pointwise_activation(const Tensor& x, const Op& op) try {
  check(x.defined(), Op::kName, "undefined input");
  if (tg::detail::is_bfloat16(x))  // in float32, rounded once
    return tg::detail::in_float32([&op](const Tensor& wide) { return pointwise_activation(wide, op); }, x);
  tg::detail::check_dtype<tg::detail::FloatingDTypes>(Op::kName, x.dtype());
  if constexpr (HasFloatKernels<Op>) {
    if (x.dtype() == kFloat32) return float32_activation(x, op);
  }
  Tensor out = tg::detail::map(x, [op](auto v) { return op.value(v); });
  if (!autograd::needs_grad(x)) return out;
  autograd::record(out, Op::kNode, {x},
                   [op, saved_x = autograd::SavedTensor(x)](const Tensor& g, autograd::GradInputs& grads) {
                     const Tensor& input = grads.unpack(saved_x);
                     grads.set(0, grads.create_graph()
                                      ? g * op.derivative_graph(input)
                                      : tg::detail::map2(g, input, [op](auto gv, auto xv) { return op.gradient(gv, xv); }));
                   });
  return out;
} catch (...) {
  tg::detail::rethrow_out_of_memory_as(Op::kName);
}

// silu(x) = x σ(x);  silu'(x) = σ(x) (1 + x (1 − σ(x))).
struct SiluFormula {
  static constexpr const char* kName = "silu";
  static constexpr const char* kNode = "SiluBackward";
  static constexpr auto kFloatKernels = &tg::detail::ActivationKernels::silu;
  tg::detail::ActivationOptions float_options() const { return {}; }
  template <typename T>
  T value(T x) const {
    return x / (T(1) + std::exp(-x));
  }
  template <typename T>
  T gradient(T g, T x) const {
    const T sigmoid = T(1) / (T(1) + std::exp(-x));
    return g * sigmoid * (T(1) + x * (T(1) - sigmoid));
  }
  Tensor derivative_graph(const Tensor& x) const {
    const Tensor sigmoid = x.sigmoid();
    return sigmoid * (1.0 + x * (1.0 - sigmoid));
  }
};

// leaky_relu(x) = x for x > 0, s·x otherwise; the gradient at 0 is s; leaky_relu'' = 0.
struct LeakyReluFormula {
  static constexpr const char* kName = "leaky_relu";
  static constexpr const char* kNode = "LeakyReluBackward";
  double negative_slope;
  // (Each parameter is read unconditionally, so that the compiler hoists it out of the loop and
  // vectorises the select.)
  template <typename T>
  T value(T x) const {
    const T slope = T(negative_slope);
    return x > T(0) ? x : x * slope;
  }
  template <typename T>
  T gradient(T g, T x) const {
    const T slope = T(negative_slope);
    return x > T(0) ? g : g * slope;
  }
  Tensor derivative_graph(const Tensor& x) const { return constant_derivative(*this, x); }
};

// elu(x) = x for x > 0, α (eˣ − 1) otherwise; elu'(x) = α eˣ for x <= 0 (α at 0), 1 above.
// eˣ − 1 as expm1 (PyTorch subtracts, losing the digits of a small |x|). elu'' = α eˣ for x < 0 only:
// 0 at x = 0, as derivatives.yaml's elu_double_backward masks it.
struct EluFormula {
  static constexpr const char* kName = "elu";
  static constexpr const char* kNode = "EluBackward";
  static constexpr auto kFloatKernels = &tg::detail::ActivationKernels::elu;
  tg::detail::ActivationOptions float_options() const { return {.alpha = static_cast<float>(alpha)}; }
  double alpha;
  template <typename T>
  T value(T x) const {
    const T a = T(alpha);
    return x <= T(0) ? std::expm1(x) * a : x;
  }
  template <typename T>
  T gradient(T g, T x) const {
    const T a = T(alpha);
    return x <= T(0) ? g * a * std::exp(x) : g;
  }
  Tensor derivative_graph(const Tensor& x) const {
    // exp of x <= 0 only: where's unselected branch still gets a zero gradient, and 0 · e^1000 is NaN
    return where(x < 0.0, x.clamp_max(0.0).exp() * alpha, constant_derivative(*this, x));
  }
};

// softplus(x) = log(1 + e^(βx)) / β, x itself where βx > threshold; softplus'(x) = σ(βx) there
// (z / (z + 1), z = e^(βx)), 1 above. softplus'' = β σ(βx)(1 − σ(βx)) for βx < threshold only, as
// derivatives.yaml's softplus_double_backward (so 0 at βx = threshold).
struct SoftplusFormula {
  static constexpr const char* kName = "softplus";
  static constexpr const char* kNode = "SoftplusBackward";
  static constexpr auto kFloatKernels = &tg::detail::ActivationKernels::softplus;
  tg::detail::ActivationOptions float_options() const {
    return {.beta = static_cast<float>(beta), .threshold = static_cast<float>(threshold)};
  }
  double beta, threshold;
  template <typename T>
  T value(T x) const {
    const T scaled = x * T(beta);
    return scaled > T(threshold) ? x : std::log1p(std::exp(scaled)) / T(beta);
  }
  template <typename T>
  T gradient(T g, T x) const {
    const T scaled = x * T(beta);
    const T z = std::exp(scaled);
    return scaled > T(threshold) ? g : g * z / (z + T(1));
  }
  Tensor derivative_graph(const Tensor& x) const {
    const Tensor scaled = x * beta;
    return where(scaled < threshold, scaled.sigmoid(), constant_derivative(*this, x));
  }
};

// hardswish(x) = x · min(max(x + 3, 0), 6) / 6; hardswish'(x) = 0 below −3, x/3 + ½ on [−3, 3),
// 1 from 3 on: at both kinks the derivative from the right (−½ at −3, 1 at 3), as PyTorch's
// vectorised kernel, which computes all but a tensor's last few elements (its scalar tail takes
// 1.5 at 3). hardswish'' = ⅓ on (−3, 3) only, as derivatives.yaml.
struct HardswishFormula {
  static constexpr const char* kName = "hardswish";
  static constexpr const char* kNode = "HardswishBackward";
  template <typename T>
  T value(T x) const {
    return x * std::min(std::max(x + T(3), T(0)), T(6)) / T(6);
  }
  template <typename T>
  T gradient(T g, T x) const {
    if (x < T(-3)) return T(0);
    if (x < T(3)) return g * (x / T(3) + T(0.5));
    return g;
  }
  Tensor derivative_graph(const Tensor& x) const {
    return where(x.abs() < 3.0, x / 3.0 + 0.5, constant_derivative(*this, x));
  }
};

// mish(x) = x tanh(sp), sp = softplus(x) = log(1 + eˣ); mish'(x) = tanh(sp) + x σ(x) (1 − tanh²(sp)),
// since sp' = σ. The recorded form is derivatives.yaml's infinitely_differentiable_mish_backward.
struct MishFormula {
  static constexpr const char* kName = "mish";
  static constexpr const char* kNode = "MishBackward";
  static constexpr auto kFloatKernels = &tg::detail::ActivationKernels::mish;
  tg::detail::ActivationOptions float_options() const { return {}; }
  template <typename T>
  T value(T x) const {
    return x * std::tanh(std::log1p(std::exp(x)));
  }
  template <typename T>
  T gradient(T g, T x) const {
    const T sigmoid = T(1) / (T(1) + std::exp(-x));
    const T tanh_softplus = std::tanh(std::log1p(std::exp(x)));
    return g * (tanh_softplus + x * sigmoid * (T(1) - tanh_softplus * tanh_softplus));
  }
  Tensor derivative_graph(const Tensor& x) const {
    const Tensor sigmoid = x.sigmoid();
    const Tensor tanh_softplus = functional::softplus(x).tanh();
    return tanh_softplus + x * sigmoid * (1.0 - tanh_softplus * tanh_softplus);
  }
};

}  // namespace

Tensor functional::relu(const Tensor& x) {
  check(x.defined(), "relu", "undefined input");
  return tg::relu(x);
}

Tensor functional::gelu(const Tensor& x, std::string_view approximate) {
  check(x.defined(), "gelu", "undefined input");
  return tg::gelu(x, approximate);
}

Tensor functional::tanh(const Tensor& x) {
  check(x.defined(), "tanh", "undefined input");
  return tg::tanh(x);
}

Tensor functional::sigmoid(const Tensor& x) {
  check(x.defined(), "sigmoid", "undefined input");
  return tg::sigmoid(x);
}

Tensor functional::silu(const Tensor& x) { return pointwise_activation(x, SiluFormula{}); }

Tensor functional::leaky_relu(const Tensor& x, double negative_slope) {
  return pointwise_activation(x, LeakyReluFormula{.negative_slope = negative_slope});
}

Tensor functional::elu(const Tensor& x, double alpha) { return pointwise_activation(x, EluFormula{.alpha = alpha}); }

Tensor functional::softplus(const Tensor& x, double beta, double threshold) {
  return pointwise_activation(x, SoftplusFormula{.beta = beta, .threshold = threshold});
}

Tensor functional::hardswish(const Tensor& x) { return pointwise_activation(x, HardswishFormula{}); }

Tensor functional::mish(const Tensor& x) { return pointwise_activation(x, MishFormula{}); }

GELU::GELU(std::string approximate) : approximate(std::move(approximate)) {
  check(this->approximate == "none" || this->approximate == "tanh", "GELU",
        "approximate must be \"none\" or \"tanh\", got \"", this->approximate, "\"");
}

Tensor ReLU::forward(const Tensor& x) { return functional::relu(x); }
Tensor GELU::forward(const Tensor& x) { return functional::gelu(x, approximate); }
Tensor Tanh::forward(const Tensor& x) { return functional::tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return functional::sigmoid(x); }
Tensor Identity::forward(const Tensor& x) { return x; }
Tensor SiLU::forward(const Tensor& x) { return functional::silu(x); }
Tensor Hardswish::forward(const Tensor& x) { return functional::hardswish(x); }
Tensor Mish::forward(const Tensor& x) { return functional::mish(x); }

LeakyReLU::LeakyReLU(const LeakyReLUOptions& options) : options(options) {}
Tensor LeakyReLU::forward(const Tensor& x) { return functional::leaky_relu(x, options.negative_slope); }

ELU::ELU(const ELUOptions& options) : options(options) {}
Tensor ELU::forward(const Tensor& x) { return functional::elu(x, options.alpha); }

Softplus::Softplus(const SoftplusOptions& options) : options(options) {}
Tensor Softplus::forward(const Tensor& x) { return functional::softplus(x, options.beta, options.threshold); }

Flatten::Flatten(int64_t start_dim, int64_t end_dim) : start_dim(start_dim), end_dim(end_dim) {}

// torch.flatten: a 0-d input counts as one dim and becomes [1]; start after end is an error.
Tensor Flatten::forward(const Tensor& x) {
  check(x.defined(), "Flatten", "undefined input");
  const int64_t ndim = std::max<int64_t>(x.dim(), 1);
  const auto wrap = [&](int64_t dim, const char* which) {
    check(dim >= -ndim && dim < ndim, "Flatten", which, " ", dim, " is out of range for a tensor of shape ",
          x.shape(), " (expected a dim in [", -ndim, ", ", ndim - 1, "])");
    return dim < 0 ? dim + ndim : dim;
  };
  const int64_t first = wrap(start_dim, "start_dim"), last = wrap(end_dim, "end_dim");
  check(first <= last, "Flatten", "start_dim ", start_dim, " comes after end_dim ", end_dim, " for a tensor of shape ",
        x.shape());
  if (x.dim() == 0) return x.reshape({1});
  Shape shape(x.shape().begin(), x.shape().begin() + first);
  int64_t merged = 1;
  for (int64_t d = first; d <= last; ++d) merged *= x.shape()[d];
  shape.push_back(merged);
  shape.insert(shape.end(), x.shape().begin() + last + 1, x.shape().end());
  return x.reshape(shape);
}

Unflatten::Unflatten(int64_t dim, Shape sizes) : dim(dim), sizes(std::move(sizes)) {}

Tensor Unflatten::forward(const Tensor& x) {
  check(x.defined(), "Unflatten", "undefined input");
  return x.unflatten(dim, sizes);
}

}  // namespace tg::nn
