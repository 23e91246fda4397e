// The optimizer protocol through SGD: parameter groups against PyTorch (tests/fixtures/
// sgd_param_groups.txt, from make_param_group_fixtures.py), schedulers over every group,
// state_dict / load_state_dict of optimizers and schedulers, and their validation.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "optim_test_util.hpp"

namespace {

using tg::optim_test::parameter;
using tg::optim_test::quadratic_loss;

using tg::optim::CosineAnnealingLR;
using tg::optim::OptimizerStateDict;
using tg::optim::SchedulerStateDict;
using tg::optim::SGD;
using tg::optim::SGDOptions;
using tg::optim::StepLR;

const char* const kNames[] = {"a", "b", "c"};  // group 0 = [a, b], group 1 = [c]

SGDOptions group_options(const tg::testing::FixtureCase& fixture, int group) {
  // (concat, not "g" + std::to_string: GCC 12 reports a false -Wrestrict on that at -O3)
  const std::string g = tg::detail::concat("g", group, "_");
  return {.lr = fixture.scalar(g + "lr"),
          .momentum = fixture.scalar(g + "momentum"),
          .dampening = fixture.scalar(g + "dampening"),
          .weight_decay = fixture.scalar(g + "weight_decay"),
          .nesterov = fixture.scalar(g + "nesterov") != 0};
}

// The fixture's parameters a, b, c at their start, and an SGD over [a, b] + add_param_group([c]).
struct GroupsRun {
  const tg::testing::FixtureCase& fixture;
  std::vector<tg::Tensor> params;
  std::unique_ptr<SGD> opt;

  explicit GroupsRun(const std::string& case_name) : fixture(tg::testing::fixture("sgd_param_groups.txt", case_name)) {
    for (const char* x : kNames) params.push_back(parameter(fixture.at(std::string(x) + "0")));
    opt = std::make_unique<SGD>(std::vector<tg::Tensor>{params[0], params[1]}, group_options(fixture, 0));
    opt->add_param_group({params[2]}, group_options(fixture, 1));
  }

  void backward() {
    opt->zero_grad();
    tg::Tensor loss = tg::zeros({});
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string x = kNames[i];
      loss = loss + quadratic_loss(params[i], fixture.at("k_" + x), fixture.at("d_" + x));
    }
    loss.backward();
  }

  // Five steps, each compared with PyTorch's: the lr every group used and every parameter after it.
  void check_trajectory(tg::optim::EpochLRScheduler* scheduler) {
    for (int step = 1; step <= 5; ++step) {
      CAPTURE(step);
      for (size_t group = 0; group < 2; ++group) {
        const std::vector<double> lr_used = fixture.at(tg::detail::concat("g", group, "_lr_used")).to_vector<double>();
        REQUIRE(opt->lr(group) == Approx(lr_used[step - 1]).epsilon(1e-15).margin(0));
      }
      backward();
      opt->step();
      if (scheduler) scheduler->step();
      for (size_t i = 0; i < params.size(); ++i)
        TG_REQUIRE_CLOSE(params[i].detach(), fixture.at(tg::detail::concat(kNames[i], step)), 1e-6);
    }
    const std::vector<tg::Tensor> buffers = opt->momentum_buffers();
    for (size_t i = 0; i < params.size(); ++i)
      TG_REQUIRE_CLOSE(buffers[i], fixture.at(std::string("buf_") + kNames[i]), 1e-5);
  }
};

const void* raw_data(const tg::Tensor& t) {
  return t.dtype() == tg::kFloat32 ? static_cast<const void*>(t.data<float>()) : t.data<double>();
}

bool same_bits(const tg::Tensor& a, const tg::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(raw_data(a), raw_data(b), static_cast<size_t>(a.numel()) * tg::element_size(a.dtype())) == 0;
}

}  // namespace

TEST_CASE("SGD with two parameter groups follows PyTorch's trajectory", "[optim][param_groups][fixture]") {
  GroupsRun run("sgd_groups");
  REQUIRE(run.opt->param_group_count() == 2);
  REQUIRE(run.opt->group_parameters(1).size() == 1);
  REQUIRE(run.opt->group_parameters(1)[0].is_same(run.params[2]));
  run.check_trajectory(nullptr);
}

