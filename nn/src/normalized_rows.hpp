// The argument checks that LayerNorm and RMSNorm share, and the [M, N] view of their input.
// Private to nn/.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "tapegrad/tensor.hpp"

namespace tg::nn::detail {

// The input viewed as M rows of N normalised elements: N = Π normalized_shape, M = the product of
// the leading dims.
struct NormalizedRows {
  int64_t M = 1, N = 1;
};

// Checks that x's trailing dims are normalized_shape (non-empty) and that each defined parameter
// ({tensor, "weight"}) has shape normalized_shape and x's dtype; tg::Error naming `op` otherwise.
NormalizedRows check_normalized_input(const char* op, const Tensor& x, const Shape& normalized_shape,
                                      std::initializer_list<std::pair<const Tensor*, const char*>> parameters);

}  // namespace tg::nn::detail
