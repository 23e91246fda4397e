#include "tapegrad/optim/lr_scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string_view>
#include <utility>

#include "option_values.hpp"
#include "out_of_memory.hpp"

namespace tg::optim {

namespace {

std::vector<double> optimizer_lrs(const Optimizer& optimizer) {
  std::vector<double> lrs;
  for (size_t group = 0; group < optimizer.param_group_count(); ++group) lrs.push_back(optimizer.lr(group));
  return lrs;
}

// PyTorch's _LRScheduler.__init__: group.setdefault("initial_lr", group["lr"]), and base_lrs are
// the initial_lrs. So every scheduler of a group starts from the lr the group had before the first
// of them, not from what the schedulers built before it set.
std::vector<double> initial_lrs(Optimizer& optimizer) {
  std::vector<double> lrs;
  for (size_t group = 0; group < optimizer.param_group_count(); ++group) {
    if (!optimizer.initial_lr(group)) optimizer.set_initial_lr(group, optimizer.lr(group));
    lrs.push_back(*optimizer.initial_lr(group));
  }
  return lrs;
}

// gamma > 0 is false for NaN; an infinite gamma would turn the lr into inf, then NaN, at the first decay.
void check_gamma(const char* op, double gamma) {
  check(gamma > 0, op, "expected gamma > 0, got ", gamma);
  check(std::isfinite(gamma), op, "expected a finite gamma, got ", gamma);
}

}  // namespace

// --- LRScheduler ---------------------------------------------------------------------------------

LRScheduler::LRScheduler(Optimizer& optimizer, const char* name, std::vector<double> base_lrs)
    : name_(name), optimizer_(optimizer), base_lrs_(std::move(base_lrs)) {}

void LRScheduler::check_group_count() const {
  check(optimizer_.param_group_count() == base_lrs_.size(), name_, "the optimizer has ",
        optimizer_.param_group_count(), " parameter groups, but the scheduler was built for ", base_lrs_.size(),
        "; build the scheduler after the last add_param_group");
}

void LRScheduler::check_group(size_t group) const {
  check(group < base_lrs_.size(), name_, "expected a parameter group index below ", base_lrs_.size(), ", got ",
        group);
}

void LRScheduler::set_lrs(const std::vector<double>& lrs, int64_t epoch) {
  check_group_count();
  // Every new lr is checked before any is set, so that a failure changes nothing.
  for (size_t group = 0; group < lrs.size(); ++group) {
    check(std::isfinite(lrs[group]), name_, "the lr of parameter group ", group, " at epoch ", epoch, " is ",
          lrs[group], " (base_lr ", base_lrs_[group], "): the schedule overflowed");
    // Only a schedule of the user's (LambdaLR's function) can go below zero.
    check(lrs[group] >= 0, name_, "the lr of parameter group ", group, " at epoch ", epoch, " is ", lrs[group],
          " (base_lr ", base_lrs_[group], "); expected an lr >= 0");
  }
  for (size_t group = 0; group < lrs.size(); ++group) optimizer_.set_lr(group, lrs[group]);
  last_epoch_ = epoch;
}

SchedulerStateDict LRScheduler::state_dict() const {
  return {.last_epoch = last_epoch_, .base_lrs = base_lrs_, .counters = {}};
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
  }
  for (const auto& counter : state_dict.counters)
    check(false, name_, "load_state_dict: unknown counter '", counter.first, "'");
}

void LRScheduler::load_state_dict(const SchedulerStateDict& state_dict) {
  check_state_dict(state_dict);
  restore(state_dict);
}

void LRScheduler::restore(const SchedulerStateDict& state_dict) {
  base_lrs_ = state_dict.base_lrs;
  last_epoch_ = state_dict.last_epoch;
}

// --- EpochLRScheduler ----------------------------------------------------------------------------

EpochLRScheduler::EpochLRScheduler(Optimizer& optimizer, const char* name)
    : LRScheduler(optimizer, name, initial_lrs(optimizer)) {}

void EpochLRScheduler::start() { advance_to(0); }

void EpochLRScheduler::step() try {
  check_group_count();
  advance_to(last_epoch() + 1);
} catch (...) {
  tg::detail::rethrow_out_of_memory_as(name());
}

