// A tensor seen along one of its dims, the layout every op "over a dim" works on: a contiguous
// shape [..., size, ...] is [outer, size, inner], outer the product of the dims before `dim` and
// inner the product of those after it. Element (o, k, i) sits at (o·size + k)·inner + i, so the
// `size` elements of line (o, i) are `inner` apart. Private to the library.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tensor_impl.hpp"

namespace tg::detail {

struct AlongDim {
  int64_t outer = 1, size = 1, inner = 1;

  int64_t lines() const { return outer * inner; }
  // Offset of element k = 0 of line `line` (line = o·inner + i).
  int64_t line_start(int64_t line) const { return (line / inner) * size * inner + line % inner; }
};

// `dim` already normalised; a 0-d tensor is one line of one element.
inline AlongDim along_dim(const Shape& shape, int64_t dim) {
  AlongDim layout;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim)
      layout.outer *= shape[d];
    else if (d == dim)
      layout.size = shape[d];
    else
      layout.inner *= shape[d];
  }
  return layout;
}

// `dim` normalised against x's dims, a 0-d tensor taking dim 0 or -1 as PyTorch does.
inline int64_t normalize_dim_0d(int64_t dim, const Tensor& x, const char* op) {
  return normalize_dim(dim, std::max<int64_t>(x.dim(), 1), op);
}

}  // namespace tg::detail
