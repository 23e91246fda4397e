// log1p, tanh, sigmoid, gelu, abs, clamp with scalar and tensor bounds (core/src/ops/unary_math.cpp):
// hand-derived values at the kinks, PyTorch's printed values at ±inf, NaN and -0, and errors. The
// fixture, gradcheck, dtype and empty checks of every op are the rows of elementwise_opinfo_test.cpp.
#include <cmath>
#include <functional>
#include <map>

#include "core_test_util.hpp"

using tg::Tensor;
using tg::Shape;
using tg::testing::kInf;
using tg::testing::kNaN;
using tg::testing::require_ieee_equal;

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
  };
  return ops;
}

}  // namespace

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
  REQUIRE_TG_ERROR(x.clamp(std::optional<double>(), std::nullopt), Catch::Contains("clamp") && Catch::Contains("at least one"));
  const Tensor ints = tg::ones({2}, tg::kInt64);
  REQUIRE_TG_ERROR(ints.tanh(), Catch::Contains("tanh") && Catch::Contains("int64"));
  REQUIRE_TG_ERROR(tg::sigmoid(Tensor()), Catch::Contains("sigmoid") && Catch::Contains("undefined"));
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

TEST_CASE("clamp with tensor bounds: values and gradients as PyTorch", "[core][unary_math][clamp]") {
  // torch.clamp(x, min, max) with x, min, max requiring grad, y.backward(ones), float64, printed by
  // torch 1.13. The last two elements: a NaN bound (NaN out, no gradient anywhere) and crossed
  // bounds min 0.5 > max -0.5 (max everywhere; the gradient goes to max, none to x or min).
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  Tensor x = tg::tensor({-1.0, -0.5, 0.0, 0.25, 1.0, kNaN, 0.0, 0.0}, {}, dtype).requires_grad_();
  Tensor low = tg::tensor({-0.5, -0.5, -0.5, -0.5, -0.5, -0.5, kNaN, 0.5}, {}, dtype).requires_grad_();
  Tensor high = tg::tensor({0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 1.0, -0.5}, {}, dtype).requires_grad_();
  const Tensor y = x.clamp(low, high);
  CHECK(std::string(y.grad_fn_name()) == "ClampBackward");
  require_ieee_equal(y, {-0.5, -0.5, 0.0, 0.25, 0.25, kNaN, kNaN, -0.5}, 0.0);
  y.backward(tg::ones({8}, dtype));
  require_ieee_equal(x.grad(), {0, 1, 1, 1, 0, 0, 0, 0}, 0.0);
  require_ieee_equal(low.grad(), {1, 0, 0, 0, 0, 0, 0, 0}, 0.0);
  require_ieee_equal(high.grad(), {0, 0, 0, 0, 1, 0, 0, 1}, 0.0);
}

TEST_CASE("clamp with one tensor bound: NaN in either operand gives NaN", "[core][unary_math][clamp]") {
  // torch.clamp(x, min=t) and torch.clamp(x, max=t), as printed by torch 1.13.
  Tensor x = tg::tensor({-1.0, -0.5, 0.0, kNaN, 1.0}, {}, tg::kFloat64).requires_grad_();
  Tensor low = tg::tensor({-0.5, -0.5, -0.5, -0.5, kNaN}, {}, tg::kFloat64).requires_grad_();
  const Tensor y = x.clamp(low);
  require_ieee_equal(y, {-0.5, -0.5, 0.0, kNaN, kNaN}, 0.0);
  y.backward(tg::ones({5}, tg::kFloat64));
  require_ieee_equal(x.grad(), {0, 1, 1, 0, 0}, 0.0);
  require_ieee_equal(low.grad(), {1, 0, 0, 0, 0}, 0.0);

  Tensor z = tg::tensor({-1.0, 0.25, 0.0, kNaN, 1.0}, {}, tg::kFloat64).requires_grad_();
  Tensor high = tg::tensor({0.25, 0.25, 0.25, 0.25, kNaN}, {}, tg::kFloat64).requires_grad_();
  const Tensor w = tg::clamp(z, std::nullopt, high);
  require_ieee_equal(w, {-1.0, 0.25, 0.0, kNaN, kNaN}, 0.0);
  w.backward(tg::ones({5}, tg::kFloat64));
  require_ieee_equal(z.grad(), {1, 1, 1, 0, 0}, 0.0);
  require_ieee_equal(high.grad(), {0, 0, 0, 0, 0}, 0.0);
}