TEST_CASE("schedulers act on every parameter group, as PyTorch's do", "[optim][param_groups][lr_scheduler][fixture]") {
  SECTION("StepLR") {
    GroupsRun run("sgd_groups_steplr");
    StepLR scheduler(*run.opt, 2, 0.5);
    REQUIRE(scheduler.base_lrs() == std::vector<double>{0.1, 0.05});
    run.check_trajectory(&scheduler);
    REQUIRE(scheduler.last_lr(1) == run.opt->lr(1));
  }
  SECTION("CosineAnnealingLR") {
    GroupsRun run("sgd_groups_cosine");
    CosineAnnealingLR scheduler(*run.opt, 4, 0.01);
    run.check_trajectory(&scheduler);
  }
}

TEST_CASE("add_param_group takes the constructor's options unless given its own", "[optim][param_groups]") {
  tg::Tensor a = parameter(tg::ones({2}));
  tg::Tensor b = parameter(tg::ones({3}));
  tg::Tensor c = parameter(tg::ones({1}));
  SGD opt({a}, {.lr = 0.5, .momentum = 0.9});
  opt.add_param_group({b});
  opt.add_param_group({c}, {.lr = 0.25, .momentum = 0.0});
  CHECK(opt.options(1).lr == 0.5);
  CHECK(opt.options(1).momentum == 0.9);
  CHECK(opt.options(2).lr == 0.25);
  CHECK(opt.options(2).momentum == 0.0);
  CHECK(opt.parameters().size() == 3);
  CHECK(opt.parameters()[2].is_same(c));

  // One step by hand: every parameter 1, every grad 2; momentum's first step sets buf = g.
  for (tg::Tensor p : {a, b, c}) p.set_grad(tg::full(p.shape(), 2.0));
  opt.step();
  TG_REQUIRE_CLOSE(a.detach(), tg::full({2}, 0.0), 0.0);   // 1 - 0.5 * 2
  TG_REQUIRE_CLOSE(b.detach(), tg::full({3}, 0.0), 0.0);   // the defaults: the same
  TG_REQUIRE_CLOSE(c.detach(), tg::full({1}, 0.5), 0.0);   // 1 - 0.25 * 2
  CHECK(opt.momentum_buffers()[1].defined());               // group 1 has the constructor's momentum
  CHECK_FALSE(opt.momentum_buffers()[2].defined());         // group 2 set its momentum to 0

  // set_lr without a group sets every group; with one, only that group.
  opt.set_lr(0.125);
  CHECK((opt.lr(0) == 0.125 && opt.lr(1) == 0.125 && opt.lr(2) == 0.125));
  opt.set_lr(1, 0.0625);
  CHECK((opt.lr(0) == 0.125 && opt.lr(1) == 0.0625));
  opt.set_options(2, {.lr = 0.5, .momentum = 0.5});
  CHECK(opt.options(2).momentum == 0.5);
}

TEST_CASE("add_param_group rejects what a group cannot hold, and changes nothing", "[optim][param_groups][errors]") {
  tg::Tensor a = parameter(tg::ones({2}));
  tg::Tensor b = parameter(tg::ones({3}));
  SGD opt({a}, {.lr = 0.1});
  REQUIRE_TG_ERROR(opt.add_param_group({}), Catch::Contains("SGD: expected at least one parameter"));
  REQUIRE_TG_ERROR(opt.add_param_group({b, a}),
                   Catch::Contains("SGD: parameter 2 (shape [2]) is the same tensor as parameter 0") &&
                       Catch::Contains("in one group"));
  REQUIRE_TG_ERROR(opt.add_param_group({b, b}), Catch::Contains("parameter 2 (shape [3]) is the same tensor as parameter 1"));
  REQUIRE_TG_ERROR(opt.add_param_group({b}, {.lr = -1}), Catch::Contains("SGD: expected lr >= 0, got -1"));
  REQUIRE(opt.param_group_count() == 1);
  REQUIRE(opt.parameters().size() == 1);
  REQUIRE_TG_ERROR(opt.lr(1), Catch::Contains("SGD: expected a parameter group index below 1, got 1"));
  REQUIRE_TG_ERROR(opt.set_lr(3, 0.1), Catch::Contains("SGD: expected a parameter group index below 1, got 3"));
  REQUIRE_TG_ERROR(opt.options(1), Catch::Contains("SGD: expected a parameter group index below 1, got 1"));
}

