/// @file
/// tg::optim::Adagrad — per-coordinate step sizes from the sum of all squared gradients, exactly
/// torch.optim.Adagrad's single-tensor update (PyTorch 1.13), step t counted per parameter:
///
/// @code
///   g = maximize ? -grad : grad
///   g = g + weight_decay * p
///   clr = lr / (1 + (t - 1) * lr_decay)
///   sum = sum + g * g              state "sum", starting at initial_accumulator_value
///   p = p - clr * g / (sqrt(sum) + eps)
/// @endcode
///
/// @code
///   tg::optim::Adagrad opt(model.parameters(), {.lr = 0.1, .initial_accumulator_value = 0.1});
/// @endcode
///
/// One fused pass over memory per parameter; the stored gradient is never modified.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tapegrad/optim/optimizer.hpp"

namespace tg::optim {

/// Declared in PyTorch's keyword order, so that designated initialisers read like its arguments.
struct AdagradOptions {
  double lr = 1e-2;  ///< the learning rate
  double lr_decay = 0.0;  ///< the lr of step t is lr / (1 + (t - 1) * lr_decay)
  double weight_decay = 0.0;               ///< L2 penalty, added to the gradient
  double initial_accumulator_value = 0.0;  ///< where each state "sum" starts
  double eps = 1e-10;                      ///< added to the denominator sqrt(sum)
  bool maximize = false;                   ///< ascend the objective instead of descending it
};

/// The options a parameter group of Adagrad gives (add_param_group, set_options): each one left
/// unset is inherited, from the constructor's options for a new group.
struct AdagradGroupOptions {
  std::optional<double> lr = std::nullopt;            ///< the learning rate
  std::optional<double> lr_decay = std::nullopt;      ///< the lr of step t is lr / (1 + (t - 1) * lr_decay)
  std::optional<double> weight_decay = std::nullopt;  ///< L2 penalty, added to the gradient
  std::optional<double> initial_accumulator_value = std::nullopt;  ///< where each state "sum" starts
  std::optional<double> eps = std::nullopt;                        ///< added to the denominator sqrt(sum)
  std::optional<bool> maximize = std::nullopt;  ///< ascend the objective instead of descending it
};

/// Adagrad, as torch.optim.Adagrad (adagrad.hpp).
class Adagrad : public OptimizerWithOptions<AdagradOptions, AdagradGroupOptions> {
 public:
  /// Rejects what PyTorch rejects — any option < 0 — and NaN or an infinity, with a tg::Error naming
  /// the option and the value.
  Adagrad(std::vector<Tensor> params, AdagradOptions options = {});

 private:
  // A parameter's "sum" starts at its group's initial_accumulator_value on its first update
  // (PyTorch fills it when the optimizer is built; the values are the same).
  void update(size_t group, Tensor& param, const Tensor& grad, ParamState& state) override;
  void check_options(const AdagradOptions& options) const override;
  AdagradOptions inherit(const AdagradGroupOptions& given, const AdagradOptions& inherited) const override;
  AdagradOptions parse_options(const OptionValues& values) const override;
  OptionValues option_values(const AdagradOptions& options) const override;
  std::vector<std::string> state_names() const override;
};

}  // namespace tg::optim
