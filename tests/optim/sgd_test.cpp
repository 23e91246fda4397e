// SGD: PyTorch trajectories (tests/fixtures/sgd.txt, from make_fixtures.py), hand-derived steps,
// the contract around gradients and state, option validation and thread-count determinism.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <tbb/task_arena.h>

#include "optim_test_util.hpp"

namespace {

using tg::optim_test::after_step;
using tg::optim_test::parameter;
using tg::optim_test::quadratic_loss;
using tg::optim_test::same_bits;

using tg::optim::SGD;
using tg::optim::SGDOptions;

SGDOptions fixture_options(const tg::testing::FixtureCase& fixture) {
  return {.lr = fixture.scalar("lr"),
          .momentum = fixture.scalar("momentum"),
          .dampening = fixture.scalar("dampening"),
          .weight_decay = fixture.scalar("weight_decay"),
          .nesterov = fixture.scalar("nesterov") != 0};
}

// Five steps of (zero_grad, loss, backward, step) from the fixture's p0 in `dtype`, each compared
// with PyTorch's float32 trajectory to `tolerance`; returns the optimizer for further checks.
std::unique_ptr<SGD> run_trajectory(const tg::testing::FixtureCase& fixture, tg::DType dtype, double tolerance) {
  const tg::Tensor c = fixture.at("c").to(dtype);
  const tg::Tensor d = fixture.at("d").to(dtype);
  tg::Tensor p = parameter(fixture.at("p0").to(dtype));
  auto opt = std::make_unique<SGD>(std::vector<tg::Tensor>{p}, fixture_options(fixture));
  for (int step = 1; step <= 5; ++step) {
    CAPTURE(step);
    opt->zero_grad();
    quadratic_loss(p, c, d).backward();
    opt->step();
    TG_REQUIRE_CLOSE(p.detach(), fixture.at(after_step(step)).to(dtype), tolerance);
  }
  return opt;
}

// One step of `options` from p = p_value with grad = grad_value, in float64; returns the new p.
double one_step(double p_value, double grad_value, SGDOptions options) {
  tg::Tensor p = parameter(tg::full({1}, p_value, tg::kFloat64));
  p.set_grad(tg::full({1}, grad_value, tg::kFloat64));
  SGD opt({p}, options);
  opt.step();
  return p.item();
}

}  // namespace

TEST_CASE("SGD follows PyTorch's trajectory for five steps", "[optim][sgd][fixture]") {
  const std::string name = GENERATE(as<std::string>{}, "sgd_lr0p1_mom0p9_damp0_wd0p0001_nest0",
                                    "sgd_lr0p1_mom0p9_damp0_wd0p0001_nest1", "sgd_lr0p05_mom0p5_damp0p3_wd0p01_nest0",
                                    "sgd_lr0p1_mom0_damp0_wd0_nest0");
  CAPTURE(name);
  const auto& fixture = tg::testing::fixture("sgd.txt", name);
  const auto opt = run_trajectory(fixture, tg::kFloat32, 1e-6);
  REQUIRE(opt->step_count() == 5);
}

TEST_CASE("SGD in float64 follows the float32 PyTorch trajectory to float32 precision", "[optim][sgd][fixture]") {
  const auto& fixture = tg::testing::fixture("sgd.txt", "sgd_lr0p1_mom0p9_damp0_wd0p0001_nest1");
  const auto opt = run_trajectory(fixture, tg::kFloat64, 1e-5);
  REQUIRE(opt->momentum_buffers()[0].dtype() == tg::kFloat64);
}

TEST_CASE("SGD single steps derived by hand", "[optim][sgd]") {
  // g = 0.5 + 0.1 * 1 = 0.6; p = 1 - 0.1 * 0.6
  CHECK(one_step(1.0, 0.5, {.lr = 0.1, .weight_decay = 0.1}) == Approx(0.94).margin(1e-15));
  // plain: p = 2 - 0.5 * 0.25
  CHECK(one_step(2.0, 0.25, {.lr = 0.5}) == Approx(1.875).margin(1e-15));
  // first momentum step: buf = g (dampening is not applied), so p = 1 - 0.1 * 0.6 as without momentum
  CHECK(one_step(1.0, 0.5, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5, .weight_decay = 0.1}) ==
        Approx(0.94).margin(1e-15));
  // Nesterov: buf = 0.5, g = 0.5 + 0.9 * 0.5 = 0.95, p = 1 - 0.1 * 0.95
  CHECK(one_step(1.0, 0.5, {.lr = 0.1, .momentum = 0.9, .nesterov = true}) == Approx(0.905).margin(1e-15));
}

