// Shape operations. Views that share storage (reshape, view, unsqueeze, squeeze, unflatten,
// flatten): a tensor is contiguous, so any new shape of the same element count is the same bytes
// read another way, and the gradient is the incoming gradient read the old way. Copies that reorder
// (transpose, permute, t): one pass of the strided-layout kernel (ops/shape.hpp), whose gradient is
// the inverse reordering. A recorded backward (create_graph) runs the same as recorded ops (reshape,
// permute), so that it can be differentiated again.
#include "ops/shape.hpp"

#include <algorithm>

#include "autograd/node.hpp"
#include "dispatch.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"

namespace tg {
namespace detail {
namespace {

// The same walk over fewer, longer rows: size-1 dims dropped, and a dim merged into the one before
// it where the source runs on across them (stride[outer] == stride[inner] · size[inner]). At least
// one dim remains. E.g. narrowing dim 0 of [4, 8, 16] is one run of 8·16 per kept row of dim 0.
StridedLayout coalesce(const StridedLayout& layout) {
  StridedLayout out;
  out.offset = layout.offset;
  for (size_t d = 0; d < layout.shape.size(); ++d) {
    const int64_t size = layout.shape[d], stride = layout.strides[d];
    if (size == 1) continue;
    if (!out.shape.empty() && out.strides.back() == stride * size) {
      out.shape.back() *= size;
      out.strides.back() = stride;
    } else {
      out.shape.push_back(size);
      out.strides.push_back(stride);
    }
  }
  if (out.shape.empty()) out.shape.push_back(1), out.strides.push_back(0);
  return out;
}

// Gather (kScatter false): contiguous[i] = strided[offset + Σ i_d · strides[d]]; scatter: the
// other way. Rows of the last dim, `inner` elements `inner_stride` apart in the strided tensor;
// each chunk of rows finds its first row's index once and then steps it like an odometer.
template <typename T, bool kScatter>
void strided_walk(const T* src, T* dst, const StridedLayout& layout) {
  const int64_t ndim = static_cast<int64_t>(layout.shape.size());
  const int64_t inner = layout.shape.back(), inner_stride = layout.strides.back();
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < ndim; ++d) rows *= layout.shape[d];
  parallel_for(rows, ceil_div(kElementwiseGrain, inner), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> index(static_cast<size_t>(std::max<int64_t>(ndim - 1, 0)));
    int64_t offset = layout.offset;
    for (int64_t d = ndim - 2, rest = begin; d >= 0; --d) {
      index[d] = rest % layout.shape[d];
      rest /= layout.shape[d];
      offset += index[d] * layout.strides[d];
    }
    for (int64_t row = begin; row < end; ++row) {
      if constexpr (kScatter) {
        const T* in = src + row * inner;
        T* out = dst + offset;
        if (inner_stride == 1)
          std::copy_n(in, inner, out);
        else
          for (int64_t i = 0; i < inner; ++i) out[i * inner_stride] = in[i];
      } else {
        const T* in = src + offset;
        T* out = dst + row * inner;
        if (inner_stride == 1)
          std::copy_n(in, inner, out);
        else
          for (int64_t i = 0; i < inner; ++i) out[i] = in[i * inner_stride];
      }
      for (int64_t d = ndim - 2; d >= 0; --d) {  // the next row's index and offset
        offset += layout.strides[d];
        if (++index[d] < layout.shape[d]) break;
        offset -= layout.strides[d] * layout.shape[d];
        index[d] = 0;
      }
    }
  });
}

}  // namespace

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

Tensor strided_gather(const Tensor& x, const StridedLayout& layout, const char* op) {
  Tensor out = make_tensor(layout.shape, x.dtype(), op);
  if (out.numel() == 0) return out;
  const StridedLayout walk = coalesce(layout);
  dispatch_all(op, x.dtype(), [&]<typename T>() { strided_walk<T, false>(x.data<T>(), out.mutable_data<T>(), walk); });
  return out;
}

void strided_scatter(const Tensor& src, Tensor& dst, const StridedLayout& layout) {
  if (src.numel() == 0) return;
  const StridedLayout walk = coalesce(layout);
  dispatch_all("strided_scatter", src.dtype(),
               [&]<typename T>() { strided_walk<T, true>(src.data<T>(), dst.mutable_data<T>(), walk); });
}

