// Learning-rate schedules: the lr sequences and trajectories of PyTorch's StepLR and
// CosineAnnealingLR (tests/fixtures/sgd.txt), the epoch bookkeeping and argument validation.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "optim_test_util.hpp"

namespace {

using tg::optim_test::after_step;
using tg::optim_test::parameter;
using tg::optim_test::quadratic_loss;

using tg::optim::CosineAnnealingLR;
using tg::optim::SGD;
using tg::optim::StepLR;

// Runs a fixture case: five steps of (zero_grad, loss, backward, step, scheduler.step), checking the
// lr each step used and the parameter after it.
template <typename Scheduler, typename... SchedulerArgs>
void check_schedule_fixture(const std::string& name, SchedulerArgs... scheduler_args) {
  const auto& fixture = tg::testing::fixture("sgd.txt", name);
  const tg::Tensor& c = fixture.at("c");
  const tg::Tensor& d = fixture.at("d");
  const std::vector<double> lr_used = fixture.at("lr_used").to_vector<double>();
  REQUIRE(lr_used.size() == 5);

  tg::Tensor p = parameter(fixture.at("p0"));
  SGD opt({p}, {.lr = fixture.scalar("lr"),
                .momentum = fixture.scalar("momentum"),
                .dampening = fixture.scalar("dampening"),
                .weight_decay = fixture.scalar("weight_decay"),
                .nesterov = fixture.scalar("nesterov") != 0});
  Scheduler scheduler(opt, scheduler_args...);
  for (int step = 1; step <= 5; ++step) {
    CAPTURE(step);
    REQUIRE(opt.lr() == Approx(lr_used[step - 1]).epsilon(1e-15).margin(0));
    REQUIRE(scheduler.last_lr() == opt.lr());
    opt.zero_grad();
    ((c * p.pow(2)).sum() + (d * p).sum()).backward();
    opt.step();
    scheduler.step();
    REQUIRE(scheduler.last_epoch() == step);
    TG_REQUIRE_CLOSE(p.detach(), fixture.at(after_step(step)), 1e-6);
  }
}

}  // namespace

TEST_CASE("StepLR reproduces PyTorch's lr sequence and trajectory", "[optim][lr_scheduler][fixture]") {
  const auto& fixture = tg::testing::fixture("sgd.txt", "sgd_steplr");
  check_schedule_fixture<StepLR>("sgd_steplr", static_cast<int64_t>(fixture.scalar("step_size")),
                                 fixture.scalar("gamma"));
}

TEST_CASE("CosineAnnealingLR reproduces PyTorch's lr sequence and trajectory", "[optim][lr_scheduler][fixture]") {
  const auto& fixture = tg::testing::fixture("sgd.txt", "sgd_cosine");
  check_schedule_fixture<CosineAnnealingLR>("sgd_cosine", static_cast<int64_t>(fixture.scalar("T_max")),
                                            fixture.scalar("eta_min"));
}

TEST_CASE("StepLR decays by gamma every step_size epochs", "[optim][lr_scheduler]") {
  tg::Tensor p = parameter(tg::ones({1}));
  SGD opt({p}, {.lr = 1.0});
  StepLR scheduler(opt, 3);  // gamma defaults to 0.1
  REQUIRE(scheduler.last_epoch() == 0);
  REQUIRE(scheduler.last_lr() == 1.0);
  REQUIRE(opt.lr() == 1.0);
  const double expected[] = {1.0, 1.0, 0.1, 0.1, 0.1, 0.01, 0.01};  // epochs 1..7
  for (double lr : expected) {
    scheduler.step();
    CAPTURE(scheduler.last_epoch());
    REQUIRE(opt.lr() == Approx(lr).epsilon(1e-15).margin(0));
    REQUIRE(scheduler.last_lr() == opt.lr());
  }
}

