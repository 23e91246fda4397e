// What LayerNorm and RMSNorm share: the argument checks, the [M, N] view of their input, and their
// backward in recorded ops for a differentiated backward pass. Private to nn/.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "autograd/node.hpp"
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

// The gradients of y = x̂·γ + β (x̂ = (x − μ)·rstd, rstd = 1/√(σ² + ε) per row; without `centered`,
// RMSNorm's x̂ = x·rstd, rstd = 1/√(mean(x²) + ε)) in recorded tg ops, for a backward pass that is
// itself differentiated (create_graph). The fused kernel's saved statistics are constants, so μ
// and rstd are recomputed here from the connected x; the formulas are layer_norm_kernels.cpp's:
//   dx = rstd · (g − mean(g) − x̂ · mean(g·x̂)), g = dy·γ (no mean(g) without centering),
//   dγ = Σ_rows dy·x̂,  dβ = Σ_rows dy,
// into slots 0 (x), 1 (γ) and, when centered, 2 (β), those the node needs.
// dy, x: [..., normalized_shape] viewed as [M, N]; gamma: normalized_shape.
void normalized_rows_backward_differentiable(const Tensor& dy, const Tensor& x, const Tensor& gamma, double eps,
                                             bool centered, NormalizedRows rows, autograd::GradInputs& grads);

}  // namespace tg::nn::detail
