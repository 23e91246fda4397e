// Adam, AdamW, RMSprop, Adagrad and SGD's maximize against PyTorch over 120 steps
// (tests/fixtures/optim.txt, from make_optim_fixtures.py), single steps derived by hand, option
// validation, state names and thread-count independence.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <tbb/task_arena.h>

#include "optim_test_util.hpp"

namespace {

using tg::optim_test::parameter;
using tg::optim_test::same_bits;

using namespace tg::optim;

const char* const kNames[] = {"a", "b"};

// The optimizer of a fixture case, from its name's prefix and its opt_* scalars.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const tg::testing::FixtureCase& f,
                                          std::vector<tg::Tensor> params) {
  const auto opt = [&](const char* key, double fallback) {
    const std::string full = std::string("opt_") + key;
    return f.has(full) ? f.scalar(full) : fallback;
  };
  const auto flag = [&](const char* key) { return opt(key, 0) != 0; };
  // b in its own group when the case has one: a constructor over [a], then add_param_group([b]).
  const bool groups = f.has("group1_lr");
  std::vector<tg::Tensor> first = groups ? std::vector<tg::Tensor>{params[0]} : params;
  const auto with_groups = [&](auto optimizer) {
    if (groups) optimizer->add_param_group({params[1]}, {.lr = f.scalar("group1_lr")});  // the rest inherited
    return std::unique_ptr<Optimizer>(std::move(optimizer));
  };
  if (name.rfind("adamw", 0) == 0)
    return with_groups(std::make_unique<AdamW>(
        first, AdamWOptions{.lr = opt("lr", 1e-3), .betas = {opt("beta1", 0.9), opt("beta2", 0.999)},
                            .eps = opt("eps", 1e-8), .weight_decay = opt("weight_decay", 1e-2),
                            .amsgrad = flag("amsgrad"), .maximize = flag("maximize")}));
  if (name.rfind("adam", 0) == 0)
    return with_groups(std::make_unique<Adam>(
        first, AdamOptions{.lr = opt("lr", 1e-3), .betas = {opt("beta1", 0.9), opt("beta2", 0.999)},
                           .eps = opt("eps", 1e-8), .weight_decay = opt("weight_decay", 0),
                           .amsgrad = flag("amsgrad"), .maximize = flag("maximize")}));
  if (name.rfind("rmsprop", 0) == 0)
    return with_groups(std::make_unique<RMSprop>(
        first, RMSpropOptions{.lr = opt("lr", 1e-2), .alpha = opt("alpha", 0.99), .eps = opt("eps", 1e-8),
                              .weight_decay = opt("weight_decay", 0), .momentum = opt("momentum", 0),
                              .centered = flag("centered"), .maximize = flag("maximize")}));
  if (name.rfind("adagrad", 0) == 0)
    return with_groups(std::make_unique<Adagrad>(
        first, AdagradOptions{.lr = opt("lr", 1e-2), .lr_decay = opt("lr_decay", 0),
                              .weight_decay = opt("weight_decay", 0),
                              .initial_accumulator_value = opt("initial_accumulator_value", 0),
                              .eps = opt("eps", 1e-10), .maximize = flag("maximize")}));
  return with_groups(std::make_unique<SGD>(
      first, SGDOptions{.lr = opt("lr", 1e-3), .momentum = opt("momentum", 0), .dampening = opt("dampening", 0),
                        .weight_decay = opt("weight_decay", 0), .nesterov = flag("nesterov"),
                        .maximize = flag("maximize")}));
}

// |actual - expected| <= rtol * (1 + |expected|) element by element.
void require_close(const tg::Tensor& actual, const tg::Tensor& expected, double rtol) {
  INFO("actual:   " << actual << "\nexpected: " << expected);
  REQUIRE(tg::testing::allclose(actual, expected, rtol, rtol));
}