TEST_CASE("CosineAnnealingLR reaches eta_min at T_max and returns to base_lr at 2 T_max", "[optim][lr_scheduler]") {
  tg::Tensor p = parameter(tg::ones({1}));
  SGD opt({p}, {.lr = 0.5});
  CosineAnnealingLR scheduler(opt, 4, 0.1);
  constexpr double kPi = std::numbers::pi;
  const double expected[] = {
      0.1 + 0.4 * (1 + std::cos(kPi / 4)) / 2,      // epoch 1
      0.3,                                          // epoch 2: halfway
      0.1 + 0.4 * (1 + std::cos(3 * kPi / 4)) / 2,  // epoch 3
      0.1,                                          // epoch 4 = T_max: eta_min
      0.1 + 0.4 * (1 + std::cos(5 * kPi / 4)) / 2,  // then back up, as PyTorch's schedule does
      0.3,
      0.1 + 0.4 * (1 + std::cos(7 * kPi / 4)) / 2,
      0.5,  // epoch 8 = 2 T_max: base_lr again
  };
  for (double lr : expected) {
    scheduler.step();
    CAPTURE(scheduler.last_epoch());
    REQUIRE(opt.lr() == Approx(lr).epsilon(1e-15).margin(1e-16));
  }
}

TEST_CASE("schedulers start from the optimizer's lr at construction", "[optim][lr_scheduler]") {
  tg::Tensor p = parameter(tg::ones({1}));
  SGD opt({p}, {.lr = 0.1});
  opt.set_lr(0.8);
  StepLR scheduler(opt, 1, 0.5);
  REQUIRE(scheduler.last_lr() == 0.8);
  scheduler.step();
  REQUIRE(opt.lr() == Approx(0.4).epsilon(1e-15));
}

TEST_CASE("schedulers reject invalid arguments", "[optim][lr_scheduler][errors]") {
  tg::Tensor p = parameter(tg::ones({1}));
  SGD opt({p}, {.lr = 0.1});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  REQUIRE_TG_ERROR(StepLR(opt, 0), Catch::Contains("StepLR: expected step_size >= 1, got 0"));
  REQUIRE_TG_ERROR(StepLR(opt, -3), Catch::Contains("StepLR: expected step_size >= 1, got -3"));
  REQUIRE_TG_ERROR(StepLR(opt, 2, 0.0), Catch::Contains("StepLR: expected gamma > 0, got 0"));
  REQUIRE_TG_ERROR(StepLR(opt, 2, -0.5), Catch::Contains("StepLR: expected gamma > 0, got -0.5"));
  REQUIRE_TG_ERROR(StepLR(opt, 2, nan), Catch::Contains("StepLR: expected gamma > 0, got nan"));
  REQUIRE_TG_ERROR(CosineAnnealingLR(opt, 0),
                   Catch::Contains("CosineAnnealingLR: expected T_max >= 1, got 0"));
  REQUIRE_TG_ERROR(CosineAnnealingLR(opt, 10, -0.01),
                   Catch::Contains("CosineAnnealingLR: expected eta_min >= 0, got -0.01"));
  REQUIRE_TG_ERROR(CosineAnnealingLR(opt, 10, nan),
                   Catch::Contains("CosineAnnealingLR: expected eta_min >= 0, got nan"));
  // Infinities too: each would put inf, then NaN (inf * 0, inf - inf), into the optimizer's lr.
  const double inf = std::numeric_limits<double>::infinity();
  REQUIRE_TG_ERROR(StepLR(opt, 2, inf), Catch::Contains("StepLR: expected a finite gamma, got inf"));
  REQUIRE_TG_ERROR(StepLR(opt, 2, -inf), Catch::Contains("StepLR: expected gamma > 0, got -inf"));
  REQUIRE_TG_ERROR(CosineAnnealingLR(opt, 10, inf),
                   Catch::Contains("CosineAnnealingLR: expected a finite eta_min, got inf"));
  REQUIRE(opt.lr() == 0.1);
}
