// log1p, tanh, sigmoid, gelu, abs, clamp (core/src/ops/unary_math.cpp): PyTorch fixtures
// (tests/fixtures/make_elementwise_fixtures.py), hand-derived values at the kinks, gradcheck.
#include <cmath>
#include <functional>
#include <map>

#include "core_test_util.hpp"

using tg::Tensor;
using tg::testing::fixture;
using tg::testing::fixture_tol;
using tg::testing::leaf;
using tg::testing::random_leaf;

namespace {

using UnaryOp = std::function<Tensor(const Tensor&)>;
const std::map<std::string, UnaryOp>& unary_ops() {
  static const std::map<std::string, UnaryOp> ops{
      {"log1p", [](const Tensor& x) { return x.log1p(); }},
      {"tanh", [](const Tensor& x) { return tg::tanh(x); }},
      {"sigmoid", [](const Tensor& x) { return x.sigmoid(); }},
      {"gelu_none", [](const Tensor& x) { return tg::gelu(x); }},
      {"gelu_tanh", [](const Tensor& x) { return x.gelu("tanh"); }},
      {"abs", [](const Tensor& x) { return tg::abs(x); }},
      {"clamp_both", [](const Tensor& x) { return x.clamp(-0.5, 0.25); }},
      {"clamp_min", [](const Tensor& x) { return x.clamp_min(-0.5); }},
      {"clamp_max", [](const Tensor& x) { return tg::clamp(x, std::nullopt, 0.25); }},
      {"clamp_crossed", [](const Tensor& x) { return x.clamp(0.5, -0.5); }},
  };
  return ops;
}

}  // namespace

TEST_CASE("unary math matches PyTorch forward and backward", "[core][unary_math][fixture]") {
  const std::string op = GENERATE(as<std::string>{}, "log1p", "tanh", "sigmoid", "gelu_none", "gelu_tanh", "abs",
                                  "clamp_both", "clamp_min", "clamp_max", "clamp_crossed");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  INFO("case " << op + suffix);
  const auto& c = fixture("elementwise.txt", op + suffix);
  const double tol = fixture_tol(c.at("x").dtype());
  Tensor x = leaf(c.at("x"));
  const Tensor y = unary_ops().at(op)(x);
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);
}

TEST_CASE("unary math passes gradcheck in float64", "[core][unary_math][gradcheck]") {
  const std::string op = GENERATE(as<std::string>{}, "log1p", "tanh", "sigmoid", "gelu_none", "gelu_tanh", "abs",
                                  "clamp_both", "clamp_min", "clamp_max");
  const tg::Shape shape = GENERATE(tg::Shape{7}, tg::Shape{3, 4}, tg::Shape{2, 1, 3});
  INFO(op);
  // Values in [-0.9, 0.9) and away from the kinks (finite differences cannot see a kink's convention).
  Tensor x = random_leaf(shape, -0.9, 0.9);
  {
    tg::NoGradGuard no_grad;
    x.copy_(tg::where(x.abs() < 0.05, x + 0.1, x));
    x.copy_(tg::where((x + 0.5).abs() < 0.05, x + 0.1, x));
    x.copy_(tg::where((x - 0.25).abs() < 0.05, x + 0.1, x));
  }
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return unary_ops().at(op)(in[0]); }, std::vector{x});
}

TEST_CASE("gelu, sigmoid, tanh and log1p at hand-derived points", "[core][unary_math]") {
  const Tensor x = tg::tensor({0.0, 1.0, -1.0}, {}, tg::kFloat64);
  // GELU(1) = Φ(1) = (1 + erf(1/√2)) / 2; GELU(-1) = -Φ(-1).
  const double phi1 = 0.5 * (1 + std::erf(1 / std::sqrt(2.0)));
  tg::testing::require_ieee_equal(x.gelu(), {0.0, phi1, -(1 - phi1)}, 1e-15);
  const double u = std::sqrt(2 / M_PI) * (1 + 0.044715);
  tg::testing::require_ieee_equal(x.gelu("tanh"), {0.0, 0.5 * (1 + std::tanh(u)), -0.5 * (1 - std::tanh(u))}, 1e-15);
  tg::testing::require_ieee_equal(x.sigmoid(), {0.5, 1 / (1 + std::exp(-1.0)), 1 / (1 + std::exp(1.0))}, 1e-15);
  tg::testing::require_ieee_equal(x.tanh(), {0.0, std::tanh(1.0), -std::tanh(1.0)}, 1e-15);
  // log1p keeps tiny arguments exact where log(1 + x) would round 1 + x.
  tg::testing::require_ieee_equal(tg::tensor({1e-20, -1.0}, {}, tg::kFloat64).log1p(), {1e-20, -tg::testing::kInf}, 1e-15);
  // Saturation: sigmoid(±800) is exactly 1 and 0 in float64, with no NaN from exp overflow.
  tg::testing::require_ieee_equal(tg::tensor({800.0, -800.0}, {}, tg::kFloat64).sigmoid(), {1.0, 0.0}, 0.0);
}

