// Sequential: the three-line model, PyTorch's child names, typed access, gradcheck of the whole.
#include <string>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

TEST_CASE("Linear -> ReLU -> LayerNorm in three lines", "[sequential]") {
  tg::manual_seed(41);
  tg::nn::Sequential model(tg::nn::Linear(5, 6), tg::nn::ReLU(), tg::nn::LayerNorm({6}));
  const Tensor x = tg::randn({4, 5});
  const Tensor y = model(x);

  REQUIRE(model.size() == 3);
  auto& lin = model.at<tg::nn::Linear>(0);
  auto& ln = model.at<tg::nn::LayerNorm>(2);
  const Tensor expected = F::layer_norm(F::relu(F::linear(x, lin.weight, lin.bias)), {6}, ln.weight, ln.bias, 1e-5);
  REQUIRE(bytes(y) == bytes(expected));

  std::vector<std::string> names;
  for (const auto& [name, p] : model.named_parameters()) names.push_back(name);
  REQUIRE(names == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  REQUIRE(model.parameters()[0].is_same(lin.weight));

  tg::nn::mse_loss(y, tg::zeros({4, 6})).backward();
  for (const Tensor& p : model.parameters()) REQUIRE(p.grad().defined());
  model.zero_grad();
  for (const Tensor& p : model.parameters()) REQUIRE(!p.grad().defined());
  model.eval();
  REQUIRE(!model[1].is_training());
}

TEST_CASE("Sequential: typed access, errors, nesting and push_back", "[sequential]") {
  tg::nn::Sequential model(tg::nn::Linear(2, 3), tg::nn::ReLU());
  REQUIRE_THROWS_WITH(model.at<tg::nn::LayerNorm>(0), Catch::Contains("Sequential") && Catch::Contains("0"));
  REQUIRE_THROWS_WITH(model[2], Catch::Contains("Sequential") && Catch::Contains("2"));
  model.push_back(tg::nn::Linear(3, 1, {.bias = false}));
  tg::nn::Sequential outer(tg::nn::Linear(4, 2), model);
  std::vector<std::string> names;
  for (const auto& [name, p] : outer.named_parameters()) names.push_back(name);
  REQUIRE(names == std::vector<std::string>{"0.weight", "0.bias", "1.0.weight", "1.0.bias", "1.2.weight"});
  REQUIRE(outer(tg::randn({5, 4})).shape() == Shape{5, 1});
  // An empty Sequential is the identity.
  tg::nn::Sequential empty;
  const Tensor x = tg::randn({2, 2});
  REQUIRE(empty(x).is_same(x));
}

TEST_CASE("the whole Sequential passes gradcheck in float64", "[sequential][gradcheck]") {
  tg::manual_seed(42);
  tg::nn::Sequential model(tg::nn::Linear(5, 6), tg::nn::ReLU(), tg::nn::LayerNorm({6}));
  model.to(tg::kFloat64);
  model.at<tg::nn::LayerNorm>(2).weight = tg::randn({6}, tg::kFloat64);
  model.at<tg::nn::LayerNorm>(2).bias = tg::randn({6}, tg::kFloat64);
  SECTION("with respect to the input, through the model") {
    TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return model(in[0]); },
                         std::vector<Tensor>{randn_leaf({3, 2, 5}, tg::kFloat64)});
  }
  SECTION("with respect to the input and every parameter, with the model's values") {
    std::vector<Tensor> inputs{randn_leaf({4, 5}, tg::kFloat64)};
    for (const Tensor& p : model.parameters()) inputs.push_back(p.detach().clone().requires_grad_());
    TG_REQUIRE_GRADCHECK(
        [](const std::vector<Tensor>& in) {
          return F::layer_norm(F::relu(F::linear(in[0], in[1], in[2])), {6}, in[3], in[4], 1e-5);
        },
        inputs);
  }
}
