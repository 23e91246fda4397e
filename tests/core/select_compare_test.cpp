// maximum, minimum, where, masked_fill (core/src/ops/select.cpp) and the comparisons
// (core/src/ops/compare.cpp): PyTorch fixtures, hand-derived values, gradcheck, errors.
#include <functional>
#include <map>

#include "core_test_util.hpp"
#include "support/tensor_equal.hpp"

using tg::Tensor;
using tg::testing::fixture;
using tg::testing::fixture_tol;
using tg::testing::leaf;
using tg::testing::random_leaf;

namespace {

Tensor bools(const std::vector<double>& values, const tg::Shape& shape = {}) {
  return tg::tensor(values, shape, tg::kBool);
}

}  // namespace

TEST_CASE("maximum and minimum match PyTorch, ties and broadcasting included", "[core][select][fixture]") {
  const std::string op = GENERATE(as<std::string>{}, "maximum", "minimum");
  const std::string shapes = GENERATE(as<std::string>{}, "2x3_2x3", "2x3_3", "4x1x3_2x1", "3_2x3", "s_2x2");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const std::string name = op + "_" + shapes + suffix;
  INFO("case " << name);
  const auto& c = fixture("elementwise.txt", name);
  const double tol = fixture_tol(c.at("a").dtype());
  Tensor a = leaf(c.at("a")), b = leaf(c.at("b"));
  const Tensor y = op == "maximum" ? a.maximum(b) : tg::minimum(a, b);
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(a.grad(), c.at("da"), tol);
  TG_REQUIRE_NEAR(b.grad(), c.at("db"), tol);
}

TEST_CASE("maximum and minimum: half the gradient to each side at a tie, NaN wins", "[core][select]") {
  Tensor a = tg::tensor({1.0, 2.0, NAN, 5.0}, {}, tg::kFloat64).requires_grad_();
  Tensor b = tg::tensor({1.0, 3.0, 0.0, NAN}, {}, tg::kFloat64).requires_grad_();
  const Tensor y = tg::maximum(a, b);
  tg::testing::require_ieee_equal(y, {1.0, 3.0, NAN, NAN}, 0.0);
  y.sum().backward();
  // PyTorch: where(a == b, g/2, g) masked where a loses; with a NaN neither side loses.
  tg::testing::require_ieee_equal(a.grad(), {0.5, 0.0, 1.0, 1.0}, 0.0);
  tg::testing::require_ieee_equal(b.grad(), {0.5, 1.0, 1.0, 1.0}, 0.0);
  // int64 works forward (no gradient), and an int64 operand is promoted against a float one.
  TG_REQUIRE_EQUAL(tg::minimum(tg::testing::int64_tensor({4, -2}), tg::testing::int64_tensor({3, 7})),
                   tg::testing::int64_tensor({3, -2}));
  TG_REQUIRE_EQUAL(tg::maximum(tg::testing::int64_tensor({4, -2}), tg::tensor({3.5, -2.5})), tg::tensor({4.0, -2.0}));
}

TEST_CASE("maximum, minimum, where and masked_fill pass gradcheck", "[core][select][gradcheck]") {
  Tensor a = random_leaf({2, 3}), b = random_leaf({3}), c = random_leaf({4, 1, 1});
  const Tensor condition = bools({1, 0, 1, 1, 0, 0}, {2, 3});
  const Tensor mask = bools({0, 1, 1}, {3});
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return tg::maximum(in[0], in[1]); }, (std::vector{a, b}));
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return in[0].minimum(in[1]); }, (std::vector{c, b}));
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return tg::where(condition, in[0], in[1]); },
                       (std::vector{c, b}));
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return in[0].masked_fill(mask, 2.0); }, (std::vector{c}));
}

TEST_CASE("where matches PyTorch with broadcasting", "[core][select][fixture]") {
  const std::string shapes = GENERATE(as<std::string>{}, "2x3_2x3_2x3", "2x1_3_2x3", "3_2x3_s", "4x1x3_2x1_1");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  INFO("case where_" << shapes << suffix);
  const auto& c = fixture("elementwise.txt", "where_" + shapes + suffix);
  const double tol = fixture_tol(c.at("a").dtype());
  Tensor a = leaf(c.at("a")), b = leaf(c.at("b"));
  const Tensor y = tg::where(c.at("condition").to(tg::kBool), a, b);
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(a.grad(), c.at("da"), tol);
  TG_REQUIRE_NEAR(b.grad(), c.at("db"), tol);
}

