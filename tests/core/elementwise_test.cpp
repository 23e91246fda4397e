// + - * / and pow with broadcasting and scalars, unary -, sqrt, rsqrt, pow, exp, log, relu: the
// values that a hand derivation or PyTorch's printed output pins down (edge values, conventions at
// 0, errors). The fixture, gradcheck, dtype and empty checks of every op are the rows of
// elementwise_opinfo_test.cpp.
#include <cmath>
#include <string>
#include <vector>

#include "core_test_util.hpp"

using tg::Shape;
using tg::Tensor;
using tg::testing::kInf;
using tg::testing::kNaN;
using tg::testing::random_leaf;
using tg::testing::require_ieee_equal;

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

TEST_CASE("gradcheck: scalar-with-tensor ops", "[core][elementwise][gradcheck]") {
  tg::manual_seed(12);
  const Tensor x = random_leaf({2, 3}, 0.5, 2.0);
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return 2.0 - in[0] * 3.0; }, std::vector<Tensor>{x});
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return 1.0 / in[0] + in[0] / 4.0; }, std::vector<Tensor>{x});
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return 0.5 * in[0] - 1.0 + (1.0 + in[0]); },
                       std::vector<Tensor>{x});
}

TEST_CASE("gradcheck: pow with other exponents", "[core][elementwise][gradcheck]") {
  const double exponent = GENERATE(2.0, -1.5, 0.0, 1.0);
  INFO("exponent " << exponent);
  tg::manual_seed(14);
  const Tensor x = random_leaf({3, 2}, 0.5, 2.0);
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return in[0].pow(exponent); }, std::vector<Tensor>{x});
}

TEST_CASE("rsqrt at hand-derived points, ±inf, NaN and 0 as PyTorch", "[core][elementwise]") {
  // torch.rsqrt(x) and x.grad for y.backward(ones), float64, printed by torch 1.13.
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  Tensor x = tg::tensor({-1.0, 0.0, -0.0, 4.0, kInf, kNaN, 0.25}, {}, dtype).requires_grad_();
  const Tensor y = tg::rsqrt(x);
  CHECK(std::string(y.grad_fn_name()) == "RsqrtBackward");
  require_ieee_equal(y, {kNaN, kInf, -kInf, 0.5, 0.0, kNaN, 2.0}, 0.0);
  y.backward(tg::ones({7}, dtype));
  // −½ y³: −½ · (1/2)³ = −1/16 at 4, −½ · 2³ = −4 at ¼.
  require_ieee_equal(x.grad(), {kNaN, -kInf, kInf, -0.0625, -0.0, kNaN, -4.0}, 0.0);
}

TEST_CASE("pow with a tensor exponent: values and PyTorch's gradient conventions", "[core][elementwise][pow]") {
  // torch.pow(b, e), b.grad and e.grad for y.backward(ones), float64, printed by torch 1.13:
  // d/db = e·b^(e−1) (0 where e = 0); d/de = b^e·log(b) (0 where b = 0 and e >= 0).
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  Tensor base = tg::tensor({0, 0, 0, 2, -2, -1, kInf, -kInf, kNaN, 0}, {}, dtype).requires_grad_();
  Tensor exponent = tg::tensor({2, 0, -1, 0.5, 3, 0.5, 0.5, 0.5, 1, -0.0}, {}, dtype).requires_grad_();
  const Tensor y = tg::pow(base, exponent);
  CHECK(std::string(y.grad_fn_name()) == "PowBackward");
  const double tol = dtype == tg::kFloat32 ? 1e-6 : 1e-15;
  // C's pow: (-inf)^0.5 is +inf here (the scalar-exponent pow sends 0.5 through sqrt instead).
  require_ieee_equal(y, {0, 1, kInf, std::sqrt(2.0), -8, kNaN, kInf, kInf, kNaN, 1}, tol);
  y.backward(tg::ones({10}, dtype));
  require_ieee_equal(base.grad(), {0, 0, -kInf, 0.5 / std::sqrt(2.0), 12, kNaN, 0, 0, 1, 0}, tol);
  require_ieee_equal(exponent.grad(), {0, 0, -kInf, std::sqrt(2.0) * std::log(2.0), kNaN, kNaN, kInf, kNaN, kNaN, 0},
                     tol);
}