TEST_CASE("state_dict has PyTorch's layout: state by parameter index, groups with options and indices",
          "[optim][state_dict]") {
  tg::Tensor a = parameter(tg::ones({2}, tg::kFloat64));
  tg::Tensor b = parameter(tg::ones({3}, tg::kFloat64));
  tg::Tensor unused = parameter(tg::ones({1}, tg::kFloat64));
  SGD opt({a}, {.lr = 0.1, .momentum = 0.9});
  opt.add_param_group({unused, b}, {.lr = 0.2, .momentum = 0.5, .weight_decay = 0.01, .nesterov = true});
  a.set_grad(tg::full({2}, 2.0, tg::kFloat64));
  b.set_grad(tg::full({3}, 4.0, tg::kFloat64));
  opt.step();

  const OptimizerStateDict state = opt.state_dict();
  REQUIRE(state.step_count == 1);
  REQUIRE(state.param_groups.size() == 2);
  CHECK(state.param_groups[0].params == std::vector<int64_t>{0});
  CHECK(state.param_groups[1].params == std::vector<int64_t>{1, 2});
  const tg::optim::OptionValues expected{{"lr", 0.2}, {"momentum", 0.5}, {"dampening", 0.0},
                                         {"weight_decay", 0.01}, {"nesterov", true}, {"maximize", false}};
  CHECK(state.param_groups[1].options == expected);
  // Only parameters that took a momentum step have state: a (index 0) and b (index 2), buf = g.
  REQUIRE(state.state.size() == 2);
  TG_REQUIRE_CLOSE(state.state.at(0).at("momentum_buffer"), tg::full({2}, 2.0, tg::kFloat64), 0.0);
  TG_REQUIRE_CLOSE(state.state.at(2).at("momentum_buffer"), tg::full({3}, 4.01, tg::kFloat64), 1e-15);
  CHECK(state.state.at(2).at("momentum_buffer").is_same(opt.state(2).at("momentum_buffer")));  // live
}

TEST_CASE("load_state_dict resumes a run bit for bit, from copies in the parameters' dtype", "[optim][state_dict]") {
  tg::manual_seed(4);
  const tg::Tensor initial_a = tg::randn({3, 4}), initial_b = tg::randn({5});
  const tg::Tensor c = tg::rand({3, 4}) + 0.1, d = tg::randn({3, 4});
  const auto make = [&](tg::Tensor& a, tg::Tensor& b) {
    auto opt = std::make_unique<SGD>(std::vector<tg::Tensor>{a}, SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.2});
    // dampening 0 given: the constructor's 0.2 would not go with Nesterov
    opt->add_param_group({b}, {.lr = 0.05, .momentum = 0.5, .dampening = 0.0, .weight_decay = 0.01, .nesterov = true});
    return opt;
  };
  const auto train = [&](SGD& opt, tg::Tensor& a, tg::Tensor& b, int steps) {
    for (int step = 0; step < steps; ++step) {
      opt.zero_grad();
      (quadratic_loss(a, c, d) + b.pow(4).sum()).backward();
      opt.step();
    }
  };
  tg::Tensor a = parameter(initial_a), b = parameter(initial_b);
  auto uninterrupted = make(a, b);
  train(*uninterrupted, a, b, 5);

  tg::Tensor first_a = parameter(initial_a), first_b = parameter(initial_b);
  auto first_half = make(first_a, first_b);
  train(*first_half, first_a, first_b, 2);
  // The saved state goes through float64, as a float64 checkpoint would: exact for float32 values.
  OptimizerStateDict saved = first_half->state_dict();
  for (auto& [index, entries] : saved.state)
    for (auto& [name, tensor] : entries) tensor = tensor.to(tg::kFloat64);
  const tg::Tensor saved_buffer = saved.state.at(0).at("momentum_buffer");
  const tg::Tensor saved_copy = saved_buffer.clone();

  tg::Tensor resumed_a = parameter(first_a), resumed_b = parameter(first_b);
  SGD resumed({resumed_a}, {.lr = 1.0});  // other options, replaced by the state's
  resumed.add_param_group({resumed_b});
  resumed.load_state_dict(saved);
  REQUIRE(resumed.step_count() == 2);
  REQUIRE(resumed.options(1).nesterov);
  REQUIRE(resumed.momentum_buffers()[0].dtype() == tg::kFloat32);
  train(resumed, resumed_a, resumed_b, 3);
  REQUIRE(same_bits(resumed_a.detach(), a.detach()));
  REQUIRE(same_bits(resumed_b.detach(), b.detach()));
  REQUIRE(same_bits(resumed.momentum_buffers()[1], uninterrupted->momentum_buffers()[1]));
  REQUIRE(same_bits(saved_buffer, saved_copy));  // the optimizer copied the state instead of writing into it
}

