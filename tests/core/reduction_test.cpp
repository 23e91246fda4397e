// sum, mean, var over lists of dims, and prod: PyTorch fixtures, hand-derived values (negative
// dims, keepdim, unbiased, empty tensors, zeros in a product, int64 and bool inputs that sum and
// multiply to int64 with wrap-around), gradcheck and gradgradcheck, and the dtype refusals.
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core_test_util.hpp"
#include "support/dim_ops.hpp"

using tg::Tensor;
using tg::testing::fixture;
using tg::testing::fixture_tol;
using tg::testing::leaf;
using tg::testing::random_leaf;

TEST_CASE("reductions match PyTorch forward and backward", "[core][reduction][fixture]") {
  const std::string name = GENERATE(as<std::string>{}, "sum_dims_m1_keep0", "sum_dims_0_2_keep1", "mean_dims_1_keep1",
                                    "mean_dims_m1_m2_keep0", "var_dims_m1_unbiased0_keep1",
                                    "var_dims_0_2_unbiased1_keep0");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  INFO("case " << name + suffix);
  const auto& c = fixture("core_ops.txt", name + suffix);
  const double tol = fixture_tol(c.at("x").dtype());
  Tensor x = leaf(c.at("x"));
  const std::vector<int64_t>& dims = c.ints("dims");
  const bool keepdim = c.scalar("keepdim") != 0.0;
  Tensor y;
  if (name.rfind("sum", 0) == 0) y = x.sum(dims, keepdim);
  else if (name.rfind("mean", 0) == 0) y = x.mean(dims, keepdim);
  else y = x.var(dims, c.scalar("unbiased") != 0.0, keepdim);
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);
}

TEST_CASE("sum over all elements matches PyTorch", "[core][reduction][fixture]") {
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const auto& c = fixture("core_ops.txt", "sum_all" + suffix);
  const double tol = fixture_tol(c.at("x").dtype());
  Tensor x = leaf(c.at("x"));
  const Tensor y = x.sum();
  CHECK(y.dim() == 0);
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);
}

TEST_CASE("sum and mean by hand over negative dims, with and without keepdim", "[core][reduction]") {
  // x[i][j][k] = 12 i + 4 j + k, shape [2, 3, 4]
  std::vector<double> values(24);
  for (int i = 0; i < 24; ++i) values[i] = i;
  const Tensor x = tg::tensor(values, {2, 3, 4}, tg::kFloat64);

  const Tensor s_last = x.sum({-1});
  CHECK(s_last.shape() == tg::Shape{2, 3});
  CHECK(s_last.to_vector<double>() == std::vector<double>{6, 22, 38, 54, 70, 86});
  CHECK(x.sum({-1}, true).shape() == tg::Shape{2, 3, 1});
  CHECK(x.sum({2}, true).to_vector<double>() == s_last.to_vector<double>());

  const Tensor s_first = x.sum({0}, true);
  CHECK(s_first.shape() == tg::Shape{1, 3, 4});
  CHECK(s_first.to_vector<double>()[0] == 12.0);   // 0 + 12
  CHECK(s_first.to_vector<double>()[11] == 34.0);  // 11 + 23

  // Non-adjacent dims 0 and 2: sum over i and k for each j = 2 * 4 * (4 j) + Σ_i 4 * 12 i + 2 * Σ_k k
  const Tensor s_outer = x.sum({-3, -1});
  CHECK(s_outer.shape() == tg::Shape{3});
  CHECK(s_outer.to_vector<double>() == std::vector<double>{60, 92, 124});

  const Tensor m = x.mean({-2, -1}, false);
  CHECK(m.shape() == tg::Shape{2});
  CHECK(m.to_vector<double>() == std::vector<double>{5.5, 17.5});
  CHECK(x.mean({1, 2}, true).shape() == tg::Shape{2, 1, 1});
  CHECK(x.mean().item() == 11.5);
  CHECK(x.sum().item() == 276.0);
  // An empty list of dims reduces everything, as in PyTorch.
  CHECK(x.sum({}, false).item() == 276.0);
  CHECK(x.sum({}, true).shape() == tg::Shape{1, 1, 1});
}