TEST_CASE("clamp with tensor bounds broadcasts all three and sums gradients back", "[core][unary_math][clamp]") {
  // torch 1.13: x [2, 3], min [1], max [2, 1] -> y [2, 3]; min.grad = [2], max.grad = [[1], [1]].
  Tensor x = tg::tensor({-1.0, 0.5, 2.0, 0.0, 3.0, -4.0}, {2, 3}, tg::kFloat64).requires_grad_();
  Tensor low = tg::tensor({-0.5}, {1}, tg::kFloat64).requires_grad_();
  Tensor high = tg::tensor({1.0, 2.0}, {2, 1}, tg::kFloat64).requires_grad_();
  const Tensor y = tg::clamp(x, low, high);
  REQUIRE(y.shape() == Shape{2, 3});
  require_ieee_equal(y, {-0.5, 0.5, 1.0, 0.0, 2.0, -0.5}, 0.0);
  y.sum().backward();
  require_ieee_equal(x.grad(), {0, 1, 0, 1, 0, 0}, 0.0);
  require_ieee_equal(low.grad(), {2}, 0.0);
  require_ieee_equal(high.grad(), {1, 1}, 0.0);
  // A 0-d x broadcast to the bounds' shape gets the sum of its gradient.
  Tensor scalar = tg::scalar_tensor(0.5, tg::kFloat64).requires_grad_();
  const Tensor spread = scalar.clamp(tg::tensor({0.0, 1.0}, {}, tg::kFloat64));
  require_ieee_equal(spread, {0.5, 1.0}, 0.0);
  spread.sum().backward();
  require_ieee_equal(scalar.grad(), {1.0}, 0.0);
  CHECK(scalar.grad().shape() == Shape{});
}

TEST_CASE("clamp with tensor bounds: only the bounds may require grad", "[core][unary_math][clamp]") {
  const Tensor x = tg::tensor({-1.0, 0.0, 1.0}, {}, tg::kFloat64);
  Tensor high = tg::tensor({0.5}, {}, tg::kFloat64).requires_grad_();
  const Tensor y = x.clamp(std::nullopt, high);
  REQUIRE(y.requires_grad());
  y.sum().backward();
  require_ieee_equal(high.grad(), {1.0}, 0.0);
  tg::NoGradGuard no_grad;
  CHECK_FALSE(x.clamp(std::nullopt, high).requires_grad());
}

TEST_CASE("clamp with tensor bounds refuses bad arguments, naming the op and shapes", "[core][unary_math][errors]") {
  const Tensor x = tg::ones({2, 3});
  REQUIRE_TG_ERROR(x.clamp(std::optional<Tensor>(), std::nullopt),
                   Catch::StartsWith("clamp:") && Catch::Contains("at least one"));
  REQUIRE_TG_ERROR(x.clamp(tg::zeros({2, 3}, tg::kFloat64)),
                   Catch::StartsWith("clamp:") && Catch::Contains("min float64") && Catch::Contains("float32"));
  REQUIRE_TG_ERROR(x.clamp(std::nullopt, tg::ones({4})),
                   Catch::StartsWith("clamp:") && Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
  REQUIRE_TG_ERROR(x.clamp(tg::zeros({3}), tg::ones({2, 2})),
                   Catch::StartsWith("clamp:") && Catch::Contains("[2, 3]") && Catch::Contains("[2, 2]"));
  REQUIRE_TG_ERROR(x.clamp(Tensor()), Catch::StartsWith("clamp:") && Catch::Contains("min is an undefined tensor"));
  REQUIRE_TG_ERROR(Tensor().clamp(x), Catch::StartsWith("clamp:") && Catch::Contains("undefined"));
}
