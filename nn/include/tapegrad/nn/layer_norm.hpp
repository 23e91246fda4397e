/// @file
/// tg::nn::LayerNorm — normalises over the trailing dims given by `normalized_shape`:
/// @code
///   y = (x − μ) / √(σ² + ε) · γ + β,  μ and σ² (biased) over those dims, per leading index.
/// @endcode
///
/// @code
///   tg::nn::LayerNorm ln({64});                                                 // nn.LayerNorm(64)
///   tg::nn::LayerNorm plain({64}, {.eps = 1e-6, .elementwise_affine = false});  // no γ, β
///   tg::nn::LayerNorm scale_only({64}, {.bias = false});                        // γ, no β
/// @endcode
#pragma once

#include "tapegrad/nn/module.hpp"

namespace tg::nn {

/// The optional arguments, by PyTorch's names and in its order (nn.LayerNorm, PyTorch ≥ 2.1).
struct LayerNormOptions {
  double eps = 1e-5;  ///< ε, added to the variance: finite and ≥ 0 (PyTorch also takes a negative one)
  bool elementwise_affine = true;  ///< false: no γ and β
  bool bias = true;                ///< false: γ but no β (when elementwise_affine)
};

/// Layer normalisation over the trailing dims `normalized_shape` (nn.LayerNorm; see layer_norm.hpp).
class LayerNorm : public Module {
 public:
  /// weight (γ) ones and bias (β) zeros of shape normalized_shape; none without elementwise_affine,
  /// no bias with bias = false.
  explicit LayerNorm(Shape normalized_shape, LayerNormOptions options = {});

  Tensor forward(const Tensor& x) override;  ///< x: [..., *normalized_shape] -> same shape
  void members(Members& m) override;

  Parameter weight;  ///< γ: normalized_shape, or absent
  Parameter bias;    ///< β: normalized_shape, or absent
  Shape normalized_shape;  ///< the trailing dims normalised over
  double eps;              ///< ε, added to the variance
};

}  // namespace tg::nn
