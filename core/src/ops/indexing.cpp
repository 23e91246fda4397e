// Indexing along a dim: index_select, gather and scatter_add (out of place), with their gradients.
//
//   index_select  out[o, k, i] = x[o, index[k], i]        backward: index_add into zeros
//   gather        out[c] = x[c with dim := index[c]]      backward: scatter_add into zeros
//   scatter_add   out = x; out[c with dim := index[c]] += src[c]
//                 backward: dx = g, dsrc[c] = g[c with dim := index[c]] (a gather)
// where c runs over the coordinates of `index`. Indices are checked before any kernel runs; the
// kernels trust them. Every sum into one element adds its terms in a fixed order, without atomics.
// A recorded backward (create_graph) writes the same gradients with the recorded ops themselves
// (gather and scatter_add are each other's gradient), so they can be differentiated again.
#include "ops/indexing.hpp"

#include <algorithm>
#include <vector>

#include "autograd/node.hpp"
#include "bfloat16_compute.hpp"
#include "dispatch.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"

namespace tg {
namespace detail {

void check_indices(const int64_t* index, int64_t n, int64_t size, int64_t dim, const char* op) {
  for (int64_t k = 0; k < n; ++k)
    check(index[k] >= 0 && index[k] < size, op, "index ", index[k], " is out of range for dim ", dim, " of size ",
          size);
}

template <typename T>
void index_rows(const T* src, const AlongDim& src_layout, const int64_t* index, int64_t n, T* out) {
  const int64_t inner = src_layout.inner;
  parallel_for(src_layout.outer * n, ceil_div(kElementwiseGrain, std::max<int64_t>(inner, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t row = begin; row < end; ++row) {
                   const int64_t o = row / n, k = row % n;
                   const T* from = src + (o * src_layout.size + index[k]) * inner;
                   std::copy(from, from + inner, out + row * inner);
                 }
               });
}

template <typename T>
void index_add(T* dst, const AlongDim& dst_layout, const int64_t* index, int64_t n, const T* src, int64_t skip) {
  const int64_t size = dst_layout.size, inner = dst_layout.inner;
  // first[r] .. first[r + 1]: the positions k (increasing) of the indices equal to r, in `order`.
  std::vector<int64_t> first(static_cast<size_t>(size) + 1, 0), order(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) ++first[index[k] + 1];
  for (int64_t r = 0; r < size; ++r) first[r + 1] += first[r];
  std::vector<int64_t> next(first.begin(), first.end() - 1);
  for (int64_t k = 0; k < n; ++k) order[next[index[k]]++] = k;
  parallel_for(dst_layout.outer * size, ceil_div(kElementwiseGrain, std::max<int64_t>(inner, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t row = begin; row < end; ++row) {
                   const int64_t o = row / size, r = row % size;
                   if (r == skip) continue;
                   T* to = dst + row * inner;
                   for (int64_t j = first[r]; j < first[r + 1]; ++j) {
                     const T* from = src + (o * n + order[j]) * inner;
                     for (int64_t i = 0; i < inner; ++i) to[i] += from[i];
                   }
                 }
               });
}

#define TG_INSTANTIATE_INDEX_KERNELS(T)                                                \
  template void index_rows<T>(const T*, const AlongDim&, const int64_t*, int64_t, T*); \
  template void index_add<T>(T*, const AlongDim&, const int64_t*, int64_t, const T*, int64_t);
TG_INSTANTIATE_INDEX_KERNELS(float)
TG_INSTANTIATE_INDEX_KERNELS(double)
#undef TG_INSTANTIATE_INDEX_KERNELS
// Selecting only moves values: labels (int64) and masks (bool) are selected too.
template void index_rows<int64_t>(const int64_t*, const AlongDim&, const int64_t*, int64_t, int64_t*);
template void index_rows<bool>(const bool*, const AlongDim&, const int64_t*, int64_t, bool*);

}  // namespace detail

namespace {

// The coordinates c of an index tensor, walked as lines along `dim`, and where c sits in the two
// tensors it relates: the `addressed` one (x; its `dim` is replaced by index[c]) and the
// `aligned` one (gather's output, scatter_add's src; read at c itself). Both may be larger than
// the index in every dim, so each tensor keeps its own strides.
struct ScatterPlan {
  Shape index_shape;
  int64_t dim = 0;
  std::vector<int64_t> index_strides, addressed_strides, aligned_strides;

