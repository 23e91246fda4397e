// Every unary elementwise op: arithmetic (neg, sqrt, rsqrt, pow with a scalar exponent or a
// scalar base, exp, exp2, expm1, log, log2, log10, log1p, erf), trigonometric and hyperbolic
// functions (sin, cos, tan, asin, acos, atan, sinh, cosh), rounding and sign (floor, ceil, round,
// sign), activations (relu, tanh, sigmoid, gelu), abs and clamp. Each is one call of unary_op: its
// forward, one map over the tensor, sits right above its derivative, one map2 of the output
// gradient with the one tensor the derivative needs (the input or the output), and that derivative
// again in recorded tg ops, for a backward that is itself recorded (create_graph) and can be
// differentiated once more.
// Formulas and the operation order are PyTorch's CPU kernels' (ATen's UnaryOpsKernel.cpp,
// Activation.cpp, PowKernel.cpp) and its gradient formulas (derivatives.yaml), and so are the
// conventions at kinks: relu'(0) = 0, abs'(0) = 0, clamp passes the gradient where min <= x <= max,
// and floor, ceil, round and sign have a zero gradient everywhere, their jumps included.
// The forwards are scalar libm calls in this file, compiled once for the baseline ISA: the same bits
// at every vector level and thread count.
// clamp with tensor bounds broadcasts its three operands, so it is written out at the end.
#include <cmath>
#include <numbers>
#include <optional>
#include <string_view>

#include "autograd/node.hpp"
#include "bfloat16_compute.hpp"
#include "map.hpp"
#include "ops/broadcast.hpp"
#include "ops/gelu_kernels.hpp"
#include "ops/reduction.hpp"
#include "out_of_memory.hpp"

