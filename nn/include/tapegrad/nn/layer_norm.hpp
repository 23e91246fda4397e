// tg::nn::LayerNorm — normalises over the trailing dims given by `normalized_shape`:
//   y = (x − μ) / √(σ² + ε) · γ + β,  μ and σ² (biased) over those dims, per leading index.
//
//   tg::nn::LayerNorm ln({64});                                                 // nn.LayerNorm(64)
//   tg::nn::LayerNorm plain({64}, {.eps = 1e-6, .elementwise_affine = false});  // no γ, β
#pragma once

#include "tapegrad/nn/module.hpp"

namespace tg::nn {

// The optional arguments, by libtorch's names and in its order (torch::nn::LayerNormOptions).
struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;  // false: no γ and β
};

class LayerNorm : public Module {
 public:
  // weight (γ) ones and bias (β) zeros of shape normalized_shape; none without elementwise_affine.
  explicit LayerNorm(Shape normalized_shape, LayerNormOptions options = {});

  Tensor forward(const Tensor& x) override;  // x: [..., *normalized_shape] -> same shape
  void members(Members& m) override;

  Parameter weight;  // γ: normalized_shape, or absent
  Parameter bias;    // β: normalized_shape, or absent
  Shape normalized_shape;
  double eps;
};

}  // namespace tg::nn