TEST_CASE("abs and clamp gradients at kinks follow PyTorch", "[core][unary_math]") {
  // abs'(0) = 0 (sign(0)), both zeros; NaN's gradient is 0 as well.
  Tensor x = tg::tensor({0.0, -0.0, 2.0, -3.0}, {}, tg::kFloat64).requires_grad_();
  x.abs().sum().backward();
  tg::testing::require_ieee_equal(x.grad(), {0.0, 0.0, 1.0, -1.0}, 0.0);
  // clamp passes the gradient at both bounds (min <= x <= max), not beyond, and not at NaN.
  Tensor y = tg::tensor({-1.0, -0.5, 0.0, 0.25, 1.0, NAN}, {}, tg::kFloat64).requires_grad_();
  const Tensor clamped = y.clamp(-0.5, 0.25);
  tg::testing::require_ieee_equal(clamped, {-0.5, -0.5, 0.0, 0.25, 0.25, NAN}, 0.0);
  clamped.sum().backward();
  tg::testing::require_ieee_equal(y.grad(), {0.0, 1.0, 1.0, 1.0, 0.0, 0.0}, 0.0);
}

TEST_CASE("clamp with NaN bounds follows PyTorch", "[core][unary_math]") {
  const Tensor x = tg::tensor({1.0, NAN, -2.0}, {}, tg::kFloat64);
  // One NaN bound alone compares false and leaves x; with both bounds given, all NaN.
  tg::testing::require_ieee_equal(x.clamp(NAN, std::nullopt), {1.0, NAN, -2.0}, 0.0);
  tg::testing::require_ieee_equal(x.clamp(std::nullopt, NAN), {1.0, NAN, -2.0}, 0.0);
  tg::testing::require_ieee_equal(x.clamp(0.0, NAN), {NAN, NAN, NAN}, 0.0);
  // min > max: max everywhere (NaN stays NaN).
  tg::testing::require_ieee_equal(x.clamp(2.0, 1.0), {1.0, NAN, 1.0}, 0.0);
}

TEST_CASE("unary math refuses bad arguments", "[core][unary_math][errors]") {
  const Tensor x = tg::ones({2, 3});
  REQUIRE_TG_ERROR(x.gelu("erf"), Catch::Contains("gelu") && Catch::Contains("\"erf\""));
  REQUIRE_TG_ERROR(x.clamp(std::nullopt, std::nullopt), Catch::Contains("clamp") && Catch::Contains("at least one"));
  const Tensor ints = tg::ones({2}, tg::kInt64);
  REQUIRE_TG_ERROR(ints.tanh(), Catch::Contains("tanh") && Catch::Contains("int64"));
  REQUIRE_TG_ERROR(tg::sigmoid(Tensor()), Catch::Contains("sigmoid") && Catch::Contains("undefined"));
}

TEST_CASE("unary math keeps float32 in float32 and handles empty tensors", "[core][unary_math]") {
  const Tensor x = tg::ones({0, 3});
  for (const auto& [name, op] : unary_ops()) {
    INFO(name);
    const Tensor y = op(x);
    CHECK(y.shape() == tg::Shape{0, 3});
    CHECK(y.dtype() == tg::kFloat32);
  }
}

TEST_CASE("unary math at ±inf, NaN and -0 gives PyTorch's values and gradients", "[core][unary_math][edge]") {
  // Expected values printed by torch 1.13 (float64) for x = [-inf, inf, nan, -0.0], dy = 1.
  struct Expected {
    std::vector<double> y, dx;
  };
  const double inf = tg::testing::kInf, nan = tg::testing::kNaN;
  const std::map<std::string, Expected> expected{
      {"gelu_none", {{nan, inf, nan, -0.0}, {nan, nan, nan, 0.5}}},
      {"gelu_tanh", {{nan, inf, nan, -0.0}, {nan, nan, nan, 0.5}}},
      {"sigmoid", {{0.0, 1.0, nan, 0.5}, {0.0, 0.0, nan, 0.25}}},
      {"tanh", {{-1.0, 1.0, nan, -0.0}, {0.0, 0.0, nan, 1.0}}},
      {"abs", {{inf, inf, nan, 0.0}, {-1.0, 1.0, 0.0, 0.0}}},
      {"log1p", {{nan, inf, nan, -0.0}, {-0.0, 0.0, nan, 1.0}}},
  };
  for (const auto& [name, want] : expected) {
    INFO(name);
    Tensor x = tg::tensor({-inf, inf, nan, -0.0}, {}, tg::kFloat64).requires_grad_();
    const Tensor y = unary_ops().at(name)(x);
    tg::testing::require_ieee_equal(y, want.y, 0.0);
    y.sum().backward();
    tg::testing::require_ieee_equal(x.grad(), want.dx, 0.0);
  }
}
