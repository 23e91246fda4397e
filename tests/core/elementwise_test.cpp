// + - * / with broadcasting and scalars, unary -, sqrt, pow, exp, log, relu: PyTorch fixtures,
// hand-derived values, and gradcheck over shape families.
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

using BinaryOp = std::function<Tensor(const Tensor&, const Tensor&)>;
const std::map<std::string, BinaryOp>& binary_ops() {
  static const std::map<std::string, BinaryOp> ops{
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }},
  };
  return ops;
}

using UnaryOp = std::function<Tensor(const Tensor&, double exponent)>;
const std::map<std::string, UnaryOp>& unary_ops() {
  static const std::map<std::string, UnaryOp> ops{
      {"neg", [](const Tensor& x, double) { return -x; }},
      {"sqrt", [](const Tensor& x, double) { return x.sqrt(); }},
      {"pow_e3", [](const Tensor& x, double p) { return x.pow(p); }},
      {"pow_e0p5", [](const Tensor& x, double p) { return tg::pow(x, p); }},
      {"exp", [](const Tensor& x, double) { return tg::exp(x); }},
      {"log", [](const Tensor& x, double) { return x.log(); }},
      {"relu", [](const Tensor& x, double) { return tg::relu(x); }},
  };
  return ops;
}

}  // namespace

TEST_CASE("binary ops match PyTorch forward and backward, broadcasting included", "[core][elementwise][fixture]") {
  const std::string op = GENERATE(as<std::string>{}, "add", "sub", "mul", "div");
  const std::string shapes = GENERATE(as<std::string>{}, "2x3_2x3", "2x3_3", "4x1x3_2x1", "2x3_2x1", "3_2x3");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const std::string name = op + "_" + shapes + suffix;
  INFO("case " << name);
  const auto& c = fixture("core_ops.txt", name);
  const double tol = fixture_tol(c.at("a").dtype());
  Tensor a = leaf(c.at("a")), b = leaf(c.at("b"));
  const Tensor y = binary_ops().at(op)(a, b);
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(a.grad(), c.at("da"), tol);
  TG_REQUIRE_NEAR(b.grad(), c.at("db"), tol);
}

TEST_CASE("unary ops match PyTorch forward and backward", "[core][elementwise][fixture]") {
  const std::string op = GENERATE(as<std::string>{}, "neg", "sqrt", "pow_e3", "pow_e0p5", "exp", "log", "relu");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  INFO("case " << op + suffix);
  const auto& c = fixture("core_ops.txt", op + suffix);
  const double tol = fixture_tol(c.at("x").dtype());
  Tensor x = leaf(c.at("x"));
  const Tensor y = unary_ops().at(op)(x, c.has("exponent") ? c.scalar("exponent") : 0.0);
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);
}

TEST_CASE("broadcasting shapes follow NumPy rules", "[core][elementwise]") {
  CHECK(tg::broadcast_shapes({2, 3}, {3}) == tg::Shape{2, 3});
  CHECK(tg::broadcast_shapes({4, 1, 3}, {2, 1}) == tg::Shape{4, 2, 3});
  CHECK(tg::broadcast_shapes({}, {2, 2}) == tg::Shape{2, 2});
  CHECK(tg::broadcast_shapes({1}, {0}) == tg::Shape{0});
  CHECK(tg::broadcast_shapes({5, 1, 4, 1}, {3, 1, 6}) == tg::Shape{5, 3, 4, 6});
}