// 120 steps of grad = k2 * x + d (set, as the fixture does), checking the parameters at the
// recorded steps and the final state, every entry by PyTorch's name.
void check_trajectory(const std::string& name, double rtol) {
  const auto& f = tg::testing::fixture("optim.txt", name);
  std::vector<tg::Tensor> params;
  for (const char* x : kNames) params.push_back(parameter(f.at(std::string(x) + "0")));
  std::unique_ptr<Optimizer> optimizer = make_optimizer(name, f, params);
  for (int step = 1; step <= 120; ++step) {
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string x = kNames[i];
      params[i].set_grad(f.at("k2_" + x) * params[i].detach() + f.at("d_" + x));
    }
    optimizer->step();
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string key = tg::detail::concat(kNames[i], "_", step);
      if (!f.has(key)) continue;
      CAPTURE(name, step, key);
      require_close(params[i].detach(), f.at(key), rtol);
    }
  }
  for (size_t i = 0; i < params.size(); ++i) {
    size_t expected_entries = 0;
    for (const auto& [key, tensor] : f.tensors) {
      const std::string suffix = std::string("_") + kNames[i];
      if (key.rfind("state_", 0) != 0 || key.size() < suffix.size() ||
          key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      const std::string state_name = key.substr(6, key.size() - 6 - suffix.size());
      CAPTURE(name, state_name);
      ++expected_entries;
      REQUIRE(optimizer->state(i).count(state_name) == 1);
      const tg::Tensor& actual = optimizer->state(i).at(state_name);
      if (state_name == kStepState) {
        REQUIRE(actual.item() == tensor.item());
      } else {
        require_close(actual, tensor, rtol);
      }
    }
    REQUIRE(optimizer->state(i).size() == expected_entries);
  }
}

}  // namespace

TEST_CASE("adaptive optimizers follow PyTorch's float64 trajectories over 120 steps", "[optim][adam][fixture]") {
  const std::string name = GENERATE(as<std::string>{}, "adam", "adam_betas_eps", "adam_wd_amsgrad",
                                    "adam_maximize_groups", "adamw", "adamw_wd_amsgrad_maximize", "rmsprop",
                                    "rmsprop_centered_momentum", "rmsprop_momentum_maximize", "adagrad",
                                    "adagrad_decay_wd_init", "adagrad_maximize", "sgd_maximize");
  check_trajectory(name + "_f64", 1e-12);
}

TEST_CASE("adaptive optimizers follow PyTorch's float32 trajectories", "[optim][adam][fixture]") {
  const std::string name = GENERATE(as<std::string>{}, "adam", "adamw_wd_amsgrad_maximize", "rmsprop", "adagrad");
  check_trajectory(name + "_f32", 2e-5);
}

TEST_CASE("Adam's first step moves every coordinate by lr against its gradient's sign", "[optim][adam]") {
  // t = 1: m = (1 - b1) g, v = (1 - b2) g^2, so m / (1 - b1) / sqrt(v / (1 - b2)) = sign(g) when eps = 0.
  tg::Tensor p = parameter(tg::tensor({1.0, -2.0, 3.0}, {3}, tg::kFloat64));
  Adam opt({p}, {.lr = 0.25, .eps = 0.0});
  p.set_grad(tg::tensor({0.5, -4.0, 1e-3}, {3}, tg::kFloat64));
  opt.step();
  tg::testing::require_ieee_equal(p.detach(), {0.75, -1.75, 2.75}, 1e-15);
  // AdamW decays first: p * (1 - lr * wd) - lr * sign(g).
  tg::Tensor q = parameter(tg::tensor({2.0}, {1}, tg::kFloat64));
  AdamW adamw({q}, {.lr = 0.1, .eps = 0.0, .weight_decay = 0.5});
  q.set_grad(tg::tensor({-3.0}, {1}, tg::kFloat64));
  adamw.step();
  tg::testing::require_ieee_equal(q.detach(), {2.0 * 0.95 + 0.1}, 1e-15);
}

TEST_CASE("RMSprop and Adagrad single steps derived by hand", "[optim][rmsprop][adagrad]") {
  // RMSprop, t = 1: s = (1 - alpha) g^2, p -= lr g / (sqrt(s) + eps).
  tg::Tensor p = parameter(tg::tensor({1.0}, {1}, tg::kFloat64));
  RMSprop rmsprop({p}, {.lr = 0.1, .alpha = 0.75, .eps = 0.0});
  p.set_grad(tg::tensor({2.0}, {1}, tg::kFloat64));
  rmsprop.step();
  tg::testing::require_ieee_equal(p.detach(), {1.0 - 0.1 * 2.0 / 1.0}, 1e-15);
  // Adagrad: sum = init + g^2, p -= lr g / (sqrt(sum) + eps); the second step's lr is lr / (1 + lr_decay).
  tg::Tensor q = parameter(tg::tensor({0.0}, {1}, tg::kFloat64));
  Adagrad adagrad({q}, {.lr = 1.0, .lr_decay = 1.0, .initial_accumulator_value = 7.0, .eps = 0.0});
  q.set_grad(tg::tensor({3.0}, {1}, tg::kFloat64));
  adagrad.step();  // sum = 16: q = -3 / 4
  tg::testing::require_ieee_equal(q.detach(), {-0.75}, 1e-15);
  q.set_grad(tg::tensor({-3.0}, {1}, tg::kFloat64));
  adagrad.step();  // sum = 25, clr = 1 / 2: q = -0.75 + 0.5 * 3 / 5
  tg::testing::require_ieee_equal(q.detach(), {-0.45}, 1e-15);
  REQUIRE(adagrad.state(0).at("step").item() == 2.0);
}

