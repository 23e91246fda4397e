// tg::optim::SGD — stochastic gradient descent with momentum, dampening, Nesterov momentum and
// L2 weight decay; the update is exactly torch.optim.SGD's:
//
//   g = grad + weight_decay * p
//   if momentum != 0:
//     buf = g                                        on a parameter's first momentum step
//     buf = momentum * buf + (1 - dampening) * g     afterwards
//     g   = g + momentum * buf  if nesterov  else  buf
//   p -= lr * g
//
//   tg::optim::SGD opt(model.parameters(),
//                      {.lr = 0.1, .momentum = 0.9, .dampening = 0, .weight_decay = 1e-4, .nesterov = false});
#pragma once

#include <cstdint>
#include <vector>

#include "tapegrad/optim/optimizer.hpp"

namespace tg::optim {

// Declared in this order so that designated initialisers read like PyTorch's keyword arguments.
struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  // Rejects what PyTorch rejects — lr < 0, momentum < 0, weight_decay < 0, nesterov without
  // momentum or with dampening — and NaN or an infinity in any option, with a tg::Error naming the
  // value. `options` are the first group's and the defaults of add_param_group(params).
  SGD(std::vector<Tensor> params, SGDOptions options);

  // A new group with its own options (PyTorch: optimizer.add_param_group({"params": ..., "lr": ...})),
  // or with the constructor's. Its parameters must be in no group yet.
  void add_param_group(std::vector<Tensor> params, SGDOptions options);
  void add_param_group(std::vector<Tensor> params);

  const SGDOptions& defaults() const { return defaults_; }
  const SGDOptions& options(size_t group = 0) const;
  void set_options(size_t group, SGDOptions options);  // validated like the constructor's

  // One per parameter of parameters(), in order: state(i)'s "momentum_buffer", undefined while
  // momentum is 0 and until a parameter's first step with a defined grad. These are the live
  // buffers: clone them to keep a snapshot.
  std::vector<Tensor> momentum_buffers() const;

 private:
  // The update of one parameter; the grad is read, never modified: the weight-decayed gradient
  // exists only as a local value inside the kernel.
  void update(size_t group, Tensor& param, const Tensor& grad, ParamState& state) override;
  OptionValues group_options(size_t group) const override;
  void check_group_options(const OptionValues& options) const override;
  void set_group_options(size_t group, const OptionValues& options) override;
  double group_lr(size_t group) const override { return group_options_[group].lr; }
  void set_group_lr(size_t group, double lr) override { group_options_[group].lr = lr; }
  std::vector<std::string> state_names() const override;

  SGDOptions defaults_;
  std::vector<SGDOptions> group_options_;  // one per parameter group
};

}  // namespace tg::optim
