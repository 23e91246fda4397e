// sum, mean, var over lists of dims: PyTorch fixtures, hand-derived values (negative dims,
// keepdim, unbiased, empty tensors), and gradcheck.
#include <cmath>

#include "core_test_util.hpp"

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
