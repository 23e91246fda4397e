/// @file
/// Learning-rate schedules that drive an optimizer's lr, epoch by epoch, as torch.optim.lr_scheduler:
///
/// @code
///   tg::optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9});
///   tg::optim::StepLR scheduler(opt, /*step_size=*/30, /*gamma=*/0.1);
///   for (int epoch = 0; epoch < 90; ++epoch) {
///     train_one_epoch(opt);
///     scheduler.step();  // lr 0.1 for epochs 0-29, 0.01 for 30-59, 0.001 for 60-89
///   }
/// @endcode
///
/// Two kinds, as in PyTorch:
/// @code
///   EpochLRScheduler   the lr is a function of the epoch (StepLR, MultiStepLR, ExponentialLR,
///                      LinearLR, CosineAnnealingLR, LambdaLR, MultiplicativeLR, SequentialLR,
///                      OneCycleLR); step() advances it.
///   ReduceLROnPlateau  the lr falls when a metric stops improving; step(metric).
/// @endcode
/// A schedule starts from each group's initial_lr (its base_lr): the group's lr when the first
/// scheduler was built on it (Optimizer::initial_lr, PyTorch's group["initial_lr"]), and, as
/// PyTorch's constructors do, sets the lr of epoch 0 there: base_lr for most, base_lr *
/// start_factor for LinearLR, max_lr / div_factor for OneCycleLR. A scheduler acts on every
/// parameter group, each from its own base_lr: build it after the last add_param_group.
///
/// Alone, a schedule's lr is its closed form in (base_lr, epoch), which gives PyTorch's numbers to
/// ~1e-15 relative over hundreds of epochs and cannot drift. Chained, as PyTorch's chainable
/// schedules are (two or more built on one optimizer and all stepped, e.g. ExponentialLR and
/// MultiStepLR), their factors compound: each step scales the lr the others left by the change of
/// its own schedule (CosineAnnealingLR scales its distance to eta_min, as PyTorch's recursion does).
/// LambdaLR, SequentialLR and OneCycleLR set the lr outright.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tapegrad/optim/optimizer.hpp"

namespace tg::optim {

/// scheduler.state_dict(): where the schedule is. The schedule's own arguments (step_size, gamma,
/// T_max, ...) come from its constructor, not from the state.
struct SchedulerStateDict {
  int64_t last_epoch = 0;  ///< steps taken so far
  std::vector<double> base_lrs;  ///< one per parameter group
  /// ReduceLROnPlateau's progress by PyTorch's names: "best", "num_bad_epochs", "cooldown_counter".
  /// Empty for the epoch schedules.
  std::map<std::string, double> counters = {};
};

/// The base of every learning-rate schedule: the optimizer it drives, base_lrs, last_epoch, state dicts.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;  ///< holds a reference to its optimizer
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// The schedule's class name, as errors and checkpoints give it ("StepLR").
  const char* name() const { return name_; }

  virtual double last_lr(size_t group = 0) const = 0;  ///< the lr most recently set
  const std::vector<double>& base_lrs() const { return base_lrs_; }  ///< where each group's schedule starts
  int64_t last_epoch() const { return last_epoch_; }  ///< 0 after construction, +1 per step

  virtual SchedulerStateDict state_dict() const;  ///< last_epoch and base_lrs (and the counters)
  /// Throws tg::Error unless last_epoch >= 0 and there is one finite base_lr >= 0 per group (and
  /// the schedule's own conditions hold), changing nothing.
  virtual void check_state_dict(const SchedulerStateDict& state_dict) const;
  /// check_state_dict, then resumes the schedule there. As in PyTorch, the optimizer's lr (and
  /// momentum) are left alone: they are part of the optimizer's own state.
  virtual void load_state_dict(const SchedulerStateDict& state_dict);

 protected:
  /// `name` ("StepLR") names the schedule in errors; base_lrs, one per group.
  LRScheduler(Optimizer& optimizer, const char* name, std::vector<double> base_lrs);

  Optimizer& optimizer() const { return optimizer_; }  ///< the optimizer it drives
  void check_group_count() const;  ///< tg::Error when the optimizer's groups changed since construction
  void check_group(size_t group) const;  ///< tg::Error unless `group` is a parameter group index
  /// Checks every lr (finite, naming `epoch`), then sets them and last_epoch = epoch.
  void set_lrs(const std::vector<double>& lrs, int64_t epoch);
  /// Installs base_lrs and last_epoch of a state that check_state_dict accepted.
  void restore(const SchedulerStateDict& state_dict);

 private:
  const char* name_;
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;  // one per parameter group
  int64_t last_epoch_ = 0;
};