TEST_CASE("broadcast add and mul by hand", "[core][elementwise]") {
  const Tensor a = tg::tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  SECTION("row vector") {
    const Tensor y = a + tg::tensor({10, 20, 30});
    CHECK(y.to_vector<float>() == std::vector<float>{11, 22, 33, 14, 25, 36});
  }
  SECTION("column vector on the left") {
    const Tensor y = tg::tensor({10, 20}, {2, 1}) * a;
    CHECK(y.shape() == tg::Shape{2, 3});
    CHECK(y.to_vector<float>() == std::vector<float>{10, 20, 30, 80, 100, 120});
  }
  SECTION("outer broadcast [3,1] - [1,2]") {
    const Tensor y = tg::tensor({1, 2, 3}, {3, 1}) - tg::tensor({10, 20}, {1, 2});
    CHECK(y.shape() == tg::Shape{3, 2});
    CHECK(y.to_vector<float>() == std::vector<float>{-9, -19, -8, -18, -7, -17});
  }
  SECTION("0-d with 2-d") {
    const Tensor y = tg::scalar_tensor(2.0) / a;
    CHECK(y.to_vector<float>() == std::vector<float>{2.0f, 1.0f, 2.0f / 3, 0.5f, 0.4f, 2.0f / 6});
  }
  SECTION("4-d broadcasting against 2-d") {
    const Tensor x = tg::ones({2, 1, 3, 1}, tg::kFloat64);
    const Tensor y = x * tg::tensor({1, 2, 3, 4}, {1, 4}, tg::kFloat64);
    CHECK(y.shape() == tg::Shape{2, 1, 3, 4});
    const std::vector<double> v = y.to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == static_cast<double>(i % 4 + 1));
  }
}

TEST_CASE("scalars on either side keep the tensor's dtype and order of operands", "[core][elementwise]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  const Tensor t = tg::tensor({1, 2, 4}, {}, dtype);
  const auto values = [](const Tensor& x) { return x.to(tg::kFloat64).to_vector<double>(); };
  CHECK((t + 1.0).dtype() == dtype);
  CHECK(values(t + 1.0) == std::vector<double>{2, 3, 5});
  CHECK(values(1.0 + t) == std::vector<double>{2, 3, 5});
  CHECK(values(t - 1.0) == std::vector<double>{0, 1, 3});
  CHECK(values(2.0 - t) == std::vector<double>{1, 0, -2});
  CHECK(values(t * 3.0) == std::vector<double>{3, 6, 12});
  CHECK(values(3.0 * t) == std::vector<double>{3, 6, 12});
  CHECK(values(t / 2.0) == std::vector<double>{0.5, 1, 2});
  CHECK(values(1.0 / t) == std::vector<double>{1, 0.5, 0.25});
  CHECK(values(-t) == std::vector<double>{-1, -2, -4});
  CHECK((2.0 - t).shape() == tg::Shape{3});
}

TEST_CASE("scalar-on-the-left gradients by hand", "[core][elementwise][autograd]") {
  Tensor t = tg::tensor({1, 2, 4}, {}, tg::kFloat64).requires_grad_();
  SECTION("2 - t") {
    (2.0 - t).sum().backward();
    CHECK(t.grad().to_vector<double>() == std::vector<double>{-1, -1, -1});
  }
  SECTION("1 / t") {
    (1.0 / t).sum().backward();  // d(1/t)/dt = -1/t²
    CHECK(t.grad().to_vector<double>() == std::vector<double>{-1, -0.25, -0.0625});
  }
  SECTION("t / 4") {
    (t / 4.0).sum().backward();
    CHECK(t.grad().to_vector<double>() == std::vector<double>{0.25, 0.25, 0.25});
  }
}

TEST_CASE("unary ops by hand, including edge values", "[core][elementwise]") {
  const Tensor x = tg::tensor({-1.0, 0.0, 0.25, 4.0}, {}, tg::kFloat64);
  CHECK(x.relu().to_vector<double>() == std::vector<double>{0, 0, 0.25, 4});
  const std::vector<double> s = x.sqrt().to_vector<double>();
  CHECK(std::isnan(s[0]));
  CHECK(s[1] == 0.0);
  CHECK(s[2] == 0.5);
  CHECK(s[3] == 2.0);
  CHECK(x.pow(2).to_vector<double>() == std::vector<double>{1, 0, 0.0625, 16});
  CHECK(x.pow(0).to_vector<double>() == std::vector<double>{1, 1, 1, 1});
  CHECK(x.exp().to_vector<double>()[1] == 1.0);
  const std::vector<double> l = x.log().to_vector<double>();
  CHECK(std::isnan(l[0]));
  CHECK(l[1] == -INFINITY);
  CHECK(l[3] == Approx(std::log(4.0)).epsilon(1e-15));
}

