// tg::nn::LayerNorm — normalises over the trailing dims given by `normalized_shape`:
//   y = (x − μ) / √(σ² + ε) · γ + β,  μ and σ² (biased) over those dims, per leading index.
#pragma once

#include "tapegrad/nn/module.hpp"

namespace tg::nn {

class LayerNorm : public Module {
 public:
  // weight (γ) ones and bias (β) zeros of shape normalized_shape; none when !elementwise_affine.
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);

  Tensor forward(const Tensor& x) override;  // x: [..., *normalized_shape] -> same shape
  void members(Members& m) override;

  Parameter weight;  // γ: normalized_shape, or absent
  Parameter bias;    // β: normalized_shape, or absent
  Shape normalized_shape;
  double eps;
};

}  // namespace tg::nn
