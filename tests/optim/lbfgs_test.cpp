// tg::optim::LBFGS against torch.optim.LBFGS (tests/fixtures/lbfgs.txt, from
// make_lbfgs_fixtures.py): Rosenbrock and a small MLP in float64, with a fixed step and with the
// strong-Wolfe line search, step by step, state included; option validation; state dicts.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "optim_test_util.hpp"

namespace {

using tg::Tensor;
using tg::optim::LBFGS;
using tg::optim::LBFGSOptions;
using tg::optim_test::parameter;
using tg::optim_test::same_bits;

constexpr const char* kFile = "lbfgs.txt";

// PyTorch and tapegrad round differently here and there (dot products summed in another order, a
// fused multiply-add in PyTorch's add_): one step of 10-15 iterations from PyTorch's state agrees to
// round-off, amplified a little by the iterations; four such steps in a row amplify it further (the
// parameters and losses are compared then; the history's differences y = g - g_prev, and ro = 1/y·s
// from them, lose digits to cancellation).
constexpr double kOneStep = 1e-11;
constexpr double kTrajectory = 1e-6;  // 60 iterations of the MLP: about 1e-7 apart at the end

void require_close(const Tensor& actual, const Tensor& expected, const std::string& what, double tolerance) {
  INFO(what << "\nactual:   " << actual << "\nexpected: " << expected
            << "\nmax |diff| = " << tg::testing::max_abs_diff(actual, expected));
  REQUIRE(tg::testing::allclose(actual, expected.reshape(actual.shape()), tolerance, tolerance));
}

struct Problem {
  std::vector<std::string> names;  // the parameters, in the optimizer's order
  std::vector<Tensor> params;
  std::function<Tensor()> loss;
};

Problem make_problem(const std::string& case_name, const tg::testing::FixtureCase& f) {
  Problem problem;
  if (case_name.rfind("rosenbrock", 0) == 0) {
    problem.names = {"x"};
    problem.params = {parameter(f.at("x_0"))};
    const Tensor x = problem.params[0];
    problem.loss = [x] {
      const Tensor x0 = x.select(0, 0), x1 = x.select(0, 1);
      return (1.0 - x0).pow(2) + 100.0 * (x1 - x0.pow(2)).pow(2);
    };
  } else {
    problem.names = {"w1", "b1", "w2", "b2", "w3", "b3"};
    for (const std::string& name : problem.names) problem.params.push_back(parameter(f.at(name + "_0")));
    const std::vector<Tensor> p = problem.params;
    const Tensor inputs = f.at("inputs"), targets = f.at("targets");
    problem.loss = [p, inputs, targets] {
      namespace F = tg::nn::functional;
      Tensor h = F::linear(inputs, p[0], p[1]).tanh();
      h = F::linear(h, p[2], p[3]).tanh();
      const Tensor out = F::linear(h, p[4], p[5]);
      return (out - targets).pow(2).mean();
    };
  }
  return problem;
}

LBFGSOptions options_of(const tg::testing::FixtureCase& f) {
  LBFGSOptions options{.lr = f.scalar("opt_lr"),
                       .max_iter = static_cast<int64_t>(f.scalar("opt_max_iter")),
                       .history_size = static_cast<int64_t>(f.scalar("opt_history_size"))};
  if (f.scalar("opt_line_search") != 0) options.line_search_fn = "strong_wolfe";
  return options;
}

std::function<Tensor()> closure_of(LBFGS& opt, const Problem& problem) {
  return [&opt, problem] {
    opt.zero_grad();
    Tensor loss = problem.loss();
    loss.backward();
    return loss;
  };
}


const char* const kStateNames[] = {"func_evals", "n_iter",         "d",         "t",        "H_diag",
                                   "prev_flat_grad", "prev_loss", "old_dirs", "old_stps", "ro"};

// The fixture's state after `step` as a state dict of `opt`'s layout (the state of parameter 0).
tg::optim::OptimizerStateDict pytorch_state(const LBFGS& opt, const tg::testing::FixtureCase& f, int step) {
  tg::optim::OptimizerStateDict state = opt.state_dict();
  for (const char* name : kStateNames)
    state.state[0][name] = f.at(std::string("state_") + name + "_" + std::to_string(step));
  state.step_count = step;
  return state;
}

// One step, its loss, parameters and (with_state) state against the fixture's.
void require_step(LBFGS& opt, const Problem& problem, const tg::testing::FixtureCase& f, int step, double tolerance,
                  bool with_state) {
  const std::string suffix = "_" + std::to_string(step);
  const Tensor loss = opt.step(closure_of(opt, problem));
  require_close(loss.detach(), f.at("loss" + suffix), "loss" + suffix, tolerance);
  for (size_t i = 0; i < problem.params.size(); ++i)
    require_close(problem.params[i].detach(), f.at(problem.names[i] + suffix), problem.names[i] + suffix, tolerance);
  if (!with_state) return;
  const tg::optim::ParamState& state = opt.state(0);
  for (const char* name : kStateNames) {
    REQUIRE(state.count(name) == 1);
    require_close(state.at(name).to(tg::kFloat64), f.at(std::string("state_") + name + suffix), name + suffix,
                  tolerance);
  }
  // The counts are exact.
  CHECK(state.at("func_evals").item<double>() == f.scalar("state_func_evals" + suffix));
  CHECK(state.at("n_iter").item<double>() == f.scalar("state_n_iter" + suffix));
}

}  // namespace