TEST_CASE("var unbiased and biased by hand", "[core][reduction]") {
  // rows [1, 2, 3, 4] (mean 2.5, Σ(x - mean)² = 5) and [2, 2, 2, 6] (mean 3, Σ = 12)
  const Tensor x = tg::tensor({1, 2, 3, 4, 2, 2, 2, 6}, {2, 4}, tg::kFloat64);
  const std::vector<double> unbiased = x.var({-1}, true).to_vector<double>();
  CHECK(unbiased[0] == Approx(5.0 / 3).epsilon(1e-15));
  CHECK(unbiased[1] == 4.0);
  CHECK(x.var({1}, false).to_vector<double>() == std::vector<double>{1.25, 3.0});
  // A braced dim list alone means dims, never the `unbiased` flag of var(bool).
  CHECK(x.var({1}).shape() == tg::Shape{2});
  CHECK(x.var({1}).to_vector<double>()[1] == 4.0);
  CHECK(x.var({-1}, false, true).shape() == tg::Shape{2, 1});
  // Over dim 0: columns [1, 2], [2, 2], [3, 2], [4, 6]
  CHECK(x.var({0}, true).to_vector<double>() == std::vector<double>{0.5, 0.0, 0.5, 2.0});
  CHECK(x.var({0}, false).to_vector<double>() == std::vector<double>{0.25, 0.0, 0.25, 1.0});
  // All 8 elements: mean 2.75, Σ(x - mean)² = 17.5
  CHECK(x.var(true).item() == Approx(17.5 / 7).epsilon(1e-15));
  CHECK(x.var(false).item() == Approx(17.5 / 8).epsilon(1e-15));
  // One element per group: unbiased divides by 0 -> nan, like PyTorch; biased gives 0.
  CHECK(std::isnan(tg::ones({3, 1}).var({1}, true).to_vector<float>()[0]));
  CHECK(tg::ones({3, 1}).var({1}, false).to_vector<float>()[0] == 0.0f);
}

TEST_CASE("var keeps precision when the mean is large", "[core][reduction]") {
  const Tensor x = tg::tensor({1e8 + 1, 1e8 + 2, 1e8 + 3}, {}, tg::kFloat64);
  CHECK(x.var(true).item() == Approx(1.0).epsilon(1e-9));
}

TEST_CASE("reductions on 0-d and 4-d tensors", "[core][reduction]") {
  const Tensor s = tg::scalar_tensor(2.5, tg::kFloat64);
  CHECK(s.sum().item() == 2.5);
  CHECK(s.mean().item() == 2.5);
  CHECK(s.sum().dim() == 0);
  // As in PyTorch, a 0-d tensor accepts dim 0 and -1 and reduces to itself.
  CHECK(s.sum({0}).item() == 2.5);
  CHECK(s.mean({-1}, true).dim() == 0);
  CHECK(s.var({0}, false).item() == 0.0);
  REQUIRE_THROWS_AS(s.sum({1}), tg::Error);

  std::vector<double> values(2 * 3 * 4 * 5);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i);
  const Tensor x = tg::tensor(values, {2, 3, 4, 5}, tg::kFloat64);
  const Tensor y = x.sum({1, 3});
  CHECK(y.shape() == tg::Shape{2, 4});
  // y[a][c] = Σ_b Σ_d (60 a + 20 b + 5 c + d) = 15 (60 a + 5 c) + 5 * 20 * 3 + 3 * 10
  for (int a = 0; a < 2; ++a)
    for (int c = 0; c < 4; ++c) CHECK(y.to_vector<double>()[a * 4 + c] == 15.0 * (60 * a + 5 * c) + 300 + 30);
  CHECK(x.mean({0, 1, 2, 3}).item() == 59.5);
}

