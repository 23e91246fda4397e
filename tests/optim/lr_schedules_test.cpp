// Every schedule against torch.optim.lr_scheduler over 120 epochs on two parameter groups
// (tests/fixtures/lr_schedulers.txt, from make_optim_fixtures.py): ExponentialLR, MultiStepLR,
// LinearLR, StepLR, CosineAnnealingLR, SequentialLR, OneCycleLR (with the momentum it cycles) and
// ReduceLROnPlateau; their argument checks and state dicts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optim_test_util.hpp"

namespace {

using tg::optim_test::parameter;

using namespace tg::optim;

// PyTorch's float64 lr within 1e-12 relative (closed forms against its recursive ones).
void require_lr(double actual, double expected) {
  INFO("actual " << actual << ", expected " << expected);
  REQUIRE(std::fabs(actual - expected) <= 1e-12 * std::fabs(expected));
}

// The fixtures' optimizer: group 0 with lr 0.1 (SGD momentum 0.9 or Adam betas (0.9, 0.999)),
// group 1 with lr 0.02.
struct TwoGroups {
  tg::Tensor a = parameter(tg::zeros({2}, tg::kFloat64));
  tg::Tensor b = parameter(tg::zeros({2}, tg::kFloat64));
  std::unique_ptr<Optimizer> optimizer;

  explicit TwoGroups(bool adam) {
    if (adam) {
      auto opt = std::make_unique<Adam>(std::vector{a}, AdamOptions{.lr = 0.1});
      opt->add_param_group({b}, {.lr = 0.02});
      optimizer = std::move(opt);
    } else {
      auto opt = std::make_unique<SGD>(std::vector{a}, SGDOptions{.lr = 0.1, .momentum = 0.9});
      opt->add_param_group({b}, {.lr = 0.02, .momentum = 0.9});
      optimizer = std::move(opt);
    }
  }
};

// Epoch 0 after construction, then 120 of (optimizer.step, scheduler step): each group's lr, and
// group 0's momentum, as PyTorch's left them.
void check_schedule(const std::string& name, Optimizer& optimizer, const LRScheduler& scheduler,
                    const std::function<void(int)>& step) {
  const auto& f = tg::testing::fixture("lr_schedulers.txt", name);
  const std::vector<double> lr0 = f.at("lr_g0").to_vector<double>(), lr1 = f.at("lr_g1").to_vector<double>(),
                            momentum = f.at("momentum_g0").to_vector<double>();
  REQUIRE(lr0.size() == 121);
  for (int epoch = 0; epoch <= 120; ++epoch) {
    CAPTURE(name, epoch);
    if (epoch > 0) {
      optimizer.step();
      step(epoch);
    }
    REQUIRE(scheduler.last_epoch() == epoch);
    // (PyTorch's OneCycleLR extrapolates below 0 at its very last step with a linear anneal; tapegrad stops at 0.)
    require_lr(optimizer.lr(0), std::max(lr0[epoch], 0.0));
    require_lr(optimizer.lr(1), std::max(lr1[epoch], 0.0));
    REQUIRE(scheduler.last_lr(1) == optimizer.lr(1));
    require_lr(optimizer.momentum(0), momentum[epoch]);
  }
}

void check_epoch_schedule(const std::string& name, TwoGroups& groups, EpochLRScheduler& scheduler) {
  check_schedule(name, *groups.optimizer, scheduler, [&](int) { scheduler.step(); });
}

}  // namespace

TEST_CASE("ExponentialLR, MultiStepLR, LinearLR, StepLR and CosineAnnealingLR match PyTorch over 120 epochs",
          "[optim][lr_scheduler][fixture]") {
  {
    TwoGroups groups(false);
    ExponentialLR scheduler(*groups.optimizer, 0.97);
    check_epoch_schedule("exponential", groups, scheduler);
  }
  {
    TwoGroups groups(false);
    MultiStepLR scheduler(*groups.optimizer, {10, 35, 35, 80}, 0.3);  // 35 twice: decays twice
    check_epoch_schedule("multistep", groups, scheduler);
  }
  {
    TwoGroups groups(false);
    LinearLR scheduler(*groups.optimizer, {.start_factor = 0.1, .end_factor = 1.0, .total_iters = 30});
    check_epoch_schedule("linear", groups, scheduler);
  }
  {
    TwoGroups groups(false);
    LinearLR scheduler(*groups.optimizer, {.start_factor = 1.0, .end_factor = 0.05, .total_iters = 100});
    check_epoch_schedule("linear_decay", groups, scheduler);
  }
  {
    TwoGroups groups(false);
    StepLR scheduler(*groups.optimizer, 7, 0.5);
    check_epoch_schedule("steplr", groups, scheduler);
  }
  {
    TwoGroups groups(false);
    CosineAnnealingLR scheduler(*groups.optimizer, 50, 0.001);  // 120 epochs: down, up, and down again
    check_epoch_schedule("cosine", groups, scheduler);
  }
}

