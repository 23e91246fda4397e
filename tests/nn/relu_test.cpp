// ReLU: PyTorch fixture, gradcheck away from 0, the module.
#include <string>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

TEST_CASE("relu matches PyTorch's output and gradient", "[relu][fixture]") {
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const tg::testing::FixtureCase& c = tg::testing::fixture("core_ops.txt", "relu" + suffix);
  Tensor x = leaf(c.at("x"));
  tg::nn::ReLU relu;
  Tensor y = relu(x);
  REQUIRE(std::string(y.grad_fn_name()) == "ReluBackward");
  TG_REQUIRE_CLOSE(y, c.at("y"), fixture_atol(suffix));
  y.backward(c.at("dy"));
  TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), fixture_atol(suffix));
}

TEST_CASE("relu passes gradcheck away from 0", "[relu][gradcheck]") {
  // Values in ±[0.1, 1.1): the kink at 0 is further than any finite-difference step.
  const Tensor magnitude = tg::rand({3, 7}, tg::kFloat64) + 0.1;
  const Tensor sign = tg::tensor({1, -1, 1, -1, -1, 1, 1}, {7}, tg::kFloat64);
  Tensor x = (magnitude * sign).detach().requires_grad_();
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return F::relu(in[0]); }, std::vector<Tensor>{x});
}

TEST_CASE("relu masks the gradient by its output and has no parameters", "[relu][module]") {
  tg::nn::ReLU relu;
  REQUIRE(relu.parameters().empty());
  Tensor x = tg::tensor({-2, -0.0, 0, 3}, {4}, tg::kFloat64).requires_grad_();
  Tensor y = relu(x);
  REQUIRE(y.to_vector<double>() == std::vector<double>{0, 0, 0, 3});
  y.backward(tg::tensor({5, 6, 7, 8}, {4}, tg::kFloat64));
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{0, 0, 0, 8});  // 0 at x = 0, as PyTorch
  REQUIRE_THROWS_WITH(F::relu(Tensor()), Catch::Contains("relu"));
}
