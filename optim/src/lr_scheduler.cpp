#include "tapegrad/optim/lr_scheduler.hpp"

#include <cmath>
#include <numbers>

namespace tg::optim {

LRScheduler::LRScheduler(Optimizer& optimizer)
    : base_lr_(optimizer.lr()), optimizer_(optimizer), last_lr_(optimizer.lr()) {}

void LRScheduler::step() {
  ++last_epoch_;
  last_lr_ = lr_at(last_epoch_);
  optimizer_.set_lr(last_lr_);
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  check(step_size >= 1, "StepLR", "expected step_size >= 1, got ", step_size);
  check(gamma > 0, "StepLR", "expected gamma > 0, got ", gamma);
}

// PyTorch's closed form (StepLR._get_closed_form_lr); its recursive get_lr multiplies by gamma at
// each boundary instead, which can differ from this in the last bit.
double StepLR::lr_at(int64_t epoch) const {
  return base_lr_ * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
  check(T_max >= 1, "CosineAnnealingLR", "expected T_max >= 1, got ", T_max);
  // A negative eta_min would drive the lr below zero, which the optimizer rejects mid-training.
  check(eta_min >= 0, "CosineAnnealingLR", "expected eta_min >= 0, got ", eta_min);
}

// PyTorch computes this schedule recursively from the previous epoch's lr; the closed form agrees
// with it to ~1e-17 for epoch <= T_max and is free of accumulated rounding for long runs.
double CosineAnnealingLR::lr_at(int64_t epoch) const {
  const double phase = std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(T_max_);
  return eta_min_ + (base_lr_ - eta_min_) * (1 + std::cos(phase)) / 2;
}

}  // namespace tg::optim
