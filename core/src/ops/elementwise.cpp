// Binary elementwise operations with broadcasting: + - * /, pow with a tensor exponent, atan2,
// fmod and remainder, each through broadcast_binary, its forward right above the closure that sends
// its gradient back. The unary ones (unary -, sqrt, pow with a scalar exponent, exp, log, sin, floor,
// relu, ...) are in unary_math.cpp.
#include "ops/elementwise.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "autograd/node.hpp"
#include "bfloat16_compute.hpp"
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

// out = op(a, b) elementwise, broadcasting, for operands of one of the `Supported` dtypes (the
// floating ones unless an op says otherwise: fmod and remainder take int64 too).
template <typename Supported = detail::FloatingDTypes, typename Op>
Tensor broadcast_binary(const Tensor& a, const Tensor& b, const char* op_name, const Op& op) {
  check(a.defined() && b.defined(), op_name, "undefined tensor operand");
  check(a.dtype() == b.dtype(), op_name, "dtypes differ: ", a.dtype(), " and ", b.dtype(),
        " (convert one with .to())");
  detail::check_dtype<Supported>(op_name, a.dtype());
  if (a.shape() == b.shape() && is_floating_point(a.dtype())) return detail::map2(a, b, op);
  const Shape out_shape = broadcast_shapes(a.shape(), b.shape(), op_name);
  Tensor out = make_tensor(out_shape, a.dtype(), op_name);
  if (out.numel() == 0) return out;
  const auto plan = detail::make_plan<2>({a.shape(), b.shape()}, out_shape);
  detail::dispatch<Supported>(op_name, a.dtype(), [&]<typename T>() {
    detail::broadcast_kernel(out.mutable_data<T>(), plan, op, a.data<T>(), b.data<T>());
  });
  return out;
}

// term(g, a, b) at every element of the output gradient g, not recorded, summed back to `shape`:
// a binary op's gradient to one of its operands in one pass over the broadcast operands.
template <typename Term>
Tensor gradient_term(const char* node_name, const Tensor& g, const Tensor& a, const Tensor& b, const Shape& shape,
                     const Term& term) {
  return detail::sum_to(detail::dispatch_floating(node_name, g.dtype(), [&]<typename T>() {
                          return detail::broadcast_map<T, T, T, T>(g.shape(), term, g, a, b);
                        }),
                        shape);
}

// The dtype PyTorch computes a binary op of a and b in: the larger of the two (bool < int64 <
// bfloat16 < float32 < float64; a 0-d operand only raises the category, detail::result_type), or
// float32, its default float dtype, for integer operands of an op that is floating-point only
// (`to_float`: atan2).
DType promoted_dtype(const Tensor& a, const Tensor& b, const char* op, bool to_float) {
  check(a.defined() && b.defined(), op, "undefined tensor operand");
  const DType common = detail::result_type(a, b);
  return to_float && !is_floating_point(common) ? kFloat32 : common;
}

// op(a, b) of operands of different dtypes, as PyTorch's type promotion: both cast to their
// promoted dtype, the casts recorded, so each operand's gradient comes back in its own dtype (a
// float32 residual stream plus a bfloat16 sublayer under tg::autocast is float32, as in PyTorch).
template <typename Op>
Tensor in_promoted_dtype(const Tensor& a, const Tensor& b, const char* op_name, const Op& op) {
  const DType common = promoted_dtype(a, b, op_name, /*to_float=*/false);
  return op(a.to(common), b.to(common));
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
  if (a.defined() && b.defined() && a.dtype() != b.dtype())
    return in_promoted_dtype(a, b, "add", [](const Tensor& x, const Tensor& y) { return x + y; });
  if (detail::all_bfloat16(a, b)) return detail::in_float32([](const Tensor& x, const Tensor& y) { return x + y; }, a, b);
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
  if (a.defined() && b.defined() && a.dtype() != b.dtype())
    return in_promoted_dtype(a, b, "sub", [](const Tensor& x, const Tensor& y) { return x - y; });
  if (detail::all_bfloat16(a, b)) return detail::in_float32([](const Tensor& x, const Tensor& y) { return x - y; }, a, b);
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
  if (a.defined() && b.defined() && a.dtype() != b.dtype())
    return in_promoted_dtype(a, b, "mul", [](const Tensor& x, const Tensor& y) { return x * y; });
  if (detail::all_bfloat16(a, b)) return detail::in_float32([](const Tensor& x, const Tensor& y) { return x * y; }, a, b);
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
  if (a.defined() && b.defined() && a.dtype() != b.dtype())
    return in_promoted_dtype(a, b, "div", [](const Tensor& x, const Tensor& y) { return x / y; });
  if (detail::all_bfloat16(a, b)) return detail::in_float32([](const Tensor& x, const Tensor& y) { return x / y; }, a, b);
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
  if (detail::all_bfloat16(base, exponent))
    return detail::in_float32([](const Tensor& b, const Tensor& e) { return pow(b, e); }, base, exponent);
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
                       if (grads.needed(0))
                         grads.set(0, gradient_term("PowBackward", g, base, exponent, base.shape(),
                                                    [](auto gv, auto b, auto e) {
                                                      using T = decltype(b);
                                                      return e == T(0) ? T(0) : gv * (e * std::pow(b, e - T(1)));
                                                    }));
                       if (grads.needed(1))
                         grads.set(1, gradient_term("PowBackward", g, base, exponent, exponent.shape(),
                                                    [](auto gv, auto b, auto e) {
                                                      using T = decltype(b);
                                                      return gv * (b == T(0) && e >= T(0) ? T(0)
                                                                                          : std::pow(b, e) * std::log(b));
                                                    }));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("pow");
}

