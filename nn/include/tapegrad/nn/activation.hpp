/// @file
/// Activation modules.
#pragma once

#include <cstdint>
#include <string>

#include "tapegrad/nn/module.hpp"

namespace tg::nn {

/// max(x, 0) elementwise; no parameters.
class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;  ///< x.relu()
};

/// GELU(x) = x Φ(x), with approximate = "none" (erf, exact) or "tanh", as nn.GELU.
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");  ///< tg::Error for any other string
  Tensor forward(const Tensor& x) override;  ///< x.gelu(approximate)
  std::string approximate;  ///< "none" or "tanh"
};

/// tanh elementwise; no parameters.
class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override;  ///< x.tanh()
};

/// 1 / (1 + e^−x) elementwise.
class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override;  ///< x.sigmoid()
};

/// Returns its input; a placeholder where a model takes a module (nn.Identity).
class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) override;  ///< x
};

/// Merges dims start_dim..end_dim (negative dims count from the end) into one, as nn.Flatten:
/// [N, C, H, W] -> [N, C·H·W] by default. A view of the input, like reshape.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);  ///< merges start_dim..end_dim
  Tensor forward(const Tensor& x) override;  ///< x reshaped with those dims merged
  int64_t start_dim;  ///< the first dim merged
  int64_t end_dim;    ///< the last dim merged (inclusive)
};

}  // namespace tg::nn