TEST_CASE("reductions over empty tensors follow PyTorch", "[core][reduction]") {
  const Tensor e = tg::zeros({0, 3}, tg::kFloat64);
  CHECK(e.sum().item() == 0.0);
  CHECK(std::isnan(e.mean().item()));
  const Tensor s0 = e.sum({0});
  CHECK(s0.shape() == tg::Shape{3});
  CHECK(s0.to_vector<double>() == std::vector<double>{0, 0, 0});
  const Tensor m0 = e.mean({0}, true);
  CHECK(m0.shape() == tg::Shape{1, 3});
  for (double v : m0.to_vector<double>()) CHECK(std::isnan(v));
  const Tensor s1 = e.sum({1});
  CHECK(s1.shape() == tg::Shape{0});
  CHECK(tg::zeros({0}).sum().item() == 0.0);
}

TEST_CASE("reducing over size-1 dims is the identity", "[core][reduction]") {
  const Tensor x = tg::tensor({1, 2, 3, 4, 5, 6}, {2, 1, 3}, tg::kFloat64);
  CHECK(x.sum({1}).shape() == tg::Shape{2, 3});
  CHECK(x.sum({1}).to_vector<double>() == x.to_vector<double>());
  CHECK(x.sum({0, 2}).to_vector<double>() == std::vector<double>{21});
  CHECK(x.mean({1, 2}).to_vector<double>() == std::vector<double>{2, 5});
}

TEST_CASE("gradcheck: reductions over dim lists", "[core][reduction][gradcheck]") {
  using Dims = std::vector<int64_t>;
  const Dims dims = GENERATE(Dims{}, Dims{0}, Dims{-1}, Dims{0, 2}, Dims{-1, -2}, Dims{1});
  const bool keepdim = GENERATE(false, true);
  const std::string op = GENERATE(as<std::string>{}, "sum", "mean", "var_unbiased", "var_biased");
  INFO(op << " over " << tg::to_string(dims) << " keepdim " << keepdim);
  tg::manual_seed(21);
  const Tensor x = random_leaf({2, 3, 4});
  TG_REQUIRE_GRADCHECK(
      [&](const std::vector<Tensor>& in) {
        Tensor y;
        if (op == "sum") y = in[0].sum(dims, keepdim);
        else if (op == "mean") y = in[0].mean(dims, keepdim);
        else y = in[0].var(dims, op == "var_unbiased", keepdim);
        return y;
      },
      std::vector<Tensor>{x});
}

TEST_CASE("gradcheck: reductions of 4-d tensors and of sums over broadcast results", "[core][reduction][gradcheck]") {
  tg::manual_seed(22);
  const Tensor x = random_leaf({2, 1, 3, 2});
  const Tensor w = random_leaf({3, 1});
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return (in[0] * in[1]).var({0, 3}, true, true); },
                       (std::vector<Tensor>{x, w}));
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return (in[0] - in[1]).mean({-2}).pow(2).sum(); },
                       (std::vector<Tensor>{x, w}));
}

// --- prod, and sums and products of bool and int64 tensors (tests/fixtures/make_reduction_fixtures.py) ---

namespace {

const std::map<std::string, tg::testing::FixtureCase>& reduction_cases() {
  return tg::testing::load_fixtures("reductions.txt");
}

// The names of reductions.txt's cases that start with `prefix`.
std::vector<std::string> cases_starting_with(const std::string& prefix) {
  std::vector<std::string> names;
  for (const auto& [name, c] : reduction_cases())
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  return names;
}

// An int64 fixture tensor, exact (values beyond 2^53 included), shaped by `<name>_shape`.
Tensor exact_int64(const tg::testing::FixtureCase& c, const std::string& name) {
  return tg::tensor(c.ints(name)).reshape(c.ints(name + "_shape"));  // an empty shape: 0-d
}

// The input of an int_* case: int64, or bool when the case says so.
Tensor int_case_input(const tg::testing::FixtureCase& c) {
  const Tensor x = exact_int64(c, "x");
  return c.scalar("is_bool") != 0.0 ? x.to(tg::kBool) : x;
}

// x.prod() or x.prod(dim, keepdim), as a fixture case's `dim` (-100: all elements) says.
Tensor prod_of_case(const Tensor& x, const tg::testing::FixtureCase& c) {
  const int64_t dim = static_cast<int64_t>(c.scalar("dim"));
  return dim == -100 ? x.prod() : x.prod(dim, c.scalar("keepdim") != 0.0);
}

}  // namespace

