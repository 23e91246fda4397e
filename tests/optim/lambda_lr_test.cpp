// LambdaLR and MultiplicativeLR against PyTorch over 10 epochs and two parameter groups
// (tests/fixtures/lambda_lr.txt, from make_lambda_lr_fixtures.py), their state dicts, inside a
// SequentialLR, and their errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

#include "optim_test_util.hpp"

namespace {

using tg::optim_test::parameter;

using namespace tg::optim;

// The fixture's functions, computing the same doubles as make_lambda_lr_fixtures.py's.
double warmup_cosine(int64_t e) {  // nanoGPT's get_lr as a factor
  if (e < 3) return static_cast<double>(e + 1) / (3 + 1);
  if (e > 8) return 0.1;
  const double ratio = static_cast<double>(e - 3) / (8 - 3);
  return 0.1 + 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) * (1.0 - 0.1);
}
double power(int64_t e) { return std::pow(0.9, static_cast<double>(e)); }
double inverse(int64_t e) { return 1 / static_cast<double>(e + 1); }

// The fixtures' optimizer: SGD, group 0 with lr 0.1 and momentum 0.9, group 1 with lr 0.02.
struct TwoGroups {
  tg::Tensor a = parameter(tg::zeros({2}, tg::kFloat64));
  tg::Tensor b = parameter(tg::zeros({2}, tg::kFloat64));
  SGD optimizer{{a}, {.lr = 0.1, .momentum = 0.9}};
  TwoGroups() { optimizer.add_param_group({b}, {.lr = 0.02}); }
};

// Epoch 0 after construction, then 10 of (optimizer.step, scheduler.step): each group's lr as
// PyTorch's, to the bit; then the state dict.
void check_lrs(const std::string& name, TwoGroups& groups, EpochLRScheduler& scheduler) {
  const auto& f = tg::testing::fixture("lambda_lr.txt", name);
  const std::vector<double> lr0 = f.at("lr_g0").to_vector<double>(), lr1 = f.at("lr_g1").to_vector<double>();
  REQUIRE(lr0.size() == 11);
  for (int epoch = 0; epoch <= 10; ++epoch) {
    CAPTURE(name, epoch);
    if (epoch > 0) {
      groups.optimizer.step();
      scheduler.step();
    }
    REQUIRE(groups.optimizer.lr(0) == lr0[epoch]);
    REQUIRE(groups.optimizer.lr(1) == lr1[epoch]);
    REQUIRE(scheduler.last_lr(1) == lr1[epoch]);
  }
  const SchedulerStateDict state = scheduler.state_dict();
  REQUIRE(state.last_epoch == static_cast<int64_t>(f.scalar("last_epoch")));
  REQUIRE(state.base_lrs == f.at("base_lrs").to_vector<double>());
  REQUIRE(state.counters.empty());
}

}  // namespace

TEST_CASE("LambdaLR sets base_lr * lambda(epoch), as PyTorch's", "[optim][lr_scheduler][lambda_lr][fixture]") {
  SECTION("one function per group") {
    TwoGroups groups;
    LambdaLR scheduler(groups.optimizer, {warmup_cosine, power});
    REQUIRE(scheduler.name() == std::string("LambdaLR"));
    check_lrs("lambda_two_functions", groups, scheduler);
  }
  SECTION("one function for every group") {
    TwoGroups groups;
    LambdaLR scheduler(groups.optimizer, inverse);
    check_lrs("lambda_one_function", groups, scheduler);
  }
  SECTION("a lambda expression") {
    TwoGroups groups;
    LambdaLR scheduler(groups.optimizer, [](int64_t e) { return 1 / static_cast<double>(e + 1); });
    check_lrs("lambda_one_function", groups, scheduler);
  }
}

TEST_CASE("MultiplicativeLR multiplies the lr by lambda(epoch), as PyTorch's", "[optim][lr_scheduler][lambda_lr][fixture]") {
  TwoGroups groups;
  MultiplicativeLR scheduler(groups.optimizer, {[](int64_t) { return 0.95; },
                                                [](int64_t e) { return 1 - 0.05 * static_cast<double>(e); }});
  check_lrs("multiplicative_two_functions", groups, scheduler);
  // Its closed form is PyTorch's recursion unrolled, in the same order: the same bits.
  const auto& f = tg::testing::fixture("lambda_lr.txt", "multiplicative_two_functions");
  REQUIRE(scheduler.lr_at(1, 0.02, 10) == f.at("lr_g1").to_vector<double>()[10]);
}

