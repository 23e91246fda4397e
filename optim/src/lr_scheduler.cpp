#include "tapegrad/optim/lr_scheduler.hpp"

#include <cmath>
#include <numbers>

namespace tg::optim {

LRScheduler::LRScheduler(Optimizer& optimizer, const char* name) : name_(name), optimizer_(optimizer) {
  for (size_t group = 0; group < optimizer.param_group_count(); ++group) base_lrs_.push_back(optimizer.lr(group));
}

void LRScheduler::step() {
  check(optimizer_.param_group_count() == base_lrs_.size(), name_, "the optimizer has ",
        optimizer_.param_group_count(), " parameter groups, but the scheduler was built for ", base_lrs_.size(),
        "; build the scheduler after the last add_param_group");
  // Every new lr is computed and checked before any is set, so that a failure changes nothing.
  std::vector<double> lrs;
  for (size_t group = 0; group < base_lrs_.size(); ++group) {
    lrs.push_back(lr_at(base_lrs_[group], last_epoch_ + 1));
    check(std::isfinite(lrs.back()), name_, "the lr of parameter group ", group, " at epoch ", last_epoch_ + 1,
          " is ", lrs.back(), " (base_lr ", base_lrs_[group], "): the schedule overflowed");
  }
  ++last_epoch_;
  for (size_t group = 0; group < lrs.size(); ++group) optimizer_.set_lr(group, lrs[group]);
}

double LRScheduler::last_lr(size_t group) const {
  check(group < base_lrs_.size(), name_, "expected a parameter group index below ", base_lrs_.size(), ", got ",
        group);
  return lr_at(base_lrs_[group], last_epoch_);
}

void LRScheduler::check_state_dict(const SchedulerStateDict& state_dict) const {
  check(state_dict.last_epoch >= 0, name_, "load_state_dict: expected last_epoch >= 0, got ", state_dict.last_epoch);
  check(state_dict.base_lrs.size() == optimizer_.param_group_count(), name_, "load_state_dict: expected ",
        optimizer_.param_group_count(), " base_lrs (one per parameter group), got ", state_dict.base_lrs.size());
  for (size_t group = 0; group < state_dict.base_lrs.size(); ++group) {
    const double base_lr = state_dict.base_lrs[group];
    // base_lr >= 0 is false for NaN, so this rejects NaN too.
    check(base_lr >= 0 && std::isfinite(base_lr), name_, "load_state_dict: expected base_lr ", group,
          " to be finite and >= 0, got ", base_lr);
    check(std::isfinite(lr_at(base_lr, state_dict.last_epoch)), name_, "load_state_dict: the lr of parameter group ",
          group, " at epoch ", state_dict.last_epoch, " overflows");
  }
}

void LRScheduler::load_state_dict(const SchedulerStateDict& state_dict) {
  check_state_dict(state_dict);
  base_lrs_ = state_dict.base_lrs;
  last_epoch_ = state_dict.last_epoch;
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer, "StepLR"), step_size_(step_size), gamma_(gamma) {
  check(step_size >= 1, "StepLR", "expected step_size >= 1, got ", step_size);
  // gamma > 0 is false for NaN; an infinite gamma would turn the lr into inf, then NaN, at the first decay.
  check(gamma > 0, "StepLR", "expected gamma > 0, got ", gamma);
  check(std::isfinite(gamma), "StepLR", "expected a finite gamma, got ", gamma);
}

// PyTorch's closed form (StepLR._get_closed_form_lr); its recursive get_lr multiplies by gamma at
// each boundary instead, which can differ from this in the last bit.
double StepLR::lr_at(double base_lr, int64_t epoch) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer, "CosineAnnealingLR"), T_max_(T_max), eta_min_(eta_min) {
  check(T_max >= 1, "CosineAnnealingLR", "expected T_max >= 1, got ", T_max);
  // A negative eta_min would drive the lr below zero, which the optimizer rejects mid-training, and
  // an infinite one makes every lr inf or NaN.
  check(eta_min >= 0, "CosineAnnealingLR", "expected eta_min >= 0, got ", eta_min);
  check(std::isfinite(eta_min), "CosineAnnealingLR", "expected a finite eta_min, got ", eta_min);
}

// PyTorch computes this schedule recursively from the previous epoch's lr; the closed form agrees
// with it to ~1e-17 for epoch <= T_max and is free of accumulated rounding for long runs.
double CosineAnnealingLR::lr_at(double base_lr, int64_t epoch) const {
  const double phase = std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(T_max_);
  return eta_min_ + (base_lr - eta_min_) * (1 + std::cos(phase)) / 2;
}

}  // namespace tg::optim