/// The schedules whose lr is a function of (base_lr, epoch).
class EpochLRScheduler : public LRScheduler {
 public:
  /// Advances the epoch counter and sets the lr of every group to the schedule's value at the new
  /// epoch. tg::Error, changing nothing, when the optimizer's groups are not those the scheduler was
  /// built for, when the schedule overflows to an infinite lr, or past OneCycleLR's last step.
  void step();
  double last_lr(size_t group = 0) const override;
  /// The lr of `epoch` (>= 0) for parameter group `group` when it starts at base_lr. Only
  /// LambdaLR's and MultiplicativeLR's depend on the group (a function per group); the others are
  /// one function of (base_lr, epoch) for every group.
  virtual double lr_at(size_t group, double base_lr, int64_t epoch) const = 0;

  void check_state_dict(const SchedulerStateDict& state_dict) const override;
  void load_state_dict(const SchedulerStateDict& state_dict) override;

 protected:
  using LRScheduler::LRScheduler;
  /// base_lrs: the groups' initial_lrs, set to their lrs where no scheduler set them yet.
  EpochLRScheduler(Optimizer& optimizer, const char* name);

  /// Sets the lrs of epoch 0: the derived constructor's last call, as PyTorch's constructor steps once.
  void start();
  /// Called after the lrs of `epoch` are set (OneCycleLR sets the momentum there).
  virtual void on_epoch(int64_t epoch) { (void)epoch; }
  /// Whether the lr compounds with what other schedulers did to it (PyTorch's chainable form), or
  /// is set outright.
  virtual bool chainable() const { return true; }
  /// The lr of `epoch` when the optimizer's lr is `current_lr`, which other schedulers may have
  /// changed since this one set it. By default the closed form times the factor by which
  /// current_lr differs from this schedule's previous value; a schedule whose recursion PyTorch
  /// writes otherwise (CosineAnnealingLR's is affine) overrides it.
  virtual double chained_lr(size_t group, double current_lr, double base_lr, int64_t epoch) const;

 private:
  void advance_to(int64_t epoch);  // sets the lrs of `epoch`

  std::vector<double> last_lrs_;  // one per group: what this scheduler set last
};

/// lr = base_lr * gamma^floor(epoch / step_size): decays by gamma every step_size epochs.
class StepLR : public EpochLRScheduler {
 public:
  /// step_size >= 1, gamma finite and > 0.
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  double lr_at(size_t group, double base_lr, int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// lr = base_lr * gamma^(number of milestones <= epoch): decays by gamma at each milestone (a
/// milestone listed twice decays twice, as PyTorch's Counter does).
class MultiStepLR : public EpochLRScheduler {
 public:
  /// milestones >= 1, in any order; gamma finite and > 0.
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);
  double lr_at(size_t group, double base_lr, int64_t epoch) const override;

 private:
  std::vector<int64_t> milestones_;  // sorted
  double gamma_;
};

/// lr = base_lr * gamma^epoch.
class ExponentialLR : public EpochLRScheduler {
 public:
  /// gamma finite and > 0.
  ExponentialLR(Optimizer& optimizer, double gamma);
  double lr_at(size_t group, double base_lr, int64_t epoch) const override;

 private:
  double gamma_;
};

/// PyTorch's defaults: from base_lr / 3 to base_lr over 5 epochs.
struct LinearLROptions {
  double start_factor = 1.0 / 3;  ///< the lr factor at epoch 0
  double end_factor = 1.0;        ///< the lr factor from total_iters on
  int64_t total_iters = 5;        ///< the epochs the ramp takes
};

/// lr = base_lr * (start_factor + (end_factor - start_factor) * min(epoch, total_iters) / total_iters):
/// a linear ramp (a warm-up when start_factor < end_factor), then constant.
class LinearLR : public EpochLRScheduler {
 public:
  /// 0 < start_factor <= 1 (PyTorch allows 0, which would divide by zero in its recursive form),
  /// 0 <= end_factor <= 1, total_iters >= 1.
  LinearLR(Optimizer& optimizer, LinearLROptions options = {});
  double lr_at(size_t group, double base_lr, int64_t epoch) const override;

 private:
  LinearLROptions options_;
};

/// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2: half a cosine from base_lr
/// down to eta_min at epoch T_max, then back up (period 2 * T_max), as PyTorch's schedule does.
class CosineAnnealingLR : public EpochLRScheduler {
 public:
  /// T_max >= 1, eta_min finite and >= 0.
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);
  double lr_at(size_t group, double base_lr, int64_t epoch) const override;

