// Linear: PyTorch fixtures, init, gradcheck, errors and thread-count determinism.
#include <cmath>
#include <string>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

TEST_CASE("linear matches PyTorch's output and gradients", "[linear][fixture]") {
  const std::string base = GENERATE(as<std::string>{}, "linear_4x5_w6x5_bias", "linear_4x5_w6x5_nobias",
                                    "linear_2x3x5_w6x5_bias", "linear_2x3x5_w6x5_nobias");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(base, suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("linear.txt", base + suffix);
  const double atol = fixture_atol(suffix);
  const bool has_bias = c.has("bias");
  Tensor x = leaf(c.at("x")), weight = leaf(c.at("weight"));
  Tensor bias = has_bias ? leaf(c.at("bias")) : Tensor();
  Tensor y = F::linear(x, weight, bias);
  REQUIRE(std::string(y.grad_fn_name()) == "LinearBackward");
  TG_REQUIRE_CLOSE(y, c.at("y"), atol);
  y.backward(c.at("dy"));
  TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), atol);
  TG_REQUIRE_CLOSE(weight.grad(), c.at("dweight"), atol);
  if (has_bias) TG_REQUIRE_CLOSE(bias.grad(), c.at("dbias"), atol);
}

TEST_CASE("Linear then ReLU reproduces the seed-002 notebook values", "[linear][fixture]") {
  const tg::testing::FixtureCase& c = tg::testing::fixture("linear.txt", "seed002_f32");
  tg::nn::Linear lin(5, 6);
  lin.weight = c.at("weight");
  lin.bias = c.at("bias");
  tg::nn::ReLU relu;
  TG_REQUIRE_CLOSE(relu(lin(c.at("x"))), c.at("y"), 1e-5);
}

TEST_CASE("Linear module: shapes, PyTorch's default init, no-bias variant", "[linear][module]") {
  tg::manual_seed(21);
  tg::nn::Linear lin(5, 6);
  REQUIRE(lin.in_features == 5);
  REQUIRE(lin.out_features == 6);
  REQUIRE(lin.weight.shape() == Shape{6, 5});
  REQUIRE(lin.bias.shape() == Shape{6});
  REQUIRE(lin.weight.requires_grad());
  REQUIRE(lin.weight.is_leaf());
  REQUIRE(lin.weight.dtype() == tg::kFloat32);
  const double bound = 1.0 / std::sqrt(5.0);
  for (const Tensor& p : lin.parameters()) {
    const std::vector<float> values = p.to_vector<float>();
    double lo = bound, hi = -bound;
    for (float v : values) lo = std::min<double>(lo, v), hi = std::max<double>(hi, v);
    REQUIRE(lo >= -bound);
    REQUIRE(hi <= bound);
    REQUIRE(hi > lo);  // really random, not constant
  }
  // The same seed gives the same parameters.
  tg::manual_seed(21);
  tg::nn::Linear again(5, 6);
  REQUIRE(bytes(again.weight) == bytes(lin.weight));
  REQUIRE(bytes(again.bias) == bytes(lin.bias));

  tg::nn::Linear no_bias(5, 6, {.bias = false});
  REQUIRE(!no_bias.bias.defined());
  const auto named = no_bias.named_parameters();
  REQUIRE(named.size() == 1);
  REQUIRE(named[0].first == "weight");

  // Any leading dims: [2, 3, 5] -> [2, 3, 6], and a 1-D input [5] -> [6].
  REQUIRE(lin(tg::randn({2, 3, 5})).shape() == Shape{2, 3, 6});
  REQUIRE(lin(tg::randn({5})).shape() == Shape{6});
  REQUIRE(std::string(lin(tg::randn({4, 5})).grad_fn_name()) == "LinearBackward");
}

TEST_CASE("linear passes gradcheck in float64", "[linear][gradcheck]") {
  tg::manual_seed(22);
  const Shape x_shape = GENERATE(Shape{4, 5}, Shape{2, 3, 5});
  const bool has_bias = GENERATE(true, false);
  CAPTURE(x_shape, has_bias);
  std::vector<Tensor> inputs{randn_leaf(x_shape, tg::kFloat64), randn_leaf({6, 5}, tg::kFloat64)};
  if (has_bias) inputs.push_back(randn_leaf({6}, tg::kFloat64));
  TG_REQUIRE_GRADCHECK(
      [](const std::vector<Tensor>& in) { return F::linear(in[0], in[1], in.size() == 3 ? in[2] : Tensor()); },
      inputs);
}

TEST_CASE("the Linear module passes gradcheck with respect to its input", "[linear][gradcheck]") {
  tg::manual_seed(23);
  tg::nn::Linear lin(5, 3);
  lin.to(tg::kFloat64);
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return lin(in[0]); },
                       std::vector<Tensor>{randn_leaf({2, 4, 5}, tg::kFloat64)});
}

TEST_CASE("linear rejects mismatched shapes and dtypes, naming them", "[linear][errors]") {
  const Tensor w = tg::randn({6, 5});
  REQUIRE_THROWS_WITH(F::linear(tg::randn({4, 4}), w),
                      Catch::Contains("linear") && Catch::Contains("[4, 4]") && Catch::Contains("[6, 5]"));
  REQUIRE_THROWS_WITH(F::linear(tg::randn({4, 5}), w, tg::randn({5})),
                      Catch::Contains("linear") && Catch::Contains("bias") && Catch::Contains("[5]"));
  REQUIRE_THROWS_WITH(F::linear(tg::randn({4, 5}), tg::randn({30})),
                      Catch::Contains("linear") && Catch::Contains("[30]"));
  REQUIRE_THROWS_WITH(F::linear(tg::randn({4, 5}, tg::kFloat64), w),
                      Catch::Contains("linear") && Catch::Contains("float64") && Catch::Contains("float32"));
  tg::nn::Linear lin(5, 6);
  REQUIRE_THROWS_WITH(lin(tg::randn({2, 3})), Catch::Contains("linear") && Catch::Contains("[2, 3]"));
}

TEST_CASE("linear forward and backward are bitwise identical for 1, 2, 3 and 8 threads", "[linear][determinism]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  CAPTURE(dtype);
  tg::manual_seed(24);
  // [512, 256] x [256, 128]ᵀ: large enough for several row blocks in every GEMM and in Σ dy.
  const Tensor x_values = tg::randn({512, 256}, dtype);
  const Tensor w_values = tg::randn({128, 256}, dtype), b_values = tg::randn({128}, dtype);
  const Tensor dy = tg::randn({512, 128}, dtype);
  auto run = [&] {
    Tensor x = leaf(x_values), w = leaf(w_values), b = leaf(b_values);
    Tensor y = F::linear(x, w, b);
    y.backward(dy);
    return std::vector<std::pair<std::string, std::vector<unsigned char>>>{
        {"y", bytes(y)}, {"dx", bytes(x.grad())}, {"dW", bytes(w.grad())}, {"db", bytes(b.grad())}};
  };
  require_bitwise_identical_across_threads(run);
}
