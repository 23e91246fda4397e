// Layout helpers shared by the shape ops and the reductions.
#pragma once

#include <vector>

#include "tensor_impl.hpp"

namespace tg::detail {

// A contiguous copy of x with its dims reordered: out.shape[i] = x.shape[perm[i]].
Tensor permute_copy(const Tensor& x, const std::vector<int64_t>& perm);

}  // namespace tg::detail
