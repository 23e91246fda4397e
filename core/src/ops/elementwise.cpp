// Binary elementwise operations with broadcasting: + - * / and pow with a tensor exponent, each
// through broadcast_binary, its forward right above the closure that sends its gradient back. The
// unary ones (unary -, sqrt, pow with a scalar exponent, exp, log, relu, ...) are in unary_math.cpp.
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

// base^exponent for two tensors, as torch.pow(Tensor, Tensor): C's pow on each pair (no special
// exponents, unlike the scalar-exponent pow), broadcasting. Gradients (derivatives.yaml,
// pow_backward_self and pow_backward_exponent), each summed back to its operand's shape:
//   base:     g · (e · base^(e−1)), and 0 where e = 0
//   exponent: g · (base^e · log(base)), and g · 0 where base = 0 and e >= 0 (0^e is 0 or 1 there,
//             where log(0) = -inf would give NaN or -inf)
// base^e is recomputed from the saved operands rather than saved: the same bits as the forward.
Tensor pow(const Tensor& base, const Tensor& exponent) try {
  Tensor out = broadcast_binary(base, exponent, "pow", [](auto b, auto e) { return std::pow(b, e); });
  if (autograd::needs_grad(base, exponent))
    autograd::record(out, "PowBackward", {base, exponent},
                     [saved_base = autograd::SavedTensor(base), saved_exponent = autograd::SavedTensor(exponent)](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor &base = grads.unpack(saved_base), &exponent = grads.unpack(saved_exponent);
                       if (grads.create_graph()) {
                         // The same formulas in recorded ops; the masks (e = 0; base = 0 and e >= 0) are
                         // constants of the double backward.
                         const Tensor zero = scalar_tensor(0.0, g.dtype());
                         const auto mask = [&](auto keep) {
                           return detail::dispatch_floating("PowBackward", g.dtype(), [&]<typename T>() {
                             return detail::broadcast_map<bool, T, T>(g.shape(), keep, base, exponent);
                           });
                         };
                         if (grads.needed(0))
                           grads.set(0, detail::sum_to(where(mask([](auto, auto e) { return e == 0; }), zero,
                                                             g * (exponent * pow(base, exponent - 1.0))),
                                                       base.shape()));
                         if (grads.needed(1))
                           grads.set(1, detail::sum_to(g * where(mask([](auto b, auto e) { return b == 0 && e >= 0; }),
                                                                 zero, pow(base, exponent) * base.log()),
                                                       exponent.shape()));
                         return;
                       }
                       // The gradient term(g, base, e) at every element of the output, summed to `shape`.
                       const auto gradient = [&](const Shape& shape, auto term) {
                         return detail::sum_to(detail::dispatch_floating("PowBackward", g.dtype(), [&]<typename T>() {
                                                 return detail::broadcast_map<T, T, T, T>(g.shape(), term, g, base,
                                                                                          exponent);
                                               }),
                                               shape);
                       };
                       if (grads.needed(0))
                         grads.set(0, gradient(base.shape(), [](auto gv, auto b, auto e) {
                                     using T = decltype(b);
                                     return e == T(0) ? T(0) : gv * (e * std::pow(b, e - T(1)));
                                   }));
                       if (grads.needed(1))
                         grads.set(1, gradient(exponent.shape(), [](auto gv, auto b, auto e) {
                                     using T = decltype(b);
                                     return gv * (b == T(0) && e >= T(0) ? T(0) : std::pow(b, e) * std::log(b));
                                   }));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("pow");
}

Tensor Tensor::pow(const Tensor& exponent) const { return tg::pow(*this, exponent); }

}  // namespace tg