TEST_CASE("relu passes no gradient at 0, like PyTorch", "[core][elementwise][autograd]") {
  Tensor x = tg::tensor({-1.0, 0.0, 2.0}, {}, tg::kFloat64).requires_grad_();
  x.relu().sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0, 1});
}

TEST_CASE("elementwise ops on empty tensors give empty results", "[core][elementwise]") {
  Tensor e = tg::zeros({0, 3}, tg::kFloat64).requires_grad_();
  const Tensor y = (e * 2.0 + tg::ones({3}, tg::kFloat64)).exp();
  CHECK(y.shape() == tg::Shape{0, 3});
  CHECK(y.numel() == 0);
  CHECK((e + tg::ones({1, 3}, tg::kFloat64)).shape() == tg::Shape{0, 3});
  y.sum().backward();
  REQUIRE(e.grad().defined());
  CHECK(e.grad().shape() == tg::Shape{0, 3});
}

TEST_CASE("gradcheck: binary ops over broadcasting shape families", "[core][elementwise][gradcheck]") {
  using Shapes = std::pair<tg::Shape, tg::Shape>;
  const Shapes shapes = GENERATE(Shapes{{2, 3}, {2, 3}}, Shapes{{2, 3}, {3}}, Shapes{{3}, {2, 3}},
                                 Shapes{{4, 1, 3}, {2, 1}}, Shapes{{2, 3}, {2, 1}}, Shapes{{}, {2, 2}},
                                 Shapes{{2, 1, 3, 1}, {1, 4}}, Shapes{{1}, {3}});
  const std::string op = GENERATE(as<std::string>{}, "add", "sub", "mul", "div");
  INFO(op << " " << tg::to_string(shapes.first) << " with " << tg::to_string(shapes.second));
  tg::manual_seed(11);
  const Tensor a = random_leaf(shapes.first);
  // Keep divisors away from 0 so that the finite differences stay accurate.
  const Tensor b = op == "div" ? random_leaf(shapes.second, 0.5, 2.0) : random_leaf(shapes.second);
  const BinaryOp& f = binary_ops().at(op);
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return f(in[0], in[1]); }, (std::vector<Tensor>{a, b}));
}

TEST_CASE("gradcheck: scalar-with-tensor ops", "[core][elementwise][gradcheck]") {
  tg::manual_seed(12);
  const Tensor x = random_leaf({2, 3}, 0.5, 2.0);
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return 2.0 - in[0] * 3.0; }, std::vector<Tensor>{x});
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return 1.0 / in[0] + in[0] / 4.0; }, std::vector<Tensor>{x});
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return 0.5 * in[0] - 1.0 + (1.0 + in[0]); },
                       std::vector<Tensor>{x});
}

TEST_CASE("gradcheck: unary ops", "[core][elementwise][gradcheck]") {
  const tg::Shape shape = GENERATE(tg::Shape{}, tg::Shape{5}, tg::Shape{2, 3, 2});
  const std::string op = GENERATE(as<std::string>{}, "neg", "sqrt", "pow_e3", "pow_e0p5", "exp", "log", "relu");
  INFO(op << " on " << tg::to_string(shape));
  tg::manual_seed(13);
  // Positive inputs for sqrt, log and fractional powers; relu away from its kink at 0.
  Tensor x = random_leaf(shape, 0.2, 2.0);
  if (op == "relu" || op == "neg" || op == "pow_e3" || op == "exp") {
    tg::NoGradGuard no_grad;
    double* v = x.mutable_data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) v[i] = (i % 2 ? -1.0 : 1.0) * v[i];
  }
  const double exponent = op == "pow_e3" ? 3.0 : 0.5;
  const UnaryOp& f = unary_ops().at(op);
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return f(in[0], exponent); }, std::vector<Tensor>{x});
}

TEST_CASE("gradcheck: pow with other exponents", "[core][elementwise][gradcheck]") {
  const double exponent = GENERATE(2.0, -1.5, 0.0, 1.0);
  INFO("exponent " << exponent);
  tg::manual_seed(14);
  const Tensor x = random_leaf({3, 2}, 0.5, 2.0);
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return in[0].pow(exponent); }, std::vector<Tensor>{x});
}
