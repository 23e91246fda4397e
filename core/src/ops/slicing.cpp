// Slicing (narrow, select, slice, index), its way back (slice_scatter, select_scatter), expand, and
// the triangles (tril, triu).
//
// Slicing and expand are copies through the strided-layout kernel (ops/shape.hpp): along the
// sliced dim the source stride is multiplied by the step and the offset moved to the first kept
// element; select drops the dim; expand gives the repeated dims stride 0. The slicing gradient is
// the incoming one scattered back through the same layout into zeros (no element is reached twice);
// expand's sums over the repeated dims. In a recorded backward (create_graph) each of those is a
// recorded op in turn (the scatter's gradient is the slice again), so it can be differentiated again.
// A slicing result remembers its region of the input (SliceOf, ops/slicing.hpp), so that an in-place
// op on it writes back (ops/inplace.cpp).
#include "ops/slicing.hpp"

#include <algorithm>
#include <cstring>

#include "dispatch.hpp"
#include "ops/reduction.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"

namespace tg {

namespace detail {

namespace {
Tensor unslice(const Tensor& g, const Shape& in_shape, const StridedLayout& layout);
}  // namespace

StridedLayout whole(const Shape& shape) { return {shape, contiguous_strides(shape), 0}; }

// x read through `layout` (a slice of it: no element twice), copied; recorded as `backward_name`.
// The gradient is the incoming one scattered back through the same layout into zeros of x's shape.
Tensor gather_slice(const Tensor& x, const StridedLayout& layout, const char* op, const char* backward_name) {
  Tensor out = strided_gather(x, layout, op);
  if (autograd::needs_grad(x))
    autograd::record(out, backward_name, {x}, [in_shape = x.shape(), layout](const Tensor& g, autograd::GradInputs& grads) {
      if (grads.create_graph()) {
        grads.set(0, unslice(g, in_shape, layout));
        return;
      }
      Tensor dx = zeros(in_shape, g.dtype());
      strided_scatter(g, dx, layout);
      grads.set(0, dx);
    });
  return out;
}

namespace {

// gather_slice's way back, as a recorded op (for a recorded backward): zeros of `in_shape` with g
// written through `layout`. Linear in g, so its gradient is the slice again.
Tensor unslice(const Tensor& g, const Shape& in_shape, const StridedLayout& layout) {
  Tensor dx = zeros(in_shape, g.dtype());
  strided_scatter(g, dx, layout);
  if (autograd::needs_grad(g))
    autograd::record(dx, "SliceBackwardBackward", {g}, [layout](const Tensor& gg, autograd::GradInputs& grads) {
      grads.set(0, grads.create_graph() ? gather_slice(gg, layout, "slice", "SliceBackward")
                                        : strided_gather(gg, layout, "slice"));
    });
  return dx;
}

}  // namespace

Tensor scatter_region(const Tensor& input, const Tensor& src, const StridedLayout& region, const char* op) {
  Tensor out = make_tensor(input.shape(), input.dtype(), op);
  if (out.numel() > 0)
    std::memcpy(impl_of(out)->storage->data, impl_of(input)->storage->data,
                static_cast<size_t>(out.numel()) * element_size(out.dtype()));
  strided_scatter(src, out, region);
  if (autograd::needs_grad(input, src))
    autograd::record(out, "SliceScatterBackward", {input, src},
                     [region, src_shape = src.shape()](const Tensor& g, autograd::GradInputs& grads) {
                       region_backward(g, grads, region, src_shape);
                     });
  return out;
}

// One path for both kinds of backward: scatter_region and gather_slice record only in a recorded
// backward (create_graph), where the incoming gradient requires grad and grad mode is on.
void region_backward(const Tensor& g, autograd::GradInputs& grads, const StridedLayout& region, const Shape& src_shape) {
  if (grads.needed(0)) grads.set(0, scatter_region(g, zeros(region.shape, g.dtype()), region, "slice_scatter"));
  if (grads.needed(1)) {
    Tensor dsrc = gather_slice(g, region, "slice", "SliceBackward");
    grads.set(1, dsrc.shape() == src_shape ? dsrc : dsrc.reshape(src_shape));
  }
}

}  // namespace detail

namespace {

using detail::StridedLayout;

// Elements start, start + step, ... (count of them) along dim d of `source`, the dim kept (or
// removed when `keep_dim` is false: select).
StridedLayout slice_layout(const StridedLayout& source, int64_t d, int64_t start, int64_t count, int64_t step,
                           bool keep_dim) {
  StridedLayout out;
  out.offset = source.offset + start * source.strides[d];
  for (size_t k = 0; k < source.shape.size(); ++k) {
    if (static_cast<int64_t>(k) != d) {
      out.shape.push_back(source.shape[k]), out.strides.push_back(source.strides[k]);
    } else if (keep_dim) {
      out.shape.push_back(count), out.strides.push_back(source.strides[k] * step);
    }
  }
  return out;
}

// Python's rules for x[start:end:step] along a dim of `size`: negative counts from the end, then
// both clamped into [0, size], and an end before the start is an empty slice.
struct SliceBounds {
  int64_t first;
  int64_t count;
};
SliceBounds python_slice(int64_t size, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  int64_t first = start.value_or(0), last = end.value_or(size);
  if (first < 0) first += size;
  if (last < 0) last += size;
  first = std::clamp<int64_t>(first, 0, size);
  last = std::clamp<int64_t>(last, first, size);
  return {first, (last - first + step - 1) / step};
}

// out, just gathered from x through `edit(x's own layout)`, remembers where its elements came from:
// `edit(x's region)` of x's base when x is itself an unreshaped slicing result whose base is alive
// (so a chain of slicing ops writes back to the root even after the intermediate copies are gone),
// otherwise `edit(x's own layout)` of x.
template <typename Edit>
void remember_region(const Tensor& out, const Tensor& x, const Edit& edit) {
  const TensorImpl* impl = detail::impl_of(x);
  auto slice = std::make_shared<detail::SliceOf>();
  std::shared_ptr<TensorImpl> base;
  if (const detail::SliceOf* outer = impl->slice_of.get()) {
    base = outer->base.lock();
    if (base && base->storage == outer->base_storage.lock() && outer->region.shape == x.shape()) {
      slice->base = base;
      slice->base_storage = base->storage;
      slice->region = edit(outer->region);
      slice->base_version = outer->base_version;
      detail::impl_of(out)->slice_of = std::move(slice);
      return;
    }
  }
  slice->base = detail::impl_ptr_of(x);
  slice->base_storage = impl->storage;
  slice->region = edit(detail::whole(x.shape()));
  slice->base_version = impl->storage->version;
  detail::impl_of(out)->slice_of = std::move(slice);
}

// Elements start, start + step, ... (count of them) along dim d of x, the dim kept (or removed when
// `keep_dim` is false: select), copied; recorded as `backward_name`; remembers its region.
Tensor strided_slice(const Tensor& x, int64_t d, int64_t start, int64_t count, int64_t step, bool keep_dim,
                     const char* op, const char* backward_name) {
  const auto edit = [&](const StridedLayout& source) { return slice_layout(source, d, start, count, step, keep_dim); };
  Tensor out = detail::gather_slice(x, edit(detail::whole(x.shape())), op, backward_name);
  remember_region(out, x, edit);
  return out;
}

// dim d of x, normalised, for an op that needs at least one dim.
int64_t slicing_dim(const Tensor& x, int64_t dim, const char* op) {
  check(x.defined(), op, "undefined tensor");
  check(x.dim() > 0, op, "cannot be applied to a 0-d tensor");
  return normalize_dim(dim, x.dim(), op);
}

}  // namespace

StridedLayout detail::index_region(const StridedLayout& source, const std::vector<indexing::TensorIndex>& indices,
                                   const char* op) {
  using Kind = indexing::TensorIndex::Kind;
  const int64_t ndim = static_cast<int64_t>(source.shape.size());
  int64_t consumed = 0, ellipses = 0;  // dims taken by integers and slices; Ellipsis entries
  for (const indexing::TensorIndex& entry : indices) {
    consumed += entry.kind() == Kind::kInteger || entry.kind() == Kind::kSlice;
    ellipses += entry.kind() == Kind::kEllipsis;
  }
  check(ellipses <= 1, op, "an index can only have a single Ellipsis, got ", ellipses);
  check(consumed <= ndim, op, "too many indices for a tensor of shape ", source.shape, ": ", consumed,
        " integers or slices for ", ndim, " dims");
  StridedLayout out;
  out.offset = source.offset;
  int64_t d = 0;  // the next dim of source
  const auto keep = [&](int64_t k) { out.shape.push_back(source.shape[k]), out.strides.push_back(source.strides[k]); };
  for (const indexing::TensorIndex& entry : indices) {
    switch (entry.kind()) {
      case Kind::kInteger: {
        const int64_t size = source.shape[d];
        int64_t index = entry.integer();
        check(index >= -size && index < size, op, "index ", index, " is out of bounds for dim ", d, " with size ",
              size, " of a tensor of shape ", source.shape);
        if (index < 0) index += size;
        out.offset += index * source.strides[d];
        ++d;
        break;
      }
      case Kind::kSlice: {
        const indexing::Slice& slice = entry.slice();
        const int64_t step = slice.step.value_or(1);
        check(step > 0, op, "slice step must be positive, got ", step, " (for dim ", d, ")");
        const SliceBounds bounds = python_slice(source.shape[d], slice.start, slice.stop, step);
        out.offset += bounds.first * source.strides[d];
        out.shape.push_back(bounds.count), out.strides.push_back(source.strides[d] * step);
        ++d;
        break;
      }
      case Kind::kNone:
        out.shape.push_back(1), out.strides.push_back(0);
        break;
      case Kind::kEllipsis:
        for (int64_t n = ndim - consumed; n > 0; --n) keep(d++);
        break;
    }
  }
  while (d < ndim) keep(d++);
  return out;
}

Tensor Tensor::index(const std::vector<indexing::TensorIndex>& indices) const try {
  check(defined(), "index", "undefined tensor");
  const auto edit = [&](const StridedLayout& source) { return detail::index_region(source, indices, "index"); };
  Tensor out = detail::gather_slice(*this, edit(detail::whole(shape())), "index", "IndexBackward");
  remember_region(out, *this, edit);
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("index");
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const try {
  const int64_t d = slicing_dim(*this, dim, "narrow");
  const int64_t size = shape()[d];
  check(start >= -size && start <= size, "narrow", "start ", start, " is out of range for dim ", dim, " of size ",
        size, " (expected a start in [", -size, ", ", size, "]) of a tensor of shape ", shape());
  if (start < 0) start += size;
  check(length >= 0, "narrow", "length must be non-negative, got ", length);
  check(start <= size - length, "narrow", "start (", start, ") + length (", length, ") exceeds size ", size,
        " of dim ", dim, " of a tensor of shape ", shape());
  return strided_slice(*this, d, start, length, 1, true, "narrow", "NarrowBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("narrow");
}

Tensor Tensor::select(int64_t dim, int64_t index) const try {
  const int64_t d = slicing_dim(*this, dim, "select");
  const int64_t size = shape()[d];
  check(index >= -size && index < size, "select", "index ", index, " is out of range for dim ", dim, " of size ",
        size, " (expected an index in [", -size, ", ", size - 1, "]) of a tensor of shape ", shape());
  return strided_slice(*this, d, index < 0 ? index + size : index, 1, 1, false, "select", "SelectBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("select");
}

Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) const try {
  const int64_t d = slicing_dim(*this, dim, "slice");
  check(step > 0, "slice", "step must be positive, got ", step);
  const SliceBounds bounds = python_slice(shape()[d], start, end, step);
  return strided_slice(*this, d, bounds.first, bounds.count, step, true, "slice", "SliceBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("slice");
}

// --- slice_scatter and select_scatter: the out-of-place forms of writing a slice -------------------

namespace {
// input with src over `region` of it, after the checks every scatter makes.
Tensor checked_scatter(const Tensor& input, const Tensor& src, const StridedLayout& region, const char* op) {
  check(src.defined(), op, "undefined src");
  check(src.dtype() == input.dtype(), op, "src is ", src.dtype(), " but input is ", input.dtype(), " (convert src with ",
        detail::cast_to(input.dtype()), ")");
  check(src.shape() == region.shape, op, "expected src of shape ", region.shape, " (the slice of input of shape ",
        input.shape(), "), got ", src.shape());
  return detail::scatter_region(input, src, region, op);
}
}  // namespace

Tensor slice_scatter(const Tensor& input, const Tensor& src, int64_t dim, std::optional<int64_t> start,
                     std::optional<int64_t> end, int64_t step) try {
  const int64_t d = slicing_dim(input, dim, "slice_scatter");
  check(step > 0, "slice_scatter", "step must be positive, got ", step);
  const SliceBounds bounds = python_slice(input.shape()[d], start, end, step);
  return checked_scatter(input, src, slice_layout(detail::whole(input.shape()), d, bounds.first, bounds.count, step, true),
                         "slice_scatter");
} catch (...) {
  detail::rethrow_out_of_memory_as("slice_scatter");
}

Tensor select_scatter(const Tensor& input, const Tensor& src, int64_t dim, int64_t index) try {
  const int64_t d = slicing_dim(input, dim, "select_scatter");
  const int64_t size = input.shape()[d];
  check(index >= -size && index < size, "select_scatter", "index ", index, " is out of range for dim ", dim,
        " of size ", size, " (expected an index in [", -size, ", ", size - 1, "]) of a tensor of shape ", input.shape());
  return checked_scatter(input, src, slice_layout(detail::whole(input.shape()), d, index < 0 ? index + size : index, 1, 1, false),
                         "select_scatter");
} catch (...) {
  detail::rethrow_out_of_memory_as("select_scatter");
}

Tensor Tensor::expand(const Shape& sizes) const try {
  check(defined(), "expand", "undefined tensor");
  const int64_t ndim = dim(), out_ndim = static_cast<int64_t>(sizes.size());
  check(out_ndim >= ndim, "expand", "the number of sizes (", out_ndim, ") in ", sizes,
        " must be at least the number of dims of the tensor of shape ", shape());
  const std::vector<int64_t> in_strides = detail::contiguous_strides(shape());
  StridedLayout layout;
  for (int64_t k = 0; k < out_ndim; ++k) {
    const int64_t j = k - (out_ndim - ndim);  // the input dim under output dim k, if any
    if (j < 0) {
      check(sizes[k] >= 0, "expand", "size ", sizes[k], " of new leading dim ", k, " in ", sizes,
            " must be non-negative (-1 keeps an existing dim only)");
      layout.shape.push_back(sizes[k]), layout.strides.push_back(0);
      continue;
    }
    const int64_t size = shape()[j];
    const int64_t target = sizes[k] == -1 ? size : sizes[k];
    check(target == size || size == 1, "expand", "the expanded size ", sizes[k], " must match the existing size ",
          size, " at non-singleton dim ", j, " (target sizes ", sizes, ", tensor shape ", shape(), ")");
    check(target >= 0, "expand", "invalid size ", sizes[k], " in ", sizes);
    layout.shape.push_back(target), layout.strides.push_back(size == 1 ? 0 : in_strides[j]);
  }
  checked_numel(layout.shape, "expand");
  Tensor out = detail::strided_gather(*this, layout, "expand");
  if (autograd::needs_grad(*this))
    autograd::record(out, "ExpandBackward", {*this}, [in_shape = shape()](const Tensor& g, autograd::GradInputs& grads) {
      grads.set(0, detail::sum_to(g, in_shape));
    });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("expand");
}

// --- tril and triu ---------------------------------------------------------------------------------

namespace {

// x: [batch, R, C] (the leading dims folded). out(b, i, j) = x(b, i, j) where j − i <= diagonal
// (lower) or j − i >= diagonal (upper), 0 elsewhere. Each row is one run kept and one zeroed.
Tensor triangle(const Tensor& x, int64_t diagonal, bool lower, const char* op) {
  Tensor out = make_tensor(x.shape(), x.dtype(), op);
  if (out.numel() == 0) return out;
  const int64_t R = x.shape()[x.dim() - 2], C = x.shape()[x.dim() - 1];
  const int64_t rows = x.numel() / C;
  // Beyond [-R, C] every diagonal masks the same (and i + diagonal cannot overflow).
  diagonal = std::clamp<int64_t>(diagonal, -R - 1, C + 1);
  detail::dispatch_all(op, x.dtype(), [&]<typename T>() {
    const T* in = x.data<T>();
    T* result = out.mutable_data<T>();
    detail::parallel_for(rows, detail::ceil_div(detail::kElementwiseGrain, C), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t i = row % R;
        // Columns [0, split) are j < i + diagonal + 1 (tril keeps them) or j < i + diagonal (triu zeroes them).
        const int64_t split = std::clamp<int64_t>(lower ? i + diagonal + 1 : i + diagonal, 0, C);
        const T* src = in + row * C;
        T* dst = result + row * C;
        if (lower) {
          std::copy_n(src, split, dst);
          std::fill(dst + split, dst + C, T(0));
        } else {
          std::fill(dst, dst + split, T(0));
          std::copy(src + split, src + C, dst + split);
        }
      }
    });
  });
  return out;
}

Tensor triangle_op(const Tensor& x, int64_t diagonal, bool lower, const char* op, const char* backward_name) {
  check(x.defined(), op, "undefined tensor");
  check(x.dim() >= 2, op, "expected a tensor with at least 2 dims, got shape ", x.shape());
  Tensor out = triangle(x, diagonal, lower, op);
  if (autograd::needs_grad(x))
    autograd::record(out, backward_name, {x},
                     [diagonal, lower, op, backward_name](const Tensor& g, autograd::GradInputs& grads) {
                       grads.set(0, grads.create_graph() ? triangle_op(g, diagonal, lower, op, backward_name)
                                                         : triangle(g, diagonal, lower, op));
                     });
  return out;
}

}  // namespace

Tensor Tensor::tril(int64_t diagonal) const try {
  return triangle_op(*this, diagonal, true, "tril", "TrilBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("tril");
}

Tensor Tensor::triu(int64_t diagonal) const try {
  return triangle_op(*this, diagonal, false, "triu", "TriuBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("triu");
}

Tensor tril(const Tensor& x, int64_t diagonal) { return x.tril(diagonal); }
Tensor triu(const Tensor& x, int64_t diagonal) { return x.triu(diagonal); }

}  // namespace tg
