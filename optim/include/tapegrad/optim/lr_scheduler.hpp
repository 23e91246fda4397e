// Learning-rate schedules that drive an optimizer's lr, epoch by epoch, as torch.optim.lr_scheduler:
//
//   tg::optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9});
//   tg::optim::StepLR scheduler(opt, /*step_size=*/30, /*gamma=*/0.1);
//   for (int epoch = 0; epoch < 90; ++epoch) {
//     train_one_epoch(opt);
//     scheduler.step();  // lr 0.1 for epochs 0-29, 0.01 for 30-59, 0.001 for 60-89
//   }
//
// Epoch 0 uses the optimizer's lr at the scheduler's construction (base_lr); every schedule here
// starts from it, so constructing a scheduler leaves the optimizer's lr unchanged.
#pragma once

#include <cstdint>

#include "tapegrad/optim/optimizer.hpp"

namespace tg::optim {

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;

  // Advances the epoch counter and sets the optimizer's lr to lr_at(the new epoch).
  void step();
  double last_lr() const { return last_lr_; }       // the lr most recently set (base_lr at epoch 0)
  int64_t last_epoch() const { return last_epoch_; }  // 0 after construction, +1 per step()

 protected:
  // The lr of `epoch` (>= 0); lr_at(0) must be base_lr_.
  virtual double lr_at(int64_t epoch) const = 0;

  double base_lr_;

 private:
  Optimizer& optimizer_;
  int64_t last_epoch_ = 0;
  double last_lr_;
};

// lr = base_lr * gamma^floor(epoch / step_size): decays by gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);  // step_size >= 1, gamma > 0

 protected:
  double lr_at(int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2: half a cosine from base_lr
// down to eta_min at epoch T_max, then back up (period 2 * T_max), as PyTorch's schedule does.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);  // T_max >= 1, eta_min >= 0

 protected:
  double lr_at(int64_t epoch) const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

}  // namespace tg::optim