TEST_CASE("load_state_dict refuses a state that does not fit, and changes nothing", "[optim][state_dict][errors]") {
  tg::Tensor a = parameter(tg::ones({2, 3}));
  tg::Tensor b = parameter(tg::ones({4}));
  SGD opt({a}, {.lr = 0.1, .momentum = 0.9});
  opt.add_param_group({b}, {.lr = 0.2});
  const OptimizerStateDict good = opt.state_dict();  // no state yet, two groups
  const auto refuses = [&](const OptimizerStateDict& state, const std::string& reason) {
    INFO("expected reason: " << reason);
    REQUIRE_TG_ERROR(opt.load_state_dict(state), Catch::Contains("SGD: load_state_dict") && Catch::Contains(reason));
    REQUIRE(opt.step_count() == 0);
    REQUIRE(opt.lr(0) == 0.1);
    REQUIRE(opt.lr(1) == 0.2);
    REQUIRE_FALSE(opt.momentum_buffers()[0].defined());
  };
  // Every refused state would also set lr 0.5 and a buffer, if it were applied.
  OptimizerStateDict base = good;
  base.param_groups[0].options["lr"] = 0.5;
  base.state[0]["momentum_buffer"] = tg::zeros({2, 3});

  OptimizerStateDict state = base;
  state.param_groups.pop_back();
  refuses(state, "expected 2 parameter groups, got 1");
  state = base;
  state.param_groups[1].params.push_back(7);
  refuses(state, "expected group 1 to hold 1 parameters, got 2");
  state = base;
  state.param_groups[1].params = {0};
  refuses(state, "parameter index 0 is listed twice");
  state = base;
  state.state[5]["momentum_buffer"] = tg::zeros({4});
  refuses(state, "state for parameter index 5, which no parameter group lists");
  state = base;
  state.state[1]["exp_avg"] = tg::zeros({4});
  refuses(state, "unknown state 'exp_avg' for parameter index 1");
  state = base;
  state.state[1]["momentum_buffer"] = tg::zeros({2, 3});
  refuses(state, "expected the 'momentum_buffer' of parameter index 1 to have its parameter's shape [4], got [2, 3]");
  state = base;
  state.state[1]["momentum_buffer"] = tg::Tensor();
  refuses(state, "(undefined)");
  state = base;
  state.param_groups[1].options.erase("momentum");
  refuses(state, "a parameter group has no 'momentum'");
  state = base;
  state.param_groups[1].options["foreach"] = false;
  refuses(state, "unknown option 'foreach'");
  state = base;
  state.param_groups[1].options["nesterov"] = 1.0;
  refuses(state, "expected 'nesterov' to be a flag");
  state = base;
  state.param_groups[1].options["lr"] = true;
  refuses(state, "expected 'lr' to be a number");
  state = base;
  state.param_groups[1].options["weight_decay"] = -0.5;
  REQUIRE_TG_ERROR(opt.load_state_dict(state), Catch::Contains("SGD: expected weight_decay >= 0, got -0.5"));
  REQUIRE(opt.lr(0) == 0.1);
  state = base;
  state.step_count = -1;
  refuses(state, "expected step_count >= 0, got -1");

  opt.load_state_dict(base);  // and the base itself fits
  REQUIRE(opt.lr(0) == 0.5);
  REQUIRE(opt.momentum_buffers()[0].defined());
}

