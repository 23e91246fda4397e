/// @file
/// tg::optim::SGD — stochastic gradient descent with momentum, dampening, Nesterov momentum and
/// L2 weight decay; the update is exactly torch.optim.SGD's:
///
/// @code
///   g = maximize ? -grad : grad
///   g = g + weight_decay * p
///   if momentum != 0:
///     buf = g                                        on a parameter's first momentum step
///     buf = momentum * buf + (1 - dampening) * g     afterwards
///     g   = g + momentum * buf  if nesterov  else  buf
///   p -= lr * g
/// @endcode
///
/// @code
///   tg::optim::SGD opt(model.parameters(),
///                      {.lr = 0.1, .momentum = 0.9, .dampening = 0, .weight_decay = 1e-4, .nesterov = false});
/// @endcode
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tapegrad/optim/optimizer.hpp"

namespace tg::optim {

/// Declared in this order so that designated initialisers read like PyTorch's keyword arguments.
struct SGDOptions {
  double lr = 0.01;           ///< the learning rate
  double momentum = 0.0;      ///< the momentum factor; 0: no momentum buffer
  double dampening = 0.0;     ///< the momentum buffer takes (1 − dampening) of each new gradient
  double weight_decay = 0.0;  ///< L2 penalty, added to the gradient
  bool nesterov = false;      ///< Nesterov momentum
  bool maximize = false;  ///< ascend the objective instead of descending it
};

/// The options a parameter group of SGD gives (add_param_group, set_options): each one left unset
/// is inherited, from the constructor's options for a new group.
struct SGDGroupOptions {
  std::optional<double> lr = std::nullopt;            ///< the learning rate
  std::optional<double> momentum = std::nullopt;      ///< the momentum factor
  std::optional<double> dampening = std::nullopt;     ///< the buffer takes (1 − dampening) of each new gradient
  std::optional<double> weight_decay = std::nullopt;  ///< L2 penalty
  std::optional<bool> nesterov = std::nullopt;        ///< Nesterov momentum
  std::optional<bool> maximize = std::nullopt;        ///< ascend the objective instead of descending it
};

/// Stochastic gradient descent with momentum, as torch.optim.SGD (sgd.hpp).
class SGD : public OptimizerWithOptions<SGDOptions, SGDGroupOptions> {
 public:
  /// Rejects what PyTorch rejects — lr < 0, momentum < 0, weight_decay < 0, nesterov without
  /// momentum or with dampening — and NaN or an infinity in any option, with a tg::Error naming the
  /// value. `options` are the first group's and the defaults of add_param_group(params).
  SGD(std::vector<Tensor> params, SGDOptions options);

  /// One per parameter of parameters(), in order: state(i)'s "momentum_buffer", undefined while
  /// momentum is 0 and until a parameter's first step with a defined grad. These are the live
  /// buffers: clone them to keep a snapshot.
  std::vector<Tensor> momentum_buffers() const;

 private:
  // The update of one parameter; the grad is read, never modified: the weight-decayed gradient
  // exists only as a local value inside the kernel.
  void update(size_t group, Tensor& param, const Tensor& grad, ParamState& state) override;
  void check_options(const SGDOptions& options) const override;
  SGDOptions inherit(const SGDGroupOptions& given, const SGDOptions& inherited) const override;
  SGDOptions parse_options(const OptionValues& values) const override;
  OptionValues option_values(const SGDOptions& options) const override;
  std::vector<std::string> state_names() const override;
};

}  // namespace tg::optim
