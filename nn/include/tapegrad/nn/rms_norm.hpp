/// @file
/// tg::nn::RMSNorm — root-mean-square normalisation over the trailing dims given by
/// `normalized_shape` (PyTorch 2.4's nn.RMSNorm):
/// @code
///   y = x / √(mean(x²) + ε) · γ,  the mean over those dims, per leading index.
/// @endcode
/// No centering and no β: LayerNorm's row kernels without the mean, so the same double-lane
/// statistics and the same thread-count-independent dγ.
///
/// @code
///   tg::nn::RMSNorm norm({64});                          // ε = the dtype's machine epsilon
///   tg::nn::RMSNorm plain({64}, {.eps = 1e-6, .elementwise_affine = false});
/// @endcode
#pragma once

#include <optional>

#include "tapegrad/nn/module.hpp"

namespace tg::nn {

/// The optional arguments, by PyTorch's names and in its order.
struct RMSNormOptions {
  /// Unset: the input's machine epsilon (std::numeric_limits<T>::epsilon(), as torch.finfo().eps).
  std::optional<double> eps = std::nullopt;
  bool elementwise_affine = true;  ///< false: no γ
};

/// Root-mean-square normalisation over the trailing dims `normalized_shape` (nn.RMSNorm).
class RMSNorm : public Module {
 public:
  /// weight (γ) ones of shape normalized_shape; absent without elementwise_affine.
  explicit RMSNorm(Shape normalized_shape, RMSNormOptions options = {});

  Tensor forward(const Tensor& x) override;  ///< x: [..., *normalized_shape] -> same shape
  void members(Members& m) override;

  Parameter weight;  ///< γ: normalized_shape, or absent
  Shape normalized_shape;     ///< the trailing dims normalised over
  std::optional<double> eps;  ///< ε, or unset for the input's machine epsilon
};

}  // namespace tg::nn