TEST_CASE("prod matches PyTorch forward and backward, with zero, one and two zeros per line",
          "[core][reduction][prod][fixture]") {
  const std::vector<std::string> names = cases_starting_with("prod_");
  // (shape, dim, keepdim) pairs: [5] 1 + 2·2, [3, 4] 1 + 3·2, [2, 3, 4] 1 + 4·2; 0, 1, 2 zeros; f32, f64
  REQUIRE(names.size() == (5 + 7 + 9) * 3 * 2);
  for (const std::string& name : names) {
    INFO("case " << name);
    const auto& c = reduction_cases().at(name);
    const double tol = fixture_tol(c.at("x").dtype());
    Tensor x = leaf(c.at("x"));
    const Tensor y = prod_of_case(x, c);
    TG_REQUIRE_NEAR(y, c.at("y"), tol);
    y.backward(c.at("dy"));
    TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);
  }
}

TEST_CASE("prod by hand: the gradient of one zero is the product of the others, of two zeros 0",
          "[core][reduction][prod]") {
  // rows [2, 3, 4], [0, 3, 4], [0, 3, 0]: products 24, 0, 0
  Tensor x = tg::tensor({2, 3, 4, 0, 3, 4, 0, 3, 0}, {3, 3}, tg::kFloat64).requires_grad_();
  const Tensor y = x.prod(1);
  CHECK(y.to_vector<double>() == std::vector<double>{24, 0, 0});
  y.backward(tg::tensor({1, 10, 100}, {}, tg::kFloat64));
  // row 0: 24 / x; row 1: only the zero gets 3 · 4 (times 10); row 2: two zeros, all 0
  CHECK(x.grad().to_vector<double>() == std::vector<double>{12, 8, 6, 120, 0, 0, 0, 0, 0});
  CHECK(x.prod(0, true).shape() == tg::Shape{1, 3});
  CHECK(x.prod(-1, true).to_vector<double>() == std::vector<double>{24, 0, 0});
  CHECK(x.prod().dim() == 0);
  CHECK(x.prod().item() == 0.0);
  // A 0-d tensor is its own product, with gradient g; dim 0 and -1 both name it.
  Tensor s = tg::scalar_tensor(-2.5, tg::kFloat64).requires_grad_();
  const Tensor ps = s.prod(-1);
  CHECK(ps.dim() == 0);
  ps.backward(tg::scalar_tensor(3.0, tg::kFloat64));
  CHECK(s.grad().item() == 3.0);
  CHECK(s.prod(0, true).item() == -2.5);
  REQUIRE_TG_ERROR(s.prod(1), Catch::Contains("prod"));
  REQUIRE_TG_ERROR(x.prod(2), Catch::Contains("prod") && Catch::Contains("2"));
}

TEST_CASE("prod of empty tensors is 1, and sum 0, in every dtype", "[core][reduction][prod][empty]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64, tg::kInt64, tg::kBool);
  INFO(dtype);
  const tg::DType result = tg::is_floating_point(dtype) ? dtype : tg::kInt64;
  const Tensor e = tg::zeros({0, 3}, dtype);
  CHECK(e.prod().dtype() == result);
  CHECK(e.prod().item() == 1.0);
  CHECK(e.sum().dtype() == result);
  CHECK(e.sum().item() == 0.0);
  const Tensor p0 = e.prod(0);
  CHECK(p0.shape() == tg::Shape{3});
  CHECK(tg::testing::values(p0) == std::vector<double>{1, 1, 1});
  CHECK(e.prod(1, true).shape() == tg::Shape{0, 1});
  CHECK(tg::testing::values(e.sum({0}, true)) == std::vector<double>{0, 0, 0});
  if (tg::is_floating_point(dtype)) {
    Tensor leaf_e = tg::zeros({0, 3}, dtype).requires_grad_();
    leaf_e.prod(0).sum().backward();
    CHECK(leaf_e.grad().shape() == tg::Shape{0, 3});
  }
}