void EpochLRScheduler::advance_to(int64_t epoch) {
  std::vector<double> lrs;
  for (size_t group = 0; group < base_lrs().size(); ++group) {
    const double base_lr = base_lrs()[group];
    lrs.push_back(chainable() ? chained_lr(group, optimizer().lr(group), base_lr, epoch)
                               : lr_at(group, base_lr, epoch));
  }
  set_lrs(lrs, epoch);
  last_lrs_ = std::move(lrs);
  on_epoch(epoch);
}

// This schedule's value times the factor by which the optimizer's lr now differs from this
// schedule's previous value (base_lr before epoch 0): what the other schedulers did since. Alone,
// that factor is x / x = 1 exactly, and the lr is the closed form to the bit. PyTorch's chainable
// get_lr multiplies the current lr by this schedule's ratio of consecutive values instead, which
// is the same product rounded in another order. Where the previous value is 0 (a cosine at
// eta_min = 0) no factor can be read, and the closed form is taken.
double EpochLRScheduler::chained_lr(size_t group, double current_lr, double base_lr, int64_t epoch) const {
  const double lr = lr_at(group, base_lr, epoch);
  const double own_previous = epoch == 0 ? base_lr : lr_at(group, base_lr, epoch - 1);
  return own_previous == 0 ? lr : lr * (current_lr / own_previous);
}

double EpochLRScheduler::last_lr(size_t group) const {
  check_group(group);
  return last_lrs_[group];
}

void EpochLRScheduler::load_state_dict(const SchedulerStateDict& state_dict) {
  check_state_dict(state_dict);
  restore(state_dict);
  // The lr of the loaded epoch as this schedule alone sets it; the optimizer's own lr is restored
  // with the optimizer, and a chained step continues from it.
  last_lrs_.clear();
  for (size_t group = 0; group < base_lrs().size(); ++group)
    last_lrs_.push_back(lr_at(group, base_lrs()[group], last_epoch()));
}

void EpochLRScheduler::check_state_dict(const SchedulerStateDict& state_dict) const {
  LRScheduler::check_state_dict(state_dict);
  for (size_t group = 0; group < state_dict.base_lrs.size(); ++group)
    check(std::isfinite(lr_at(group, state_dict.base_lrs[group], state_dict.last_epoch)), name(),
          "load_state_dict: the lr of parameter group ", group, " at epoch ", state_dict.last_epoch, " overflows");
}

// --- StepLR, MultiStepLR, ExponentialLR --------------------------------------------------------

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : EpochLRScheduler(optimizer, "StepLR"), step_size_(step_size), gamma_(gamma) {
  check(step_size >= 1, "StepLR", "expected step_size >= 1, got ", step_size);
  check_gamma("StepLR", gamma);
  start();
}

// PyTorch's closed form (StepLR._get_closed_form_lr); its recursive get_lr multiplies by gamma at
// each boundary instead, which can differ from this in the last bit.
double StepLR::lr_at(size_t, double base_lr, int64_t epoch) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : EpochLRScheduler(optimizer, "MultiStepLR"), milestones_(std::move(milestones)), gamma_(gamma) {
  for (int64_t milestone : milestones_)
    check(milestone >= 1, "MultiStepLR", "expected every milestone >= 1, got ", milestone);
  check_gamma("MultiStepLR", gamma);
  std::sort(milestones_.begin(), milestones_.end());
  start();
}

// base_lr * gamma^bisect_right(milestones, epoch): PyTorch's _get_closed_form_lr.
double MultiStepLR::lr_at(size_t, double base_lr, int64_t epoch) const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin();
  return base_lr * std::pow(gamma_, static_cast<double>(passed));
}

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma)
    : EpochLRScheduler(optimizer, "ExponentialLR"), gamma_(gamma) {
  check_gamma("ExponentialLR", gamma);
  start();
}

// PyTorch multiplies the previous lr by gamma; the power agrees with it to ~epoch ulps.
double ExponentialLR::lr_at(size_t, double base_lr, int64_t epoch) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch));
}

// --- LinearLR, CosineAnnealingLR ----------------------------------------------------------------