Tensor permute_copy(const Tensor& x, const std::vector<int64_t>& perm) {
  const std::vector<int64_t> in_strides = contiguous_strides(x.shape());
  StridedLayout layout;
  for (int64_t d : perm) layout.shape.push_back(x.shape()[d]), layout.strides.push_back(in_strides[d]);
  return strided_gather(x, layout, "permute");
}

}  // namespace detail

namespace {

// x under a new shape of the same element count, sharing its storage; the gradient is the incoming
// one read under x's shape. `backward_name` is the node's name (ViewBackward, UnsqueezeBackward...).
Tensor view_with_shape(const Tensor& x, const Shape& shape, const char* backward_name) {
  Tensor out = make_view(x, shape);
  detail::share_storage(x, out);  // counted, so that an in-place op on one of them sees the other
  if (autograd::needs_grad(x))
    autograd::record(out, backward_name, {x}, [in_shape = x.shape()](const Tensor& g, autograd::GradInputs& grads) {
      grads.set(0, grads.create_graph() ? g.reshape(in_shape) : make_view(g, in_shape));
    });
  return out;
}

// `requested` with its one -1 (if any) resolved so that the element count is `numel`, or tg::Error
// naming `op` and `input_shape`.
Shape infer_shape(const Shape& requested, int64_t numel, const Shape& input_shape, const char* op) {
  Shape resolved = requested;
  int64_t inferred = -1;
  for (size_t d = 0; d < resolved.size(); ++d) {
    if (resolved[d] == -1) {
      check(inferred < 0, op, "only one dim can be -1, got ", requested);
      inferred = static_cast<int64_t>(d);
    } else {
      check(resolved[d] >= 0, op, "invalid size ", resolved[d], " in shape ", requested);
    }
  }
  // The product of the given dims, checked for overflow (the -1 counts as 1 here).
  Shape given = resolved;
  if (inferred >= 0) given[inferred] = 1;
  const int64_t known = checked_numel(given, op);
  if (inferred >= 0) {
    check(known != 0 && numel % known == 0, op, "shape ", requested, " is invalid for input of shape ", input_shape,
          " (", numel, " elements)");
    resolved[inferred] = numel / known;
  }
  check(checked_numel(resolved, op) == numel, op, "shape ", requested, " is invalid for input of shape ", input_shape,
        " (", numel, " elements)");
  return resolved;
}

}  // namespace

