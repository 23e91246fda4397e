// Ops that pick each output element from one of their inputs: maximum, minimum, where and
// masked_fill, with broadcasting. The gradient goes to the input that was picked, with PyTorch's
// convention at ties (derivatives.yaml): maximum and minimum give half to each side. A recorded
// backward (create_graph) gives the same with recorded ops (where, masked_fill, a product with the
// constant shares), so that it can be differentiated again.
#include "autograd/node.hpp"
#include "bfloat16_compute.hpp"
#include "ops/broadcast.hpp"
#include "ops/reduction.hpp"
#include "out_of_memory.hpp"

namespace tg {
namespace {

// The output gradient where `mask` is `keep_where` and 0 elsewhere; mask broadcasts to g. Not recorded.
// A selection, exact in any float dtype: bfloat16 gradients too.
Tensor gradient_where(const Tensor& mask, bool keep_where, const Tensor& g) {
  return detail::dispatch<detail::DTypes<kFloat32, kFloat64, kBFloat16>>("where", g.dtype(), [&]<typename T>() {
    return detail::broadcast_map<T, bool, T>(
        g.shape(), [keep_where](bool m, T gv) { return m == keep_where ? gv : T(0); }, mask, g);
  });
}

// --- maximum / minimum -------------------------------------------------------------------------

// The larger (smaller) of x and y, NaN when either is NaN.
template <bool Larger, typename T>
T pick(T x, T y) {
  if (x != x) return x;  // NaN: only floats differ from themselves
  if (y != y) return y;
  return (Larger ? x < y : y < x) ? y : x;
}

// The share of the output gradient that p gets against q when the larger one wins: all of it
// when p > q, none when p < q, half at a tie; and all of it when either is NaN (both get it,
// as in PyTorch, since neither p == q nor p < q holds).
template <typename T>
T winner_share(T p, T q) {
  return p == q ? T(0.5) : (p < q ? T(0) : T(1));
}

template <bool Larger>
Tensor pick_elementwise(const Tensor& a, const Tensor& b, const char* op, const char* node_name) try {
  check(a.defined() && b.defined(), op, "undefined tensor operand");
  const DType common = detail::result_type(a, b);
  if (common == kBFloat16)  // in float32 (exact: a selection), rounded back
    return detail::in_float32([op, node_name](const Tensor& x, const Tensor& y) {
      return pick_elementwise<Larger>(x, y, op, node_name);
    }, a.to(common), b.to(common));
  check(common != kBool, op, "not implemented for two bool tensors (supported: float32, float64, int64)",
        detail::cast_advice<detail::DTypes<kFloat32, kFloat64, kInt64>>(kBool));
  // Recorded conversions: a promoted operand gets its gradient back in its own dtype.
  const Tensor lhs = a.to(common), rhs = b.to(common);
  const Shape out_shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = detail::dispatch<detail::DTypes<kFloat32, kFloat64, kInt64>>(op, common, [&]<typename T>() {
    return detail::broadcast_map<T, T, T>(out_shape, [](T x, T y) { return pick<Larger>(x, y); }, lhs, rhs);
  });
  if (autograd::needs_grad(lhs, rhs))
    autograd::record(out, node_name, {lhs, rhs},
                     [node_name, saved_a = autograd::SavedTensor(lhs), saved_b = autograd::SavedTensor(rhs)](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor &a = grads.unpack(saved_a), &b = grads.unpack(saved_b);
                       // maximum: a's share is winner_share(a, b); minimum: the smaller wins, so
                       // a's share is winner_share(b, a). b's share mirrors a's.
                       const auto share = [&](const Tensor& p, const Tensor& q) {
                         if (grads.create_graph())  // recorded: g times the shares, a constant
                           return g * detail::dispatch_floating(node_name, g.dtype(), [&]<typename T>() {
                                    return detail::broadcast_map<T, T, T>(
                                        g.shape(), [](T pv, T qv) { return winner_share(pv, qv); }, p, q);
                                  });
                         return detail::dispatch_floating(node_name, g.dtype(), [&]<typename T>() {
                           return detail::broadcast_map<T, T, T, T>(
                               g.shape(), [](T gv, T pv, T qv) { return gv * winner_share(pv, qv); }, g, p, q);
                         });
                       };
                       if (grads.needed(0))
                         grads.set(0, detail::sum_to(Larger ? share(a, b) : share(b, a), a.shape()));
                       if (grads.needed(1))
                         grads.set(1, detail::sum_to(Larger ? share(b, a) : share(a, b), b.shape()));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as(op);
}

}  // namespace

Tensor Tensor::maximum(const Tensor& other) const {
  return pick_elementwise<true>(*this, other, "maximum", "MaximumBackward");
}
Tensor Tensor::minimum(const Tensor& other) const {
  return pick_elementwise<false>(*this, other, "minimum", "MinimumBackward");
}
Tensor maximum(const Tensor& a, const Tensor& b) { return a.maximum(b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return a.minimum(b); }

// --- where / masked_fill -----------------------------------------------------------------------

// out = condition ? a : b, all three broadcast together; a and b promoted to a common dtype.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) try {
  check(condition.defined() && a.defined() && b.defined(), "where", "undefined tensor operand");
  check(condition.dtype() == kBool, "where", "expected a bool condition, got ", condition.dtype());
  const DType common = detail::result_type(a, b);
  const Tensor lhs = a.to(common), rhs = b.to(common);
  const Shape out_shape =
      broadcast_shapes(condition.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
  Tensor out = detail::dispatch_all("where", common, [&]<typename T>() {
    return detail::broadcast_map<T, bool, T, T>(
        out_shape, [](bool c, T x, T y) { return c ? x : y; }, condition, lhs, rhs);
  });
  if (autograd::needs_grad(lhs, rhs))
    autograd::record(out, "WhereBackward", {lhs, rhs},
                     [saved_condition = autograd::SavedTensor(condition), sa = a.shape(), sb = b.shape()](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor& condition = grads.unpack(saved_condition);
                       if (grads.create_graph()) {  // recorded: where again, with zeros
                         const Tensor zero = scalar_tensor(0.0, g.dtype());
                         if (grads.needed(0)) grads.set(0, detail::sum_to(where(condition, g, zero), sa));
                         if (grads.needed(1)) grads.set(1, detail::sum_to(where(condition, zero, g), sb));
                         return;
                       }
                       if (grads.needed(0)) grads.set(0, detail::sum_to(gradient_where(condition, true, g), sa));
                       if (grads.needed(1)) grads.set(1, detail::sum_to(gradient_where(condition, false, g), sb));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("where");
}

// PyTorch's out-of-place masked_fill: x and mask broadcast together, value (rounded to x's dtype)
// where mask is true. The gradient reaches x where mask is false.
Tensor Tensor::masked_fill(const Tensor& mask, double value) const try {
  check(defined() && mask.defined(), "masked_fill", "undefined tensor operand");
  check(mask.dtype() == kBool, "masked_fill", "expected a bool mask, got ", mask.dtype());
  check(dtype() != kInt64 || (value >= -0x1p63 && value < 0x1p63), "masked_fill", "value ", value,
        " cannot be converted to int64 without overflow");
  const Shape out_shape = broadcast_shapes(shape(), mask.shape(), "masked_fill");
  Tensor out = detail::dispatch_all("masked_fill", dtype(), [&]<typename T>() {
    const T fill = static_cast<T>(value);
    return detail::broadcast_map<T, T, bool>(out_shape, [fill](T x, bool m) { return m ? fill : x; }, *this, mask);
  });
  if (autograd::needs_grad(*this))
    autograd::record(out, "MaskedFillBackward", {*this},
                     [saved_mask = autograd::SavedTensor(mask), in_shape = shape()](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor& mask = grads.unpack(saved_mask);
                       grads.set(0, detail::sum_to(grads.create_graph() ? g.masked_fill(mask, 0.0)  // recorded
                                                                        : gradient_where(mask, false, g),
                                                   in_shape));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("masked_fill");
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) { return x.masked_fill(mask, value); }

}  // namespace tg
