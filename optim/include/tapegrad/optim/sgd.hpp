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
  // momentum or with dampening — and NaN in any option, with a tg::Error naming the value.
  SGD(std::vector<Tensor> params, SGDOptions options);

  // One update of every parameter whose grad is defined. The grad is read, never modified:
  // the weight-decayed gradient exists only as a local value inside the kernel.
  void step() override;

  double lr() const override { return options_.lr; }
  void set_lr(double lr) override;  // lr >= 0, as in the constructor

  const SGDOptions& options() const { return options_; }
  // Replaces every hyper-parameter at once, validated like the constructor's (what tg::load does
  // when it restores a checkpoint, as PyTorch's load_state_dict restores param_groups).
  void set_options(const SGDOptions& options);
  int64_t step_count() const { return step_count_; }  // calls to step() so far

  // One per parameter, in parameter order; undefined while momentum is 0 and until a parameter's
  // first step with a defined grad. These are the live buffers: clone them to keep a snapshot.
  const std::vector<Tensor>& momentum_buffers() const { return momentum_buffers_; }

  // Restores the state of a checkpoint: step_count >= 0 and one buffer per parameter, each
  // undefined or of its parameter's shape and dtype (tg::Error otherwise). The buffers are
  // copied, so later steps never write into the caller's tensors.
  void load_state(int64_t step_count, std::vector<Tensor> momentum_buffers);

 private:
  SGDOptions options_;
  int64_t step_count_ = 0;
  std::vector<Tensor> momentum_buffers_;  // buffer i: shape and dtype of parameter i
};

}  // namespace tg::optim
