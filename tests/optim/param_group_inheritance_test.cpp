// A parameter group that gives only some options inherits the others from the optimizer's
// defaults, as PyTorch's add_param_group does: every optimizer with groups against PyTorch
// (tests/fixtures/param_group_inheritance.txt, from make_group_inheritance_fixtures.py), the state
// dict's param_groups, set_options changing one option, and the whole-struct forms.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "optim_test_util.hpp"

namespace {

using tg::optim_test::parameter;
using tg::optim_test::quadratic_loss;

using namespace tg::optim;

const char* const kNames[] = {"a", "b"};  // group 0 = [a] (the constructor's), group 1 = [b]

// Builds the optimizer over `a`, adds the group `b` as the user would write it.
using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(tg::Tensor a, tg::Tensor b)>;

// Five steps against PyTorch's trajectory, then group 1's options in state_dict() against
// PyTorch's param_groups[1]: the same keys, each the same value.
void check_inheritance(const std::string& case_name, const MakeOptimizer& make) {
  const auto& f = tg::testing::fixture("param_group_inheritance.txt", case_name);
  std::vector<tg::Tensor> params;
  for (const char* x : kNames) params.push_back(parameter(f.at(std::string(x) + "0")));
  const std::unique_ptr<Optimizer> optimizer = make(params[0], params[1]);
  REQUIRE(optimizer->param_group_count() == 2);
  for (int step = 1; step <= 5; ++step) {
    optimizer->zero_grad();
    tg::Tensor loss = tg::zeros({}, tg::kFloat64);
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string x = kNames[i];
      loss = loss + quadratic_loss(params[i], f.at("k_" + x), f.at("d_" + x));
    }
    loss.backward();
    optimizer->step();
    for (size_t i = 0; i < params.size(); ++i) {
      CAPTURE(case_name, step, kNames[i]);
      REQUIRE(tg::testing::allclose(params[i].detach(), f.at(tg::detail::concat(kNames[i], step)), 1e-13, 1e-13));
    }
  }
  const OptionValues options = optimizer->state_dict().param_groups.at(1).options;
  size_t expected_keys = 0;
  for (const auto& [key, tensor] : f.tensors) {
    if (key.rfind("g1_", 0) != 0) continue;
    ++expected_keys;
    const std::string option = key.substr(3);
    CAPTURE(case_name, option);
    REQUIRE(options.count(option) == 1);
    const OptionValue& value = options.at(option);
    if (const auto* number = std::get_if<double>(&value)) {
      REQUIRE(*number == tensor.item());
    } else if (const auto* flag = std::get_if<bool>(&value)) {
      REQUIRE(*flag == (tensor.item() != 0));
    } else {
      REQUIRE(std::get<std::vector<double>>(value) == tensor.to_vector<double>());
    }
  }
  REQUIRE(options.size() == expected_keys);
}

}  // namespace

TEST_CASE("a parameter group inherits the options it does not give, as PyTorch's", "[optim][param_groups][fixture]") {
  SECTION("AdamW: a group without weight decay keeps the constructor's lr and betas") {
    check_inheritance("adamw_inherit", [](tg::Tensor a, tg::Tensor b) {
      auto opt = std::make_unique<AdamW>(std::vector{a}, AdamWOptions{.lr = 0.003, .betas = {0.9, 0.95},
                                                                       .weight_decay = 0.1});
      opt->add_param_group({b}, {.weight_decay = 0.0});
      REQUIRE(opt->options(1).lr == 0.003);
      REQUIRE(opt->options(1).betas == std::array<double, 2>{0.9, 0.95});
      return opt;
    });
  }
  SECTION("Adam: a group with its own betas keeps eps, weight_decay and amsgrad") {
    check_inheritance("adam_inherit", [](tg::Tensor a, tg::Tensor b) {
      auto opt = std::make_unique<Adam>(std::vector{a}, AdamOptions{.lr = 0.01, .betas = {0.8, 0.99}, .eps = 1e-6,
                                                                     .weight_decay = 0.01, .amsgrad = true});
      opt->add_param_group({b}, {.betas = {0.5, 0.9}});
      return opt;
    });
  }
  SECTION("SGD: a group with its own lr keeps momentum, weight decay and Nesterov") {
    check_inheritance("sgd_inherit", [](tg::Tensor a, tg::Tensor b) {
      auto opt = std::make_unique<SGD>(std::vector{a}, SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3,
                                                                   .nesterov = true});
      opt->add_param_group({b}, {.lr = 0.05});
      return opt;
    });
  }
  SECTION("RMSprop: a group with its own lr keeps alpha, eps, momentum and centered") {
    check_inheritance("rmsprop_inherit", [](tg::Tensor a, tg::Tensor b) {
      auto opt = std::make_unique<RMSprop>(std::vector{a}, RMSpropOptions{.lr = 0.01, .alpha = 0.9, .eps = 1e-6,
                                                                           .weight_decay = 0.01, .momentum = 0.5,
                                                                           .centered = true});
      opt->add_param_group({b}, {.lr = 0.002});
      return opt;
    });
  }
  SECTION("Adagrad: a group with its own weight decay keeps lr_decay and the initial accumulator") {
    check_inheritance("adagrad_inherit", [](tg::Tensor a, tg::Tensor b) {
      auto opt = std::make_unique<Adagrad>(std::vector{a}, AdagradOptions{.lr = 0.1, .lr_decay = 0.01,
                                                                           .initial_accumulator_value = 0.1,
                                                                           .eps = 1e-8});
      opt->add_param_group({b}, {.weight_decay = 0.05, .maximize = false});
      return opt;
    });
  }
}