TEST_CASE("LBFGS takes torch.optim.LBFGS's step from each of its states", "[optim][lbfgs]") {
  const std::string case_name = GENERATE("rosenbrock_fixed", "rosenbrock_wolfe", "mlp_fixed", "mlp_wolfe");
  INFO("case " << case_name);
  const tg::testing::FixtureCase& f = tg::testing::fixture(kFile, case_name);
  for (int step = 1; f.has("loss_" + std::to_string(step)); ++step) {
    INFO("step " << step);
    // PyTorch's parameters and state before this step (none before the first).
    Problem problem = make_problem(case_name, f);
    for (size_t i = 0; i < problem.params.size(); ++i)
      problem.params[i].detach().copy_(f.at(problem.names[i] + "_" + std::to_string(step - 1)));
    LBFGS opt(problem.params, options_of(f));
    if (step > 1) opt.load_state_dict(pytorch_state(opt, f, step - 1));
    require_step(opt, problem, f, step, kOneStep, true);
  }
}

TEST_CASE("LBFGS runs torch.optim.LBFGS's whole trajectory", "[optim][lbfgs]") {
  const std::string case_name = GENERATE("rosenbrock_fixed", "rosenbrock_wolfe", "mlp_fixed", "mlp_wolfe");
  INFO("case " << case_name);
  const tg::testing::FixtureCase& f = tg::testing::fixture(kFile, case_name);
  Problem problem = make_problem(case_name, f);
  LBFGS opt(problem.params, options_of(f));
  for (int step = 1; f.has("loss_" + std::to_string(step)); ++step) require_step(opt, problem, f, step, kTrajectory, false);
  CHECK(opt.step_count() == 4);
}

TEST_CASE("LBFGS resolves max_eval as PyTorch and reports its options by PyTorch's names", "[optim][lbfgs]") {
  Tensor w = tg::zeros({3}, tg::kFloat64).requires_grad_();
  LBFGS opt({w}, {.max_iter = 10});
  CHECK(*opt.options().max_eval == 12);  // 10 * 5 / 4, rounded down as Python's //
  LBFGS wolfe({w.detach().clone().requires_grad_()}, {.max_eval = 3, .line_search_fn = "strong_wolfe"});
  const tg::optim::OptionValues options = wolfe.state_dict().param_groups.at(0).options;
  CHECK(std::get<double>(options.at("lr")) == 1);
  CHECK(std::get<double>(options.at("max_iter")) == 20);
  CHECK(std::get<double>(options.at("max_eval")) == 3);
  CHECK(std::get<double>(options.at("tolerance_grad")) == 1e-7);
  CHECK(std::get<double>(options.at("tolerance_change")) == 1e-9);
  CHECK(std::get<double>(options.at("history_size")) == 100);
  CHECK(std::get<std::string>(options.at("line_search_fn")) == "strong_wolfe");
  CHECK(std::get<std::string>(opt.state_dict().param_groups.at(0).options.at("line_search_fn")).empty());
}