TEST_CASE("gradcheck and gradgradcheck: prod over every dim, with zeros in the input",
          "[core][reduction][prod][gradcheck]") {
  // prod is a polynomial, so finite differences are exact enough at zeros too.
  const int zeros = GENERATE(0, 1, 2);
  const int64_t dim = GENERATE(-100, 0, 1, -1);  // -100: all elements
  const bool keepdim = GENERATE(false, true);
  INFO(zeros << " zeros per row, dim " << dim << ", keepdim " << keepdim);
  tg::manual_seed(31);
  Tensor x = tg::empty({3, 4}, tg::kFloat64).uniform_(0.5, 1.5);
  double* values = x.mutable_data<double>();
  for (int row = 0; row < 3; ++row)
    for (int k = 0; k < zeros; ++k) values[row * 4 + (row + 2 * k) % 4] = 0.0;
  x.requires_grad_();
  const tg::DifferentiableFunction f = [&](const std::vector<Tensor>& in) {
    return dim == -100 ? in[0].prod() : in[0].prod(dim, keepdim);
  };
  TG_REQUIRE_GRADCHECK(f, std::vector<Tensor>{x});
  const tg::GradcheckResult second = tg::gradgradcheck(f, {x});
  INFO(second.message);
  REQUIRE(second.passed);
}

TEST_CASE("bool and int64 tensors sum and multiply to int64 as in PyTorch, wrapping around on overflow",
          "[core][reduction][int][fixture]") {
  const std::vector<std::string> names = cases_starting_with("int_");
  size_t checked = 0;
  for (const std::string& name : names) {
    const auto& c = reduction_cases().at(name);
    const bool is_sum = name.find("_sum_") != std::string::npos, is_prod = name.find("_prod_") != std::string::npos;
    if (!is_sum && !is_prod) continue;  // the scans: scan_test.cpp
    INFO("case " << name);
    const Tensor x = int_case_input(c);
    const Tensor y = is_sum ? x.sum(c.ints("dims"), c.scalar("keepdim") != 0.0) : prod_of_case(x, c);
    const Tensor expected = exact_int64(c, "y");
    REQUIRE(y.dtype() == tg::kInt64);
    REQUIRE(y.shape() == expected.shape());
    CHECK(y.to_vector<int64_t>() == expected.to_vector<int64_t>());
    CHECK_FALSE(y.requires_grad());
    ++checked;
  }
  // per dtype: sums over 3 + 4 + 7 dim lists, each keepdim or not; products 3 + 5 + 7
  CHECK(checked == 2 * ((3 + 4 + 7) * 2 + 3 + 5 + 7));
}

