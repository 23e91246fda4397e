// Two schedulers built one after another on one optimizer and stepped by hand, against PyTorch's
// chainable schedules (tests/fixtures/chained_schedulers.txt, from
// make_chained_scheduler_fixtures.py); the groups' initial_lr, which every scheduler starts from,
// and its place in the optimizer's state dict.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optim_test_util.hpp"

namespace {

using tg::optim_test::parameter;
using namespace tg::optim;

// The fixtures' optimizer: SGD over two groups, lr 0.1 and 0.02.
struct TwoGroups {
  tg::Tensor a = parameter(tg::zeros({2}, tg::kFloat64));
  tg::Tensor b = parameter(tg::zeros({2}, tg::kFloat64));
  SGD optimizer{{a}, {.lr = 0.1}};
  TwoGroups() { optimizer.add_param_group({b}, {.lr = 0.02}); }
};

using MakeScheduler = std::function<std::unique_ptr<EpochLRScheduler>(Optimizer&)>;

struct ChainedCase {
  const char* name;
  MakeScheduler first, second;
  bool both_stepped;  // else only the second
};

template <typename Scheduler, typename... Args>
MakeScheduler make(Args... args) {
  return [=](Optimizer& optimizer) { return std::make_unique<Scheduler>(optimizer, args...); };
}

const std::vector<ChainedCase>& cases() {
  static const std::vector<ChainedCase> all = {
      {"exponential_then_multistep", make<ExponentialLR>(0.9), make<MultiStepLR>(std::vector<int64_t>{10, 20}, 0.5),
       true},
      {"linear_then_cosine", make<LinearLR>(LinearLROptions{.start_factor = 0.25, .total_iters = 8}),
       make<CosineAnnealingLR>(int64_t{20}), true},
      {"cosine_then_linear", make<CosineAnnealingLR>(int64_t{25}),
       make<LinearLR>(LinearLROptions{.start_factor = 0.01, .total_iters = 10}), true},
      {"step_then_linear_decay", make<StepLR>(int64_t{4}, 0.7),
       make<LinearLR>(LinearLROptions{.start_factor = 1.0, .end_factor = 0.2, .total_iters = 15}), true},
      {"linear_then_exponential_second_stepped", make<LinearLR>(LinearLROptions{.start_factor = 0.1, .total_iters = 5}),
       make<ExponentialLR>(0.9), false},
      {"exponential_then_cosine_eta_min", make<ExponentialLR>(0.95), make<CosineAnnealingLR>(int64_t{8}, 0.004), true},
      {"cosine_eta_min_then_step", make<CosineAnnealingLR>(int64_t{6}, 0.003), make<StepLR>(int64_t{5}, 0.8), true},
  };
  return all;
}

// PyTorch multiplies the current lr by each schedule's ratio; tapegrad scales its closed form by
// the others' factor: the same product, rounded in another order.
void require_lr(double actual, double expected) {
  INFO("actual " << actual << ", expected " << expected);
  REQUIRE(std::fabs(actual - expected) <= 1e-12 * std::fabs(expected));
}

}  // namespace

TEST_CASE("two schedulers built and stepped one after another compound as PyTorch's chainable ones",
          "[optim][lr_scheduler][fixture]") {
  for (const ChainedCase& c : cases()) {
    CAPTURE(c.name);
    const auto& f = tg::testing::fixture("chained_schedulers.txt", c.name);
    TwoGroups groups;
    const std::unique_ptr<EpochLRScheduler> first = c.first(groups.optimizer);
    const std::unique_ptr<EpochLRScheduler> second = c.second(groups.optimizer);
    // Both start from the lrs before the first changed them: the groups' initial_lr.
    REQUIRE(groups.optimizer.initial_lr(0) == f.scalar("initial_lr_g0"));
    REQUIRE(groups.optimizer.initial_lr(1) == f.scalar("initial_lr_g1"));
    REQUIRE(first->base_lrs() == f.at("base_lrs_first").to_vector<double>());
    REQUIRE(second->base_lrs() == f.at("base_lrs_second").to_vector<double>());
    const std::vector<double> lr0 = f.at("lr_g0").to_vector<double>(), lr1 = f.at("lr_g1").to_vector<double>();
    REQUIRE(lr0.size() == 31);
    for (int epoch = 0; epoch <= 30; ++epoch) {
      CAPTURE(epoch);
      if (epoch > 0) {
        groups.optimizer.step();
        if (c.both_stepped) first->step();
        second->step();
      }
      require_lr(groups.optimizer.lr(0), lr0[static_cast<size_t>(epoch)]);
      require_lr(groups.optimizer.lr(1), lr1[static_cast<size_t>(epoch)]);
      REQUIRE(second->last_lr(1) == groups.optimizer.lr(1));  // the last one stepped set it
    }
  }
}