TEST_CASE("masked_fill matches PyTorch with broadcasting", "[core][select][fixture]") {
  const std::string shapes = GENERATE(as<std::string>{}, "2x3_2x3", "2x3_3", "3_2x3", "2x1x3_4x1");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  INFO("case masked_fill_" << shapes << suffix);
  const auto& c = fixture("elementwise.txt", "masked_fill_" + shapes + suffix);
  const double tol = fixture_tol(c.at("x").dtype());
  Tensor x = leaf(c.at("x"));
  const Tensor y = x.masked_fill(c.at("mask").to(tg::kBool), c.scalar("value"));
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);
}

TEST_CASE("where and masked_fill work on int64 and bool tensors", "[core][select]") {
  const Tensor condition = bools({1, 0, 1});
  TG_REQUIRE_EQUAL(tg::where(condition, tg::testing::int64_tensor({1, 2, 3}), tg::testing::int64_tensor({-1, -2, -3})),
                   tg::testing::int64_tensor({1, -2, 3}));
  TG_REQUIRE_EQUAL(tg::where(condition, bools({0, 0, 0}), bools({1, 1, 1})), bools({0, 1, 0}));
  // Mixed dtypes promote (int64 with float32 -> float32), as torch.where does.
  TG_REQUIRE_EQUAL(tg::where(condition, tg::testing::int64_tensor({1, 2, 3}), tg::tensor({0.5, 0.5, 0.5})),
                   tg::tensor({1.0, 0.5, 3.0}));
  TG_REQUIRE_EQUAL(tg::testing::int64_tensor({5, 6, 7}).masked_fill(condition, -1),
                   tg::testing::int64_tensor({-1, 6, -1}));
  // The gradient of a promoted float32 operand comes back in float32.
  Tensor a = tg::tensor({1.0, 2.0, 3.0}).requires_grad_();
  tg::where(condition, a, tg::zeros({3}, tg::kFloat64)).sum().backward();
  TG_REQUIRE_EQUAL(a.grad(), tg::tensor({1.0, 0.0, 1.0}));
}

TEST_CASE("select ops refuse bad arguments", "[core][select][errors]") {
  const Tensor x = tg::ones({2, 3});
  REQUIRE_TG_ERROR(tg::where(tg::ones({2, 3}), x, x), Catch::Contains("where") && Catch::Contains("bool condition"));
  REQUIRE_TG_ERROR(tg::where(bools({1, 0}), x, x), Catch::Contains("where") && Catch::Contains("[2]") &&
                                                       Catch::Contains("[2, 3]"));
  REQUIRE_TG_ERROR(x.masked_fill(tg::ones({3}), 0.0), Catch::Contains("masked_fill") && Catch::Contains("bool mask"));
  REQUIRE_TG_ERROR(x.masked_fill(bools({1, 0}), 0.0), Catch::Contains("masked_fill") && Catch::Contains("[2]"));
  REQUIRE_TG_ERROR(tg::testing::int64_tensor({1}).masked_fill(bools({1}), NAN),
                   Catch::Contains("masked_fill") && Catch::Contains("int64"));
  REQUIRE_TG_ERROR(tg::maximum(x, tg::ones({4})), Catch::Contains("maximum") && Catch::Contains("[4]"));
  REQUIRE_TG_ERROR(tg::minimum(bools({1}), bools({0})), Catch::Contains("minimum") && Catch::Contains("bool"));
  REQUIRE_TG_ERROR(tg::maximum(x, Tensor()), Catch::Contains("maximum") && Catch::Contains("undefined"));
}

namespace {

using Comparison = std::function<Tensor(const Tensor&, const Tensor&)>;
const std::map<std::string, Comparison>& comparisons() {
  static const std::map<std::string, Comparison> ops{
      {"eq", [](const Tensor& a, const Tensor& b) { return a == b; }},
      {"ne", [](const Tensor& a, const Tensor& b) { return a != b; }},
      {"lt", [](const Tensor& a, const Tensor& b) { return a < b; }},
      {"le", [](const Tensor& a, const Tensor& b) { return tg::le(a, b); }},
      {"gt", [](const Tensor& a, const Tensor& b) { return a.gt(b); }},
      {"ge", [](const Tensor& a, const Tensor& b) { return a >= b; }},
  };
  return ops;
}

using ScalarComparison = std::function<Tensor(const Tensor&, double)>;
const std::map<std::string, ScalarComparison>& scalar_comparisons() {
  static const std::map<std::string, ScalarComparison> ops{
      {"eq", [](const Tensor& a, double b) { return a.eq(b); }},
      {"ne", [](const Tensor& a, double b) { return a != b; }},
      {"lt", [](const Tensor& a, double b) { return a < b; }},
      {"le", [](const Tensor& a, double b) { return a <= b; }},
      {"gt", [](const Tensor& a, double b) { return a > b; }},
      {"ge", [](const Tensor& a, double b) { return a.ge(b); }},
  };
  return ops;
}

}  // namespace

