// Elementwise operations: + - * / with broadcasting, unary -, sqrt, pow, exp, log, relu.
// Each forward sits right above the closure that sends its gradient back.
#include "ops/elementwise.hpp"

#include <cmath>

#include "autograd/node.hpp"
#include "ops/broadcast.hpp"
#include "ops/reduction.hpp"
#include "out_of_memory.hpp"

namespace tg {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  for (const Shape* shape : {&a, &b})
    for (int64_t size : *shape) check(size >= 0, op, "negative dimension ", size, " in shape ", *shape);
  const size_t ndim = std::max(a.size(), b.size());
  Shape out(ndim);
  for (size_t i = 0; i < ndim; ++i) {
    // Align trailing dims; a missing leading dim behaves like size 1.
    const int64_t da = i < ndim - a.size() ? 1 : a[i - (ndim - a.size())];
    const int64_t db = i < ndim - b.size() ? 1 : b[i - (ndim - b.size())];
    check(da == db || da == 1 || db == 1, op, "shapes ", a, " and ", b, " cannot be broadcast together (dim ",
          static_cast<int64_t>(i) - static_cast<int64_t>(ndim), ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

template <typename Op>
Tensor broadcast_binary(const Tensor& a, const Tensor& b, const char* op_name, const Op& op) {
  check(a.defined() && b.defined(), op_name, "undefined tensor operand");
  check(a.dtype() == b.dtype(), op_name, "dtypes differ: ", a.dtype(), " and ", b.dtype(),
        " (convert one with .to())");
  detail::check_dtype<detail::FloatingDTypes>(op_name, a.dtype());
  if (a.shape() == b.shape()) return detail::map2(a, b, op);
  const Shape out_shape = broadcast_shapes(a.shape(), b.shape(), op_name);
  Tensor out = make_tensor(out_shape, a.dtype(), op_name);
  if (out.numel() == 0) return out;
  const auto plan = detail::make_plan<2>({a.shape(), b.shape()}, out_shape);
  detail::dispatch_floating(op_name, a.dtype(), [&]<typename T>() {
    detail::broadcast_kernel(out.mutable_data<T>(), plan, op, a.data<T>(), b.data<T>());
  });
  return out;
}

Tensor scalar_like(double value, const Tensor& t) { return scalar_tensor(value, t.defined() ? t.dtype() : kFloat32); }

}  // namespace

namespace detail {
Tensor broadcast_to(const Tensor& x, const Shape& shape, double scale) {
  Tensor out = make_tensor(shape, x.dtype());
  if (out.numel() == 0) return out;
  const auto plan = make_plan<1>({x.shape()}, shape);
  dispatch_floating("broadcast_to", x.dtype(), [&]<typename T>() {
    const T factor = static_cast<T>(scale);
    broadcast_kernel(out.mutable_data<T>(), plan, [factor](T value) { return value * factor; }, x.data<T>());
  });
  return out;
}

Tensor add_same_shape(const Tensor& a, const Tensor& b) {
  return map2(a, b, [](auto x, auto y) { return x + y; });
}
}  // namespace detail

// --- binary ---------------------------------------------------------------------------------
// Broadcasting repeats an input along some dims, so its gradient is the output gradient summed
// back over those dims (sum_to).

Tensor operator+(const Tensor& a, const Tensor& b) try {
  Tensor out = broadcast_binary(a, b, "add", [](auto x, auto y) { return x + y; });
  if (autograd::needs_grad(a, b))
    autograd::record(out, "AddBackward", {a, b},
                     [sa = a.shape(), sb = b.shape()](const Tensor& g, autograd::GradInputs& grads) {
                       if (grads.needed(0)) grads.set(0, detail::sum_to(g, sa));
                       if (grads.needed(1)) grads.set(1, detail::sum_to(g, sb));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("add");
}

Tensor operator-(const Tensor& a, const Tensor& b) try {
  Tensor out = broadcast_binary(a, b, "sub", [](auto x, auto y) { return x - y; });
  if (autograd::needs_grad(a, b))
    autograd::record(out, "SubBackward", {a, b},
                     [sa = a.shape(), sb = b.shape()](const Tensor& g, autograd::GradInputs& grads) {
                       if (grads.needed(0)) grads.set(0, detail::sum_to(g, sa));
                       if (grads.needed(1)) grads.set(1, detail::sum_to(-g, sb));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("sub");
}

Tensor operator*(const Tensor& a, const Tensor& b) try {
  Tensor out = broadcast_binary(a, b, "mul", [](auto x, auto y) { return x * y; });
  if (autograd::needs_grad(a, b))
    autograd::record(out, "MulBackward", {a, b},
                     [saved_a = autograd::SavedTensor(a), saved_b = autograd::SavedTensor(b)](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor &a = grads.unpack(saved_a), &b = grads.unpack(saved_b);
                       // d(ab)/da = b, d(ab)/db = a
                       if (grads.needed(0)) grads.set(0, detail::sum_to(g * b, a.shape()));
                       if (grads.needed(1)) grads.set(1, detail::sum_to(g * a, b.shape()));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("mul");
}

Tensor operator/(const Tensor& a, const Tensor& b) try {
  Tensor out = broadcast_binary(a, b, "div", [](auto x, auto y) { return x / y; });
  if (autograd::needs_grad(a, b))
    autograd::record(out, "DivBackward", {a, b},
                     [saved_a = autograd::SavedTensor(a), saved_b = autograd::SavedTensor(b)](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor &a = grads.unpack(saved_a), &b = grads.unpack(saved_b);
                       // d(a/b)/da = 1/b, d(a/b)/db = -a/b²
                       const Tensor g_over_b = g / b;
                       if (grads.needed(0)) grads.set(0, detail::sum_to(g_over_b, a.shape()));
                       if (grads.needed(1)) grads.set(1, detail::sum_to(-(g_over_b * a / b), b.shape()));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("div");
}

// Scalars become 0-d tensors of the tensor's dtype; the 0-d tensor needs no gradient.
Tensor operator+(const Tensor& a, double b) { return a + scalar_like(b, a); }
Tensor operator-(const Tensor& a, double b) { return a - scalar_like(b, a); }
Tensor operator*(const Tensor& a, double b) { return a * scalar_like(b, a); }
Tensor operator/(const Tensor& a, double b) { return a / scalar_like(b, a); }
Tensor operator+(double a, const Tensor& b) { return scalar_like(a, b) + b; }
Tensor operator-(double a, const Tensor& b) { return scalar_like(a, b) - b; }
Tensor operator*(double a, const Tensor& b) { return scalar_like(a, b) * b; }
Tensor operator/(double a, const Tensor& b) { return scalar_like(a, b) / b; }

// --- unary ------------------------------------------------------------------------------------

namespace {
void check_unary(const Tensor& x, const char* op) {
  check(x.defined(), op, "undefined tensor");
  detail::check_dtype<detail::FloatingDTypes>(op, x.dtype());
}
}  // namespace

Tensor operator-(const Tensor& x) try {
  check_unary(x, "neg");
  Tensor out = detail::map(x, [](auto v) { return -v; });
  if (autograd::needs_grad(x))
    autograd::record(out, "NegBackward", {x},
                     [](const Tensor& g, autograd::GradInputs& grads) { grads.set(0, -g); });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("neg");
}

Tensor Tensor::sqrt() const try {
  check_unary(*this, "sqrt");
  Tensor out = detail::map(*this, [](auto v) { return std::sqrt(v); });
  if (autograd::needs_grad(*this))
    autograd::record(out, "SqrtBackward", {*this}, [saved_y = autograd::SavedTensor(out)](
                                                       const Tensor& g, autograd::GradInputs& grads) {
      const Tensor& y = grads.unpack(saved_y);
      // d sqrt(x)/dx = 1 / (2 sqrt(x))
      grads.set(0, detail::map2(g, y, [](auto gv, auto yv) { return gv / (yv + yv); }));
    });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("sqrt");
}

namespace {
// x^p as PyTorch computes it: p = ±0.5 go through sqrt, so that x.pow(0.5) agrees with x.sqrt() at
// -inf and -0 (C's pow(-inf, 0.5) is +inf, sqrt(-inf) is nan); p = 2 is one multiply.
template <typename T>
T power(T x, T p) {
  if (p == T(2)) return x * x;
  if (p == T(0.5)) return std::sqrt(x);
  if (p == T(-0.5)) return T(1) / std::sqrt(x);
  return static_cast<T>(std::pow(x, p));
}
}  // namespace

Tensor Tensor::pow(double exponent) const try {
  check_unary(*this, "pow");
  Tensor out = detail::map(*this, [exponent](auto v) { return power(v, static_cast<decltype(v)>(exponent)); });
  if (autograd::needs_grad(*this))
    autograd::record(out, "PowBackward", {*this},
                     [saved_x = autograd::SavedTensor(*this), exponent](const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor& x = grads.unpack(saved_x);
                       // d x^p/dx = p x^(p-1)
                       grads.set(0, detail::map2(g, x, [exponent](auto gv, auto xv) {
                                   using T = decltype(xv);
                                   const T p = static_cast<T>(exponent);
                                   return exponent == 0.0 ? T(0) : gv * p * power(xv, p - T(1));
                                 }));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("pow");
}

Tensor Tensor::exp() const try {
  check_unary(*this, "exp");
  Tensor out = detail::map(*this, [](auto v) { return std::exp(v); });
  if (autograd::needs_grad(*this))
    autograd::record(out, "ExpBackward", {*this}, [saved_y = autograd::SavedTensor(out)](
                                                      const Tensor& g, autograd::GradInputs& grads) {
      const Tensor& y = grads.unpack(saved_y);
      grads.set(0, detail::map2(g, y, [](auto gv, auto yv) { return gv * yv; }));  // d e^x/dx = e^x
    });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("exp");
}

Tensor Tensor::log() const try {
  check_unary(*this, "log");
  Tensor out = detail::map(*this, [](auto v) { return std::log(v); });
  if (autograd::needs_grad(*this))
    autograd::record(out, "LogBackward", {*this}, [saved_x = autograd::SavedTensor(*this)](
                                                      const Tensor& g, autograd::GradInputs& grads) {
      const Tensor& x = grads.unpack(saved_x);
      grads.set(0, detail::map2(g, x, [](auto gv, auto xv) { return gv / xv; }));  // d log x/dx = 1/x
    });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("log");
}

Tensor Tensor::relu() const try {
  check_unary(*this, "relu");
  // max(x, 0) written as PyTorch's clamp_min: NaN stays NaN and -0 stays -0 (x < 0 is false for both).
  Tensor out = detail::map(*this, [](auto v) { return v < 0 ? decltype(v)(0) : v; });
  if (autograd::needs_grad(*this))
    autograd::record(out, "ReluBackward", {*this}, [saved_y = autograd::SavedTensor(out)](
                                                       const Tensor& g, autograd::GradInputs& grads) {
      const Tensor& y = grads.unpack(saved_y);
      // PyTorch's threshold_backward: 0 where the output is <= 0 (so 0 at x = 0); the gradient
      // passes everywhere else, NaN outputs included.
      grads.set(0, detail::map2(g, y, [](auto gv, auto yv) { return yv <= 0 ? decltype(gv)(0) : gv; }));
    });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("relu");
}

Tensor sqrt(const Tensor& x) { return x.sqrt(); }
Tensor pow(const Tensor& x, double exponent) { return x.pow(exponent); }
Tensor exp(const Tensor& x) { return x.exp(); }
Tensor log(const Tensor& x) { return x.log(); }
Tensor relu(const Tensor& x) { return x.relu(); }

}  // namespace tg