TEST_CASE("a group inherits the constructor's options, not what changed group 0 since", "[optim][param_groups]") {
  tg::Tensor a = parameter(tg::ones({2})), b = parameter(tg::ones({2})), c = parameter(tg::ones({2}));
  AdamW opt({a}, {.lr = 0.003, .betas = {0.9, 0.95}, .weight_decay = 0.1});
  opt.set_lr(0, 0.5);  // as a scheduler would
  opt.set_options(0, {.eps = 1e-6});
  opt.add_param_group({b}, {.weight_decay = 0.0});
  CHECK(opt.options(1).lr == 0.003);  // PyTorch's optimizer.defaults["lr"]
  CHECK(opt.options(1).eps == 1e-8);
  CHECK(opt.options(1).weight_decay == 0.0);
  opt.add_param_group({c});  // no options: all the constructor's
  CHECK(opt.options(2).weight_decay == 0.1);
  CHECK(opt.defaults().lr == 0.003);
}

TEST_CASE("set_options changes the options it gives and keeps the others", "[optim][param_groups]") {
  tg::Tensor a = parameter(tg::ones({2})), b = parameter(tg::ones({2}));
  SGD opt({a}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4, .nesterov = true});
  opt.add_param_group({b}, {.lr = 0.01});
  opt.set_options(1, {.weight_decay = 0.0});  // param_groups[1]["weight_decay"] = 0.0
  CHECK(opt.options(1).weight_decay == 0.0);
  CHECK(opt.options(1).lr == 0.01);
  CHECK(opt.options(1).momentum == 0.9);
  CHECK(opt.options(1).nesterov);
  CHECK(opt.options(0).weight_decay == 1e-4);  // the other group is left alone
  // An invalid change is refused whole: nesterov needs dampening 0.
  REQUIRE_TG_ERROR(opt.set_options(1, {.lr = 0.2, .dampening = 0.5}),
                   Catch::Contains("SGD: nesterov momentum requires momentum > 0 and dampening = 0"));
  CHECK(opt.options(1).lr == 0.01);
  CHECK(opt.options(1).dampening == 0.0);
  REQUIRE_TG_ERROR(opt.set_options(2, {.lr = 0.2}), Catch::Contains("SGD: expected a parameter group index below 2, got 2"));
  // A group that would be invalid with the inherited options is refused, and not added.
  tg::Tensor c = parameter(tg::ones({1}));
  REQUIRE_TG_ERROR(opt.add_param_group({c}, {.momentum = 0.0}),
                   Catch::Contains("nesterov momentum requires momentum > 0"));
  CHECK(opt.param_group_count() == 2);
}

TEST_CASE("a whole options struct still sets every option of a group", "[optim][param_groups]") {
  tg::Tensor a = parameter(tg::ones({2})), b = parameter(tg::ones({2}));
  AdamW opt({a}, {.lr = 0.003, .betas = {0.9, 0.95}, .weight_decay = 0.1});
  AdamWOptions without_decay = opt.defaults();
  without_decay.weight_decay = 0.0;
  opt.add_param_group({b}, without_decay);
  CHECK(opt.options(1).lr == 0.003);
  CHECK(opt.options(1).weight_decay == 0.0);
  // A whole struct spelt out gives its defaults for every field it does not name.
  opt.set_options(1, AdamWOptions{.lr = 0.02});
  CHECK(opt.options(1).betas == std::array<double, 2>{0.9, 0.999});
  CHECK(opt.options(1).weight_decay == 1e-2);
  // The group options by name: AdamW::GroupOptions.
  const AdamW::GroupOptions no_decay{.weight_decay = 0.0};
  opt.set_options(1, no_decay);
  CHECK(opt.options(1).weight_decay == 0.0);
  CHECK(opt.options(1).lr == 0.02);
}