TEST_CASE("SGD momentum buffer starts at g, then decays and is dampened", "[optim][sgd]") {
  tg::Tensor p = parameter(tg::full({2}, 1.0, tg::kFloat64));
  SGD opt({p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5, .weight_decay = 0.1});
  REQUIRE_FALSE(opt.momentum_buffers()[0].defined());

  p.set_grad(tg::full({2}, 0.5, tg::kFloat64));
  opt.step();
  // buf = g = 0.5 + 0.1 * 1
  TG_REQUIRE_CLOSE(opt.momentum_buffers()[0], tg::full({2}, 0.6, tg::kFloat64), 1e-15);
  TG_REQUIRE_CLOSE(p.detach(), tg::full({2}, 0.94, tg::kFloat64), 1e-15);

  opt.step();
  // g = 0.5 + 0.1 * 0.94 = 0.594; buf = 0.9 * 0.6 + (1 - 0.5) * 0.594 = 0.837; p = 0.94 - 0.1 * 0.837
  TG_REQUIRE_CLOSE(opt.momentum_buffers()[0], tg::full({2}, 0.837, tg::kFloat64), 1e-15);
  TG_REQUIRE_CLOSE(p.detach(), tg::full({2}, 0.8563, tg::kFloat64), 1e-15);
  REQUIRE(opt.step_count() == 2);
}

TEST_CASE("SGD skips parameters whose grad is undefined", "[optim][sgd]") {
  tg::manual_seed(1);
  tg::Tensor used = parameter(tg::randn({3, 2}));
  tg::Tensor unused = parameter(tg::randn({4}));
  const tg::Tensor unused_before = unused.detach().clone();
  const tg::Tensor used_before = used.detach().clone();
  SGD opt({used, unused}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});

  for (int step = 0; step < 2; ++step) {
    opt.zero_grad();
    used.pow(2).sum().backward();
    opt.step();
  }
  REQUIRE_FALSE(unused.grad().defined());
  REQUIRE(same_bits(unused.detach(), unused_before));
  REQUIRE_FALSE(opt.momentum_buffers()[1].defined());
  REQUIRE(opt.momentum_buffers()[0].defined());
  REQUIRE_FALSE(same_bits(used.detach(), used_before));

  // A parameter that joins later starts its own buffer at its first step, buf = g.
  opt.zero_grad();
  (used.sum() + (unused * 3.0).sum()).backward();
  opt.step();
  // grad 3 + 0.01 * p
  TG_REQUIRE_CLOSE(opt.momentum_buffers()[1], 3.0 + 0.01 * unused_before, 1e-6);
}

TEST_CASE("SGD never modifies the stored gradient", "[optim][sgd]") {
  tg::manual_seed(2);
  tg::Tensor p = parameter(tg::randn({5, 3}));
  SGD opt({p}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.5, .nesterov = true});
  p.set_grad(tg::randn({5, 3}));
  const tg::Tensor grad = p.grad();
  const tg::Tensor grad_before = grad.clone();
  for (int step = 0; step < 3; ++step) opt.step();
  REQUIRE(p.grad().is_same(grad));
  REQUIRE(same_bits(grad, grad_before));
}

TEST_CASE("zero_grad makes every gradient undefined", "[optim][sgd]") {
  tg::Tensor a = parameter(tg::ones({2, 2}));
  tg::Tensor b = parameter(tg::ones({3}));
  SGD opt({a, b}, {.lr = 0.1});
  (a.sum() * b.sum()).backward();
  REQUIRE(a.grad().defined());
  REQUIRE(b.grad().defined());
  opt.zero_grad();
  REQUIRE_FALSE(a.grad().defined());
  REQUIRE_FALSE(b.grad().defined());
  // and the next backward writes a fresh gradient rather than accumulating into the old one
  (a.sum() * 2.0).backward();
  TG_REQUIRE_CLOSE(a.grad(), tg::full({2, 2}, 2.0), 0.0);
}

TEST_CASE("SGD options read like PyTorch's keyword arguments", "[optim][sgd]") {
  tg::Tensor p = parameter(tg::ones({2}));
  const SGD opt({p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0, .weight_decay = 1e-4, .nesterov = false});
  CHECK(opt.options().lr == 0.1);
  CHECK(opt.options().momentum == 0.9);
  CHECK(opt.options().dampening == 0);
  CHECK(opt.options().weight_decay == 1e-4);
  CHECK_FALSE(opt.options().nesterov);
  CHECK(opt.parameters().size() == 1);
  CHECK(opt.parameters()[0].is_same(p));
  CHECK(opt.step_count() == 0);
}

TEST_CASE("SGD lr can be read and set", "[optim][sgd]") {
  tg::Tensor p = parameter(tg::ones({1}, tg::kFloat64));
  SGD opt({p}, {});
  REQUIRE(opt.lr() == 0.01);
  opt.set_lr(0.25);
  REQUIRE(opt.lr() == 0.25);
  REQUIRE(opt.options().lr == 0.25);
  p.set_grad(tg::full({1}, 2.0, tg::kFloat64));
  opt.step();
  REQUIRE(p.item() == Approx(0.5).margin(1e-15));  // 1 - 0.25 * 2

  REQUIRE_TG_ERROR(opt.set_lr(-1.0), Catch::Contains("SGD") && Catch::Contains("got -1"));
  REQUIRE_TG_ERROR(opt.set_lr(std::nan("")), Catch::Contains("SGD") && Catch::Contains("nan"));
  REQUIRE_TG_ERROR(opt.set_lr(std::numeric_limits<double>::infinity()),
                   Catch::Contains("SGD: expected a finite lr, got inf"));
  REQUIRE(opt.lr() == 0.25);
}

