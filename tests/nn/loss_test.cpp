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
  // As in PyTorch, a target of the input's shape holds class probabilities, which must be floats.
  REQUIRE_THROWS_WITH(tg::nn::cross_entropy(tg::randn({3}), {0, 1, 2}),
                      Catch::Contains("cross_entropy") && Catch::Contains("probabilities") && Catch::Contains("[3]"));
}

TEST_CASE("cross_entropy with an int64 target tensor matches PyTorch and the vector overload", "[loss][cross_entropy][dtype]") {
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const tg::testing::FixtureCase& c = tg::testing::fixture("losses.txt", "cross_entropy_mean_5x4" + suffix);
  const std::vector<int64_t>& classes = c.ints("target");
  Tensor targets = tg::empty({static_cast<int64_t>(classes.size())}, tg::kInt64);
  std::copy(classes.begin(), classes.end(), targets.mutable_data<int64_t>());

  Tensor logits = leaf(c.at("logits"));
  Tensor loss = tg::nn::cross_entropy(logits, targets);
  TG_REQUIRE_CLOSE(loss, c.at("loss"), fixture_atol(suffix));
  // Overwriting the targets after the forward pass changes nothing: backward uses the classes
  // that were checked (PyTorch would refuse the backward; the answer here is the forward's).
  targets.fill_(0.0);
  loss.backward(tg::scalar_tensor(c.scalar("dloss"), logits.dtype()));
  TG_REQUIRE_CLOSE(logits.grad(), c.at("dlogits"), fixture_atol(suffix));

  Tensor vector_logits = leaf(c.at("logits"));
  Tensor vector_loss = F::cross_entropy(vector_logits, classes);
  vector_loss.backward(tg::scalar_tensor(c.scalar("dloss"), logits.dtype()));
  REQUIRE(bytes(vector_loss) == bytes(loss));
  REQUIRE(bytes(vector_logits.grad()) == bytes(logits.grad()));
}

TEST_CASE("cross_entropy checks its int64 targets: dtype, shape and range", "[loss][cross_entropy][dtype][errors]") {
  const Tensor logits = tg::randn({3, 4});
  REQUIRE_THROWS_WITH(tg::nn::cross_entropy(logits, tg::tensor({0, 5, 1}, {}, tg::kInt64)),
                      Catch::Contains("cross_entropy") && Catch::Contains("target 5") && Catch::Contains("index 1") &&
                          Catch::Contains("[0, 4)"));
  REQUIRE_THROWS_WITH(tg::nn::cross_entropy(logits, tg::tensor({0, 1, -3}, {}, tg::kInt64)),
                      Catch::Contains("target -3") && Catch::Contains("index 2"));
  REQUIRE_THROWS_WITH(tg::nn::cross_entropy(logits, tg::tensor({0, 1, 2})),
                      Catch::Contains("cross_entropy") && Catch::Contains("int64") && Catch::Contains("float32"));
  REQUIRE_THROWS_WITH(tg::nn::cross_entropy(logits, tg::tensor({0, 1, 2}, {3, 1}, tg::kInt64)),
                      Catch::Contains("cross_entropy") && Catch::Contains("[3]") && Catch::Contains("[3, 1]"));
  REQUIRE_THROWS_WITH(tg::nn::cross_entropy(logits, Tensor()), Catch::Contains("cross_entropy"));
  // A float target is the probability form: the message names the shape it needs, and the other form's.
  REQUIRE_THROWS_WITH(tg::nn::cross_entropy(logits, tg::rand({3, 5})),
                      Catch::Contains("cross_entropy: a float32 target holds class probabilities") &&
                          Catch::Contains("input's shape [3, 4], got target of shape [3, 5]") &&
                          Catch::Contains("int64 target of shape [3]"));
  REQUIRE_THROWS_WITH(tg::nn::cross_entropy(logits, tg::rand({4}, tg::kFloat64)),
                      Catch::Contains("float64 target") && Catch::Contains("[3, 4]") && Catch::Contains("shape [4]"));
  // nll_loss has no probability form: int64 classes, and the shapes named.
  REQUIRE_THROWS_WITH(tg::nn::nll_loss(logits, tg::rand({3, 5})),
                      Catch::Contains("nll_loss: expected int64 class targets of shape [3] for input of shape [3, 4], "
                                      "got float32 of shape [3, 5]"));
}

TEST_CASE("nn kernels refuse int64 and bool inputs, naming the op", "[loss][dtype][errors]") {
  const tg::DType dtype = GENERATE(tg::kInt64, tg::kBool);
  const Tensor x = tg::ones({2, 3}, dtype);
  REQUIRE_THROWS_WITH(F::linear(x, tg::ones({4, 3}, dtype), {}),
                      Catch::StartsWith("linear: not implemented for " + std::string(tg::name(dtype))));
  REQUIRE_THROWS_WITH(F::layer_norm(x, {3}), Catch::StartsWith("layer_norm: not implemented"));
  REQUIRE_THROWS_WITH(tg::nn::mse_loss(x, x), Catch::StartsWith("mse_loss: not implemented"));
  REQUIRE_THROWS_WITH(tg::nn::cross_entropy(x, {0, 1}), Catch::StartsWith("cross_entropy: not implemented"));
  REQUIRE_THROWS_WITH(F::relu(x), Catch::StartsWith("relu: not implemented"));
}