LinearLR::LinearLR(Optimizer& optimizer, LinearLROptions options)
    : EpochLRScheduler(optimizer, "LinearLR"), options_(options) {
  check(options.start_factor > 0 && options.start_factor <= 1, "LinearLR",
        "expected 0 < start_factor <= 1, got ", options.start_factor);
  check(options.end_factor >= 0 && options.end_factor <= 1, "LinearLR", "expected 0 <= end_factor <= 1, got ",
        options.end_factor);
  check(options.total_iters >= 1, "LinearLR", "expected total_iters >= 1, got ", options.total_iters);
  start();
}

// PyTorch's _get_closed_form_lr, in its order of operations.
double LinearLR::lr_at(size_t, double base_lr, int64_t epoch) const {
  const double done = static_cast<double>(std::min(options_.total_iters, epoch));
  return base_lr * (options_.start_factor + (options_.end_factor - options_.start_factor) * done /
                                                static_cast<double>(options_.total_iters));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : EpochLRScheduler(optimizer, "CosineAnnealingLR"), T_max_(T_max), eta_min_(eta_min) {
  check(T_max >= 1, "CosineAnnealingLR", "expected T_max >= 1, got ", T_max);
  // A negative eta_min would drive the lr below zero, which the optimizer rejects mid-training, and
  // an infinite one makes every lr inf or NaN.
  check(eta_min >= 0, "CosineAnnealingLR", "expected eta_min >= 0, got ", eta_min);
  check(std::isfinite(eta_min), "CosineAnnealingLR", "expected a finite eta_min, got ", eta_min);
  start();
}

// PyTorch computes this schedule recursively from the previous epoch's lr; the closed form agrees
// with it to ~1e-15 and is free of accumulated rounding for long runs. At epoch 0 it is base_lr
// exactly, as PyTorch's first step leaves it.
double CosineAnnealingLR::lr_at(size_t, double base_lr, int64_t epoch) const {
  if (epoch == 0) return base_lr;
  const double phase = std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(T_max_);
  return eta_min_ + (base_lr - eta_min_) * (1 + std::cos(phase)) / 2;
}

// PyTorch's recursion (CosineAnnealingLR.get_lr) is affine around eta_min: the distance to eta_min
// scales by the ratio of consecutive cosines, and in the step after each minimum, where that ratio
// would divide by zero, the lr rises by the closed form's first step up. Where the optimizer's lr
// is what this schedule set last (alone, or no other scheduler moved it) that recursion is the
// closed form, which is taken exactly.
double CosineAnnealingLR::chained_lr(size_t group, double current_lr, double base_lr, int64_t epoch) const {
  if (epoch == 0 || current_lr == lr_at(group, base_lr, epoch - 1))
    return EpochLRScheduler::chained_lr(group, current_lr, base_lr, epoch);
  const double T = static_cast<double>(T_max_);
  if ((epoch - 1 - T_max_) % (2 * T_max_) == 0)
    return current_lr + (base_lr - eta_min_) * (1 - std::cos(std::numbers::pi / T)) / 2;
  const double e = static_cast<double>(epoch);
  return (1 + std::cos(std::numbers::pi * e / T)) / (1 + std::cos(std::numbers::pi * (e - 1) / T)) *
             (current_lr - eta_min_) +
         eta_min_;
}

// --- LambdaLR, MultiplicativeLR -------------------------------------------------------------------

namespace {

// PyTorch's check (one function per group), and none empty; then the base_lrs, as EpochLRScheduler's
// constructor takes them, so that a constructor that throws leaves the optimizer's initial_lrs alone.
std::vector<double> lambda_base_lrs(Optimizer& optimizer, const char* op, const std::vector<LRLambda>& lr_lambdas) {
  check(lr_lambdas.size() == optimizer.param_group_count(), op, "expected ", optimizer.param_group_count(),
        " lr_lambdas (one per parameter group), got ", lr_lambdas.size());
  for (size_t group = 0; group < lr_lambdas.size(); ++group)
    check(static_cast<bool>(lr_lambdas[group]), op, "lr_lambda ", group, " is an empty std::function");
  return initial_lrs(optimizer);
}

}  // namespace

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<LRLambda> lr_lambdas)
    : EpochLRScheduler(optimizer, "LambdaLR", lambda_base_lrs(optimizer, "LambdaLR", lr_lambdas)),
      lr_lambdas_(std::move(lr_lambdas)) {
  start();
}

