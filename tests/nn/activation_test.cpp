// GELU, Tanh, Sigmoid, Identity, Flatten: the modules and functional forms against PyTorch's
// fixtures (tests/fixtures/make_elementwise_fixtures.py), gradcheck, train/eval, errors.
#include <string>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

TEST_CASE("GELU, Tanh and Sigmoid modules match PyTorch", "[activation][fixture]") {
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const std::string name = GENERATE(as<std::string>{}, "gelu_none", "gelu_tanh", "tanh", "sigmoid");
  INFO(name << suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("elementwise.txt", name + suffix);
  tg::nn::GELU gelu, gelu_tanh("tanh");
  tg::nn::Tanh tanh;
  tg::nn::Sigmoid sigmoid;
  tg::nn::Module& module = name == "gelu_none" ? static_cast<tg::nn::Module&>(gelu)
                           : name == "gelu_tanh" ? static_cast<tg::nn::Module&>(gelu_tanh)
                           : name == "tanh"      ? static_cast<tg::nn::Module&>(tanh)
                                                 : static_cast<tg::nn::Module&>(sigmoid);
  Tensor x = leaf(c.at("x"));
  Tensor y = module(x);
  TG_REQUIRE_CLOSE(y, c.at("y"), fixture_atol(suffix));
  y.backward(c.at("dy"));
  TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), fixture_atol(suffix));
  REQUIRE(module.parameters().empty());
}

TEST_CASE("functional gelu, tanh and sigmoid pass gradcheck", "[activation][gradcheck]") {
  Tensor x = randn_leaf({4, 5}, tg::kFloat64);
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return F::gelu(in[0]); }, std::vector<Tensor>{x});
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return F::gelu(in[0], "tanh"); }, std::vector<Tensor>{x});
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return F::tanh(in[0]); }, std::vector<Tensor>{x});
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return F::sigmoid(in[0]); }, std::vector<Tensor>{x});
  CHECK(std::string(F::gelu(x).grad_fn_name()) == "GeluBackward");
}

TEST_CASE("activation modules refuse bad arguments", "[activation][errors]") {
  REQUIRE_TG_ERROR(tg::nn::GELU("exact"), Catch::Contains("GELU") && Catch::Contains("\"exact\""));
  REQUIRE_TG_ERROR(F::gelu(tg::ones({2}), "Tanh"), Catch::Contains("gelu") && Catch::Contains("\"Tanh\""));
  REQUIRE_TG_ERROR(F::tanh(Tensor()), Catch::Contains("tanh"));
  REQUIRE_TG_ERROR(F::sigmoid(tg::ones({2}, tg::kBool)), Catch::Contains("sigmoid") && Catch::Contains("bool"));
}

TEST_CASE("Identity returns its input and Flatten merges dims as torch.flatten", "[activation][flatten]") {
  const Tensor x = tg::randn({2, 3, 4, 5});
  tg::nn::Identity identity;
  CHECK(identity(x).is_same(x));
  CHECK(tg::nn::Flatten()(x).shape() == Shape{2, 60});
  CHECK(tg::nn::Flatten(0)(x).shape() == Shape{120});
  CHECK(tg::nn::Flatten(1, 2)(x).shape() == Shape{2, 12, 5});
  CHECK(tg::nn::Flatten(-3, -2)(x).shape() == Shape{2, 12, 5});
  CHECK(tg::nn::Flatten(2, 2)(x).shape() == Shape{2, 3, 4, 5});
  CHECK(tg::nn::Flatten(0)(tg::scalar_tensor(3.0)).shape() == Shape{1});
  CHECK(tg::nn::Flatten()(tg::ones({2, 0, 3})).shape() == Shape{2, 0});
  // Values keep their row-major order, and the gradient flows back through the view.
  Tensor leaf_x = tg::tensor({1, 2, 3, 4, 5, 6}, {1, 2, 3}).requires_grad_();
  Tensor flat = tg::nn::Flatten()(leaf_x);
  CHECK(flat.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  (flat * tg::tensor({1, 2, 3, 4, 5, 6}, {1, 6})).sum().backward();
  CHECK(leaf_x.grad().shape() == Shape{1, 2, 3});
  CHECK(leaf_x.grad().to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  REQUIRE_TG_ERROR(tg::nn::Flatten(2, 1)(x), Catch::Contains("Flatten") && Catch::Contains("comes after"));
  REQUIRE_TG_ERROR(tg::nn::Flatten()(tg::ones({4})), Catch::Contains("Flatten") && Catch::Contains("[4]") &&
                                                         Catch::Contains("start_dim 1"));
}