namespace tg {
namespace {

// What a unary op's backward reads besides the output gradient.
enum class Saved { Nothing, Input, Output };

// What a unary op does with int64 and bool tensors (which never require grad), as PyTorch does.
enum class Integers {
  Refused,  // tg::Error naming the op and the dtype
  ToFloat,  // computed as float32, PyTorch's default float dtype: sin of an int64 tensor is float32
  Copied,   // int64 returned as a copy, already whole (floor, ceil, round); bool refused, as PyTorch
  Kept,     // int64 and bool run the forward in their own type and keep it (sign)
};

// <cmath>'s M_SQRT2, M_SQRT1_2 and M_2_SQRTPI (exact: scaling by 2 does not round), which
// PyTorch's GELU kernels multiply in this order.
constexpr double kSqrt2 = std::numbers::sqrt2;
constexpr double kSqrtHalf = std::numbers::sqrt2 / 2;
constexpr double k2OverSqrtPi = 2 * std::numbers::inv_sqrtpi;
// The tanh form's β = √(2/π) (as PyTorch rounds it: M_SQRT2 · M_2_SQRTPI · 0.5) and κ.
constexpr double kGeluBeta = kSqrt2 * k2OverSqrtPi * 0.5;
constexpr double kGeluKappa = 0.044715;
// ln 2 and ln 10 as derivatives.yaml writes them (M_LN2 and 2.3025850929940456).
constexpr double kLn2 = std::numbers::ln2;
constexpr double kLn10 = std::numbers::ln10;

// The derivative of a step (floor, ceil, round, sign): 0, at the jumps too, as PyTorch's
// zeros_like(grad) (so a NaN or infinite output gradient still gives 0); recorded, a zero tensor.
constexpr auto kZeroDerivative = [](auto g) { return decltype(g)(0); };
const auto kZeroDerivativeGraph = [](const Tensor& g) { return zeros_like(g); };

// y = forward(x) elementwise, float32 and float64 (int64 and bool as `integers` says). The
// gradient is g → derivative(g, s) elementwise, where s is the saved input or output, or
// g → derivative(g) when nothing is saved.
// A pass that records its backward (create_graph) computes the same gradient as graph(g, s) (or
// graph(g)), written in recorded tg ops, so that it can be differentiated again: there s is
// connected to the graph (the input itself, or the output with this node as its grad_fn).
template <Saved saved, Integers integers = Integers::Refused, typename Forward, typename Derivative,
          typename GraphDerivative>
Tensor unary_op(const Tensor& x, const char* op, const char* node_name, const Forward& forward,
                const Derivative& derivative, const GraphDerivative& graph) try {
  check(x.defined(), op, "undefined tensor");
  if (detail::is_bfloat16(x))  // in float32, rounded once (bfloat16_compute.hpp)
    return detail::in_float32(
        [&](const Tensor& wide) { return unary_op<saved, integers>(wide, op, node_name, forward, derivative, graph); },
        x);
  if constexpr (integers == Integers::ToFloat)
    if (!is_floating_point(x.dtype()))
      return unary_op<saved>(x.to(kFloat32), op, node_name, forward, derivative, graph);
  if constexpr (integers == Integers::Copied) {
    detail::check_dtype<detail::DTypes<kFloat32, kFloat64, kInt64>>(op, x.dtype());
    if (x.dtype() == kInt64) return x.clone();
  }
  if constexpr (integers == Integers::Kept)
    if (!is_floating_point(x.dtype()))
      return detail::dispatch<detail::DTypes<kInt64, kBool>>(op, x.dtype(), [&]<typename T>() {
        return detail::broadcast_map<T, T>(x.shape(), forward, x);
      });
  detail::check_dtype<detail::FloatingDTypes>(op, x.dtype());
  Tensor out = detail::map(x, forward);
  if (!autograd::needs_grad(x)) return out;
  if constexpr (saved == Saved::Nothing)
    autograd::record(out, node_name, {x}, [derivative, graph](const Tensor& g, autograd::GradInputs& grads) {
      grads.set(0, grads.create_graph() ? graph(g) : detail::map(g, derivative));
    });
  else
    autograd::record(out, node_name, {x},
                     [saved_tensor = saved == Saved::Input
                                         ? autograd::SavedTensor(x)
                                         : autograd::SavedTensor(out, autograd::SavedTensor::kOutput),
                      derivative, graph](const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor& s = grads.unpack(saved_tensor);
                       grads.set(0, grads.create_graph() ? graph(g, s) : detail::map2(g, s, derivative));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as(op);
}

// A bool tensor of x's shape, keep(x) elementwise. A step's derivative is 0, so in a recorded
// backward a mask is a constant, read from x's values without recording.
template <typename Keep>
Tensor mask_of(const Tensor& x, const Keep& keep) {
  return detail::dispatch_floating("mask", x.dtype(), [&]<typename T>() {
    return detail::broadcast_map<bool, T>(x.shape(), [keep](T v) { return keep(v); }, x);
  });
}

// g where `keep` is true and 0 elsewhere, recorded (tg::where): the recorded form of a gradient
// that passes only where the op is the identity (relu, clamp).
Tensor keep_where(const Tensor& keep, const Tensor& g) { return where(keep, g, scalar_tensor(0.0, g.dtype())); }

// gelu'(x) in recorded ops, for a recorded backward (the formulas of Tensor::gelu below).
Tensor gelu_derivative_graph(const Tensor& x, bool tanh_form);

// x^p as PyTorch computes it: p = ±0.5 go through sqrt, so that x.pow(0.5) agrees with x.sqrt() at
// -inf and -0 (C's pow(-inf, 0.5) is +inf, sqrt(-inf) is nan); p = 2 is one multiply.
template <typename T>
T power(T x, T p) {
  if (p == T(2)) return x * x;
  if (p == T(0.5)) return std::sqrt(x);
  if (p == T(-0.5)) return T(1) / std::sqrt(x);
  return static_cast<T>(std::pow(x, p));
}

// float32 GELU: one vectorised pass (ops/gelu_kernels.cpp), where glibc's scalar erf and tanh
// would not vectorise. When a gradient is needed, that pass also writes gelu'(x), which costs
// little beside the exp and erfc it shares with gelu(x), and backward is one product with it at
// the level's vector width instead of running the exp and erfc a second time. It is saved in place of the input, and has
// its size: where nothing else keeps the input alive, the memory is the same. The same bits as
// computing gelu'(x) in backward. That saved derivative is a constant to a recorded backward, which
// recomputes gelu'(x) from the input in recorded ops: so the input is saved too.
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
                   [saved_derivative = autograd::SavedTensor(derivative), saved_x = autograd::SavedTensor(x),
                    tanh_form = approximation == detail::GeluApproximation::tanh](const Tensor& g,
                                                                                    autograd::GradInputs& grads) {
                     if (grads.create_graph()) {
                       grads.set(0, g * gelu_derivative_graph(grads.unpack(saved_x), tanh_form));
                       return;
                     }
                     const Tensor& derivative = grads.unpack(saved_derivative);
                     Tensor grad_input = make_tensor(derivative.shape(), kFloat32, "gelu");
                     detail::gelu_kernels_for_cpu().backward(g.data<float>(), derivative.data<float>(),
                                                             grad_input.mutable_data<float>(), derivative.numel());
                     grads.set(0, std::move(grad_input));
                   });
  return out;
}

}  // namespace

// --- arithmetic --------------------------------------------------------------------------------

Tensor operator-(const Tensor& x) {
  return unary_op<Saved::Nothing>(
      x, "neg", "NegBackward", [](auto v) { return -v; }, [](auto g) { return -g; },
      [](const Tensor& g) { return -g; });
}

Tensor Tensor::sqrt() const {
  return unary_op<Saved::Output>(
      *this, "sqrt", "SqrtBackward", [](auto v) { return std::sqrt(v); },
      [](auto g, auto y) { return g / (y + y); },  // d √x/dx = 1 / (2 √x)
      [](const Tensor& g, const Tensor& y) { return g / (y + y); });
}

// PyTorch's rsqrt kernel divides (1 / √x, no reciprocal-square-root estimate); its gradient is
// −½ g y³ from the output (derivatives.yaml: -0.5 * grad * result.pow(3), y³ as y·y·y).
Tensor Tensor::rsqrt() const {
  return unary_op<Saved::Output>(
      *this, "rsqrt", "RsqrtBackward",
      [](auto v) {
        using T = decltype(v);
        return T(1) / std::sqrt(v);
      },
      [](auto g, auto y) {
        using T = decltype(y);
        return (T(-0.5) * g) * (y * y * y);  // d x^(−½)/dx = −½ x^(−3/2) = −½ y³
      },
      [](const Tensor& g, const Tensor& y) { return (g * -0.5) * (y * y * y); });
}

Tensor Tensor::pow(double exponent) const {
  return unary_op<Saved::Input>(
      *this, "pow", "PowBackward",
      [exponent](auto v) { return power(v, static_cast<decltype(v)>(exponent)); },
      [exponent](auto g, auto x) {
        using T = decltype(x);
        const T p = static_cast<T>(exponent);
        return exponent == 0.0 ? T(0) : g * p * power(x, p - T(1));  // d x^p/dx = p x^(p−1)
      },
      [exponent](const Tensor& g, const Tensor& x) {
        return exponent == 0.0 ? zeros_like(g) : g * exponent * x.pow(exponent - 1.0);
      });
}

// base^e with a scalar base, as torch.pow(Scalar, Tensor): the base rounded to the exponent's dtype,
// then C's pow. d base^e/de = base^e · log(base), with log(base) rounded to the dtype and base^e
// recomputed from the saved exponent rather than saved; at base = 0, PyTorch's convention: 0 where
// e >= 0 (where 0^e is 0 or 1 and log(0) = -inf would give NaN or -inf).
Tensor pow(double base, const Tensor& exponent) {
  return unary_op<Saved::Input>(
      exponent, "pow", "PowBackward",
      [base](auto e) {
        using T = decltype(e);
        return static_cast<T>(std::pow(static_cast<T>(base), e));
      },
      [base](auto g, auto e) {
        using T = decltype(e);
        if (base == 0.0 && e >= T(0)) return g * T(0);
        const T power_of_base = static_cast<T>(std::pow(static_cast<T>(base), e));
        return g * (power_of_base * static_cast<T>(std::log(base)));
      },
      [base](const Tensor& g, const Tensor& e) {
        Tensor term = pow(base, e) * std::log(base);
        if (base == 0.0) term = where(mask_of(e, [](auto v) { return v >= 0; }), scalar_tensor(0.0, e.dtype()), term);
        return g * term;
      });
}

Tensor Tensor::exp() const {
  return unary_op<Saved::Output>(
      *this, "exp", "ExpBackward", [](auto v) { return std::exp(v); },
      [](auto g, auto y) { return g * y; },  // d e^x/dx = e^x
      [](const Tensor& g, const Tensor& y) { return g * y; });
}

Tensor Tensor::log() const {
  return unary_op<Saved::Input>(
      *this, "log", "LogBackward", [](auto v) { return std::log(v); },
      [](auto g, auto x) { return g / x; },  // d log x/dx = 1/x
      [](const Tensor& g, const Tensor& x) { return g / x; });
}

Tensor Tensor::log1p() const {
  return unary_op<Saved::Input>(
      *this, "log1p", "Log1pBackward", [](auto v) { return std::log1p(v); },
      [](auto g, auto x) { return g / (x + decltype(x)(1)); },  // d log(1 + x)/dx = 1 / (1 + x)
      [](const Tensor& g, const Tensor& x) { return g / (x + 1.0); });
}

// 2^x, as torch.exp2; d 2^x/dx = 2^x · ln 2 (derivatives.yaml: grad * result * M_LN2).
Tensor Tensor::exp2() const {
  return unary_op<Saved::Output, Integers::ToFloat>(
      *this, "exp2", "Exp2Backward", [](auto v) { return std::exp2(v); },
      [](auto g, auto y) { return g * y * decltype(y)(kLn2); },
      [](const Tensor& g, const Tensor& y) { return g * y * kLn2; });
}

// e^x − 1, accurate for small x, as torch.expm1; d (e^x − 1)/dx = e^x = y + 1.
Tensor Tensor::expm1() const {
  return unary_op<Saved::Output, Integers::ToFloat>(
      *this, "expm1", "Expm1Backward", [](auto v) { return std::expm1(v); },
      [](auto g, auto y) { return g * (y + decltype(y)(1)); },
      [](const Tensor& g, const Tensor& y) { return g * (y + 1.0); });
}

// d log₂ x/dx = 1 / (x ln 2), d log₁₀ x/dx = 1 / (x ln 10): derivatives.yaml divides by the product.
Tensor Tensor::log2() const {
  return unary_op<Saved::Input, Integers::ToFloat>(
      *this, "log2", "Log2Backward", [](auto v) { return std::log2(v); },
      [](auto g, auto x) { return g / (x * decltype(x)(kLn2)); },
      [](const Tensor& g, const Tensor& x) { return g / (x * kLn2); });
}

Tensor Tensor::log10() const {
  return unary_op<Saved::Input, Integers::ToFloat>(
      *this, "log10", "Log10Backward", [](auto v) { return std::log10(v); },
      [](auto g, auto x) { return g / (x * decltype(x)(kLn10)); },
      [](const Tensor& g, const Tensor& x) { return g / (x * kLn10); });
}

// The error function, as torch.erf; d erf(x)/dx = 2/√π · e^(−x²).
Tensor Tensor::erf() const {
  return unary_op<Saved::Input>(
      *this, "erf", "ErfBackward", [](auto v) { return std::erf(v); },
      [](auto g, auto x) {
        using T = decltype(x);
        return g * (T(k2OverSqrtPi) * std::exp(-(x * x)));
      },
      [](const Tensor& g, const Tensor& x) { return g * ((-(x * x)).exp() * k2OverSqrtPi); });
}

Tensor Tensor::abs() const {
  return unary_op<Saved::Input>(
      *this, "abs", "AbsBackward", [](auto v) { return std::abs(v); },
      [](auto g, auto x) {
        using T = decltype(x);
        return g * static_cast<T>((T(0) < x) - (x < T(0)));  // g · sign(x): 0 at x = 0 and for NaN
      },
      [](const Tensor& g, const Tensor& x) {  // sign(x) is a constant: abs'' = 0
        return g * detail::map(x, [](auto v) {
                 using T = decltype(v);
                 return static_cast<T>((T(0) < v) - (v < T(0)));
               });
      });
}

// --- trigonometric and hyperbolic functions ---------------------------------------------------
// int64 and bool inputs are computed as float32, as PyTorch's (torch.sin(torch.arange(3)) is
// float32). Derivatives in derivatives.yaml's operation order.

Tensor Tensor::sin() const {
  return unary_op<Saved::Input, Integers::ToFloat>(
      *this, "sin", "SinBackward", [](auto v) { return std::sin(v); },
      [](auto g, auto x) { return g * std::cos(x); },  // d sin x/dx = cos x
      [](const Tensor& g, const Tensor& x) { return g * x.cos(); });
}

Tensor Tensor::cos() const {
  return unary_op<Saved::Input, Integers::ToFloat>(
      *this, "cos", "CosBackward", [](auto v) { return std::cos(v); },
      [](auto g, auto x) { return g * -std::sin(x); },  // d cos x/dx = −sin x
      [](const Tensor& g, const Tensor& x) { return g * -x.sin(); });
}

Tensor Tensor::tan() const {
  return unary_op<Saved::Output, Integers::ToFloat>(
      *this, "tan", "TanBackward", [](auto v) { return std::tan(v); },
      [](auto g, auto y) { return g * (decltype(y)(1) + y * y); },  // d tan x/dx = 1 + tan² x
      [](const Tensor& g, const Tensor& y) { return g * (1.0 + y * y); });
}

// d asin x/dx = 1/√(1 − x²) and d acos x/dx = −1/√(1 − x²): PyTorch's (−x·x + 1).rsqrt(), a
// division (as its rsqrt kernel); ±inf at ±1, NaN beyond.
Tensor Tensor::asin() const {
  return unary_op<Saved::Input, Integers::ToFloat>(
      *this, "asin", "AsinBackward", [](auto v) { return std::asin(v); },
      [](auto g, auto x) {
        using T = decltype(x);
        return g * (T(1) / std::sqrt(T(1) - x * x));
      },
      [](const Tensor& g, const Tensor& x) { return g * (1.0 - x * x).rsqrt(); });
}

Tensor Tensor::acos() const {
  return unary_op<Saved::Input, Integers::ToFloat>(
      *this, "acos", "AcosBackward", [](auto v) { return std::acos(v); },
      [](auto g, auto x) {
        using T = decltype(x);
        return g * -(T(1) / std::sqrt(T(1) - x * x));
      },
      [](const Tensor& g, const Tensor& x) { return g * -(1.0 - x * x).rsqrt(); });
}

Tensor Tensor::atan() const {
  return unary_op<Saved::Input, Integers::ToFloat>(
      *this, "atan", "AtanBackward", [](auto v) { return std::atan(v); },
      [](auto g, auto x) { return g / (x * x + decltype(x)(1)); },  // d atan x/dx = 1 / (1 + x²)
      [](const Tensor& g, const Tensor& x) { return g / (x * x + 1.0); });
}

Tensor Tensor::sinh() const {
  return unary_op<Saved::Input, Integers::ToFloat>(
      *this, "sinh", "SinhBackward", [](auto v) { return std::sinh(v); },
      [](auto g, auto x) { return g * std::cosh(x); },  // d sinh x/dx = cosh x
      [](const Tensor& g, const Tensor& x) { return g * x.cosh(); });
}

Tensor Tensor::cosh() const {
  return unary_op<Saved::Input, Integers::ToFloat>(
      *this, "cosh", "CoshBackward", [](auto v) { return std::cosh(v); },
      [](auto g, auto x) { return g * std::sinh(x); },  // d cosh x/dx = sinh x
      [](const Tensor& g, const Tensor& x) { return g * x.sinh(); });
}

// --- rounding and sign ---------------------------------------------------------------------------
// Steps: a zero gradient everywhere (kZeroDerivative). int64 is already whole, so floor, ceil and
// round return a copy of it; sign computes −1/0/1 in int64 and is the identity on bool.

Tensor Tensor::floor() const {
  return unary_op<Saved::Nothing, Integers::Copied>(
      *this, "floor", "FloorBackward", [](auto v) { return std::floor(v); }, kZeroDerivative, kZeroDerivativeGraph);
}

Tensor Tensor::ceil() const {
  return unary_op<Saved::Nothing, Integers::Copied>(
      *this, "ceil", "CeilBackward", [](auto v) { return std::ceil(v); }, kZeroDerivative, kZeroDerivativeGraph);
}

// Halves to even: C's nearbyint in the default rounding mode, as PyTorch's kernel. With decimals,
// PyTorch's round_decimals kernel: the scale 10^|d| computed in double and rounded to the dtype, then
// nearbyint(x · scale) / scale, or nearbyint(x / scale) · scale for d < 0 (so 10^|d| overflowing
// float32 gives NaN, as in PyTorch).
Tensor Tensor::round(int64_t decimals) const {
  check(decimals == 0 || !defined() || is_floating_point(dtype()), "round", "decimals = ", decimals,
        " is not implemented for ", dtype(), " tensors (convert with .to(tg::kFloat32))");
  const bool negative = decimals < 0;
  const double scale = std::pow(10.0, std::fabs(static_cast<double>(decimals)));
  return unary_op<Saved::Nothing, Integers::Copied>(
      *this, "round", "RoundBackward",
      [decimals, negative, scale](auto v) {
        using T = decltype(v);
        const T ten_pow = static_cast<T>(scale);
        if (decimals == 0) return std::nearbyint(v);
        return negative ? std::nearbyint(v / ten_pow) * ten_pow : std::nearbyint(v * ten_pow) / ten_pow;
      },
      kZeroDerivative, kZeroDerivativeGraph);
}

// (0 < x) − (x < 0): ±0 and NaN give 0, as PyTorch's kernel.
Tensor Tensor::sign() const {
  return unary_op<Saved::Nothing, Integers::Kept>(
      *this, "sign", "SignBackward",
      [](auto v) {
        using T = decltype(v);
        return static_cast<T>((T(0) < v) - (v < T(0)));
      },
      kZeroDerivative, kZeroDerivativeGraph);
}

// --- activations -------------------------------------------------------------------------------

Tensor Tensor::relu() const {
  // max(x, 0) written as PyTorch's clamp_min: NaN stays NaN and -0 stays -0 (x < 0 is false for
  // both). The gradient is PyTorch's threshold_backward: 0 where the output is <= 0 (so 0 at
  // x = 0); it passes everywhere else, NaN outputs included.
  return unary_op<Saved::Output>(
      *this, "relu", "ReluBackward", [](auto v) { return v < 0 ? decltype(v)(0) : v; },
      [](auto g, auto y) { return y <= 0 ? decltype(g)(0) : g; },
      [](const Tensor& g, const Tensor& y) { return keep_where(mask_of(y, [](auto v) { return !(v <= 0); }), g); });
}

Tensor Tensor::tanh() const {
  return unary_op<Saved::Output>(
      *this, "tanh", "TanhBackward", [](auto v) { return std::tanh(v); },
      [](auto g, auto y) { return g * (decltype(y)(1) - y * y); },  // d tanh/dx = 1 − tanh²
      [](const Tensor& g, const Tensor& y) { return g * (1.0 - y * y); });
}

Tensor Tensor::sigmoid() const {
  return unary_op<Saved::Output>(
      *this, "sigmoid", "SigmoidBackward",
      [](auto v) {
        using T = decltype(v);
        return T(1) / (T(1) + std::exp(-v));  // σ(x) = 1 / (1 + e^−x)
      },
      [](auto g, auto y) { return g * (decltype(y)(1) - y) * y; },  // σ' = (1 − σ) σ
      [](const Tensor& g, const Tensor& y) { return g * (1.0 - y) * y; });
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
  if (detail::is_bfloat16(*this))
    return detail::in_float32([approximate](const Tensor& x) { return x.gelu(approximate); }, *this);
  if (defined() && dtype() == kFloat32)
    return gelu_float32(*this, tanh_form ? detail::GeluApproximation::tanh : detail::GeluApproximation::none);
  if (tanh_form)
    return unary_op<Saved::Input>(
        *this, "gelu", "GeluBackward",
        [](auto x) {
          using T = decltype(x);
          const T beta = T(kGeluBeta), kappa = T(kGeluKappa);
          const T inner = beta * (x + kappa * (x * x * x));
          return T(0.5) * x * (T(1) + std::tanh(inner));
        },
        [](auto g, auto x) {
          using T = decltype(x);
          const T beta = T(kGeluBeta), kappa = T(kGeluKappa);
          const T x_squared = x * x;
          const T tanh_inner = std::tanh(beta * (x + kappa * (x_squared * x)));
          const T left_derivative = T(0.5) * (T(1) + tanh_inner);
          const T inner_derivative = beta * (T(1) + T(3) * kappa * x_squared);
          const T right_derivative = T(0.5) * x * (T(1) - tanh_inner * tanh_inner) * inner_derivative;
          return g * (left_derivative + right_derivative);
        },
        [](const Tensor& g, const Tensor& x) { return g * gelu_derivative_graph(x, true); });
  return unary_op<Saved::Input>(
      *this, "gelu", "GeluBackward",
      [](auto x) {
        using T = decltype(x);
        return x * T(0.5) * (T(1) + std::erf(x * T(kSqrtHalf)));
      },
      [](auto g, auto x) {
        using T = decltype(x);
        const T pdf_scale = T(k2OverSqrtPi * kSqrtHalf * 0.5);  // 1/√(2π)
        const T cdf = T(0.5) * (T(1) + std::erf(x * T(kSqrtHalf)));
        const T pdf = pdf_scale * std::exp(x * x * T(-0.5));
        return g * (cdf + x * pdf);
      },
      [](const Tensor& g, const Tensor& x) { return g * gelu_derivative_graph(x, false); });
} catch (...) {
  detail::rethrow_out_of_memory_as("gelu");
}

namespace {
Tensor gelu_derivative_graph(const Tensor& x, bool tanh_form) {
  if (tanh_form) {
    const Tensor x_squared = x * x;
    const Tensor tanh_inner = ((x + x_squared * x * kGeluKappa) * kGeluBeta).tanh();
    const Tensor left_derivative = (tanh_inner + 1.0) * 0.5;
    const Tensor inner_derivative = (x_squared * (3.0 * kGeluKappa) + 1.0) * kGeluBeta;
    return left_derivative + x * 0.5 * (1.0 - tanh_inner * tanh_inner) * inner_derivative;
  }
  const Tensor cdf = ((x * kSqrtHalf).erf() + 1.0) * 0.5;                       // Φ(x)
  const Tensor pdf = (x * x * -0.5).exp() * (k2OverSqrtPi * kSqrtHalf * 0.5);  // φ(x) = e^(−x²/2) / √(2π)
  return cdf + x * pdf;
}
}  // namespace

// PyTorch's clamp: min(max(x, min), max) with the bounds rounded to the tensor's dtype, so
// min > max gives max everywhere; NaN in x stays NaN, and a NaN bound makes everything NaN when
// both bounds are given (alone, a NaN bound compares false and leaves x as it is, as in PyTorch).
// The gradient passes where min <= x <= max (both ends included) and is 0 elsewhere and at NaN.
Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const {
  check(min || max, "clamp", "at least one of min and max must be given");
  const double low = min.value_or(-INFINITY), high = max.value_or(INFINITY);
  const bool nan_bounds = min && max && (std::isnan(low) || std::isnan(high));
  return unary_op<Saved::Input>(
      *this, "clamp", "ClampBackward",
      [low, high, nan_bounds](auto x) {
        using T = decltype(x);
        const T lower = static_cast<T>(low), upper = static_cast<T>(high);
        const T raised = x < lower ? lower : x;
        return nan_bounds ? T(NAN) : (upper < raised ? upper : raised);
      },
      [low, high](auto g, auto x) {
        using T = decltype(x);
        return x >= static_cast<T>(low) && x <= static_cast<T>(high) ? g : T(0);
      },
      [low, high](const Tensor& g, const Tensor& x) {
        return keep_where(mask_of(x,
                                  [low, high](auto v) {
                                    using T = decltype(v);
                                    return v >= static_cast<T>(low) && v <= static_cast<T>(high);
                                  }),
                          g);
      });
}

Tensor Tensor::clamp_min(double min) const { return clamp(min, std::nullopt); }
Tensor Tensor::clamp_max(double max) const { return clamp(std::nullopt, max); }

// torch.clamp(x, min, max) with tensor bounds: x, min and max broadcast together (one of the bounds
// may be absent), of x's dtype. Forward: min(max(x, lo), hi) as above; a NaN anywhere gives NaN
// (PyTorch's maximum/minimum with a tensor, and its clamp kernel with both). An absent bound is a
// 0-d ±inf, which changes no value. Gradients (derivatives.yaml, clamp_backward_min_max), each
// summed back to its operand's shape:
//   x:   g where lo <= x <= hi
//   min: g where x < lo, and lo < hi when max is given (a crossed min loses to max)
//   max: g where x > hi, or hi < lo when min is given (a crossed max wins everywhere)
// NaN fails every comparison: no gradient flows to any operand there.
Tensor Tensor::clamp(const std::optional<Tensor>& min, const std::optional<Tensor>& max) const try {
  const char* op = "clamp";
  check(defined(), op, "undefined tensor");
  check(min || max, op, "at least one of min and max must be given");
  if (detail::all_bfloat16(*this, min, max))
    return detail::in_float32([](const Tensor& x, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) {
      return x.clamp(lo, hi);
    }, *this, min, max);
  detail::check_dtype<detail::FloatingDTypes>(op, dtype());
  for (const auto& [bound, name] : {std::pair{&min, "min"}, std::pair{&max, "max"}}) {
    if (!*bound) continue;
    check((*bound)->defined(), op, name, " is an undefined tensor (pass std::nullopt for no bound)");
    check((*bound)->dtype() == dtype(), op, "dtypes differ: input ", dtype(), ", ", name, " ", (*bound)->dtype(),
          " (convert one with .to())");
  }
  const bool has_min = min.has_value(), has_max = max.has_value();
  const Tensor low = has_min ? *min : scalar_tensor(-INFINITY, dtype());
  const Tensor high = has_max ? *max : scalar_tensor(INFINITY, dtype());
  const Shape out_shape = broadcast_shapes(broadcast_shapes(shape(), low.shape(), op), high.shape(), op);
  Tensor out = detail::dispatch_floating(op, dtype(), [&]<typename T>() {
    return detail::broadcast_map<T, T, T, T>(
        out_shape,
        [](T x, T lo, T hi) {
          const T raised = x < lo ? lo : x;
          return lo != lo || hi != hi ? T(NAN) : (hi < raised ? hi : raised);
        },
        *this, low, high);
  });
  if (autograd::needs_grad(*this, low, high))
    autograd::record(out, "ClampBackward", {*this, low, high},
                     [saved_x = autograd::SavedTensor(*this), saved_low = autograd::SavedTensor(low),
                      saved_high = autograd::SavedTensor(high), has_min,
                      has_max](const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor &x = grads.unpack(saved_x), &low = grads.unpack(saved_low),
                                    &high = grads.unpack(saved_high);
                       // The output gradient where passes(x, lo, hi) holds, 0 elsewhere, summed to `shape`;
                       // recorded, the mask a constant, when the backward is.
                       const auto masked = [&](const Shape& shape, auto passes) {
                         if (grads.create_graph())
                           return detail::sum_to(
                               keep_where(detail::dispatch_floating("ClampBackward", g.dtype(), [&]<typename T>() {
                                            return detail::broadcast_map<bool, T, T, T>(
                                                g.shape(), [passes](T xv, T lo, T hi) { return passes(xv, lo, hi); },
                                                x, low, high);
                                          }),
                                          g),
                               shape);
                         return detail::sum_to(
                             detail::dispatch_floating("ClampBackward", g.dtype(), [&]<typename T>() {
                               return detail::broadcast_map<T, T, T, T, T>(
                                   g.shape(), [passes](T gv, T xv, T lo, T hi) { return passes(xv, lo, hi) ? gv : T(0); },
                                   g, x, low, high);
                             }),
                             shape);
                       };
                       if (grads.needed(0))
                         grads.set(0, masked(x.shape(), [](auto xv, auto lo, auto hi) { return xv >= lo && xv <= hi; }));
                       if (grads.needed(1))
                         grads.set(1, masked(low.shape(), [has_max](auto xv, auto lo, auto hi) {
                                     return xv < lo && (!has_max || lo < hi);
                                   }));
                       if (grads.needed(2))
                         grads.set(2, masked(high.shape(), [has_min](auto xv, auto lo, auto hi) {
                                     return xv > hi || (has_min && hi < lo);
                                   }));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("clamp");
}

Tensor sqrt(const Tensor& x) { return x.sqrt(); }
Tensor rsqrt(const Tensor& x) { return x.rsqrt(); }
Tensor pow(const Tensor& x, double exponent) { return x.pow(exponent); }
Tensor exp(const Tensor& x) { return x.exp(); }
Tensor log(const Tensor& x) { return x.log(); }
Tensor relu(const Tensor& x) { return x.relu(); }
Tensor log1p(const Tensor& x) { return x.log1p(); }
Tensor tanh(const Tensor& x) { return x.tanh(); }
Tensor sigmoid(const Tensor& x) { return x.sigmoid(); }
Tensor gelu(const Tensor& x, std::string_view approximate) { return x.gelu(approximate); }
Tensor erf(const Tensor& x) { return x.erf(); }
Tensor abs(const Tensor& x) { return x.abs(); }
Tensor sin(const Tensor& x) { return x.sin(); }
Tensor cos(const Tensor& x) { return x.cos(); }
Tensor tan(const Tensor& x) { return x.tan(); }
Tensor asin(const Tensor& x) { return x.asin(); }
Tensor acos(const Tensor& x) { return x.acos(); }
Tensor atan(const Tensor& x) { return x.atan(); }
Tensor sinh(const Tensor& x) { return x.sinh(); }
Tensor cosh(const Tensor& x) { return x.cosh(); }
Tensor exp2(const Tensor& x) { return x.exp2(); }
Tensor log2(const Tensor& x) { return x.log2(); }
Tensor log10(const Tensor& x) { return x.log10(); }
Tensor expm1(const Tensor& x) { return x.expm1(); }
Tensor floor(const Tensor& x) { return x.floor(); }
Tensor ceil(const Tensor& x) { return x.ceil(); }
Tensor round(const Tensor& x, int64_t decimals) { return x.round(decimals); }
Tensor sign(const Tensor& x) { return x.sign(); }
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) { return x.clamp(min, max); }
Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
  return x.clamp(min, max);
}

}  // namespace tg