 protected:
  double chained_lr(size_t group, double current_lr, double base_lr, int64_t epoch) const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

/// One schedule after another: schedulers[0] until milestones[0], then schedulers[1] restarted at
/// its epoch 0, and so on (PyTorch's SequentialLR), e.g. a linear warm-up then a cosine:
///
/// @code
///   tg::optim::LinearLR warmup(opt, {.start_factor = 0.01, .total_iters = 10});
///   tg::optim::CosineAnnealingLR cosine(opt, /*T_max=*/90);
///   tg::optim::SequentialLR schedule(opt, {warmup, cosine}, /*milestones=*/{10});
/// @endcode
///
/// The schedulers must be built on `optimizer`, in order, and outlive this one; only this one is
/// stepped. Every schedule starts from the groups' initial_lrs, the lrs before the first of them
/// changed any, and this one sets the lr outright (as PyTorch's resets it to initial_lr).
class SequentialLR : public EpochLRScheduler {
 public:
  /// At least one scheduler, milestones.size() == schedulers.size() - 1, strictly increasing and >= 1.
  SequentialLR(Optimizer& optimizer, std::vector<std::reference_wrapper<const EpochLRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  double lr_at(size_t group, double base_lr, int64_t epoch) const override;

 private:
  bool chainable() const override { return false; }

  std::vector<std::reference_wrapper<const EpochLRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

/// A learning-rate factor as a function of the epoch, for LambdaLR and MultiplicativeLR. It must be
/// a pure function of the epoch: a schedule may call it again for an epoch it has seen
/// (load_state_dict, SequentialLR).
using LRLambda = std::function<double(int64_t epoch)>;

/// lr = base_lr * lr_lambda(epoch) (PyTorch's LambdaLR): any schedule written as a function of the
/// epoch, with one function for every group or one per group. nanoGPT's warm-up and cosine decay,
/// stepped per iteration:
///
/// @code
///   tg::optim::LambdaLR schedule(opt, [&](int64_t it) {
///     if (it < warmup_iters) return static_cast<double>(it + 1) / (warmup_iters + 1);
///     const double progress = std::min(1.0, double(it - warmup_iters) / (decay_iters - warmup_iters));
///     return min_factor + 0.5 * (1 + std::cos(std::numbers::pi * progress)) * (1 - min_factor);
///   });
/// @endcode
///
/// The lr is set outright, as PyTorch's (not chained with other schedulers). As PyTorch's
/// state_dict of plain functions, the state holds last_epoch and base_lrs, not the functions:
/// they come from the constructor.
class LambdaLR : public EpochLRScheduler {
 public:
  /// One function for every parameter group (anything callable as double(int64_t)).
  template <typename Lambda>
    requires std::is_invocable_r_v<double, Lambda&, int64_t>
  LambdaLR(Optimizer& optimizer, Lambda lr_lambda)
      : LambdaLR(optimizer, std::vector<LRLambda>(optimizer.param_group_count(), LRLambda(std::move(lr_lambda)))) {}
  /// One function per parameter group, in group order: tg::Error unless there are as many as the
  /// optimizer has groups, none empty.
  LambdaLR(Optimizer& optimizer, std::vector<LRLambda> lr_lambdas);
  double lr_at(size_t group, double base_lr, int64_t epoch) const override;

 private:
  bool chainable() const override { return false; }

  std::vector<LRLambda> lr_lambdas_;  // one per parameter group
};

/// lr = lr * lr_lambda(epoch) at every step after epoch 0 (PyTorch's MultiplicativeLR), so alone
/// lr = base_lr * lr_lambda(1) * ... * lr_lambda(epoch), multiplied in that order as PyTorch's
/// recursion does; chained with other schedulers it multiplies the lr they left. One function for
/// every group or one per group; state as LambdaLR's. lr_at is that product, so its cost grows
/// with the epoch: a step alone costs one call per group.
class MultiplicativeLR : public EpochLRScheduler {
 public:
  /// One function for every parameter group (anything callable as double(int64_t)).
  template <typename Lambda>
    requires std::is_invocable_r_v<double, Lambda&, int64_t>
  MultiplicativeLR(Optimizer& optimizer, Lambda lr_lambda)
      : MultiplicativeLR(optimizer,
                         std::vector<LRLambda>(optimizer.param_group_count(), LRLambda(std::move(lr_lambda)))) {}
  /// One function per parameter group, as LambdaLR's.
  MultiplicativeLR(Optimizer& optimizer, std::vector<LRLambda> lr_lambdas);
  double lr_at(size_t group, double base_lr, int64_t epoch) const override;

 protected:
  /// PyTorch's step: the optimizer's lr (epoch 0) or it times lr_lambda(epoch).
  double chained_lr(size_t group, double current_lr, double base_lr, int64_t epoch) const override;

 private:
  std::vector<LRLambda> lr_lambdas_;  // one per parameter group
};

/// How OneCycleLR anneals: PyTorch's "cos" and "linear".
enum class AnnealStrategy { Cos, Linear };

/// PyTorch's defaults.
struct OneCycleLROptions {
  double pct_start = 0.3;  ///< the fraction of the steps spent increasing the lr
  AnnealStrategy anneal_strategy = AnnealStrategy::Cos;  ///< the shape of each phase
  bool cycle_momentum = true;  ///< momentum (or Adam's beta1) goes from max_momentum to base_momentum and back
  double base_momentum = 0.85;  ///< the momentum at the lr's peak
  double max_momentum = 0.95;   ///< the momentum at the start and at the end
  double div_factor = 25.0;          ///< initial_lr = max_lr / div_factor
  double final_div_factor = 1e4;     ///< min_lr = initial_lr / final_div_factor
  bool three_phase = false;          ///< up, back down to initial_lr, then to min_lr
};

/// The 1cycle policy (PyTorch's OneCycleLR), stepped after every batch for total_steps steps: the lr
/// anneals from max_lr / div_factor up to max_lr, then down to min_lr, while the momentum moves the
/// other way. Every group follows the same max_lr; base_lrs and the groups' initial_lrs are
/// max_lr / div_factor.
class OneCycleLR : public EpochLRScheduler {
 public:
  /// max_lr finite and > 0, total_steps >= 1, 0 <= pct_start <= 1, div_factor and final_div_factor
  /// finite and > 0, momenta in [0, 1) and an optimizer with a momentum (SGD, RMSprop) or betas
  /// (Adam, AdamW) when cycle_momentum.
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, OneCycleLROptions options = {});
  /// tg::Error past total_steps; at total_steps, PyTorch's extrapolation, but never below 0 (PyTorch
  /// sets a negative lr there with a linear anneal).
  double lr_at(size_t group, double base_lr, int64_t epoch) const override;
  double momentum_at(int64_t epoch) const;  ///< the momentum of `epoch` when cycle_momentum

 private:
  // One phase: from start to end (lr and momentum) over epochs (previous end_step, end_step].
  struct Phase {
    double end_step;
    double start_lr, end_lr;
    double start_momentum, end_momentum;
  };
  // The phase of `epoch` and the fraction of it done.
  std::pair<const Phase*, double> phase_at(int64_t epoch) const;
  double anneal(double start, double end, double pct) const;
  void on_epoch(int64_t epoch) override;
  bool chainable() const override { return false; }

  int64_t total_steps_;
  OneCycleLROptions options_;
  std::vector<Phase> phases_;
};

/// Whether a smaller or a larger metric is better.
enum class PlateauMode { Min, Max };
/// How ReduceLROnPlateau's threshold applies: PyTorch's "rel" and "abs".
enum class ThresholdMode { Relative, Absolute };

/// PyTorch's defaults.
struct ReduceLROnPlateauOptions {
  PlateauMode mode = PlateauMode::Min;  ///< Min: a smaller metric is better
  double factor = 0.1;  ///< new_lr = max(lr * factor, min_lr)
  int64_t patience = 10;  ///< epochs without improvement tolerated before a reduction
  double threshold = 1e-4;  ///< how much better counts as better
  ThresholdMode threshold_mode = ThresholdMode::Relative;  ///< relative or absolute threshold
  int64_t cooldown = 0;  ///< epochs after a reduction during which bad epochs are not counted
  double min_lr = 0.0;  ///< the lr never goes below it
  double eps = 1e-8;  ///< a reduction smaller than this is skipped
};

/// Reduces every group's lr by `factor` when the metric passed to step(metric) has not improved for
/// more than `patience` epochs (PyTorch's ReduceLROnPlateau):
///
/// @code
///   tg::optim::ReduceLROnPlateau scheduler(opt, {.factor = 0.5, .patience = 3});
///   for (...) { train(opt); scheduler.step(validation_loss); }
/// @endcode
class ReduceLROnPlateau : public LRScheduler {
 public:
  /// 0 <= factor < 1, patience >= 0, threshold >= 0, cooldown >= 0, min_lr >= 0, eps >= 0, all finite.
  ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options = {});

  /// One epoch's metric (NaN counts as no improvement). tg::Error, changing nothing, when the
  /// optimizer's groups changed.
  void step(double metric);
  double last_lr(size_t group = 0) const override;
  double best() const { return best_; }  ///< the best metric so far
  /// Epochs in a row without improvement (not counted during cooldown).
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }  ///< cooldown epochs left

  SchedulerStateDict state_dict() const override;  ///< with the counters best, num_bad_epochs, cooldown_counter
  void check_state_dict(const SchedulerStateDict& state_dict) const override;
  void load_state_dict(const SchedulerStateDict& state_dict) override;

 private:
  bool is_better(double metric) const;

  ReduceLROnPlateauOptions options_;
  double best_;  // the best metric so far (+inf for min, -inf for max before the first)
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
  std::vector<double> last_lrs_;
};

}  // namespace tg::optim