TEST_CASE("LBFGS on a quadratic: the first iteration's step is min(1, 1/sum|g|) lr along -g", "[optim][lbfgs]") {
  // f(w) = sum(w^2) at w = (1, -2): g = (2, -4), sum|g| = 6, so t = 1/6 and w - g/6 = (2/3, -4/3).
  Tensor w = tg::tensor(std::vector<double>{1, -2}, {2}, tg::kFloat64).requires_grad_();
  LBFGS opt({w}, {.max_iter = 1});
  const Tensor loss = opt.step([&] {
    opt.zero_grad();
    Tensor l = (w * w).sum();
    l.backward();
    return l;
  });
  CHECK(loss.item<double>() == 5);
  const std::vector<double> got = w.detach().to_vector<double>();
  CHECK(got[0] == Approx(2.0 / 3).epsilon(1e-15));
  CHECK(got[1] == Approx(-4.0 / 3).epsilon(1e-15));
  CHECK(opt.state(0).at("func_evals").item<double>() == 1);  // the last iteration does not re-evaluate
  // A gradient already below tolerance_grad: the step evaluates once and stops there.
  Tensor v = tg::zeros({2}, tg::kFloat64).requires_grad_();
  LBFGS still({v});
  still.step([&] {
    still.zero_grad();
    Tensor l = (v * v).sum();
    l.backward();
    return l;
  });
  CHECK(still.state(0).at("n_iter").item<double>() == 0);
  CHECK(still.state(0).at("func_evals").item<double>() == 1);
}

TEST_CASE("LBFGS treats a parameter without a gradient as a zero gradient", "[optim][lbfgs]") {
  Tensor used = tg::tensor(std::vector<double>{1, -2}, {2}, tg::kFloat64).requires_grad_();
  Tensor unused = tg::tensor(std::vector<double>{3}, {1}, tg::kFloat64).requires_grad_();
  LBFGS opt({used, unused}, {.max_iter = 5});
  opt.step([&] {
    opt.zero_grad();
    Tensor l = (used * used).sum();
    l.backward();
    return l;
  });
  CHECK(unused.item<double>() == 3);
  CHECK(std::abs(used.detach().to_vector<double>()[0]) < 1e-6);
}

TEST_CASE("LBFGS rejects bad options, mixed dtypes and a missing or bad closure", "[optim][lbfgs]") {
  Tensor w = tg::zeros({2}, tg::kFloat64).requires_grad_();
  using Catch::Matchers::Contains;
  REQUIRE_TG_ERROR(LBFGS({w}, {.lr = -1}), Contains("lr >= 0"));
  REQUIRE_TG_ERROR(LBFGS({w}, {.lr = NAN}), Contains("lr >= 0"));
  REQUIRE_TG_ERROR(LBFGS({w}, {.max_iter = 0}), Contains("max_iter >= 1, got 0"));
  REQUIRE_TG_ERROR(LBFGS({w}, {.max_eval = 0}), Contains("max_eval >= 1, got 0"));
  REQUIRE_TG_ERROR(LBFGS({w}, {.tolerance_grad = -1e-3}), Contains("tolerance_grad"));
  REQUIRE_TG_ERROR(LBFGS({w}, {.tolerance_change = INFINITY}), Contains("tolerance_change"));
  REQUIRE_TG_ERROR(LBFGS({w}, {.history_size = 0}), Contains("history_size >= 1, got 0"));
  REQUIRE_TG_ERROR(LBFGS({w}, {.line_search_fn = "backtracking"}), Contains("\"backtracking\""));
  Tensor f32 = tg::zeros({2}, tg::kFloat32).requires_grad_();
  REQUIRE_TG_ERROR(LBFGS({w, f32}), Contains("expected every parameter to be float64"));

  LBFGS opt({w});
  REQUIRE_TG_ERROR(opt.step(), Contains("needs a closure"));
  tg::optim::Optimizer& base = opt;
  REQUIRE_TG_ERROR(base.step(), Contains("needs a closure"));
  REQUIRE_TG_ERROR(opt.step(nullptr), Contains("expected a closure"));
  REQUIRE_TG_ERROR(opt.step([&] { return w * 2.0; }), Contains("one-element tensor, got [2]"));
  REQUIRE_TG_ERROR(opt.set_options({.history_size = -3}), Contains("history_size"));
}