TEST_CASE("LambdaLR's state dict holds last_epoch and base_lrs, and resumes", "[optim][lr_scheduler][lambda_lr][state_dict]") {
  TwoGroups first;
  LambdaLR scheduler(first.optimizer, {warmup_cosine, power});
  for (int epoch = 0; epoch < 4; ++epoch) scheduler.step();
  const SchedulerStateDict state = scheduler.state_dict();
  REQUIRE(state.last_epoch == 4);
  REQUIRE(state.base_lrs == std::vector<double>{0.1, 0.02});

  // The functions come from the constructor, as PyTorch's state_dict does not hold them.
  TwoGroups second;
  LambdaLR resumed(second.optimizer, {warmup_cosine, power});
  resumed.load_state_dict(state);
  REQUIRE(resumed.last_epoch() == 4);
  REQUIRE(resumed.last_lr(0) == 0.1 * warmup_cosine(4));
  resumed.step();
  scheduler.step();
  REQUIRE(second.optimizer.lr(0) == first.optimizer.lr(0));
  REQUIRE(second.optimizer.lr(1) == first.optimizer.lr(1));
}

TEST_CASE("LambdaLR as SequentialLR's warm-up", "[optim][lr_scheduler][lambda_lr]") {
  TwoGroups groups;
  LambdaLR warmup(groups.optimizer, [](int64_t e) { return static_cast<double>(e + 1) / 4; });
  ExponentialLR decay(groups.optimizer, 0.5);
  SequentialLR schedule(groups.optimizer, {warmup, decay}, {4});
  // PyTorch's SequentialLR: the warm-up's epochs 0-3, then the decay restarted at its epoch 0.
  const std::vector<double> factors = {0.25, 0.5, 0.75, 1.0, 1.0, 0.5, 0.25};
  for (size_t epoch = 0; epoch < factors.size(); ++epoch) {
    CAPTURE(epoch);
    if (epoch > 0) schedule.step();
    REQUIRE(groups.optimizer.lr(0) == Approx(0.1 * factors[epoch]).epsilon(1e-15));
    REQUIRE(groups.optimizer.lr(1) == Approx(0.02 * factors[epoch]).epsilon(1e-15));
  }
}

TEST_CASE("LambdaLR and MultiplicativeLR refuse what does not fit, naming themselves", "[optim][lr_scheduler][lambda_lr][errors]") {
  TwoGroups groups;
  REQUIRE_TG_ERROR(LambdaLR(groups.optimizer, {power}),
                   Catch::Contains("LambdaLR: expected 2 lr_lambdas (one per parameter group), got 1"));
  REQUIRE_TG_ERROR(LambdaLR(groups.optimizer, {power, power, power}),
                   Catch::Contains("LambdaLR: expected 2 lr_lambdas (one per parameter group), got 3"));
  REQUIRE_TG_ERROR(MultiplicativeLR(groups.optimizer, {power}),
                   Catch::Contains("MultiplicativeLR: expected 2 lr_lambdas (one per parameter group), got 1"));
  REQUIRE_TG_ERROR(LambdaLR(groups.optimizer, {power, LRLambda()}),
                   Catch::Contains("LambdaLR: lr_lambda 1 is an empty std::function"));
  // A constructor that throws leaves the optimizer as it was: no initial_lr set.
  REQUIRE_FALSE(groups.optimizer.initial_lr(0).has_value());
  REQUIRE(groups.optimizer.lr(0) == 0.1);

  // A function that gives a negative or a non-finite factor: the step is refused, nothing changes.
  LambdaLR falling(groups.optimizer, [](int64_t e) { return 1 - 0.5 * static_cast<double>(e); });
  falling.step();
  falling.step();  // factor 0: lr 0
  REQUIRE_TG_ERROR(falling.step(), Catch::Contains("LambdaLR: the lr of parameter group 0 at epoch 3 is -0.05") &&
                                       Catch::Contains("expected an lr >= 0"));
  REQUIRE(falling.last_epoch() == 2);
  REQUIRE(groups.optimizer.lr(1) == 0.0);

  // Groups added after the scheduler was built.
  TwoGroups more;
  LambdaLR scheduler(more.optimizer, power);
  more.optimizer.add_param_group({parameter(tg::zeros({1}, tg::kFloat64))});
  REQUIRE_TG_ERROR(scheduler.step(), Catch::Contains("LambdaLR: the optimizer has 3 parameter groups"));
}