TEST_CASE("optimizers keep PyTorch's state names, and never modify the stored gradient", "[optim][adam]") {
  tg::Tensor p = parameter(tg::ones({2, 2}));
  const tg::Tensor grad = tg::full({2, 2}, 0.5);
  p.set_grad(grad);
  const tg::Tensor grad_before = grad.clone();
  const auto names = [](const ParamState& state) {
    std::vector<std::string> keys;
    for (const auto& [key, tensor] : state) keys.push_back(key);
    return keys;
  };
  Adam adam({p}, {.weight_decay = 0.1, .amsgrad = true, .maximize = true});
  adam.step();
  CHECK(names(adam.state(0)) == std::vector<std::string>{"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"});
  CHECK(adam.state(0).at("step").shape() == tg::Shape{});
  RMSprop rmsprop({p}, {.momentum = 0.9, .centered = true});
  rmsprop.step();
  CHECK(names(rmsprop.state(0)) == std::vector<std::string>{"grad_avg", "momentum_buffer", "square_avg", "step"});
  Adagrad adagrad({p}, {});
  adagrad.step();
  CHECK(names(adagrad.state(0)) == std::vector<std::string>{"step", "sum"});
  REQUIRE(same_bits(p.grad(), grad_before));
}

TEST_CASE("adaptive optimizers reject invalid options as PyTorch does", "[optim][adam][errors]") {
  tg::Tensor p = parameter(tg::ones({2}));
  REQUIRE_TG_ERROR(Adam({p}, {.lr = -1}), Catch::Contains("Adam") && Catch::Contains("expected lr >= 0, got -1"));
  REQUIRE_TG_ERROR(Adam({p}, {.betas = {1.0, 0.999}}), Catch::Contains("expected 0 <= betas[0] < 1, got 1"));
  REQUIRE_TG_ERROR(AdamW({p}, {.betas = {0.9, -0.1}}), Catch::Contains("AdamW") && Catch::Contains("betas[1]"));
  REQUIRE_TG_ERROR(AdamW({p}, {.eps = -1e-8}), Catch::Contains("expected eps >= 0"));
  REQUIRE_TG_ERROR(Adam({p}, {.weight_decay = std::nan("")}), Catch::Contains("weight_decay"));
  REQUIRE_TG_ERROR(RMSprop({p}, {.alpha = -0.5}), Catch::Contains("RMSprop") && Catch::Contains("alpha >= 0"));
  REQUIRE_TG_ERROR(RMSprop({p}, {.momentum = -0.5}), Catch::Contains("momentum >= 0"));
  REQUIRE_TG_ERROR(Adagrad({p}, {.lr_decay = -1}), Catch::Contains("Adagrad") && Catch::Contains("lr_decay >= 0"));
  REQUIRE_TG_ERROR(Adagrad({p}, {.initial_accumulator_value = -1}),
                   Catch::Contains("initial_accumulator_value >= 0"));
  REQUIRE_TG_ERROR(Adagrad({p}, {.eps = INFINITY}), Catch::Contains("expected a finite eps"));
  Adam adam({p}, {});
  REQUIRE_TG_ERROR(adam.set_options(0, {.betas = {0.9, 2.0}}), Catch::Contains("betas[1]"));
  REQUIRE_TG_ERROR(adam.add_param_group({parameter(tg::ones({1}))}, {.lr = -2}), Catch::Contains("lr >= 0"));
  REQUIRE(adam.param_group_count() == 1);
}