TEST_CASE("LBFGS's state dict resumes the run bitwise and is validated", "[optim][lbfgs]") {
  const tg::testing::FixtureCase& f = tg::testing::fixture(kFile, "mlp_wolfe");
  Problem first = make_problem("mlp_wolfe", f);
  LBFGS opt(first.params, options_of(f));
  const auto closure = closure_of(opt, first);
  opt.step(closure);
  opt.step(closure);

  Problem second = make_problem("mlp_wolfe", f);
  for (size_t i = 0; i < second.params.size(); ++i) second.params[i].detach().copy_(first.params[i].detach());
  LBFGS resumed(second.params, {.history_size = 7});
  resumed.load_state_dict(opt.state_dict());
  CHECK(resumed.options().history_size == 4);
  const auto resumed_closure = closure_of(resumed, second);
  for (int step = 0; step < 2; ++step) {
    opt.step(closure);
    resumed.step(resumed_closure);
  }
  for (size_t i = 0; i < first.params.size(); ++i) CHECK(same_bits(first.params[i].detach(), second.params[i].detach()));

  using Catch::Matchers::Contains;
  tg::optim::OptimizerStateDict bad = opt.state_dict();
  bad.state.at(0).at("d") = tg::zeros({3}, tg::kFloat64);
  REQUIRE_TG_ERROR(resumed.load_state_dict(bad), Contains("expected 'd' of shape [97]"));
  bad = opt.state_dict();
  bad.state.at(0).at("old_dirs") = tg::zeros({2, 5}, tg::kFloat64);
  REQUIRE_TG_ERROR(resumed.load_state_dict(bad), Contains("'old_dirs' of shape [k, 97]"));
  bad = opt.state_dict();
  bad.state.at(0).at("n_iter") = tg::scalar_tensor(2.5, tg::kFloat64);
  REQUIRE_TG_ERROR(resumed.load_state_dict(bad), Contains("n_iter"));
  bad = opt.state_dict();
  bad.param_groups.at(0).options.at("line_search_fn") = std::string("armijo");
  REQUIRE_TG_ERROR(resumed.load_state_dict(bad), Contains("\"armijo\""));
  bad = opt.state_dict();
  bad.param_groups.at(0).options.at("max_iter") = 2.5;
  REQUIRE_TG_ERROR(resumed.load_state_dict(bad), Contains("max_iter"));
}

TEST_CASE("LBFGS's state and options go through a checkpoint", "[optim][lbfgs]") {
  // line_search_fn is the one string option of any optimizer: the checkpoint's JSON must keep it.
  const auto train = [](tg::nn::Linear& model, LBFGS& opt, int steps) {
    const Tensor x = tg::tensor(std::vector<double>{1, 2, -1, 0.5, 0, 3}, {3, 2}, tg::kFloat64);
    const Tensor y = tg::tensor(std::vector<double>{1, -1, 2}, {3, 1}, tg::kFloat64);
    for (int step = 0; step < steps; ++step)
      opt.step([&] {
        opt.zero_grad();
        Tensor loss = (model(x) - y).pow(2).mean();
        loss.backward();
        return loss;
      });
  };
  tg::manual_seed(0);
  tg::nn::Linear model(2, 1);
  model.to(tg::kFloat64);
  LBFGS opt(model.parameters(), {.max_iter = 3, .history_size = 2, .line_search_fn = "strong_wolfe"});
  train(model, opt, 2);
  const std::string path = (std::filesystem::temp_directory_path() / "tg_lbfgs_checkpoint.safetensors").string();
  tg::save(model, opt, path);

  tg::nn::Linear restored(2, 1);
  restored.to(tg::kFloat64);
  LBFGS restored_opt(restored.parameters());
  tg::load(restored, restored_opt, path);
  std::filesystem::remove(path);
  CHECK(restored_opt.options().line_search_fn == std::optional<std::string>("strong_wolfe"));
  CHECK(restored_opt.options().history_size == 2);
  for (const char* name : kStateNames) CHECK(same_bits(restored_opt.state(0).at(name), opt.state(0).at(name)));
  train(model, opt, 1);
  train(restored, restored_opt, 1);
  CHECK(same_bits(restored.weight.detach(), model.weight.detach()));
}
