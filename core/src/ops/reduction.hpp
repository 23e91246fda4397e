// Reduction helpers shared by ops' backward passes and by nn kernels.
#pragma once

#include "tensor_impl.hpp"

namespace tg::detail {

// out[a, b] = scale * Σ_r in[a, r, b] for a contiguous [A, R, B] input, accumulated in double.
// Deterministic: the split into chunks depends only on A, R and B.
template <typename T>
void reduce_sum(const T* in, T* out, int64_t A, int64_t R, int64_t B, double scale);

// Sums a gradient of a broadcast result back to the shape of the input that was broadcast.
Tensor sum_to(const Tensor& grad, const Shape& shape);

}  // namespace tg::detail