Tensor Tensor::pow(const Tensor& exponent) const { return tg::pow(*this, exponent); }

// --- atan2 ----------------------------------------------------------------------------------------

// atan2(a, b), the angle of the point (b, a), as torch.atan2: the operands promoted (int64 and bool
// computed as float32), C's atan2 on each pair, broadcasting. Gradients (derivatives.yaml,
// atan2_backward), with r = 1 / (a² + b²), each summed back to its operand's shape:
//   a: g · b · r        b: g · (−a) · r
Tensor atan2(const Tensor& a, const Tensor& b) try {
  const DType common = promoted_dtype(a, b, "atan2", /*to_float=*/true);
  if (common == kBFloat16)
    return detail::in_float32([](const Tensor& y, const Tensor& x) { return atan2(y, x); }, a.to(common), b.to(common));
  const Tensor y = a.to(common), x = b.to(common);  // recorded: a promoted operand's gradient comes back in its dtype
  Tensor out = broadcast_binary(y, x, "atan2", [](auto yv, auto xv) { return std::atan2(yv, xv); });
  if (autograd::needs_grad(y, x))
    autograd::record(out, "Atan2Backward", {y, x},
                     [saved_y = autograd::SavedTensor(y), saved_x = autograd::SavedTensor(x)](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor &y = grads.unpack(saved_y), &x = grads.unpack(saved_x);
                       if (grads.create_graph()) {
                         const Tensor reciprocal = 1.0 / (y * y + x * x);
                         if (grads.needed(0)) grads.set(0, detail::sum_to(g * x * reciprocal, y.shape()));
                         if (grads.needed(1)) grads.set(1, detail::sum_to(g * -y * reciprocal, x.shape()));
                         return;
                       }
                       if (grads.needed(0))
                         grads.set(0, gradient_term("Atan2Backward", g, y, x, y.shape(), [](auto gv, auto yv, auto xv) {
                                     using T = decltype(yv);
                                     return gv * xv * (T(1) / (yv * yv + xv * xv));
                                   }));
                       if (grads.needed(1))
                         grads.set(1, gradient_term("Atan2Backward", g, y, x, x.shape(), [](auto gv, auto yv, auto xv) {
                                     using T = decltype(yv);
                                     return gv * -yv * (T(1) / (yv * yv + xv * xv));
                                   }));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("atan2");
}

Tensor Tensor::atan2(const Tensor& other) const { return tg::atan2(*this, other); }

// --- fmod and remainder ---------------------------------------------------------------------------

namespace {

// The remainder of a / b with the quotient truncated (fmod: C's fmod and C++'s %, the sign of a) or
// floored (`floored`, remainder: the sign of b, Python's %), as PyTorch's kernels: the truncated
// remainder, plus b where it is nonzero and its sign differs from b's (so remainder(−1, inf) is
// inf, and −0 stays −0). An integer b = −1 gives 0 without dividing: INT64_MIN % −1 traps the CPU
// (PyTorch dies of SIGFPE there).
template <bool floored, typename T>
T modulo(T a, T b) {
  T mod;
  if constexpr (std::is_integral_v<T>) mod = b == T(-1) ? T(0) : static_cast<T>(a % b);
  else mod = std::fmod(a, b);
  if constexpr (floored)
    if (mod != T(0) && (b < T(0)) != (mod < T(0))) mod += b;
  return mod;
}

// The quotient that goes with modulo<floored>, for the gradient to b: trunc(a / b) (fmod), or
// PyTorch's floor division (div(rounding_mode="floor"), what remainder's gradient uses): the exact
// quotient (a − fmod(a, b)) / b, moved down by 1 where the remainders' signs differ, then floored
// and rounded to the nearest integer; a / b when b = 0, and a zero quotient takes the sign of a / b.
template <bool floored, typename T>
T quotient(T a, T b) {
  if constexpr (!floored) {
    return std::trunc(a / b);
  } else {
    if (b == T(0)) return a / b;
    const T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != T(0) && (b < T(0)) != (mod < T(0))) div -= T(1);
    if (div == T(0)) return std::copysign(T(0), a / b);
    T floor_div = std::floor(div);
    if (div - floor_div > T(0.5)) floor_div += T(1);
    return floor_div;
  }
}

// fmod (floored = false) or remainder of two tensors: operands promoted (float32, float64, int64;
// two bools refused, as PyTorch), broadcasting. An int64 division by zero is refused before any
// element is computed, as PyTorch's RuntimeError "ZeroDivisionError". Gradients (derivatives.yaml):
//   a: g        b: −g · quotient(a, b), where the quotient is a step (its own derivative is 0),
// each summed back to its operand's shape.
template <bool floored>
Tensor modulo_op(const Tensor& a, const Tensor& b, const char* op, const char* node_name) try {
  using Supported = detail::DTypes<kFloat32, kFloat64, kInt64>;
  const DType common = promoted_dtype(a, b, op, /*to_float=*/false);
  if (common == kBFloat16)
    return detail::in_float32([op, node_name](const Tensor& x, const Tensor& y) { return modulo_op<floored>(x, y, op, node_name); },
                              a.to(common), b.to(common));
  detail::check_dtype<Supported>(op, common);
  const Tensor lhs = a.to(common), rhs = b.to(common);  // recorded, as atan2's
  (void)broadcast_shapes(a.shape(), b.shape(), op);  // a shape mismatch is reported before a zero divisor
  if (common == kInt64 && lhs.numel() > 0) {  // (with both nonempty, so is the output)
    const int64_t* divisor = rhs.data<int64_t>();
    check(std::find(divisor, divisor + rhs.numel(), int64_t{0}) == divisor + rhs.numel(), op,
          "ZeroDivisionError: an int64 divisor holds 0 (PyTorch's RuntimeError; convert to float for NaN)");
  }
  Tensor out = broadcast_binary<Supported>(lhs, rhs, op, [](auto x, auto y) { return modulo<floored>(x, y); });
  if (autograd::needs_grad(lhs, rhs))
    autograd::record(out, node_name, {lhs, rhs},
                     [node_name, saved_a = autograd::SavedTensor(lhs), saved_b = autograd::SavedTensor(rhs)](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor &a = grads.unpack(saved_a), &b = grads.unpack(saved_b);
                       if (grads.needed(0)) grads.set(0, detail::sum_to(g, a.shape()));
                       if (!grads.needed(1)) return;
                       if (grads.create_graph()) {  // recorded: −g times the quotient, a constant
                         const Tensor q = detail::dispatch_floating(node_name, g.dtype(), [&]<typename T>() {
                           return detail::broadcast_map<T, T, T>(
                               g.shape(), [](T av, T bv) { return quotient<floored>(av, bv); }, a, b);
                         });
                         grads.set(1, detail::sum_to(-g * q, b.shape()));
                         return;
                       }
                       grads.set(1, gradient_term(node_name, g, a, b, b.shape(), [](auto gv, auto av, auto bv) {
                                   return -gv * quotient<floored>(av, bv);
                                 }));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as(op);
}

}  // namespace

Tensor fmod(const Tensor& a, const Tensor& b) { return modulo_op<false>(a, b, "fmod", "FmodBackward"); }
Tensor remainder(const Tensor& a, const Tensor& b) { return modulo_op<true>(a, b, "remainder", "RemainderBackward"); }
Tensor Tensor::fmod(const Tensor& other) const { return tg::fmod(*this, other); }
Tensor Tensor::remainder(const Tensor& other) const { return tg::remainder(*this, other); }

// x.fmod(number), x.remainder(number): the number as a 0-d tensor of the dtype PyTorch gives a
// Scalar against this tensor, which the promotion above then combines: a float tensor's own dtype
// (the number rounded to it); int64 for an integer (exactly) and float32 for a floating-point number
// against an int64 or bool tensor.
Tensor Tensor::modulo_by(bool floored, bool integral, int64_t integer, double floating) const {
  const char* op = floored ? "remainder" : "fmod";
  check(defined(), op, "undefined tensor");
  Tensor other;
  if (is_floating_point(dtype())) {
    other = scalar_tensor(floating, dtype());
  } else if (integral) {
    other = make_tensor({}, kInt64, op);
    other.mutable_data<int64_t>()[0] = integer;
  } else {
    other = scalar_tensor(floating, kFloat32);
  }
  return floored ? tg::remainder(*this, other) : tg::fmod(*this, other);
}

}  // namespace tg
