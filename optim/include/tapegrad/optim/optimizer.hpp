// tg::optim::Optimizer — the base of every optimizer: it holds the parameters it updates.
//
//   tg::optim::SGD opt(model.parameters(), {.lr = 0.1});
//   opt.zero_grad();   // every parameter's grad becomes undefined
//   loss.backward();   // ... and is created afresh by the backward pass
//   opt.step();        // parameters whose grad is still undefined are skipped
//
// Updates run outside the tape: they write parameter storage directly, so no NoGradGuard is needed.
#pragma once

#include <vector>

#include "tapegrad/tensor.hpp"

namespace tg::optim {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Not copyable (so not movable either): a copy would share parameters and optimizer state with
  // the original, and schedulers keep a reference to the optimizer they drive.
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual void step() = 0;
  // Sets every parameter's grad to undefined (PyTorch 2's zero_grad(set_to_none=True)): the next
  // backward then writes a fresh gradient instead of adding into a zeroed one.
  void zero_grad();

  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;  // what learning-rate schedulers call

  const std::vector<Tensor>& parameters() const { return params_; }

 protected:
  // Validates the parameters and names `op` (e.g. "SGD") in the error: the list must be non-empty
  // and every parameter defined, a leaf, requiring grad, and listed once (a parameter listed twice
  // would be updated twice per step).
  Optimizer(std::vector<Tensor> params, const char* op);

  std::vector<Tensor> params_;
};

}  // namespace tg::optim
