/// @file
/// tg::nn::Linear — y = x·Wᵀ + b over the last dim of x.
///
/// @code
///   tg::nn::Linear lin(4, 3);                     // nn.Linear(4, 3)
///   tg::nn::Linear no_bias(4, 3, {.bias = false});  // nn.Linear(4, 3, bias=False)
/// @endcode
#pragma once

#include <cstdint>

#include "tapegrad/nn/module.hpp"

namespace tg::nn {

/// The optional arguments, by libtorch's names (torch::nn::LinearOptions).
struct LinearOptions {
  bool bias = true;  ///< false: no bias parameter at all
};

/// y = x·Wᵀ + b over the last dim of x (nn.Linear).
class Linear : public Module {
 public:
  /// weight [out, in] and bias [out] drawn from U(−1/√in, 1/√in), PyTorch's default, with the
  /// global generator (tg::manual_seed).
  Linear(int64_t in_features, int64_t out_features, LinearOptions options = {});

  Tensor forward(const Tensor& x) override;  ///< x: [..., in] -> [..., out]
  void members(Members& m) override;

  Parameter weight;  ///< [out, in]
  Parameter bias;    ///< [out], or absent
  int64_t in_features;   ///< the size of x's last dim
  int64_t out_features;  ///< the size of y's last dim
};

}  // namespace tg::nn