TEST_CASE("SGD rejects invalid options", "[optim][sgd][errors]") {
  struct Invalid {
    SGDOptions options;
    std::string message;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const Invalid invalid = GENERATE_COPY(
      Invalid{{.lr = -0.1}, "SGD: expected lr >= 0, got -0.1"},
      Invalid{{.lr = nan}, "SGD: expected lr >= 0, got nan"},
      Invalid{{.momentum = -0.5}, "SGD: expected momentum >= 0, got -0.5"},
      Invalid{{.momentum = nan}, "SGD: expected momentum >= 0, got nan"},
      Invalid{{.dampening = nan}, "SGD: expected a finite dampening, got nan"},
      Invalid{{.weight_decay = -0.0001}, "SGD: expected weight_decay >= 0, got -0.0001"},
      Invalid{{.weight_decay = nan}, "SGD: expected weight_decay >= 0, got nan"},
      Invalid{{.lr = inf}, "SGD: expected a finite lr, got inf"},
      Invalid{{.momentum = inf}, "SGD: expected a finite momentum, got inf"},
      Invalid{{.dampening = -inf}, "SGD: expected a finite dampening, got -inf"},
      Invalid{{.weight_decay = inf}, "SGD: expected a finite weight_decay, got inf"},
      Invalid{{.momentum = 0, .nesterov = true}, "momentum = 0, dampening = 0"},
      Invalid{{.momentum = 0.9, .dampening = 0.1, .nesterov = true}, "momentum = 0.9, dampening = 0.1"});
  CAPTURE(invalid.message);
  tg::Tensor p = parameter(tg::ones({2}));
  REQUIRE_TG_ERROR(SGD({p}, invalid.options),
                   Catch::Contains("SGD") && Catch::Contains(invalid.message));
}

TEST_CASE("SGD rejects parameters it cannot update", "[optim][sgd][errors]") {
  tg::Tensor leaf = parameter(tg::ones({2, 3}));
  const tg::Tensor computed = leaf * 2.0;
  const tg::Tensor constant = tg::ones({4});
  REQUIRE_TG_ERROR(SGD({}, {}), Catch::Contains("SGD") && Catch::Contains("empty"));
  REQUIRE_TG_ERROR(SGD({leaf, tg::Tensor()}, {}),
                   Catch::Contains("SGD") && Catch::Contains("parameter 1 is an undefined"));
  REQUIRE_TG_ERROR(SGD({computed}, {}),
                   Catch::Contains("parameter 0 (shape [2, 3])") && Catch::Contains("leaf"));
  REQUIRE_TG_ERROR(SGD({leaf, constant}, {}),
                   Catch::Contains("parameter 1 (shape [4])") && Catch::Contains("require grad"));
  REQUIRE_TG_ERROR(SGD({leaf, leaf}, {}),
                   Catch::Contains("parameter 1 (shape [2, 3]) is the same tensor as parameter 0"));
}

TEST_CASE("SGD without momentum keeps no buffers", "[optim][sgd]") {
  tg::Tensor p = parameter(tg::ones({3}));
  SGD opt({p}, {.lr = 0.1, .weight_decay = 0.1});
  p.set_grad(tg::ones({3}));
  opt.step();
  opt.step();
  REQUIRE(opt.momentum_buffers().size() == 1);
  REQUIRE_FALSE(opt.momentum_buffers()[0].defined());
}

TEST_CASE("SGD gives bitwise-identical results at any thread count", "[optim][sgd][parallel]") {
  // 1 << 20 elements: 32 chunks of kElementwiseGrain, so the update really runs in parallel.
  const int64_t n = int64_t{1} << 20;
  tg::manual_seed(3);
  const tg::Tensor initial = tg::randn({n});
  const tg::Tensor grad = tg::randn({n});
  const SGDOptions options{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true};

  auto run = [&](int threads) {
    tg::Tensor p = parameter(initial);
    p.set_grad(grad);
    SGD opt({p}, options);
    tbb::task_arena arena(threads);
    arena.execute([&] {
      for (int step = 0; step < 3; ++step) opt.step();
    });
    return std::pair{p.detach(), opt.momentum_buffers()[0]};
  };
  const auto [p1, buf1] = run(1);
  for (int threads : {2, 3}) {
    CAPTURE(threads);
    const auto [p, buf] = run(threads);
    REQUIRE(same_bits(p, p1));
    REQUIRE(same_bits(buf, buf1));
  }

  // Every chunk was updated: compare with the update written out in double precision.
  const std::vector<float> p0 = initial.to_vector<float>(), g = grad.to_vector<float>(), actual = p1.to_vector<float>();
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    double p = p0[i], buf = 0;
    for (int step = 0; step < 3; ++step) {
      const double decayed = g[i] + 0.01 * p;
      buf = step == 0 ? decayed : 0.9 * buf + decayed;
      p -= 0.1 * (decayed + 0.9 * buf);
    }
    worst = std::max(worst, std::abs(p - actual[i]));
  }
  REQUIRE(worst < 1e-5);
}