// PyTorch's get_lr: base_lr * lmbda(last_epoch), in that order.
double LambdaLR::lr_at(size_t group, double base_lr, int64_t epoch) const {
  return base_lr * lr_lambdas_[group](epoch);
}

MultiplicativeLR::MultiplicativeLR(Optimizer& optimizer, std::vector<LRLambda> lr_lambdas)
    : EpochLRScheduler(optimizer, "MultiplicativeLR", lambda_base_lrs(optimizer, "MultiplicativeLR", lr_lambdas)),
      lr_lambdas_(std::move(lr_lambdas)) {
  start();
}

// PyTorch's recursion unrolled, multiplied in its order: ((base_lr * f(1)) * f(2)) * ...
double MultiplicativeLR::lr_at(size_t group, double base_lr, int64_t epoch) const {
  double lr = base_lr;
  for (int64_t e = 1; e <= epoch; ++e) lr *= lr_lambdas_[group](e);
  return lr;
}

double MultiplicativeLR::chained_lr(size_t group, double current_lr, double /*base_lr*/, int64_t epoch) const {
  return epoch == 0 ? current_lr : current_lr * lr_lambdas_[group](epoch);
}

// --- SequentialLR --------------------------------------------------------------------------------

namespace {

std::vector<double> first_base_lrs(const std::vector<std::reference_wrapper<const EpochLRScheduler>>& schedulers) {
  check(!schedulers.empty(), "SequentialLR", "expected at least one scheduler, got none");
  return schedulers.front().get().base_lrs();
}

}  // namespace

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::reference_wrapper<const EpochLRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : EpochLRScheduler(optimizer, "SequentialLR", first_base_lrs(schedulers)),
      schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  check(milestones_.size() + 1 == schedulers_.size(), "SequentialLR", "expected ", schedulers_.size() - 1,
        " milestones (one fewer than the ", schedulers_.size(), " schedulers), got ", milestones_.size());
  for (size_t i = 0; i < milestones_.size(); ++i)
    check(milestones_[i] >= 1 && (i == 0 || milestones_[i] > milestones_[i - 1]), "SequentialLR",
          "expected milestones >= 1 and strictly increasing, got ", milestones_[i], " at index ", i);
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    const EpochLRScheduler& scheduler = schedulers_[i].get();
    check(scheduler.base_lrs().size() == base_lrs().size(), "SequentialLR", "scheduler ", i, " (", scheduler.name(),
          ") was built for ", scheduler.base_lrs().size(), " parameter groups, the optimizer has ",
          base_lrs().size());
  }
  start();  // back to the first schedule's epoch 0, whatever the others' constructors set
}

// The schedule in force at `epoch`, restarted at its milestone: PyTorch's step(0) there takes the
// closed form at 0, and every later step continues from it.
double SequentialLR::lr_at(size_t group, double base_lr, int64_t epoch) const {
  const size_t index =
      static_cast<size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin());
  const int64_t since = index == 0 ? epoch : epoch - milestones_[index - 1];
  return schedulers_[index].get().lr_at(group, base_lr, since);
}

// --- OneCycleLR ----------------------------------------------------------------------------------