TEST_CASE("SequentialLR chains schedules at their milestones as PyTorch does", "[optim][lr_scheduler][fixture]") {
  {
    TwoGroups groups(false);
    LinearLR warmup(*groups.optimizer, {.start_factor = 0.01, .total_iters = 10});
    CosineAnnealingLR cosine(*groups.optimizer, 110, 1e-4);
    SequentialLR scheduler(*groups.optimizer, {warmup, cosine}, {10});
    check_epoch_schedule("sequential_warmup_cosine", groups, scheduler);
  }
  {
    TwoGroups groups(false);
    LinearLR warmup(*groups.optimizer, {.start_factor = 0.2, .total_iters = 5});
    ExponentialLR exponential(*groups.optimizer, 0.9);
    StepLR steps(*groups.optimizer, 10, 0.5);
    SequentialLR scheduler(*groups.optimizer, {warmup, exponential, steps}, {20, 50});
    check_epoch_schedule("sequential_three", groups, scheduler);
  }
}

TEST_CASE("OneCycleLR matches PyTorch's lr and momentum (SGD) or beta1 (Adam)", "[optim][lr_scheduler][fixture]") {
  {
    TwoGroups groups(false);
    OneCycleLR scheduler(*groups.optimizer, 1.0, 120);
    check_epoch_schedule("onecycle_cos", groups, scheduler);
  }
  {
    TwoGroups groups(false);
    OneCycleLR scheduler(*groups.optimizer, 0.5, 120,
                         {.pct_start = 0.4, .anneal_strategy = AnnealStrategy::Linear, .base_momentum = 0.8,
                          .max_momentum = 0.95, .div_factor = 10.0, .final_div_factor = 100.0, .three_phase = true});
    check_epoch_schedule("onecycle_linear_three_phase", groups, scheduler);
  }
  {
    TwoGroups groups(true);
    OneCycleLR scheduler(*groups.optimizer, 0.01, 120, {.pct_start = 0.25});
    check_epoch_schedule("onecycle_adam", groups, scheduler);
    REQUIRE(dynamic_cast<Adam&>(*groups.optimizer).options(1).betas[1] == 0.999);  // beta2 untouched
    REQUIRE_TG_ERROR(scheduler.step(), Catch::Contains("OneCycleLR: tried to step 122 times; total_steps is 120"));
    REQUIRE(scheduler.last_epoch() == 120);
  }
  {
    TwoGroups groups(false);
    OneCycleLR scheduler(*groups.optimizer, 0.3, 120, {.cycle_momentum = false});
    check_epoch_schedule("onecycle_no_momentum", groups, scheduler);
  }
}

TEST_CASE("ReduceLROnPlateau matches PyTorch step by step", "[optim][lr_scheduler][fixture]") {
  {
    TwoGroups groups(false);
    ReduceLROnPlateau scheduler(*groups.optimizer, {.factor = 0.5, .patience = 3, .threshold = 1e-2,
                                                    .cooldown = 2, .min_lr = 1e-3});
    const std::vector<double> metrics =
        tg::testing::fixture("lr_schedulers.txt", "plateau_min").at("metrics").to_vector<double>();
    check_schedule("plateau_min", *groups.optimizer, scheduler, [&](int epoch) { scheduler.step(metrics[epoch - 1]); });
  }
  {
    TwoGroups groups(false);
    ReduceLROnPlateau scheduler(*groups.optimizer,
                                {.mode = PlateauMode::Max, .factor = 0.3, .patience = 2, .threshold = 0.05,
                                 .threshold_mode = ThresholdMode::Absolute, .min_lr = 0.0, .eps = 1e-3});
    const std::vector<double> metrics =
        tg::testing::fixture("lr_schedulers.txt", "plateau_max_abs").at("metrics").to_vector<double>();
    check_schedule("plateau_max_abs", *groups.optimizer, scheduler,
                   [&](int epoch) { scheduler.step(metrics[epoch - 1]); });
  }
}

