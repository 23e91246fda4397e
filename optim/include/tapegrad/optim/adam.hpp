/// @file
/// tg::optim::Adam and tg::optim::AdamW — adaptive moment estimation, exactly torch.optim.Adam's and
/// torch.optim.AdamW's single-tensor update (PyTorch 1.13), step t counted per parameter:
///
/// @code
///   g = maximize ? -grad : grad
///   Adam:  g = g + weight_decay * p            (L2 penalty, folded into the gradient)
///   AdamW: p = p * (1 - lr * weight_decay)     (decoupled weight decay, applied to the parameter)
///   m = beta1 * m + (1 - beta1) * g                          state "exp_avg"
///   v = beta2 * v + (1 - beta2) * g * g                      state "exp_avg_sq"
///   v_max = max(v_max, v)  if amsgrad, and v_max replaces v below   state "max_exp_avg_sq"
///   denom = sqrt(v) / sqrt(1 - beta2^t) + eps
///   p = p - lr / (1 - beta1^t) * m / denom
/// @endcode
///
/// @code
///   tg::optim::AdamW opt(model.parameters(), {.lr = 3e-4, .betas = {0.9, 0.95}, .weight_decay = 0.1});
/// @endcode
///
/// One fused pass over memory per parameter: p, grad, m, v (and v_max) are each read once and p, m,
/// v written once. The stored gradient is never modified.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "tapegrad/optim/optimizer.hpp"

namespace tg::optim {

/// Declared in PyTorch's keyword order, so that designated initialisers read like its arguments.
struct AdamOptions {
  double lr = 1e-3;  ///< the learning rate
  std::array<double, 2> betas = {0.9, 0.999};  ///< decay of the first and the second moment
  double eps = 1e-8;                            ///< added to the denominator, after the bias correction
  double weight_decay = 0.0;                    ///< L2 penalty
  bool amsgrad = false;                         ///< normalise by the largest second moment seen so far
  bool maximize = false;                        ///< ascend the objective instead of descending it
};

/// AdamW's options: Adam's, with PyTorch's default decoupled weight decay of 1e-2.
struct AdamWOptions {
  double lr = 1e-3;  ///< the learning rate
  std::array<double, 2> betas = {0.9, 0.999};  ///< decay of the first and the second moment
  double eps = 1e-8;  ///< added to the denominator, after the bias correction
  double weight_decay = 1e-2;  ///< decoupled: p shrinks by lr * weight_decay per step
  bool amsgrad = false;   ///< normalise by the largest second moment seen so far
  bool maximize = false;  ///< ascend the objective instead of descending it
};

/// The options a parameter group of Adam or AdamW gives (add_param_group, set_options): each one
/// left unset is inherited, from the constructor's options for a new group.
struct AdamGroupOptions {
  std::optional<double> lr = std::nullopt;            ///< the learning rate
  OptionalArray<2> betas = {};  ///< decay of the first and the second moment: `.betas = {0.9, 0.95}`
  std::optional<double> eps = std::nullopt;           ///< added to the denominator, after the bias correction
  std::optional<double> weight_decay = std::nullopt;  ///< Adam: L2 penalty; AdamW: decoupled weight decay
  std::optional<bool> amsgrad = std::nullopt;         ///< normalise by the largest second moment seen so far
  std::optional<bool> maximize = std::nullopt;        ///< ascend the objective instead of descending it
};

/// Adam, as torch.optim.Adam (adam.hpp).
class Adam : public OptimizerWithOptions<AdamOptions, AdamGroupOptions> {
 public:
  /// Rejects what PyTorch rejects — lr, eps or weight_decay < 0, a beta outside [0, 1) — and NaN or
  /// an infinity, with a tg::Error naming the option and the value.
  Adam(std::vector<Tensor> params, AdamOptions options = {});

 private:
  void update(size_t group, Tensor& param, const Tensor& grad, ParamState& state) override;
  void check_options(const AdamOptions& options) const override;
  AdamOptions inherit(const AdamGroupOptions& given, const AdamOptions& inherited) const override;
  AdamOptions parse_options(const OptionValues& values) const override;
  OptionValues option_values(const AdamOptions& options) const override;
  std::vector<std::string> state_names() const override;
};

/// AdamW: Adam with decoupled weight decay, as torch.optim.AdamW (adam.hpp).
class AdamW : public OptimizerWithOptions<AdamWOptions, AdamGroupOptions> {
 public:
  /// Validated as Adam's.
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});

 private:
  void update(size_t group, Tensor& param, const Tensor& grad, ParamState& state) override;
  void check_options(const AdamWOptions& options) const override;
  AdamWOptions inherit(const AdamGroupOptions& given, const AdamWOptions& inherited) const override;
  AdamWOptions parse_options(const OptionValues& values) const override;
  OptionValues option_values(const AdamWOptions& options) const override;
  std::vector<std::string> state_names() const override;
};

}  // namespace tg::optim
