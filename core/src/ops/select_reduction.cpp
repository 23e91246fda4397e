// Reductions that select an element: max/min over a dim (values and int64 indices), argmax/argmin,
// and max/min of all elements.
//
// A line along the dim ([outer, size, inner], ops/along_dim.hpp) keeps its first best element, as
// PyTorch's CPU kernels do: a later tie does not replace it, and NaN beats every number (the
// first NaN wins), so NaN propagates. Lines are independent, so any thread count gives the same
// answer. A recorded backward (create_graph) sends the same gradients with recorded ops (a
// scatter_add whose gradient is a gather, a product with the constant ties), so that they can be
// differentiated again.
#include <cmath>
#include <type_traits>

#include "autograd/node.hpp"
#include "bfloat16_compute.hpp"
#include "dispatch.hpp"
#include "map.hpp"
#include "ops/along_dim.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"

namespace tg {
namespace {

using detail::AlongDim;
// max and min read float and integer tensors; only float values take part in autograd.
using SelectDTypes = detail::DTypes<kFloat32, kFloat64, kInt64>;

template <typename T>
bool is_nan(T value) {
  if constexpr (std::is_floating_point_v<T>)
    return std::isnan(value);
  else
    return false;
}

// Whether `candidate` replaces the current `best` (strictly better, so ties keep the first).
template <bool Max, typename T>
bool beats(T candidate, T best) {
  if (is_nan(candidate)) return !is_nan(best);
  return Max ? candidate > best : candidate < best;
}

// x: [outer, size, inner], size > 0 -> indices: [outer, inner] (int64) and, unless null,
// values: [outer, inner], the best element of each line.
template <bool Max, typename T>
void select_forward(const T* x, T* values, int64_t* indices, const AlongDim& layout) {
  const int64_t n = layout.size, stride = layout.inner;
  detail::parallel_for(layout.lines(), detail::ceil_div(detail::kElementwiseGrain, n), [&](int64_t begin, int64_t end) {
    for (int64_t line = begin; line < end; ++line) {
      const T* in = x + layout.line_start(line);
      int64_t best = 0;
      for (int64_t k = 1; k < n; ++k)
        if (beats<Max>(in[k * stride], in[best * stride])) best = k;
      indices[line] = best;
      if (values) values[line] = in[best * stride];
    }
  });
}

// dvalues, indices: [outer, inner] -> dx: [outer, size, inner], which holds zeros, gets each
// line's gradient at its index.
template <typename T>
void select_backward(const T* dvalues, const int64_t* indices, T* dx, const AlongDim& layout) {
  detail::parallel_for(layout.lines(), detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t line = begin; line < end; ++line)
      dx[layout.line_start(line) + indices[line] * layout.inner] = dvalues[line];
  });
}

// The layout and the result shape of a selection over `dim` of x; tg::Error for an empty dim,
// which has no max (PyTorch: the operation has no identity).
struct SelectPlan {
  AlongDim layout;
  Shape out_shape;
};

SelectPlan plan_select(const Tensor& x, int64_t dim, bool keepdim, const char* op) {
  check(x.defined(), op, "undefined input");
  detail::check_dtype<SelectDTypes>(op, x.dtype());
  const int64_t d = detail::normalize_dim_0d(dim, x, op);
  SelectPlan plan{detail::along_dim(x.shape(), x.dim() == 0 ? 1 : d), {}};
  check(x.dim() == 0 || x.size(d) > 0, op, "cannot reduce over dim ", dim, " of size 0 (input of shape ", x.shape(),
        "): the operation has no identity");
  for (int64_t k = 0; k < x.dim(); ++k)
    if (k != d || keepdim) plan.out_shape.push_back(k == d ? 1 : x.size(k));
  return plan;
}

// The selection's gradient in recorded ops, for a recorded backward (derivatives.yaml's
// value_selecting_reduction_backward): zeros of x's shape with each line's gradient at its index, a
// scatter_add of g and the indices, each given back the reduced dim; its gradient is a gather.
Tensor scatter_to_dim(const Tensor& g, const Tensor& indices, int64_t dim, const Shape& in_shape) {
  if (in_shape.empty()) return g.reshape(in_shape);  // a 0-d input selects its one element
  const int64_t d = normalize_dim(dim, static_cast<int64_t>(in_shape.size()), "max");
  Shape keepdim_shape = in_shape;
  keepdim_shape[d] = 1;
  return scatter_add(zeros(in_shape, g.dtype()), d, indices.reshape(keepdim_shape), g.reshape(keepdim_shape));
}