TEST_CASE("a scheduler's state_dict resumes its schedule", "[optim][lr_scheduler][state_dict]") {
  tg::Tensor a = parameter(tg::ones({1}));
  tg::Tensor b = parameter(tg::ones({1}));
  SGD opt({a}, {.lr = 0.8});
  opt.add_param_group({b}, {.lr = 0.4});
  StepLR scheduler(opt, 2, 0.5);
  for (int epoch = 0; epoch < 3; ++epoch) scheduler.step();
  const SchedulerStateDict state = scheduler.state_dict();
  REQUIRE(state.last_epoch == 3);
  REQUIRE(state.base_lrs == std::vector<double>{0.8, 0.4});

  tg::Tensor c = parameter(tg::ones({1}));
  tg::Tensor d = parameter(tg::ones({1}));
  SGD other({c}, {.lr = 0.1});
  other.add_param_group({d}, {.lr = 0.1});
  StepLR resumed(other, 2, 0.5);
  resumed.load_state_dict(state);
  REQUIRE(resumed.last_epoch() == 3);
  REQUIRE(resumed.last_lr(1) == 0.2);  // 0.4 * 0.5^floor(3 / 2)
  REQUIRE(other.lr(1) == 0.1);         // as in PyTorch, the optimizer's lr is its own state
  // Epoch 4 is a boundary: as PyTorch's StepLR, the step halves the optimizer's lr (0.1, not
  // restored here), rather than setting 0.8 * 0.25 and 0.4 * 0.25 over it.
  resumed.step();
  REQUIRE(other.lr(0) == 0.05);
  REQUIRE(other.lr(1) == 0.05);
  REQUIRE(resumed.last_lr(0) == 0.05);

  REQUIRE_TG_ERROR(resumed.load_state_dict({.last_epoch = -1, .base_lrs = {0.1, 0.1}}),
                   Catch::Contains("StepLR: load_state_dict: expected last_epoch >= 0, got -1"));
  REQUIRE_TG_ERROR(resumed.load_state_dict({.last_epoch = 1, .base_lrs = {0.1}}),
                   Catch::Contains("StepLR: load_state_dict: expected 2 base_lrs (one per parameter group), got 1"));
  REQUIRE_TG_ERROR(resumed.load_state_dict({.last_epoch = 1, .base_lrs = {0.1, std::nan("")}}),
                   Catch::Contains("expected base_lr 1 to be finite and >= 0, got nan"));
  REQUIRE(resumed.last_epoch() == 4);
}

TEST_CASE("a scheduler refuses to step an optimizer whose groups changed, or to overflow", "[optim][lr_scheduler][errors]") {
  tg::Tensor a = parameter(tg::ones({1}));
  tg::Tensor b = parameter(tg::ones({1}));
  SGD opt({a}, {.lr = 0.1});
  CosineAnnealingLR cosine(opt, 10);
  opt.add_param_group({b});
  REQUIRE_TG_ERROR(cosine.step(), Catch::Contains("CosineAnnealingLR: the optimizer has 2 parameter groups, but the "
                                                  "scheduler was built for 1"));
  REQUIRE(cosine.last_epoch() == 0);

  tg::Tensor p = parameter(tg::ones({1}));
  SGD big({p}, {.lr = 1e290});
  StepLR growing(big, 1, 1e10);  // gamma > 1 is allowed, as in PyTorch, until the lr overflows
  growing.step();
  REQUIRE_TG_ERROR(growing.step(), Catch::Contains("StepLR: the lr of parameter group 0 at epoch 2 is inf") &&
                                       Catch::Contains("overflowed"));
  REQUIRE(growing.last_epoch() == 1);
  REQUIRE(big.lr() == growing.last_lr());
}
