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

/// x σ(x) elementwise, the sigmoid-weighted linear unit (nn.SiLU, also called swish).
class SiLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;  ///< functional::silu(x)
};

/// LeakyReLU's options, nn.LeakyReLU's defaults: `LeakyReLU({.negative_slope = 0.2})`.
struct LeakyReLUOptions {
  double negative_slope = 0.01;  ///< the slope for x <= 0
};

/// x for x > 0, negative_slope · x otherwise (nn.LeakyReLU).
class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(const LeakyReLUOptions& options = {});  ///< any slope (negative or > 1 included)
  Tensor forward(const Tensor& x) override;  ///< functional::leaky_relu(x, options.negative_slope)
  LeakyReLUOptions options;  ///< as constructed
};

/// ELU's options, nn.ELU's defaults.
struct ELUOptions {
  double alpha = 1.0;  ///< the value that α (eˣ − 1) approaches for x → −∞ is −α
};

/// x for x > 0, α (eˣ − 1) otherwise (nn.ELU).
class ELU : public Module {
 public:
  explicit ELU(const ELUOptions& options = {});  ///< any α
  Tensor forward(const Tensor& x) override;  ///< functional::elu(x, options.alpha)
  ELUOptions options;  ///< as constructed
};

/// Softplus's options, nn.Softplus's defaults.
struct SoftplusOptions {
  double beta = 1.0;        ///< the sharpness β of log(1 + e^(βx)) / β
  double threshold = 20.0;  ///< above βx > threshold the result is x itself
};

/// log(1 + e^(βx)) / β, and x where βx > threshold (nn.Softplus).
class Softplus : public Module {
 public:
  explicit Softplus(const SoftplusOptions& options = {});  ///< any β ≠ 0 and threshold
  Tensor forward(const Tensor& x) override;  ///< functional::softplus(x, options.beta, options.threshold)
  SoftplusOptions options;  ///< as constructed
};

/// x · min(max(x + 3, 0), 6) / 6 elementwise (nn.Hardswish).
class Hardswish : public Module {
 public:
  Tensor forward(const Tensor& x) override;  ///< functional::hardswish(x)
};

/// x · tanh(softplus(x)) elementwise (nn.Mish).
class Mish : public Module {
 public:
  Tensor forward(const Tensor& x) override;  ///< functional::mish(x)
};

/// Splits dim into `sizes` (one of them may be −1, inferred), as nn.Unflatten: Unflatten(1, {C, H, W})
/// turns [N, C·H·W] into [N, C, H, W]. The inverse of Flatten; a view of the input, like reshape.
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, Shape sizes);  ///< dim may be negative (counts from the end)
  Tensor forward(const Tensor& x) override;  ///< x.unflatten(dim, sizes)
  int64_t dim;  ///< the dim that is split
  Shape sizes;  ///< what it is split into
};

}  // namespace tg::nn
