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
// starts from it, so constructing a scheduler leaves the optimizer's lr unchanged. A scheduler acts
// on every parameter group, each from its own base_lr: build it after the last add_param_group.
#pragma once

#include <cstdint>
#include <vector>

#include "tapegrad/optim/optimizer.hpp"

namespace tg::optim {

// scheduler.state_dict(): where the schedule is. The schedule's own arguments (step_size, gamma,
// T_max, eta_min) come from its constructor, not from the state.
struct SchedulerStateDict {
  int64_t last_epoch = 0;
  std::vector<double> base_lrs;  // one per parameter group
};

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;

  // The schedule's class name, as errors and checkpoints give it ("StepLR").
  const char* name() const { return name_; }

  // Advances the epoch counter and sets the lr of every group to the schedule's value at the new
  // epoch. tg::Error, changing nothing, when the optimizer's groups are not those the scheduler was
  // built for or when the schedule overflows to an infinite lr.
  void step();
  double last_lr(size_t group = 0) const;  // the lr most recently set (base_lr at epoch 0)
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  int64_t last_epoch() const { return last_epoch_; }  // 0 after construction, +1 per step()

  SchedulerStateDict state_dict() const { return {.last_epoch = last_epoch_, .base_lrs = base_lrs_}; }
  // Throws tg::Error unless last_epoch >= 0 and there is one finite base_lr >= 0 per group.
  void check_state_dict(const SchedulerStateDict& state_dict) const;
  // check_state_dict, then resumes the schedule there. As in PyTorch, the optimizer's lr is left
  // alone: it is part of the optimizer's own state.
  void load_state_dict(const SchedulerStateDict& state_dict);

 protected:
  // `name` ("StepLR") names the schedule in errors.
  LRScheduler(Optimizer& optimizer, const char* name);

  // The lr of `epoch` (>= 0) for a group that starts at base_lr; lr_at(base_lr, 0) must be base_lr.
  virtual double lr_at(double base_lr, int64_t epoch) const = 0;

 private:
  const char* name_;
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;  // one per parameter group
  int64_t last_epoch_ = 0;
};

// lr = base_lr * gamma^floor(epoch / step_size): decays by gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  // step_size >= 1, gamma finite and > 0.
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2: half a cosine from base_lr
// down to eta_min at epoch T_max, then back up (period 2 * T_max), as PyTorch's schedule does.
class CosineAnnealingLR : public LRScheduler {
 public:
  // T_max >= 1, eta_min finite and >= 0.
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

}  // namespace tg::optim
