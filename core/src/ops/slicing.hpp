// Regions of a tensor, shared by the slicing ops (slicing.cpp) and the in-place ops (inplace.cpp).
//
// A region is a StridedLayout over a contiguous tensor that reaches no element twice: what
// narrow, select, slice and index copy out, what slice_scatter and index_put_ write over. A copy
// taken through one remembers it (SliceOf), so that an in-place op on the copy writes back.
#pragma once

#include <memory>
#include <string>

#include "autograd/node.hpp"
#include "dispatch.hpp"
#include "ops/shape.hpp"

namespace tg::detail {

// What a result of narrow, select, slice or index remembers: the tensor it was copied from and the
// region. When it is itself sliced again, the new result remembers the same base with the regions
// composed, so that a chain of slicing ops writes back to the tensor at its root even after the
// intermediate copies are gone. Views of the result (reshape...) share this record.
struct SliceOf {
  std::weak_ptr<TensorImpl> base;       // weak: a copy does not keep its source alive
  std::weak_ptr<Storage> base_storage;  // base's bytes when the copy was taken (set_data replaces them)
  StridedLayout region;                 // the copied elements of base, in the copy's row-major order
  uint64_t base_version = 0;            // base's storage version when the copy last matched the region
};

// x read through `region`, copied; recorded as `backward_name`, the gradient scattered back.
Tensor gather_slice(const Tensor& x, const StridedLayout& region, const char* op, const char* backward_name);

// A copy of input with src (region's element count, in row-major order) written over `region`;
// recorded as SliceScatterBackward (gradients to input and src, see region_backward).
Tensor scatter_region(const Tensor& input, const Tensor& src, const StridedLayout& region, const char* op);

// The gradients of "input with src written over region": to input, g with the region zeroed; to
// src, g's region under src_shape. Both in recorded ops when grads.create_graph().
void region_backward(const Tensor& g, autograd::GradInputs& grads, const StridedLayout& region, const Shape& src_shape);

// The region of a contiguous tensor of `shape` that indices select (Python's x[...] with basic
// indexing), composed onto `source` (the layout x's elements have in the tensor being indexed:
// x's own contiguous layout, or x's region of its base); tg::Error naming `op` for a bad index.
StridedLayout index_region(const StridedLayout& source, const std::vector<indexing::TensorIndex>& indices,
                           const char* op);

// x's elements as a layout of itself: offset 0 and contiguous strides.
StridedLayout whole(const Shape& shape);

// The cast that gives a tensor `dtype`, for error messages: ".to(tg::kFloat32)".
inline std::string cast_to(DType dtype) { return concat(".to(", constant_name(dtype), ")"); }

}  // namespace tg::detail