TEST_CASE("a scheduler alone sets its closed form to the bit", "[optim][lr_scheduler]") {
  TwoGroups groups;
  CosineAnnealingLR cosine(groups.optimizer, 7, 0.001);
  for (int epoch = 1; epoch <= 20; ++epoch) {
    cosine.step();
    REQUIRE(groups.optimizer.lr(0) == cosine.lr_at(0, 0.1, epoch));
    REQUIRE(groups.optimizer.lr(1) == cosine.lr_at(1, 0.02, epoch));
  }
}

TEST_CASE("initial_lr: set by the first scheduler, kept in the optimizer's state dict", "[optim][lr_scheduler]") {
  TwoGroups groups;
  SGD& optimizer = groups.optimizer;
  REQUIRE_FALSE(optimizer.initial_lr(0).has_value());
  REQUIRE(optimizer.state_dict().param_groups[0].options.count("initial_lr") == 0);
  // The first scheduler sets it where it is unset (PyTorch's setdefault); later ones keep it.
  optimizer.set_initial_lr(1, 0.5);
  ExponentialLR exponential(optimizer, 0.5);
  REQUIRE(optimizer.initial_lr(0) == 0.1);
  REQUIRE(optimizer.initial_lr(1) == 0.5);
  REQUIRE(exponential.base_lrs() == std::vector<double>{0.1, 0.5});
  exponential.step();
  StepLR steps(optimizer, 3);
  REQUIRE(steps.base_lrs() == std::vector<double>{0.1, 0.5});
  // OneCycleLR sets it outright, to max_lr / div_factor.
  OneCycleLR cycle(optimizer, 1.0, 10, {.cycle_momentum = false, .div_factor = 4.0});
  REQUIRE(optimizer.initial_lr(0) == 0.25);
  REQUIRE(optimizer.initial_lr(1) == 0.25);

  OptimizerStateDict state = optimizer.state_dict();
  REQUIRE(std::get<double>(state.param_groups[0].options.at("initial_lr")) == 0.25);
  TwoGroups other;
  other.optimizer.load_state_dict(state);
  REQUIRE(other.optimizer.initial_lr(1) == 0.25);
  REQUIRE(other.optimizer.lr(0) == optimizer.lr(0));
  // A state dict without it (saved before any scheduler) unsets it, as PyTorch's param_groups are replaced.
  state.param_groups[1].options.erase("initial_lr");
  other.optimizer.load_state_dict(state);
  REQUIRE(other.optimizer.initial_lr(0) == 0.25);
  REQUIRE_FALSE(other.optimizer.initial_lr(1).has_value());
  ExponentialLR fresh(other.optimizer, 0.5);
  REQUIRE(fresh.base_lrs()[1] == other.optimizer.lr(1));
}

TEST_CASE("initial_lr refuses what is not a learning rate", "[optim][lr_scheduler][errors]") {
  TwoGroups groups;
  SGD& optimizer = groups.optimizer;
  REQUIRE_TG_ERROR(optimizer.set_initial_lr(0, -1), Catch::Contains("SGD: expected a finite initial_lr >= 0, got -1"));
  REQUIRE_TG_ERROR(optimizer.set_initial_lr(0, NAN), Catch::Contains("got nan"));
  REQUIRE_TG_ERROR(optimizer.set_initial_lr(2, 0.1), Catch::Contains("expected a parameter group index below 2, got 2"));
  REQUIRE_TG_ERROR(optimizer.initial_lr(2), Catch::Contains("below 2"));
  OptimizerStateDict state = optimizer.state_dict();
  state.param_groups[0].options["initial_lr"] = true;
  REQUIRE_TG_ERROR(optimizer.load_state_dict(state), Catch::Contains("SGD: load_state_dict: expected 'initial_lr' to be a number"));
  state.param_groups[0].options["initial_lr"] = INFINITY;
  REQUIRE_TG_ERROR(optimizer.load_state_dict(state),
                   Catch::Contains("SGD: load_state_dict: expected a finite 'initial_lr' >= 0, got inf"));
  REQUIRE_FALSE(optimizer.initial_lr(0).has_value());  // each refusal changed nothing
  // OneCycleLR sets initial_lr outright, but only once all its arguments are accepted.
  REQUIRE_TG_ERROR(OneCycleLR(optimizer, 1.0, 0, {.cycle_momentum = false}), Catch::Contains("total_steps >= 1, got 0"));
  REQUIRE_TG_ERROR(OneCycleLR(optimizer, 1.0, 10, {.pct_start = 2, .cycle_momentum = false}),
                   Catch::Contains("pct_start <= 1, got 2"));
  REQUIRE_FALSE(optimizer.initial_lr(0).has_value());
  REQUIRE_FALSE(optimizer.initial_lr(1).has_value());
}