  int64_t lines() const {
    int64_t count = 1;
    for (int64_t d = 0; d < static_cast<int64_t>(index_shape.size()); ++d)
      if (d != dim) count *= index_shape[d];
    return count;
  }
  // Offset of the line's first element (coordinate 0 along dim) in a tensor of `strides`.
  int64_t line_offset(int64_t line, const std::vector<int64_t>& strides) const {
    int64_t offset = 0;
    for (int64_t d = static_cast<int64_t>(index_shape.size()) - 1; d >= 0; --d) {
      if (d == dim) continue;
      offset += (line % index_shape[d]) * strides[d];
      line /= index_shape[d];
    }
    return offset;
  }
};

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// Lines run in parallel: two lines never touch the same element of either tensor, since they
// differ in a coordinate other than dim, which both tensors keep.
template <typename Body>
void for_each_index_line(const ScatterPlan& plan, const Body& body) {
  const int64_t length = plan.index_shape[plan.dim];
  detail::parallel_for(plan.lines(), detail::ceil_div(detail::kElementwiseGrain, std::max<int64_t>(length, 1)),
                       [&](int64_t begin, int64_t end) {
                         for (int64_t line = begin; line < end; ++line)
                           body(plan.line_offset(line, plan.index_strides),
                                plan.line_offset(line, plan.addressed_strides),
                                plan.line_offset(line, plan.aligned_strides), length);
                       });
}

// aligned[c] = addressed[c with dim := index[c]]
template <typename T>
void gather_kernel(const T* addressed, const int64_t* index, T* aligned, const ScatterPlan& plan) {
  const int64_t index_step = plan.index_strides[plan.dim], addressed_step = plan.addressed_strides[plan.dim],
                aligned_step = plan.aligned_strides[plan.dim];
  for_each_index_line(plan, [&](int64_t at_index, int64_t at_addressed, int64_t at_aligned, int64_t length) {
    for (int64_t k = 0; k < length; ++k)
      aligned[at_aligned + k * aligned_step] =
          addressed[at_addressed + index[at_index + k * index_step] * addressed_step];
  });
}

// addressed[c with dim := index[c]] += aligned[c], in increasing order of c along dim.
template <typename T>
void scatter_add_kernel(T* addressed, const int64_t* index, const T* aligned, const ScatterPlan& plan) {
  const int64_t index_step = plan.index_strides[plan.dim], addressed_step = plan.addressed_strides[plan.dim],
                aligned_step = plan.aligned_strides[plan.dim];
  for_each_index_line(plan, [&](int64_t at_index, int64_t at_addressed, int64_t at_aligned, int64_t length) {
    for (int64_t k = 0; k < length; ++k)
      addressed[at_addressed + index[at_index + k * index_step] * addressed_step] +=
          aligned[at_aligned + k * aligned_step];
  });
}

// A 0-d tensor takes part as shape [1].
Shape at_least_1d(const Shape& shape) { return shape.empty() ? Shape{1} : shape; }

// Checks gather's and scatter_add's arguments (PyTorch's rules) and plans the walk over `index`.
// `aligned_shape`: src's shape for scatter_add, the index's own for gather.
ScatterPlan plan_scatter(const Tensor& x, int64_t dim, const Tensor& index, const Shape& aligned_shape,
                         const char* op) {
  check(index.defined(), op, "undefined index");
  check(index.dtype() == kInt64, op, "expected an int64 index, got ", index.dtype());
  // PyTorch counts a 0-d tensor as one dim here: a 0-d input takes a [n] index and vice versa.
  check(std::max<int64_t>(index.dim(), 1) == std::max<int64_t>(x.dim(), 1), op,
        "expected an index with as many dims as the input (", x.dim(), "), got an index of shape ", index.shape(),
        " for an input of shape ", x.shape());
  ScatterPlan plan;
  plan.dim = detail::normalize_dim_0d(dim, x, op);
  plan.index_shape = at_least_1d(index.shape());
  const Shape x_shape = at_least_1d(x.shape()), aligned = at_least_1d(aligned_shape);
  for (size_t d = 0; d < plan.index_shape.size(); ++d) {
    check(static_cast<int64_t>(d) == plan.dim || plan.index_shape[d] <= x_shape[d], op, "index of shape ",
          index.shape(), " is larger than the input of shape ", x.shape(), " in dim ", d);
    check(plan.index_shape[d] <= aligned[d], op, "index of shape ", index.shape(), " is larger than src of shape ",
          aligned_shape, " in dim ", d);
  }
  detail::check_indices(index.data<int64_t>(), index.numel(), x_shape[plan.dim], dim, op);
  plan.index_strides = contiguous_strides(plan.index_shape);
  plan.addressed_strides = contiguous_strides(x_shape);
  plan.aligned_strides = contiguous_strides(aligned);
  return plan;
}

// t (recorded) extended with zeros at the end of every dim to `shape`, which is at least as large
// in every dim; a 0-d tensor counts as [1].
Tensor zero_pad_to(Tensor t, const Shape& shape) {
  const Shape target = at_least_1d(shape);
  t = t.reshape(at_least_1d(t.shape()));
  for (size_t d = 0; d < target.size(); ++d) {
    if (t.shape()[d] == target[d]) continue;
    Shape zeros_shape = t.shape();
    zeros_shape[d] = target[d] - t.shape()[d];
    t = cat({t, zeros(zeros_shape, t.dtype())}, static_cast<int64_t>(d));
  }
  return t.reshape(shape);
}

// index_select's gradient in recorded ops, for a recorded backward: g's rows added into zeros of
// x's shape at the rows `index` names, a scatter_add with the index spread over g's shape (whose
// gradient is a gather, and a gather's a scatter_add: differentiable at any order).
Tensor index_select_backward_graph(const Tensor& g, int64_t d, const Tensor& index, const Shape& in_shape) {
  if (in_shape.empty()) return g.reshape(in_shape);  // a 0-d input: its one element, selected once
  Shape index_shape(in_shape.size(), 1);
  index_shape[d] = index.numel();
  return scatter_add(zeros(in_shape, g.dtype()), d, index.reshape(index_shape).expand(g.shape()), g);
}

// index_select and gather only move values, so they take every dtype; scatter_add adds, so floats.
void check_input(const Tensor& x, const char* op, bool adds) {
  check(x.defined(), op, "undefined input");
  if (adds) detail::check_dtype<detail::FloatingDTypes>(op, x.dtype());
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) try {
  // A bfloat16 input that needs a gradient goes through float32: its backward adds rows.
  if (detail::is_bfloat16(x) && autograd::needs_grad(x))
    return detail::in_float32([&](const Tensor& wide) { return index_select(wide, dim, index); }, x);
  const char* op = "index_select";
  check_input(x, op, /*adds=*/false);
  check(index.defined(), op, "undefined index");
  check(index.dtype() == kInt64, op, "expected an int64 index, got ", index.dtype());
  check(index.dim() <= 1, op, "expected a 1-D index, got an index of shape ", index.shape());
  const int64_t d = detail::normalize_dim_0d(dim, x, op);
  const int64_t n = index.numel();
  check(x.dim() > 0 || n == 1, op, "expected one index for a 0-d input, got ", n);
  const detail::AlongDim layout = detail::along_dim(at_least_1d(x.shape()), d);
  detail::check_indices(index.data<int64_t>(), n, layout.size, dim, op);
  Shape out_shape = x.shape();
  if (x.dim() > 0) out_shape[d] = n;
  Tensor out = make_tensor(out_shape, x.dtype(), op);
  detail::dispatch_all(op, x.dtype(), [&]<typename T>() {
    detail::index_rows<T>(x.data<T>(), layout, index.data<int64_t>(), n, out.mutable_data<T>());
  });
  if (autograd::needs_grad(x))
    autograd::record(out, "IndexSelectBackward", {x},
                     [saved_index = autograd::SavedTensor(index), layout, d, in_shape = x.shape()](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor& index = grads.unpack(saved_index);
                       if (grads.create_graph()) {
                         grads.set(0, index_select_backward_graph(g, d, index, in_shape));
                         return;
                       }
                       Tensor dx = zeros(in_shape, g.dtype());
                       detail::dispatch_floating("IndexSelectBackward", g.dtype(), [&]<typename T>() {
                         detail::index_add<T>(dx.mutable_data<T>(), layout, index.data<int64_t>(), index.numel(),
                                              g.data<T>());
                       });
                       grads.set(0, dx);
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("index_select");
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) try {
  if (detail::is_bfloat16(x) && autograd::needs_grad(x))  // as index_select
    return detail::in_float32([&](const Tensor& wide) { return gather(wide, dim, index); }, x);
  const char* op = "gather";
  check_input(x, op, /*adds=*/false);
  const ScatterPlan plan = plan_scatter(x, dim, index, index.defined() ? index.shape() : Shape{}, op);
  Tensor out = make_tensor(index.shape(), x.dtype(), op);
  detail::dispatch_all(op, x.dtype(), [&]<typename T>() {
    gather_kernel<T>(x.data<T>(), index.data<int64_t>(), out.mutable_data<T>(), plan);
  });
  if (autograd::needs_grad(x))
    autograd::record(out, "GatherBackward", {x},
                     [saved_index = autograd::SavedTensor(index), plan, in_shape = x.shape()](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor& index = grads.unpack(saved_index);
                       if (grads.create_graph()) {  // recorded: scatter_add into zeros
                         grads.set(0, scatter_add(zeros(in_shape, g.dtype()), plan.dim, index, g));
                         return;
                       }
                       Tensor dx = zeros(in_shape, g.dtype());
                       detail::dispatch_floating("GatherBackward", g.dtype(), [&]<typename T>() {
                         scatter_add_kernel<T>(dx.mutable_data<T>(), index.data<int64_t>(), g.data<T>(), plan);
                       });
                       grads.set(0, dx);
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("gather");
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) try {
  if (detail::all_bfloat16(x, src))  // in float32, rounded once
    return detail::in_float32([&](const Tensor& w, const Tensor& s) { return scatter_add(w, dim, index, s); }, x, src);
  const char* op = "scatter_add";
  check_input(x, op, /*adds=*/true);
  check(src.defined(), op, "undefined src");
  check(src.dtype() == x.dtype(), op, "dtypes differ: input ", x.dtype(), ", src ", src.dtype());
  check(std::max<int64_t>(src.dim(), 1) == std::max<int64_t>(x.dim(), 1), op,
        "expected src with as many dims as the input (", x.dim(), "), got src of shape ", src.shape(),
        " for an input of shape ", x.shape());
  const ScatterPlan plan = plan_scatter(x, dim, index, src.shape(), op);
  Tensor out = x.detach().clone();
  detail::dispatch_floating(op, x.dtype(), [&]<typename T>() {
    scatter_add_kernel<T>(out.mutable_data<T>(), index.data<int64_t>(), src.data<T>(), plan);
  });
  if (autograd::needs_grad(x, src))
    autograd::record(out, "ScatterAddBackward", {x, src},
                     [saved_index = autograd::SavedTensor(index), plan, src_shape = src.shape()](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor& index = grads.unpack(saved_index);
                       if (grads.needed(0)) grads.set(0, g);
                       if (!grads.needed(1)) return;
                       // Elements of src that the index does not reach never reached the output: their gradient is 0.
                       if (grads.create_graph()) {  // recorded: gather, padded with zeros to src's shape
                         grads.set(1, zero_pad_to(gather(g, plan.dim, index), src_shape));
                         return;
                       }
                       Tensor dsrc = zeros(src_shape, g.dtype());
                       detail::dispatch_floating("ScatterAddBackward", g.dtype(), [&]<typename T>() {
                         gather_kernel<T>(g.data<T>(), index.data<int64_t>(), dsrc.mutable_data<T>(), plan);
                       });
                       grads.set(1, dsrc);
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("scatter_add");
}

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return tg::index_select(*this, dim, index); }
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return tg::gather(*this, dim, index); }
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return tg::scatter_add(*this, dim, index, src);
}

}  // namespace tg