TEST_CASE("ReduceLROnPlateau by hand: patience, cooldown, min_lr, and its state dict", "[optim][lr_scheduler]") {
  tg::Tensor p = parameter(tg::ones({1}));
  SGD opt({p}, {.lr = 1.0});
  ReduceLROnPlateau scheduler(opt, {.factor = 0.5, .patience = 1, .cooldown = 1, .min_lr = 0.3});
  const double metrics[] = {5, 5, 5, 5, 5, 5, 5, 4};
  const double lrs[] = {1, 1, 0.5, 0.5, 0.5, 0.3, 0.3, 0.3};  // two bad epochs, cooldown, min_lr
  for (int i = 0; i < 8; ++i) {
    CAPTURE(i);
    scheduler.step(metrics[i]);
    REQUIRE(opt.lr() == lrs[i]);
  }
  REQUIRE(scheduler.best() == 4);
  SchedulerStateDict state = scheduler.state_dict();
  REQUIRE(state.counters.at("best") == 4);
  REQUIRE(state.last_epoch == 8);

  SGD other({parameter(tg::ones({1}))}, {.lr = 0.3});
  ReduceLROnPlateau resumed(other, {.factor = 0.5, .patience = 1, .cooldown = 1, .min_lr = 0.3});
  resumed.load_state_dict(state);
  REQUIRE(resumed.best() == 4);
  REQUIRE(resumed.last_epoch() == 8);
  state.counters.erase("best");
  REQUIRE_TG_ERROR(resumed.load_state_dict(state), Catch::Contains("ReduceLROnPlateau: load_state_dict: no 'best'"));
  state.counters["best"] = 1.0;
  state.counters["num_bad_epochs"] = -1;
  REQUIRE_TG_ERROR(resumed.load_state_dict(state), Catch::Contains("'num_bad_epochs' to be a whole number >= 0"));
  state.counters["num_bad_epochs"] = 0;
  state.counters["patience"] = 0;
  REQUIRE_TG_ERROR(resumed.load_state_dict(state), Catch::Contains("unknown counter 'patience'"));
  REQUIRE(resumed.best() == 4);
}

TEST_CASE("new schedulers reject invalid arguments", "[optim][lr_scheduler][errors]") {
  tg::Tensor p = parameter(tg::ones({1}));
  SGD opt({p}, {.lr = 0.1});
  REQUIRE_TG_ERROR(ExponentialLR(opt, 0.0), Catch::Contains("ExponentialLR: expected gamma > 0, got 0"));
  REQUIRE_TG_ERROR(MultiStepLR(opt, {3, 0}), Catch::Contains("MultiStepLR: expected every milestone >= 1, got 0"));
  REQUIRE_TG_ERROR(LinearLR(opt, {.start_factor = 0.0}), Catch::Contains("LinearLR: expected 0 < start_factor <= 1"));
  REQUIRE_TG_ERROR(LinearLR(opt, {.end_factor = 1.5}), Catch::Contains("expected 0 <= end_factor <= 1, got 1.5"));
  REQUIRE_TG_ERROR(LinearLR(opt, {.total_iters = 0}), Catch::Contains("expected total_iters >= 1, got 0"));
  StepLR first(opt, 2);
  StepLR second(opt, 3);
  REQUIRE_TG_ERROR(SequentialLR(opt, {first, second}, {}), Catch::Contains("SequentialLR: expected 1 milestones"));
  REQUIRE_TG_ERROR(SequentialLR(opt, {}, {}), Catch::Contains("expected at least one scheduler"));
  REQUIRE_TG_ERROR(SequentialLR(opt, {first, second, first}, {5, 5}), Catch::Contains("strictly increasing"));
  REQUIRE_TG_ERROR(OneCycleLR(opt, 0.0, 10), Catch::Contains("OneCycleLR: expected a finite max_lr > 0, got 0"));
  REQUIRE_TG_ERROR(OneCycleLR(opt, 1.0, 0), Catch::Contains("expected total_steps >= 1, got 0"));
  REQUIRE_TG_ERROR(OneCycleLR(opt, 1.0, 10, {.pct_start = 1.5}), Catch::Contains("expected 0 <= pct_start <= 1"));
  REQUIRE_TG_ERROR(OneCycleLR(opt, 1.0, 10, {.max_momentum = 1.0}), Catch::Contains("max_momentum"));
  Adagrad adagrad({parameter(tg::ones({1}))}, {});
  REQUIRE_TG_ERROR(OneCycleLR(adagrad, 1.0, 10), Catch::Contains("cycle_momentum needs an optimizer with a momentum"));
  REQUIRE_TG_ERROR(ReduceLROnPlateau(opt, {.factor = 1.0}), Catch::Contains("expected 0 <= factor < 1, got 1"));
  REQUIRE_TG_ERROR(ReduceLROnPlateau(opt, {.patience = -1}), Catch::Contains("expected patience >= 0"));
  REQUIRE_TG_ERROR(ReduceLROnPlateau(opt, {.min_lr = -1}), Catch::Contains("expected min_lr >= 0"));
  REQUIRE(opt.lr() == 0.1);
}

TEST_CASE("LinearLR and OneCycleLR set the lr of epoch 0 at construction, as PyTorch's do", "[optim][lr_scheduler]") {
  tg::Tensor p = parameter(tg::ones({1}));
  SGD opt({p}, {.lr = 0.3, .momentum = 0.5});
  LinearLR warmup(opt, {.start_factor = 0.5});
  REQUIRE(opt.lr() == 0.15);
  OneCycleLR cycle(opt, 2.0, 10);
  REQUIRE(opt.lr() == Approx(2.0 / 25).epsilon(1e-15));
  REQUIRE(opt.momentum(0) == Approx(0.95).epsilon(1e-15));
  REQUIRE(cycle.base_lrs() == std::vector<double>{2.0 / 25});
}
