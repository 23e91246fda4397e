// model.to(kFloat64) after the optimizer was built: the optimizer keeps training the same
// parameters (PyTorch swaps param.data and keeps the objects), and its state made in float32
// follows the parameters to float64 at the next step.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.hpp>

#include "optim_test_util.hpp"

using tg::Tensor;
using tg::optim_test::same_bits;

namespace {

// A linear regression whose exact answer is w = [1, -2, 0.5], b = 0.3, on fixed inputs.
struct Regression {
  Tensor x, y;
  Regression() {
    tg::manual_seed(11);
    x = tg::randn({16, 3});
    y = tg::matmul(x, tg::tensor({1.0, -2.0, 0.5}, {3, 1})) + 0.3;
  }
  double loss_step(tg::nn::Module& model, tg::optim::Optimizer& opt) const {
    const tg::DType dtype = model.parameters()[0].dtype();
    opt.zero_grad();
    const Tensor loss = tg::nn::mse_loss(model(x.to(dtype)), y.to(dtype));
    loss.backward();
    opt.step();
    return loss.item();
  }
};

std::unique_ptr<tg::optim::Optimizer> make_optimizer(const std::string& which, tg::nn::Module& model) {
  if (which == "SGD")
    return std::make_unique<tg::optim::SGD>(model.parameters(), tg::optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  return std::make_unique<tg::optim::AdamW>(model.parameters(), tg::optim::AdamWOptions{.lr = 0.05, .weight_decay = 0.01});
}

}  // namespace

TEST_CASE("an optimizer built before model.to(kFloat64) trains the converted parameters",
          "[optim][module_to]") {
  const std::string which = GENERATE("SGD", "AdamW");
  CAPTURE(which);
  const Regression data;
  tg::manual_seed(12);
  tg::nn::Linear model(3, 1);
  auto opt = make_optimizer(which, model);
  for (int step = 0; step < 3; ++step) data.loss_step(model, *opt);
  REQUIRE(opt->state(0).size() >= 1);  // state exists, in float32

  model.to(tg::kFloat64);
  // The optimizer's handles are the model's parameters, now float64.
  REQUIRE(opt->parameters()[0].is_same(model.weight));
  REQUIRE(opt->parameters()[1].is_same(model.bias));
  REQUIRE(opt->parameters()[0].dtype() == tg::kFloat64);

  double first = 0, last = 0;
  for (int step = 0; step < 50; ++step) {
    const double loss = data.loss_step(model, *opt);
    if (step == 0) first = loss;
    last = loss;
  }
  CAPTURE(first, last);
  REQUIRE(last < 0.1 * first);  // trains (it stayed at its first value when the optimizer held stale tensors)
  for (size_t i = 0; i < opt->parameters().size(); ++i)
    for (const auto& [name, state] : opt->state(i)) {
      INFO(name);
      CHECK(state.dtype() == tg::kFloat64);  // exp_avg, momentum_buffer converted; Adam's step was float64
    }
}

TEST_CASE("after model.to(), the step equals one from the state converted by load_state_dict",
          "[optim][module_to]") {
  // The same float32 start twice. A: to(kFloat64) under the live optimizer. B: the optimizer's state
  // saved, a new optimizer on the float64 model loading it (load_state_dict converts state to the
  // parameters' dtype). The next steps must agree bit for bit.
  const std::string which = GENERATE("SGD", "AdamW");
  CAPTURE(which);
  const Regression data;
  tg::manual_seed(13);
  tg::nn::Linear a(3, 1);
  tg::nn::Linear b(3, 1);
  b = a;  // copies a's values into b's own parameters
  auto opt_a = make_optimizer(which, a);
  auto opt_b = make_optimizer(which, b);
  for (int step = 0; step < 3; ++step) {
    data.loss_step(a, *opt_a);
    data.loss_step(b, *opt_b);
  }
  a.to(tg::kFloat64);
  const tg::optim::OptimizerStateDict saved = opt_b->state_dict();
  b.to(tg::kFloat64);
  auto fresh_b = make_optimizer(which, b);
  fresh_b->load_state_dict(saved);
  for (int step = 0; step < 5; ++step) {
    data.loss_step(a, *opt_a);
    data.loss_step(b, *fresh_b);
  }
  CHECK(same_bits(a.weight.detach(), b.weight.detach()));
  CHECK(same_bits(a.bias.detach(), b.bias.detach()));
}

TEST_CASE("SGD's first step after to(kFloat64) uses the float32 momentum, converted", "[optim][module_to]") {
  // Hand-derived: buf' = momentum · buf + g, p' = p − lr · buf' in float64 with buf's float32 values.
  tg::nn::Linear model(2, 1);
  {
    tg::NoGradGuard no_grad;
    model.weight.copy_(tg::tensor({0.5, -1.0}, {1, 2}));
    model.bias.fill_(0.25);
  }
  tg::optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9});
  const Tensor x = tg::tensor({1.0, 2.0, -1.0, 0.5}, {2, 2});
  const auto step = [&] {
    opt.zero_grad();
    model(x.to(model.weight.dtype())).pow(2.0).sum().backward();
    opt.step();
  };
  step();
  const std::vector<float> buffer = opt.momentum_buffers()[0].to_vector<float>();
  model.to(tg::kFloat64);
  const std::vector<double> w = model.weight.to_vector<double>();
  opt.zero_grad();
  model(x.to(tg::kFloat64)).pow(2.0).sum().backward();
  const std::vector<double> g = model.weight.grad().to_vector<double>();
  opt.step();
  const std::vector<double> after = model.weight.to_vector<double>();
  for (size_t i = 0; i < 2; ++i) {
    CAPTURE(i, w[i], g[i], buffer[i]);
    CHECK(after[i] == Approx(w[i] - 0.1 * (0.9 * static_cast<double>(buffer[i]) + g[i])).epsilon(1e-14));
  }
}
