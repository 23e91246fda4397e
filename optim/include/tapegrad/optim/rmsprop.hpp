/// @file
/// tg::optim::RMSprop — gradient descent divided by a running root mean square of the gradient,
/// exactly torch.optim.RMSprop's single-tensor update (PyTorch 1.13):
///
/// @code
///   g = maximize ? -grad : grad
///   g = g + weight_decay * p
///   s = alpha * s + (1 - alpha) * g * g                      state "square_avg"
///   if centered:  a = alpha * a + (1 - alpha) * g            state "grad_avg"
///                 avg = sqrt(s - a * a) + eps
///   else          avg = sqrt(s) + eps
///   if momentum > 0:  b = momentum * b + g / avg;  p = p - lr * b     state "momentum_buffer"
///   else              p = p - lr * g / avg
/// @endcode
///
/// @code
///   tg::optim::RMSprop opt(model.parameters(), {.lr = 1e-3, .alpha = 0.9, .momentum = 0.9, .centered = true});
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
struct RMSpropOptions {
  double lr = 1e-2;     ///< the learning rate
  double alpha = 0.99;  ///< decay of the running mean of g^2
  double eps = 1e-8;    ///< added to the root mean square
  double weight_decay = 0.0;  ///< L2 penalty, added to the gradient
  double momentum = 0.0;      ///< the momentum factor; 0: no momentum buffer
  bool centered = false;  ///< divide by the estimated standard deviation instead of the RMS
  bool maximize = false;  ///< ascend the objective instead of descending it
};

/// The options a parameter group of RMSprop gives (add_param_group, set_options): each one left
/// unset is inherited, from the constructor's options for a new group.
struct RMSpropGroupOptions {
  std::optional<double> lr = std::nullopt;            ///< the learning rate
  std::optional<double> alpha = std::nullopt;         ///< decay of the running mean of g^2
  std::optional<double> eps = std::nullopt;           ///< added to the root mean square
  std::optional<double> weight_decay = std::nullopt;  ///< L2 penalty, added to the gradient
  std::optional<double> momentum = std::nullopt;      ///< the momentum factor
  std::optional<bool> centered = std::nullopt;  ///< divide by the estimated standard deviation instead of the RMS
  std::optional<bool> maximize = std::nullopt;  ///< ascend the objective instead of descending it
};

/// RMSprop, as torch.optim.RMSprop (rmsprop.hpp).
class RMSprop : public OptimizerWithOptions<RMSpropOptions, RMSpropGroupOptions> {
 public:
  /// Rejects what PyTorch rejects — lr, alpha, eps, weight_decay or momentum < 0 — and NaN or an
  /// infinity, with a tg::Error naming the option and the value.
  RMSprop(std::vector<Tensor> params, RMSpropOptions options = {});

 private:
  void update(size_t group, Tensor& param, const Tensor& grad, ParamState& state) override;
  void check_options(const RMSpropOptions& options) const override;
  RMSpropOptions inherit(const RMSpropGroupOptions& given, const RMSpropOptions& inherited) const override;
  RMSpropOptions parse_options(const OptionValues& values) const override;
  OptionValues option_values(const RMSpropOptions& options) const override;
  std::vector<std::string> state_names() const override;
};

}  // namespace tg::optim
