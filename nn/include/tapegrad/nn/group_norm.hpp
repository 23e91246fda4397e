/// @file
/// tg::nn::GroupNorm and F::group_norm — split the C channels (dim 1) into num_groups groups of
/// consecutive channels and normalise each group of each sample over its channels and spatial dims,
/// then scale and shift per channel:
/// @code
///   y = (x − μ_{n,g}) / √(σ²_{n,g} + ε) · γ_c + β_c,   μ, σ² (biased) over the group's C/G·H·W values
/// @endcode
/// The same in training and eval mode (no running statistics).
///
/// @code
///   tg::nn::GroupNorm gn(8, 32);                           // nn.GroupNorm(8, 32)
///   tg::Tensor y = gn(x);                                  // x: [N, 32, *]
///   tg::Tensor z = F::group_norm(x, 8, gn.weight, gn.bias);
/// @endcode
#pragma once

#include <cstdint>

#include "tapegrad/nn/module.hpp"

namespace tg::nn {

/// The optional arguments of GroupNorm, by PyTorch's names and defaults.
struct GroupNormOptions {
  double eps = 1e-5;   ///< ε, added to the variance: finite and ≥ 0 (PyTorch also takes a negative one)
  bool affine = true;  ///< false: no γ and β
};

/// nn.GroupNorm: input [N, C, *] with C = num_channels (group_norm.hpp).
class GroupNorm : public Module {
 public:
  /// weight (γ) ones and bias (β) zeros of [num_channels] (absent without affine). tg::Error unless
  /// num_groups ≥ 1 divides num_channels.
  GroupNorm(int64_t num_groups, int64_t num_channels, const GroupNormOptions& options = {});

  Tensor forward(const Tensor& x) override;  ///< F::group_norm(x, num_groups, weight, bias, eps)
  void members(Members& m) override;

  Parameter weight;      ///< γ: [num_channels], or absent
  Parameter bias;        ///< β: [num_channels], or absent
  int64_t num_groups;    ///< G
  int64_t num_channels;  ///< C
  GroupNormOptions options;  ///< as constructed
};

namespace functional {

/// torch.nn.functional.group_norm: input [N, C, *] (rank ≥ 2), C divisible by num_groups; weight,
/// bias: [C] or undefined (ones, zeros). tg::Error naming the shapes otherwise, and for an eps that
/// is negative or not finite (PyTorch accepts a negative one). One tape node (GroupNormBackward),
/// twice differentiable.
Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

}  // namespace functional

}  // namespace tg::nn