TEST_CASE("comparisons match PyTorch for float64 and int64, tensor and scalar", "[core][compare][fixture]") {
  const std::string op = GENERATE(as<std::string>{}, "eq", "ne", "lt", "le", "gt", "ge");
  const std::string shapes = GENERATE(as<std::string>{}, "2x3_2x3", "4x1x3_2x1", "3_s");
  const std::string suffix = GENERATE(as<std::string>{}, "_f64", "_i64");
  const std::string name = op + "_" + shapes + suffix;
  INFO("case " << name);
  const auto& c = fixture("elementwise.txt", name);
  const tg::DType dtype = suffix == "_i64" ? tg::kInt64 : tg::kFloat64;
  const Tensor a = c.at("a").to(dtype);
  const Tensor y = shapes == "3_s" ? scalar_comparisons().at(op)(a, c.scalar("b"))
                                   : comparisons().at(op)(a, c.at("b").to(dtype));
  REQUIRE(y.dtype() == tg::kBool);
  TG_REQUIRE_EQUAL(y, c.at("y").to(tg::kBool));
  // float32 gives the same answers on these (exact) values.
  if (dtype == tg::kFloat64 && shapes != "3_s")
    TG_REQUIRE_EQUAL(comparisons().at(op)(a.to(tg::kFloat32), c.at("b").to(tg::kFloat32)), y);
}

TEST_CASE("comparisons: promotion, scalars, bools, NaN and a scalar on the left", "[core][compare]") {
  const Tensor x = tg::tensor({0.1, 1.0, NAN});
  // The scalar is rounded to float32 first, as in PyTorch: float32 0.1 == 0.1.
  TG_REQUIRE_EQUAL(x == 0.1, bools({1, 0, 0}));
  TG_REQUIRE_EQUAL(x != x, bools({0, 0, 1}));  // NaN differs from itself
  TG_REQUIRE_EQUAL(0.5 < x, x > 0.5);
  TG_REQUIRE_EQUAL(1.0 >= x, bools({1, 1, 0}));
  // int64 against a float tensor promotes; bools compare as 0 and 1.
  TG_REQUIRE_EQUAL(tg::testing::int64_tensor({1, 2}) < tg::tensor({1.5, 1.5}, {}, tg::kFloat64), bools({1, 0}));
  TG_REQUIRE_EQUAL(bools({1, 0}) < tg::tensor({1.5, 0.0}), bools({1, 0}));
  TG_REQUIRE_EQUAL(bools({1, 0}) == bools({1, 1}), bools({1, 0}));
  // An integral scalar compares exactly with large int64 values; a fractional one in float64.
  const int64_t big = (int64_t{1} << 60) + 1;
  TG_REQUIRE_EQUAL(tg::testing::int64_tensor({big, 3}) == static_cast<double>(int64_t{1} << 60), bools({0, 0}));
  TG_REQUIRE_EQUAL(tg::testing::int64_tensor({0, 1}) < 0.5, bools({1, 0}));
  // Comparisons are constants of the tape.
  const Tensor w = tg::ones({2}).requires_grad_();
  CHECK_FALSE((w > 0.0).requires_grad());
  // Broadcasting and empty tensors.
  CHECK((tg::ones({0, 3}) < tg::ones({3})).shape() == tg::Shape{0, 3});
  REQUIRE_TG_ERROR(tg::ones({2, 3}) < tg::ones({2}), Catch::Contains("lt") && Catch::Contains("[2, 3]") &&
                                                         Catch::Contains("[2]"));
  REQUIRE_TG_ERROR(tg::eq(Tensor(), x), Catch::Contains("eq") && Catch::Contains("undefined"));
}

TEST_CASE("broadcast loops are independent of how the output is chunked", "[core][select]") {
  // Larger than one parallel chunk, with every access pattern: contiguous, repeated and strided rows.
  tg::manual_seed(3);
  const Tensor a = tg::randn({70, 1, 1000}, tg::kFloat64), b = tg::randn({3, 1}, tg::kFloat64);
  const Tensor m = tg::maximum(a, b);
  REQUIRE(m.shape() == tg::Shape{70, 3, 1000});
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>(), mv = m.to_vector<double>();
  for (int64_t i = 0; i < 70; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 1000; k += 37) REQUIRE(mv[(i * 3 + j) * 1000 + k] == std::max(av[i * 1000 + k], bv[j]));
  const Tensor t = tg::ones({1000, 1}) < tg::ones({1, 70});  // inner stride 0 for a, 1 for b
  CHECK(t.shape() == tg::Shape{1000, 70});
  CHECK(t.to(tg::kFloat32).sum().item() == 0.0);
}