TEST_CASE("integer sums by hand: counts of bools, exact beyond 2^53, wrapping as two's complement",
          "[core][reduction][int]") {
  const Tensor mask = tg::tensor(std::vector<bool>{true, false, true, true, false, true}, {2, 3});
  CHECK(mask.sum().dtype() == tg::kInt64);
  CHECK(mask.sum().item<int64_t>() == 4);
  CHECK(mask.sum({1}).to_vector<int64_t>() == std::vector<int64_t>{2, 2});
  CHECK(mask.sum({0}, true).to_vector<int64_t>() == std::vector<int64_t>{2, 0, 2});
  CHECK(mask.sum({0}, true).shape() == tg::Shape{1, 3});
  CHECK(mask.prod({1}).to_vector<int64_t>() == std::vector<int64_t>{0, 0});

  const int64_t big = int64_t{1} << 62;
  const Tensor x = tg::tensor(std::vector<int64_t>{big + 1, big, 3, -2}, {2, 2});
  // big + 1 + big = 2^63 + 1: wraps to -2^63 + 1
  CHECK(x.sum({1}).to_vector<int64_t>()[0] == std::numeric_limits<int64_t>::min() + 1);
  CHECK(x.sum({1}).to_vector<int64_t>()[1] == 1);
  CHECK(x.sum({0}).to_vector<int64_t>() == std::vector<int64_t>{big + 4, big - 2});
  // 2^62 · 3 = 2^63 + 2^62 wraps to -2^62; (2^62 + 1) · 2^62 = 2^62 mod 2^64 (2^124 vanishes)
  CHECK(tg::tensor(std::vector<int64_t>{big, 3}).prod().item<int64_t>() == -big);
  // (2^62 + 1) · 3 = 2^63 + 2^62 + 3 wraps to -2^62 + 3; 2^62 · -2 = -2^63 just fits
  CHECK(x.prod(0).to_vector<int64_t>() == std::vector<int64_t>{-big + 3, std::numeric_limits<int64_t>::min()});
  CHECK(tg::tensor(std::vector<int64_t>{big + 1, big}).prod().item<int64_t>() == big);
}

TEST_CASE("the accuracy idiom: (pred == y).sum().item()", "[core][reduction][int]") {
  const Tensor logits = tg::tensor({0.1, 2.0, 0.3, 1.5, 0.2, 0.1, 0.0, 0.1, 0.9, 3.0, 1.0, 2.0}, {4, 3});
  const Tensor y = tg::tensor(std::vector<int64_t>{1, 0, 1, 0});
  const Tensor pred = logits.argmax(1);  // [1, 0, 2, 0]
  const Tensor correct = (pred == y).sum();
  CHECK(correct.dtype() == tg::kInt64);
  CHECK(correct.item() == 3.0);
  CHECK(correct.item<int64_t>() == 3);
  CHECK((pred == y).to(tg::kFloat32).mean().item() == 0.75);
}

TEST_CASE("integer results are the same at any thread count", "[core][reduction][int][threads]") {
  std::vector<int64_t> values(300000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>(i * 2654435761u % 1000003) - 500000;
  const Tensor x = tg::tensor(values, {300, 1000});
  int64_t total = 0;
  for (int64_t v : values) total += v;
  CHECK(x.sum().item<int64_t>() == total);
  tg::testing::require_same_bits_at_any_thread_count([&] {
    // (the helper compares float64 bits: the int64 results, all below 2^53 but the products, as float64)
    return std::vector<Tensor>{x.sum().to(tg::kFloat64), x.sum({0}).to(tg::kFloat64), x.sum({1}, true).to(tg::kFloat64),
                               (x > 0).sum({0}).to(tg::kFloat64), x.prod(1).to(tg::kFloat64), x.cumsum(0).to(tg::kFloat64)};
  });
}

TEST_CASE("mean, var and std refuse bool and int64 tensors, naming the cast", "[core][reduction][int][errors]") {
  const tg::DType dtype = GENERATE(tg::kInt64, tg::kBool);
  const std::string dtype_name(tg::name(dtype));
  const Tensor x = tg::ones({2, 3}, dtype);
  REQUIRE_TG_ERROR(x.mean(), Catch::Equals("mean: " + dtype_name +
                                           " tensors have no mean; cast first: x.to(tg::kFloat32).mean()"));
  REQUIRE_TG_ERROR(x.mean({1}, true), Catch::StartsWith("mean: " + dtype_name) &&
                                          Catch::Contains("x.to(tg::kFloat32).mean()"));
  REQUIRE_TG_ERROR(x.var(), Catch::Equals("var: not implemented for " + dtype_name +
                                          " tensors (supported: float32, float64); cast with .to(tg::kFloat32)"));
  REQUIRE_TG_ERROR(x.std({0}), Catch::StartsWith("std: not implemented") && Catch::EndsWith(".to(tg::kFloat32)"));
}