namespace {

// As PyTorch's OneCycleLR, which sets every group's initial_lr to max_lr / div_factor outright:
// after every argument is checked, so that a constructor that throws leaves the optimizer as it was.
std::vector<double> one_cycle_base_lrs(Optimizer& optimizer, double max_lr, int64_t total_steps,
                                       const OneCycleLROptions& options) {
  check(max_lr > 0 && std::isfinite(max_lr), "OneCycleLR", "expected a finite max_lr > 0, got ", max_lr);
  options::check_non_negative("OneCycleLR", "div_factor", options.div_factor);
  check(options.div_factor > 0, "OneCycleLR", "expected div_factor > 0, got ", options.div_factor);
  check(total_steps >= 1, "OneCycleLR", "expected total_steps >= 1, got ", total_steps);
  check(options.pct_start >= 0 && options.pct_start <= 1, "OneCycleLR", "expected 0 <= pct_start <= 1, got ",
        options.pct_start);
  options::check_non_negative("OneCycleLR", "final_div_factor", options.final_div_factor);
  check(options.final_div_factor > 0, "OneCycleLR", "expected final_div_factor > 0, got ", options.final_div_factor);
  if (options.cycle_momentum) {
    check(optimizer.has_momentum(), "OneCycleLR", "cycle_momentum needs an optimizer with a momentum or betas, and ",
          optimizer.name(), " has neither; pass cycle_momentum = false");
    options::check_unit_interval("OneCycleLR", "base_momentum", options.base_momentum);
    options::check_unit_interval("OneCycleLR", "max_momentum", options.max_momentum);
  }
  const double initial_lr = max_lr / options.div_factor;
  for (size_t group = 0; group < optimizer.param_group_count(); ++group) optimizer.set_initial_lr(group, initial_lr);
  return std::vector<double>(optimizer.param_group_count(), initial_lr);
}

}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, OneCycleLROptions options)
    : EpochLRScheduler(optimizer, "OneCycleLR", one_cycle_base_lrs(optimizer, max_lr, total_steps, options)),
      total_steps_(total_steps),
      options_(options) {
  const double initial_lr = max_lr / options.div_factor;
  const double min_lr = initial_lr / options.final_div_factor;
  const double steps = static_cast<double>(total_steps);
  const double last = steps - 1;
  const double base_m = options.base_momentum, max_m = options.max_momentum;
  if (options.three_phase) {
    phases_ = {{options.pct_start * steps - 1, initial_lr, max_lr, max_m, base_m},
               {2 * options.pct_start * steps - 2, max_lr, initial_lr, base_m, max_m},
               {last, initial_lr, min_lr, max_m, max_m}};
  } else {
    phases_ = {{options.pct_start * steps - 1, initial_lr, max_lr, max_m, base_m},
               {last, max_lr, min_lr, base_m, max_m}};
  }
  start();
}

std::pair<const OneCycleLR::Phase*, double> OneCycleLR::phase_at(int64_t epoch) const {
  check(epoch <= total_steps_, "OneCycleLR", "tried to step ", epoch + 1, " times; total_steps is ", total_steps_);
  const double step = static_cast<double>(epoch);
  double start_step = 0;
  for (size_t i = 0; i < phases_.size(); ++i) {
    const Phase& phase = phases_[i];
    if (step <= phase.end_step || i + 1 == phases_.size())
      return {&phase, (step - start_step) / (phase.end_step - start_step)};
    start_step = phase.end_step;
  }
  return {&phases_.back(), 1.0};  // not reached: the last phase always matches
}

// PyTorch's _annealing_cos and _annealing_linear, in their order of operations.
double OneCycleLR::anneal(double start, double end, double pct) const {
  if (options_.anneal_strategy == AnnealStrategy::Linear) return (end - start) * pct + start;
  const double cos_out = std::cos(std::numbers::pi * pct) + 1;
  return end + (start - end) / 2.0 * cos_out;
}

// Every group follows max_lr, so base_lr plays no part. At epoch total_steps (one past the last
// phase's end, which PyTorch allows) its formula extrapolates; a linear anneal then goes below zero,
// which no optimizer accepts: the lr stops at 0 there.
double OneCycleLR::lr_at(size_t, double, int64_t epoch) const {
  const auto [phase, pct] = phase_at(epoch);
  return std::max(anneal(phase->start_lr, phase->end_lr, pct), 0.0);
}

double OneCycleLR::momentum_at(int64_t epoch) const {
  const auto [phase, pct] = phase_at(epoch);
  return anneal(phase->start_momentum, phase->end_momentum, pct);
}

void OneCycleLR::on_epoch(int64_t epoch) {
  if (!options_.cycle_momentum) return;
  const double momentum = momentum_at(epoch);
  for (size_t group = 0; group < base_lrs().size(); ++group) optimizer().set_momentum(group, momentum);
}

// --- ReduceLROnPlateau ---------------------------------------------------------------------------

