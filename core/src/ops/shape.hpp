// Layout helpers shared by the shape ops, the slicing ops and the reductions.
//
// A tapegrad tensor is always contiguous, so every op that PyTorch answers with a strided view
// (permute, transpose, expand, narrow, select, slice) is a copy here, and all of them are one
// kernel: a walk over a strided layout. A StridedLayout describes which elements of a contiguous
// tensor form the op's result: element (i_0, ..., i_{n-1}) of `shape` (row-major) sits at
// offset + Σ_d i_d · strides[d] of the contiguous source. A stride 0 repeats an element (expand),
// reordered strides permute, a stride times step skips (slice).
#pragma once

#include <vector>

#include "tensor_impl.hpp"

namespace tg::detail {

struct StridedLayout {
  Shape shape;                   // the result's shape
  std::vector<int64_t> strides;  // per result dim: the step in the source, in elements (>= 0)
  int64_t offset = 0;            // the source element of the result's first one
};

// The row-major strides of a contiguous tensor of `shape`.
std::vector<int64_t> contiguous_strides(const Shape& shape);

// A new contiguous tensor of layout.shape: out[i] = x[offset + Σ i_d · strides[d]]. `op` names
// the caller in an out-of-memory error.
Tensor strided_gather(const Tensor& x, const StridedLayout& layout, const char* op);

// The way back, for a layout that reaches no element twice (every slicing op's): dst[offset +
// Σ i_d · strides[d]] = src[i] for each element i of src (contiguous, of layout.shape); the other
// elements of dst are left as they are.
void strided_scatter(const Tensor& src, Tensor& dst, const StridedLayout& layout);

// A contiguous copy of x with its dims reordered: out.shape[i] = x.shape[perm[i]].
Tensor permute_copy(const Tensor& x, const std::vector<int64_t>& perm);

}  // namespace tg::detail