template <bool Max>
Tensor::ValuesAndIndices select_values(const Tensor& x, int64_t dim, bool keepdim, const char* op,
                                       const char* backward_name) try {
  if (detail::is_bfloat16(x)) {  // selected in float32 (exact), the values rounded back (exact too)
    Tensor::ValuesAndIndices wide = select_values<Max>(x.to(kFloat32), dim, keepdim, op, backward_name);
    return {wide.values.to(kBFloat16), wide.indices};
  }
  const SelectPlan plan = plan_select(x, dim, keepdim, op);
  Tensor values = make_tensor(plan.out_shape, x.dtype(), op);
  Tensor indices = make_tensor(plan.out_shape, kInt64, op);
  detail::dispatch<SelectDTypes>(op, x.dtype(), [&]<typename T>() {
    select_forward<Max, T>(x.data<T>(), values.mutable_data<T>(), indices.mutable_data<int64_t>(), plan.layout);
  });
  if (autograd::needs_grad(x))
    autograd::record(values, backward_name, {x},
                     [saved_indices = autograd::SavedTensor(indices), layout = plan.layout, in_shape = x.shape(),
                      backward_name, dim](const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor& indices = grads.unpack(saved_indices);
                       if (grads.create_graph()) {
                         grads.set(0, scatter_to_dim(g, indices, dim, in_shape));
                         return;
                       }
                       Tensor dx = zeros(in_shape, g.dtype());
                       detail::dispatch_floating(backward_name, g.dtype(), [&]<typename T>() {
                         select_backward<T>(g.data<T>(), indices.data<int64_t>(), dx.mutable_data<T>(), layout);
                       });
                       grads.set(0, dx);
                     });
  return {values, indices};
} catch (...) {
  detail::rethrow_out_of_memory_as(op);
}

template <bool Max>
Tensor select_index(const Tensor& x, int64_t dim, bool keepdim, const char* op) try {
  if (detail::is_bfloat16(x)) return select_index<Max>(x.to(kFloat32), dim, keepdim, op);  // exact
  const SelectPlan plan = plan_select(x, dim, keepdim, op);
  Tensor indices = make_tensor(plan.out_shape, kInt64, op);
  detail::dispatch<SelectDTypes>(op, x.dtype(), [&]<typename T>() {
    select_forward<Max, T>(x.data<T>(), nullptr, indices.mutable_data<int64_t>(), plan.layout);
  });
  return indices;
} catch (...) {
  detail::rethrow_out_of_memory_as(op);
}

// argmax() without a dim: the index into the flattened tensor, 0-d.
template <bool Max>
Tensor select_flat_index(const Tensor& x, const char* op) try {
  check(x.defined(), op, "undefined input");
  check(x.numel() > 0, op, "cannot reduce an empty tensor (shape ", x.shape(), "): the operation has no identity");
  return select_index<Max>(make_view(x, {x.numel()}), 0, false, op);
} catch (...) {
  detail::rethrow_out_of_memory_as(op);
}

// max() / min() of all elements, 0-d. Its gradient is shared evenly among the elements equal to
// the result (PyTorch's evenly_distribute_backward), NaN counting as equal to a NaN result.
template <bool Max>
Tensor select_all(const Tensor& x, const char* op, const char* backward_name) try {
  check(x.defined(), op, "undefined input");
  check(x.numel() > 0, op, "cannot reduce an empty tensor (shape ", x.shape(),
        "): the operation has no identity; give a dim");
  if (detail::is_bfloat16(x))
    return detail::in_float32([&](const Tensor& wide) { return select_all<Max>(wide, op, backward_name); }, x);
  Tensor value = select_values<Max>(make_view(x, {x.numel()}), 0, false, op, backward_name).values;
  if (autograd::needs_grad(x))
    autograd::record(value, backward_name, {x},
                     [saved_x = autograd::SavedTensor(x), saved_value = autograd::SavedTensor(value, autograd::SavedTensor::kOutput)](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor &x = grads.unpack(saved_x), &value = grads.unpack(saved_value);
                       const double best = value.item();
                       const bool best_is_nan = std::isnan(best);
                       const Tensor ties = detail::map(x, [&](auto v) -> decltype(v) {
                         return (best_is_nan ? std::isnan(v) : static_cast<double>(v) == best) ? 1 : 0;
                       });
                       if (grads.create_graph()) {  // recorded: ties · (g / count), the ties a constant
                         grads.set(0, ties * (g / ties.sum()));
                         return;
                       }
                       const double share = g.item() / ties.sum().item();
                       grads.set(0, detail::map(ties, [&](auto tie) -> decltype(tie) {
                                   return tie * static_cast<decltype(tie)>(share);
                                 }));
                     });
  return value;
} catch (...) {
  detail::rethrow_out_of_memory_as(op);
}

}  // namespace

Tensor::ValuesAndIndices Tensor::max(int64_t dim, bool keepdim) const {
  return select_values<true>(*this, dim, keepdim, "max", "MaxBackward");
}
Tensor::ValuesAndIndices Tensor::min(int64_t dim, bool keepdim) const {
  return select_values<false>(*this, dim, keepdim, "min", "MinBackward");
}
Tensor Tensor::max() const { return select_all<true>(*this, "max", "MaxBackward"); }
Tensor Tensor::min() const { return select_all<false>(*this, "min", "MinBackward"); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return select_index<true>(*this, dim, keepdim, "argmax"); }
Tensor Tensor::argmin(int64_t dim, bool keepdim) const { return select_index<false>(*this, dim, keepdim, "argmin"); }
Tensor Tensor::argmax() const { return select_flat_index<true>(*this, "argmax"); }
Tensor Tensor::argmin() const { return select_flat_index<false>(*this, "argmin"); }

}  // namespace tg