namespace {

constexpr const char* kBest = "best";
constexpr const char* kNumBadEpochs = "num_bad_epochs";
constexpr const char* kCooldownCounter = "cooldown_counter";

double worst_metric(PlateauMode mode) {
  return mode == PlateauMode::Min ? INFINITY : -INFINITY;
}

}  // namespace

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options)
    : LRScheduler(optimizer, "ReduceLROnPlateau", optimizer_lrs(optimizer)),
      options_(options),
      best_(worst_metric(options.mode)),
      last_lrs_(base_lrs()) {
  check(options.factor >= 0 && options.factor < 1, "ReduceLROnPlateau", "expected 0 <= factor < 1, got ",
        options.factor);
  check(options.patience >= 0, "ReduceLROnPlateau", "expected patience >= 0, got ", options.patience);
  options::check_non_negative("ReduceLROnPlateau", "threshold", options.threshold);
  check(options.cooldown >= 0, "ReduceLROnPlateau", "expected cooldown >= 0, got ", options.cooldown);
  options::check_non_negative("ReduceLROnPlateau", "min_lr", options.min_lr);
  options::check_non_negative("ReduceLROnPlateau", "eps", options.eps);
}

// PyTorch's is_better: "better" by more than the threshold, relative to best or absolute. NaN is
// never better (every comparison with it is false).
bool ReduceLROnPlateau::is_better(double metric) const {
  const bool relative = options_.threshold_mode == ThresholdMode::Relative;
  if (options_.mode == PlateauMode::Min)
    return relative ? metric < best_ * (1. - options_.threshold) : metric < best_ - options_.threshold;
  return relative ? metric > best_ * (options_.threshold + 1.) : metric > best_ + options_.threshold;
}

void ReduceLROnPlateau::step(double metric) try {
  check_group_count();
  // PyTorch's step, on copies committed at the end.
  double best = best_;
  int64_t num_bad_epochs = num_bad_epochs_, cooldown_counter = cooldown_counter_;
  if (is_better(metric)) {
    best = metric;
    num_bad_epochs = 0;
  } else {
    ++num_bad_epochs;
  }
  if (cooldown_counter > 0) {
    --cooldown_counter;
    num_bad_epochs = 0;  // bad epochs in cooldown are ignored
  }
  std::vector<double> lrs = optimizer_lrs(optimizer());
  if (num_bad_epochs > options_.patience) {
    for (double& lr : lrs) {
      const double reduced = std::max(lr * options_.factor, options_.min_lr);
      if (lr - reduced > options_.eps) lr = reduced;  // a negligible reduction is skipped
    }
    cooldown_counter = options_.cooldown;
    num_bad_epochs = 0;
  }
  set_lrs(lrs, last_epoch() + 1);
  best_ = best;
  num_bad_epochs_ = num_bad_epochs;
  cooldown_counter_ = cooldown_counter;
  last_lrs_ = std::move(lrs);
} catch (...) {
  tg::detail::rethrow_out_of_memory_as(name());
}

double ReduceLROnPlateau::last_lr(size_t group) const {
  check_group(group);
  return last_lrs_[group];
}

SchedulerStateDict ReduceLROnPlateau::state_dict() const {
  SchedulerStateDict state = LRScheduler::state_dict();
  state.counters = {{kBest, best_},
                    {kNumBadEpochs, static_cast<double>(num_bad_epochs_)},
                    {kCooldownCounter, static_cast<double>(cooldown_counter_)}};
  return state;
}

void ReduceLROnPlateau::check_state_dict(const SchedulerStateDict& state_dict) const {
  SchedulerStateDict rest = state_dict;
  for (const char* key : {kBest, kNumBadEpochs, kCooldownCounter}) {
    auto it = rest.counters.find(key);
    check(it != rest.counters.end(), name(), "load_state_dict: no '", key, "'");
    const double value = it->second;
    if (std::string_view(key) == kBest) {
      check(!std::isnan(value), name(), "load_state_dict: expected a 'best' that is not NaN");
    } else {
      check(value >= 0 && value == std::floor(value) && value < 9e15, name(), "load_state_dict: expected '", key,
            "' to be a whole number >= 0, got ", value);
    }
    rest.counters.erase(it);
  }
  LRScheduler::check_state_dict(rest);  // the base state, and no other counter
}

void ReduceLROnPlateau::load_state_dict(const SchedulerStateDict& state_dict) {
  check_state_dict(state_dict);
  restore(state_dict);
  best_ = state_dict.counters.at(kBest);
  num_bad_epochs_ = static_cast<int64_t>(state_dict.counters.at(kNumBadEpochs));
  cooldown_counter_ = static_cast<int64_t>(state_dict.counters.at(kCooldownCounter));
  last_lrs_ = optimizer_lrs(optimizer());  // the lrs are the optimizer's own state
}

}  // namespace tg::optim