Tensor Tensor::reshape(const Shape& new_shape) const try {
  check(defined(), "reshape", "undefined tensor");
  return view_with_shape(*this, infer_shape(new_shape, numel(), shape(), "reshape"), "ReshapeBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("reshape");
}

Tensor Tensor::view(const Shape& new_shape) const try {
  check(defined(), "view", "undefined tensor");
  return view_with_shape(*this, infer_shape(new_shape, numel(), shape(), "view"), "ViewBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("view");
}

Tensor Tensor::unsqueeze(int64_t dim) const try {
  check(defined(), "unsqueeze", "undefined tensor");
  const int64_t d = normalize_dim(dim, this->dim() + 1, "unsqueeze");
  Shape out_shape = shape();
  out_shape.insert(out_shape.begin() + d, 1);
  return view_with_shape(*this, out_shape, "UnsqueezeBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("unsqueeze");
}

Tensor Tensor::squeeze() const try {
  check(defined(), "squeeze", "undefined tensor");
  Shape out_shape;
  for (int64_t size : shape())
    if (size != 1) out_shape.push_back(size);
  return view_with_shape(*this, out_shape, "SqueezeBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("squeeze");
}

Tensor Tensor::squeeze(int64_t dim) const try {
  check(defined(), "squeeze", "undefined tensor");
  // A 0-d tensor takes dim 0 or -1 and stays 0-d, as in PyTorch.
  const int64_t d = normalize_dim(dim, std::max<int64_t>(this->dim(), 1), "squeeze");
  Shape out_shape = shape();
  if (this->dim() > 0 && out_shape[d] == 1) out_shape.erase(out_shape.begin() + d);
  return view_with_shape(*this, out_shape, "SqueezeBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("squeeze");
}

Tensor Tensor::unflatten(int64_t dim, const Shape& sizes) const try {
  check(defined(), "unflatten", "undefined tensor");
  check(this->dim() > 0, "unflatten", "a 0-d tensor cannot be unflattened");
  const int64_t d = normalize_dim(dim, this->dim(), "unflatten");
  check(!sizes.empty(), "unflatten", "sizes must be non-empty");
  Shape inner;
  try {
    inner = infer_shape(sizes, shape()[d], {shape()[d]}, "unflatten");
  } catch (const Error&) {
    detail::fail("unflatten", "sizes ", sizes, " do not multiply to size ", shape()[d], " of dim ", dim,
         " of a tensor of shape ", shape());
  }
  Shape out_shape(shape().begin(), shape().begin() + d);
  out_shape.insert(out_shape.end(), inner.begin(), inner.end());
  out_shape.insert(out_shape.end(), shape().begin() + d + 1, shape().end());
  return view_with_shape(*this, out_shape, "UnflattenBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("unflatten");
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const try {
  check(defined(), "flatten", "undefined tensor");
  // A 0-d input counts as one dim and becomes [1], as torch.flatten.
  const int64_t ndim = std::max<int64_t>(dim(), 1);
  const int64_t first = normalize_dim(start_dim, ndim, "flatten"), last = normalize_dim(end_dim, ndim, "flatten");
  check(first <= last, "flatten", "start_dim ", start_dim, " comes after end_dim ", end_dim,
        " for a tensor of shape ", shape());
  if (dim() == 0) return view_with_shape(*this, {1}, "FlattenBackward");
  Shape out_shape(shape().begin(), shape().begin() + first);
  int64_t merged = 1;
  for (int64_t d = first; d <= last; ++d) merged *= shape()[d];
  out_shape.push_back(merged);
  out_shape.insert(out_shape.end(), shape().begin() + last + 1, shape().end());
  return view_with_shape(*this, out_shape, "FlattenBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("flatten");
}

namespace {
// x's dims reordered by `perm` (validated), a copy; the gradient is the inverse permutation.
Tensor permuted(const Tensor& x, const std::vector<int64_t>& perm, const char* backward_name) {
  Tensor out = detail::permute_copy(x, perm);
  if (autograd::needs_grad(x)) {
    std::vector<int64_t> inverse(perm.size());
    for (size_t d = 0; d < perm.size(); ++d) inverse[perm[d]] = static_cast<int64_t>(d);
    autograd::record(out, backward_name, {x}, [inverse](const Tensor& g, autograd::GradInputs& grads) {
      grads.set(0, grads.create_graph() ? g.permute(inverse) : detail::permute_copy(g, inverse));
    });
  }
  return out;
}
}  // namespace

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const try {
  check(defined(), "transpose", "undefined tensor");
  const int64_t ndim = dim();
  const int64_t d0 = normalize_dim(dim0, std::max<int64_t>(ndim, 1), "transpose");
  const int64_t d1 = normalize_dim(dim1, std::max<int64_t>(ndim, 1), "transpose");
  if (ndim == 0 || d0 == d1) return clone();
  std::vector<int64_t> perm(ndim);
  for (int64_t d = 0; d < ndim; ++d) perm[d] = d;
  std::swap(perm[d0], perm[d1]);
  return permuted(*this, perm, "TransposeBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("transpose");
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const try {
  check(defined(), "permute", "undefined tensor");
  const int64_t ndim = dim();
  check(static_cast<int64_t>(dims.size()) == ndim, "permute", "dims ", dims, " must list each of the ", ndim,
        " dims of a tensor of shape ", shape(), " once");
  std::vector<int64_t> perm(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    perm[i] = normalize_dim(dims[i], ndim, "permute");
    check(!seen[perm[i]], "permute", "dim ", dims[i], " is repeated in dims ", dims);
    seen[perm[i]] = true;
  }
  return permuted(*this, perm, "PermuteBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("permute");
}

Tensor Tensor::t() const try {
  check(defined(), "t", "undefined tensor");
  check(dim() <= 2, "t", "expected a tensor with at most 2 dims, got shape ", shape(), "; use transpose(dim0, dim1)");
  return dim() < 2 ? clone() : permuted(*this, {1, 0}, "TBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("t");
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) { return x.permute(dims); }

}  // namespace tg
