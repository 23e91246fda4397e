// A whole training run against PyTorch's, step by step: the same seed gives the same initial
// weights (Linear's reset), the same Dropout masks at every step, and AdamW with OneCycleLR (which
// also cycles β₁) then follows the same trajectory. The generating script,
// tests/fixtures/make_training_run_fixtures.py, says exactly what PyTorch ran.
#include <cmath>
#include <string>

#include <catch2/catch.hpp>

#include <tapegrad/tapegrad.hpp>

#include "support/fixtures.hpp"

namespace nn = tg::nn;

TEST_CASE("Linear-GELU-Dropout-LayerNorm-Linear with AdamW and OneCycleLR follows PyTorch for 20 steps",
          "[training_run][fixture]") {
  const bool amsgrad = GENERATE(false, true);
  const std::string approximate = GENERATE(as<std::string>{}, "none", "tanh");
  const std::string name = std::string("adamw") + (amsgrad ? "_amsgrad" : "") + "_gelu_" + approximate;
  CAPTURE(name);
  const tg::testing::FixtureCase& c = tg::testing::fixture("training_run.txt", name);

  // As torch: the modules are built (and their weights drawn) in float32, then converted. One
  // statement per Linear: C++ leaves the order of a call's arguments to the compiler, so
  // Sequential(Linear(8, 32), ..., Linear(32, 4)) may draw the second layer's weights first.
  tg::manual_seed(0);
  nn::Linear first(8, 32);
  nn::Linear last(32, 4);
  nn::Sequential model(first, nn::GELU(approximate), nn::Dropout(0.1), nn::LayerNorm({32}), last);
  model.to(tg::kFloat64);
  const tg::Tensor x = c.at("x");
  std::vector<double> target_values;
  for (int64_t t : c.ints("targets")) target_values.push_back(static_cast<double>(t));
  const tg::Tensor targets = tg::tensor(target_values, {}, tg::kInt64);
  tg::optim::AdamW optimizer(model.parameters(), {.lr = 1e-2, .weight_decay = 0.01, .amsgrad = amsgrad});
  tg::optim::OneCycleLR scheduler(optimizer, /*max_lr=*/0.05, /*total_steps=*/20);

  const std::vector<double> losses = tg::testing::values(c.at("losses"));
  const std::vector<double> lrs = tg::testing::values(c.at("lrs"));
  REQUIRE(losses.size() == 20);
  for (size_t step = 0; step < losses.size(); ++step) {
    CAPTURE(step);
    optimizer.zero_grad();
    tg::Tensor loss = nn::cross_entropy(model(x), targets, {.label_smoothing = 0.1});
    loss.backward();
    optimizer.step();
    CHECK(optimizer.lr() == Approx(lrs[step]).epsilon(1e-12));
    scheduler.step();
    // float64 throughout: the two runs differ only by rounding, which 20 steps do not amplify.
    REQUIRE(std::fabs(loss.item() - losses[step]) <= 1e-10 * std::fabs(losses[step]));
  }
}
