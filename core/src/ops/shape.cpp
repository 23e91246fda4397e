// Shape operations: reshape (a view sharing storage) and transpose (a permuting copy).
#include "ops/shape.hpp"

#include "autograd/node.hpp"
#include "dispatch.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"

namespace tg {
namespace detail {

Tensor permute_copy(const Tensor& x, const std::vector<int64_t>& perm) {
  const Shape& in_shape = x.shape();
  const size_t ndim = in_shape.size();
  std::vector<int64_t> in_strides(ndim, 1);
  for (size_t d = ndim; d-- > 1;) in_strides[d - 1] = in_strides[d] * in_shape[d];
  Shape out_shape(ndim);
  std::vector<int64_t> strides(ndim);  // input stride for each output dim
  for (size_t d = 0; d < ndim; ++d) out_shape[d] = in_shape[perm[d]], strides[d] = in_strides[perm[d]];
  Tensor out = make_tensor(out_shape, x.dtype());
  if (out.numel() == 0) return out;
  const int64_t inner = ndim ? out_shape.back() : 1, inner_stride = ndim ? strides.back() : 1;
  const int64_t rows = out.numel() / inner;
  dispatch_all("transpose", x.dtype(), [&]<typename T>() {
    const T* in = x.data<T>();
    T* result = out.mutable_data<T>();
    parallel_for(rows, ceil_div(kElementwiseGrain, inner), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        int64_t offset = 0;
        for (int64_t d = static_cast<int64_t>(ndim) - 2, rest = row; d >= 0; --d) {
          offset += (rest % out_shape[d]) * strides[d];
          rest /= out_shape[d];
        }
        const T* src = in + offset;
        T* dst = result + row * inner;
        for (int64_t i = 0; i < inner; ++i) dst[i] = src[i * inner_stride];
      }
    });
  });
  return out;
}

}  // namespace detail

Tensor Tensor::reshape(const Shape& new_shape) const try {
  check(defined(), "reshape", "undefined tensor");
  Shape resolved = new_shape;
  int64_t inferred = -1;
  for (size_t d = 0; d < resolved.size(); ++d) {
    if (resolved[d] == -1) {
      check(inferred < 0, "reshape", "only one dim can be -1, got ", new_shape);
      inferred = static_cast<int64_t>(d);
    } else {
      check(resolved[d] >= 0, "reshape", "invalid size ", resolved[d], " in shape ", new_shape);
    }
  }
  // The product of the given dims, checked for overflow (the -1 counts as 1 here).
  Shape given = resolved;
  if (inferred >= 0) given[inferred] = 1;
  const int64_t known = checked_numel(given, "reshape");
  if (inferred >= 0) {
    check(known != 0 && numel() % known == 0, "reshape", "shape ", new_shape, " is invalid for input of shape ",
          shape(), " (", numel(), " elements)");
    resolved[inferred] = numel() / known;
  }
  check(checked_numel(resolved, "reshape") == numel(), "reshape", "shape ", new_shape,
        " is invalid for input of shape ", shape(), " (", numel(), " elements)");
  Tensor out = make_view(*this, resolved);
  if (autograd::needs_grad(*this))
    autograd::record(out, "ReshapeBackward", {*this}, [in_shape = shape()](const Tensor& g, autograd::GradInputs& grads) {
      grads.set(0, make_view(g, in_shape));
    });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("reshape");
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const try {
  check(defined(), "transpose", "undefined tensor");
  const int64_t ndim = dim();
  const int64_t d0 = normalize_dim(dim0, std::max<int64_t>(ndim, 1), "transpose");
  const int64_t d1 = normalize_dim(dim1, std::max<int64_t>(ndim, 1), "transpose");
  if (ndim == 0 || d0 == d1) return clone();
  std::vector<int64_t> perm(ndim);
  for (int64_t d = 0; d < ndim; ++d) perm[d] = d;
  std::swap(perm[d0], perm[d1]);
  Tensor out = detail::permute_copy(*this, perm);
  if (autograd::needs_grad(*this))
    autograd::record(out, "TransposeBackward", {*this}, [perm](const Tensor& g, autograd::GradInputs& grads) {
      grads.set(0, detail::permute_copy(g, perm));  // a swap is its own inverse
    });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("transpose");
}

}  // namespace tg