TEST_CASE("momentum() reads and sets SGD's momentum and Adam's beta1", "[optim][momentum]") {
  tg::Tensor p = parameter(tg::ones({2}));
  SGD sgd({p}, {.lr = 0.1, .momentum = 0.9});
  REQUIRE(sgd.has_momentum());
  sgd.set_momentum(0, 0.85);
  REQUIRE(sgd.options().momentum == 0.85);
  Adam adam({p}, {.betas = {0.9, 0.99}});
  REQUIRE(adam.momentum(0) == 0.9);
  adam.set_momentum(0, 0.95);
  REQUIRE(adam.options().betas == std::array<double, 2>{0.95, 0.99});
  REQUIRE_TG_ERROR(adam.set_momentum(0, 1.5), Catch::Contains("betas[0]"));
  Adagrad adagrad({p}, {});
  REQUIRE_FALSE(adagrad.has_momentum());
  REQUIRE_TG_ERROR(adagrad.momentum(0), Catch::Contains("Adagrad: has neither a momentum nor betas"));
}

TEST_CASE("Adam and AdamW state_dicts resume a run bit for bit", "[optim][adam][state_dict]") {
  tg::manual_seed(5);
  const tg::Tensor start = tg::randn({4, 3}, tg::kFloat64), k2 = tg::rand({4, 3}, tg::kFloat64) + 0.5;
  const auto run = [&](Optimizer& optimizer, tg::Tensor& p, int steps) {
    for (int step = 0; step < steps; ++step) {
      p.set_grad(k2 * p.detach() - 1.0);
      optimizer.step();
    }
  };
  tg::Tensor straight = parameter(start);
  AdamW reference({straight}, {.lr = 0.05, .amsgrad = true});
  run(reference, straight, 20);

  tg::Tensor first = parameter(start);
  AdamW stopped({first}, {.lr = 0.05, .amsgrad = true});
  run(stopped, first, 8);
  const OptimizerStateDict saved = stopped.state_dict();
  tg::Tensor resumed_param = parameter(first.detach());
  AdamW resumed({resumed_param}, {.lr = 1.0});  // its options come from the state dict
  resumed.load_state_dict(saved);
  REQUIRE(resumed.options().lr == 0.05);
  run(resumed, resumed_param, 12);
  REQUIRE(same_bits(resumed_param.detach(), straight.detach()));
  REQUIRE(same_bits(resumed.state(0).at("exp_avg_sq"), reference.state(0).at("exp_avg_sq")));

  OptimizerStateDict bad = saved;
  bad.state[0]["step"] = tg::scalar_tensor(2.5, tg::kFloat64);
  REQUIRE_TG_ERROR(resumed.load_state_dict(bad), Catch::Contains("'step' of parameter index 0 to be a whole number"));
  bad.state[0]["step"] = tg::zeros({4, 3});
  REQUIRE_TG_ERROR(resumed.load_state_dict(bad), Catch::Contains("to be a 0-d count []"));
  bad = saved;
  bad.param_groups[0].options["betas"] = std::vector<double>{0.9};
  REQUIRE_TG_ERROR(resumed.load_state_dict(bad), Catch::Contains("expected 'betas' to hold 2 numbers, got 1"));
}

TEST_CASE("adaptive optimizers give bitwise-identical results at any thread count", "[optim][adam][parallel]") {
  const int64_t n = int64_t{1} << 20;  // 32 chunks of kElementwiseGrain: the update runs in parallel
  tg::manual_seed(9);
  const tg::Tensor initial = tg::randn({n});
  const tg::Tensor grad = tg::randn({n});
  const auto run = [&](int threads, auto make) {
    tg::Tensor p = parameter(initial);
    p.set_grad(grad);
    auto optimizer = make(p);
    tbb::task_arena arena(threads);
    arena.execute([&] {
      for (int step = 0; step < 3; ++step) optimizer->step();
    });
    return p.detach();
  };
  const auto adamw = [](tg::Tensor& p) { return std::make_unique<AdamW>(std::vector{p}, AdamWOptions{.amsgrad = true}); };
  const auto rmsprop = [](tg::Tensor& p) {
    return std::make_unique<RMSprop>(std::vector{p}, RMSpropOptions{.momentum = 0.9, .centered = true});
  };
  const auto adagrad = [](tg::Tensor& p) { return std::make_unique<Adagrad>(std::vector{p}, AdagradOptions{}); };
  const tg::Tensor adamw1 = run(1, adamw), rmsprop1 = run(1, rmsprop), adagrad1 = run(1, adagrad);
  for (int threads : {2, 3}) {
    CAPTURE(threads);
    REQUIRE(same_bits(run(threads, adamw), adamw1));
    REQUIRE(same_bits(run(threads, rmsprop), rmsprop1));
    REQUIRE(same_bits(run(threads, adagrad), adagrad1));
  }
}
