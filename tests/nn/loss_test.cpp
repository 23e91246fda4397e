// mse_loss and cross_entropy: PyTorch fixtures, gradcheck, hand-derived values and errors.
#include <cmath>
#include <string>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

TEST_CASE("mse_loss matches PyTorch's loss and gradient", "[loss][mse][fixture]") {
  const std::string base = GENERATE(as<std::string>{}, "mse_mean_4x3", "mse_mean_4x3_dloss2p5");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(base, suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("losses.txt", base + suffix);
  const tg::DType dtype = fixture_dtype(suffix);
  Tensor input = leaf(c.at("input"));
  Tensor loss = tg::nn::mse_loss(input, c.at("target"));
  REQUIRE(loss.dim() == 0);
  REQUIRE(std::string(loss.grad_fn_name()) == "MseLossBackward");
  TG_REQUIRE_CLOSE(loss, c.at("loss"), fixture_atol(suffix));
  loss.backward(tg::scalar_tensor(c.scalar("dloss"), dtype));
  TG_REQUIRE_CLOSE(input.grad(), c.at("dinput"), fixture_atol(suffix));
}

TEST_CASE("cross_entropy matches PyTorch's loss and gradient", "[loss][cross_entropy][fixture]") {
  const std::string base = GENERATE(as<std::string>{}, "cross_entropy_mean_5x4", "cross_entropy_mean_5x4_large");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(base, suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("losses.txt", base + suffix);
  const tg::DType dtype = fixture_dtype(suffix);
  Tensor logits = leaf(c.at("logits"));
  Tensor loss = tg::nn::cross_entropy(logits, c.ints("target"));
  REQUIRE(std::string(loss.grad_fn_name()) == "CrossEntropyBackward");
  // The "large" case has logits of ~1e3: float32 itself only resolves the loss to ~1e-4 there.
  const bool large_f32 = base.ends_with("large") && suffix == "_f32";
  TG_REQUIRE_CLOSE(loss, c.at("loss"), large_f32 ? 1e-4 : fixture_atol(suffix));
  loss.backward(tg::scalar_tensor(c.scalar("dloss"), dtype));
  TG_REQUIRE_CLOSE(logits.grad(), c.at("dlogits"), fixture_atol(suffix));
}

TEST_CASE("losses by hand", "[loss]") {
  // mse: ((1-0)² + (2-4)²) / 2 = 2.5
  REQUIRE(tg::nn::mse_loss(tg::tensor({1, 2}), tg::tensor({0, 4})).item() == 2.5);
  // Uniform logits: loss = log C, whatever the target.
  const double loss = tg::nn::cross_entropy(tg::zeros({2, 4}, tg::kFloat64), {3, 0}).item();
  REQUIRE(std::fabs(loss - std::log(4.0)) < 1e-15);
  // Logits of 1e4 neither overflow nor lose the answer: softmax(1e4, 1e4 − 1) exactly.
  const double big = tg::nn::cross_entropy(tg::tensor({1e4, 1e4 - 1}, {1, 2}, tg::kFloat64), {1}).item();
  REQUIRE(std::fabs(big - (1.0 + std::log1p(std::exp(-1.0)))) < 1e-12);
}

TEST_CASE("losses pass gradcheck in float64", "[loss][gradcheck]") {
  tg::manual_seed(31);
  SECTION("mse_loss, with respect to input and target") {
    TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return tg::nn::mse_loss(in[0], in[1]); },
                         (std::vector<Tensor>{randn_leaf({4, 3}, tg::kFloat64), randn_leaf({4, 3}, tg::kFloat64)}));
  }
  SECTION("cross_entropy") {
    const std::vector<int64_t> targets{0, 2, 1, 2, 3};
    TG_REQUIRE_GRADCHECK(
        [&](const std::vector<Tensor>& in) { return tg::nn::cross_entropy(in[0] * 3.0, targets); },
        std::vector<Tensor>{randn_leaf({5, 4}, tg::kFloat64)});
  }
}

TEST_CASE("losses reject invalid arguments, naming them", "[loss][errors]") {
  REQUIRE_THROWS_WITH(tg::nn::mse_loss(tg::randn({4, 3}), tg::randn({3, 4})),
                      Catch::Contains("mse_loss") && Catch::Contains("[4, 3]") && Catch::Contains("[3, 4]"));
  REQUIRE_THROWS_WITH(tg::nn::mse_loss(tg::randn({4}), tg::randn({4}, tg::kFloat64)),
                      Catch::Contains("mse_loss") && Catch::Contains("float64"));
  const Tensor logits = tg::randn({3, 4});
  REQUIRE_THROWS_WITH(tg::nn::cross_entropy(logits, {0, 4, 1}),
                      Catch::Contains("cross_entropy") && Catch::Contains("target 4") && Catch::Contains("index 1"));
  REQUIRE_THROWS_WITH(tg::nn::cross_entropy(logits, {0, -1, 1}),
                      Catch::Contains("cross_entropy") && Catch::Contains("target -1"));
  REQUIRE_THROWS_WITH(tg::nn::cross_entropy(logits, {0, 1}),
                      Catch::Contains("cross_entropy") && Catch::Contains("[3, 4]") && Catch::Contains("2"));
  REQUIRE_THROWS_WITH(tg::nn::cross_entropy(tg::randn({3}), {0, 1, 2}),
                      Catch::Contains("cross_entropy") && Catch::Contains("[N, C]") && Catch::Contains("[3]"));
}
