// Slicing (narrow, select, slice), expand, and the triangles (tril, triu).
//
// Slicing and expand are copies through the strided-layout kernel (ops/shape.hpp): along the
// sliced dim the source stride is multiplied by the step and the offset moved to the first kept
// element; select drops the dim; expand gives the repeated dims stride 0. The slicing gradient is
// the incoming one scattered back through the same layout into zeros (no element is reached twice);
// expand's sums over the repeated dims. In a recorded backward (create_graph) each of those is a
// recorded op in turn (the scatter's gradient is the slice again), so it can be differentiated again.
#include <algorithm>

#include "autograd/node.hpp"
#include "dispatch.hpp"
#include "ops/reduction.hpp"
#include "ops/shape.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"

namespace tg {
namespace {

Tensor unslice(const Tensor& g, const Shape& in_shape, const detail::StridedLayout& layout);

// x read through `layout` (a slice of it: no element twice), copied; recorded as `backward_name`.
// The gradient is the incoming one scattered back through the same layout into zeros of x's shape.
Tensor gather_slice(const Tensor& x, const detail::StridedLayout& layout, const char* op, const char* backward_name) {
  Tensor out = detail::strided_gather(x, layout, op);
  if (autograd::needs_grad(x))
    autograd::record(out, backward_name, {x}, [in_shape = x.shape(), layout](const Tensor& g, autograd::GradInputs& grads) {
      if (grads.create_graph()) {
        grads.set(0, unslice(g, in_shape, layout));
        return;
      }
      Tensor dx = zeros(in_shape, g.dtype());
      detail::strided_scatter(g, dx, layout);
      grads.set(0, dx);
    });
  return out;
}

// gather_slice's way back, as a recorded op (for a recorded backward): zeros of `in_shape` with g
// written through `layout`. Linear in g, so its gradient is the slice again.
Tensor unslice(const Tensor& g, const Shape& in_shape, const detail::StridedLayout& layout) {
  Tensor dx = zeros(in_shape, g.dtype());
  detail::strided_scatter(g, dx, layout);
  if (autograd::needs_grad(g))
    autograd::record(dx, "SliceBackwardBackward", {g}, [layout](const Tensor& gg, autograd::GradInputs& grads) {
      grads.set(0, grads.create_graph() ? gather_slice(gg, layout, "slice", "SliceBackward")
                                        : detail::strided_gather(gg, layout, "slice"));
    });
  return dx;
}

// Elements start, start + step, ... (count of them) along dim d of x, the dim kept (or removed when
// `keep_dim` is false: select), copied; recorded as `backward_name`.
Tensor strided_slice(const Tensor& x, int64_t d, int64_t start, int64_t count, int64_t step, bool keep_dim,
                     const char* op, const char* backward_name) {
  const std::vector<int64_t> in_strides = detail::contiguous_strides(x.shape());
  detail::StridedLayout layout;
  layout.offset = start * in_strides[d];
  for (int64_t k = 0; k < x.dim(); ++k) {
    if (k != d) {
      layout.shape.push_back(x.shape()[k]), layout.strides.push_back(in_strides[k]);
    } else if (keep_dim) {
      layout.shape.push_back(count), layout.strides.push_back(in_strides[k] * step);
    }
  }
  return gather_slice(x, layout, op, backward_name);
}

// dim d of x, normalised, for an op that needs at least one dim.
int64_t slicing_dim(const Tensor& x, int64_t dim, const char* op) {
  check(x.defined(), op, "undefined tensor");
  check(x.dim() > 0, op, "cannot be applied to a 0-d tensor");
  return normalize_dim(dim, x.dim(), op);
}

}  // namespace

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
  const int64_t size = shape()[d];
  // Python's rules for x[start:end]: negative counts from the end, then both clamped into
  // [0, size], and an end before the start is an empty slice.
  int64_t first = start.value_or(0), last = end.value_or(size);
  if (first < 0) first += size;
  if (last < 0) last += size;
  first = std::clamp<int64_t>(first, 0, size);
  last = std::clamp<int64_t>(last, first, size);
  const int64_t count = (last - first + step - 1) / step;
  return strided_slice(*this, d, first, count, step, true, "slice", "SliceBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("slice");
}

Tensor Tensor::expand(const Shape& sizes) const try {
  check(defined(), "expand", "undefined tensor");
  const int64_t ndim = dim(), out_ndim = static_cast<int64_t>(sizes.size());
  check(out_ndim >= ndim, "expand", "the number of sizes (", out_ndim, ") in ", sizes,
        " must be at least the number of dims of the tensor of shape ", shape());
  const std::vector<int64_t> in_strides = detail::contiguous_strides(shape());
  detail::StridedLayout layout;
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