TEST_CASE("pow with a tensor exponent broadcasts and sums gradients back", "[core][elementwise][pow]") {
  Tensor base = tg::tensor({1, 2, 3}, {3, 1}, tg::kFloat64).requires_grad_();
  Tensor exponent = tg::tensor({0, 1, 2}, {3}, tg::kFloat64).requires_grad_();
  const Tensor y = base.pow(exponent);
  REQUIRE(y.shape() == Shape{3, 3});
  CHECK(y.to_vector<double>() == std::vector<double>{1, 1, 1, 1, 2, 4, 1, 3, 9});
  y.sum().backward();
  // d/db = Σ_e e·b^(e−1) = 0 + 1 + 2b;  d/de = Σ_b b^e·log b.
  CHECK(base.grad().to_vector<double>() == std::vector<double>{3, 5, 7});
  const double l2 = std::log(2.0), l3 = std::log(3.0);
  require_ieee_equal(exponent.grad(), {l2 + l3, 2 * l2 + 3 * l3, 4 * l2 + 9 * l3}, 1e-15);
}

TEST_CASE("pow with a scalar base: values and PyTorch's gradient conventions", "[core][elementwise][pow]") {
  // torch.pow(base, e) and e.grad for y.backward(ones), float64, printed by torch 1.13.
  struct Case {
    double base;
    std::vector<double> y, de;  // for e = [2, 0, -1, 0.5, nan]
  };
  const double l2 = std::log(2.0);
  const Case c = GENERATE_COPY(Case{0.0, {0, 1, kInf, 0, kNaN}, {0, 0, -kInf, 0, kNaN}},
                               Case{2.0, {4, 1, 0.5, std::sqrt(2.0), kNaN}, {4 * l2, l2, 0.5 * l2, std::sqrt(2.0) * l2, kNaN}},
                               Case{1.0, {1, 1, 1, 1, 1}, {0, 0, 0, 0, 0}},
                               Case{-2.0, {4, 1, -0.5, kNaN, kNaN}, {kNaN, kNaN, kNaN, kNaN, kNaN}});
  INFO("base " << c.base);
  Tensor exponent = tg::tensor({2, 0, -1, 0.5, kNaN}, {}, tg::kFloat64).requires_grad_();
  const Tensor y = tg::pow(c.base, exponent);
  require_ieee_equal(y, c.y, 1e-15);
  y.backward(tg::ones({5}, tg::kFloat64));
  require_ieee_equal(exponent.grad(), c.de, 1e-15);
  // float32 keeps float32, the base rounded to it.
  CHECK(tg::pow(c.base, tg::ones({2})).dtype() == tg::kFloat32);
}

TEST_CASE("pow refuses mismatched operands, naming the op", "[core][elementwise][pow][errors]") {
  const Tensor a = tg::ones({2, 3});
  REQUIRE_TG_ERROR(a.pow(tg::ones({2, 3}, tg::kFloat64)),
                   Catch::StartsWith("pow:") && Catch::Contains("float32") && Catch::Contains("float64"));
  REQUIRE_TG_ERROR(tg::pow(a, tg::ones({4})), Catch::StartsWith("pow:") && Catch::Contains("[2, 3]") &&
                                                  Catch::Contains("[4]"));
  REQUIRE_TG_ERROR(tg::pow(a, Tensor()), Catch::StartsWith("pow:") && Catch::Contains("undefined"));
  REQUIRE_TG_ERROR(tg::pow(2.0, Tensor()), Catch::StartsWith("pow:") && Catch::Contains("undefined"));
}

TEST_CASE("unary ops record their PyTorch node names", "[core][elementwise]") {
  const Tensor x = tg::ones({2}, tg::kFloat64).requires_grad_();
  CHECK(std::string((-x).grad_fn_name()) == "NegBackward");
  CHECK(std::string(x.sqrt().grad_fn_name()) == "SqrtBackward");
  CHECK(std::string(x.pow(3).grad_fn_name()) == "PowBackward");
  CHECK(std::string(tg::pow(2.0, x).grad_fn_name()) == "PowBackward");
  CHECK(std::string(x.exp().grad_fn_name()) == "ExpBackward");
  CHECK(std::string(x.log().grad_fn_name()) == "LogBackward");
  CHECK(std::string(x.relu().grad_fn_name()) == "ReluBackward");
  tg::NoGradGuard no_grad;
  CHECK(x.rsqrt().grad_fn_name() == nullptr);
  CHECK(x.pow(x).grad_fn_name() == nullptr);
}
