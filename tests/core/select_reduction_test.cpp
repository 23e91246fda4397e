// max/min over a dim (values and indices), argmax/argmin, max()/min() of all elements: PyTorch
// fixtures with ties, values by hand (NaN, int64, 0-d, keepdim), gradcheck, errors.
#include <cmath>

#include "core_test_util.hpp"
#include "support/dim_ops.hpp"

using tg::Tensor;
using tg::testing::fixture;
using tg::testing::fixture_tol;
using tg::testing::leaf;
using tg::testing::random_leaf;

namespace {
const std::vector<std::string> kDimCases = {"_3x4_dim1_keep0", "_2x3x4_dim0_keep1", "_2x3x4_dimm1_keep0"};
}

TEST_CASE("max and min over a dim match PyTorch, ties included", "[core][select][fixture]") {
  const std::string op = GENERATE(as<std::string>{}, "max", "min");
  const std::string shape = GENERATE(from_range(kDimCases));
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const auto& c = fixture("indexing.txt", op + shape + suffix);
  INFO(c.name);
  const double tol = fixture_tol(c.at("x").dtype());
  Tensor x = leaf(c.at("x"));
  const int64_t dim = c.ints("dim")[0];
  const bool keepdim = c.scalar("keepdim") != 0.0;
  const auto [values, indices] = op == "max" ? x.max(dim, keepdim) : x.min(dim, keepdim);
  CHECK(indices.dtype() == tg::kInt64);
  TG_REQUIRE_NEAR(values, c.at("y"), tol);
  values.backward(c.at("dy"));
  TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);

  const auto& ic = fixture("indexing.txt", op + shape + "_indices");
  const Tensor expected = tg::testing::int64_tensor(ic, "indices");
  const Tensor xi = ic.at("x").to(x.dtype());
  CHECK(xi.max(dim, keepdim).indices.shape() == expected.shape());
  const Tensor got = op == "max" ? xi.max(dim, keepdim).indices : xi.min(dim, keepdim).indices;
  CHECK(got.to_vector<int64_t>() == expected.to_vector<int64_t>());
  const Tensor arg = op == "max" ? xi.argmax(dim, keepdim) : xi.argmin(dim, keepdim);
  CHECK(arg.shape() == expected.shape());
  CHECK(arg.to_vector<int64_t>() == expected.to_vector<int64_t>());
}

TEST_CASE("max() and min() of all elements share the gradient among ties as PyTorch", "[core][select][fixture]") {
  const std::string op = GENERATE(as<std::string>{}, "max", "min");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const auto& c = fixture("indexing.txt", op + "_all" + suffix);
  INFO(c.name);
  const double tol = fixture_tol(c.at("x").dtype());
  Tensor x = leaf(c.at("x"));
  const Tensor y = op == "max" ? x.max() : x.min();
  CHECK(y.dim() == 0);
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);

  const auto& flat = fixture("indexing.txt", "arg" + op + "_flat");
  const Tensor index = op == "max" ? flat.at("x").argmax() : flat.at("x").argmin();
  CHECK(index.dim() == 0);
  CHECK(index.item<int64_t>() == flat.ints("index")[0]);
}

TEST_CASE("max and min by hand: first of ties, NaN wins, int64, 0-d, keepdim", "[core][select]") {
  const Tensor x = tg::tensor({1, 7, 7, 2, -3, -3, -3, 0}, {2, 4}, tg::kFloat64);
  auto [values, indices] = x.max(1);
  CHECK(values.to_vector<double>() == std::vector<double>{7, 0});
  CHECK(indices.to_vector<int64_t>() == std::vector<int64_t>{1, 3});
  CHECK(x.min(1).indices.to_vector<int64_t>() == std::vector<int64_t>{0, 0});
  CHECK(x.min(-1, true).values.shape() == tg::Shape{2, 1});
  CHECK(x.max(0).indices.to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 0});
  CHECK(x.min(0).indices.to_vector<int64_t>() == std::vector<int64_t>{1, 1, 1, 1});
  CHECK(x.argmax().item<int64_t>() == 1);
  CHECK(x.argmin().item<int64_t>() == 4);
  CHECK(x.argmax(0, true).shape() == tg::Shape{1, 4});
  // NaN is the max and the min, and the first NaN is the index (PyTorch's propagation).
  const double nan = tg::testing::kNaN;
  const Tensor with_nan = tg::tensor({1, nan, 5, nan}, {}, tg::kFloat64);
  CHECK(std::isnan(with_nan.max(0).values.item()));
  CHECK(with_nan.max(0).indices.item<int64_t>() == 1);
  CHECK(with_nan.argmin().item<int64_t>() == 1);
  CHECK(std::isnan(with_nan.min().item()));
  // int64 tensors select too (no gradient).
  const Tensor counts = tg::tensor({4, 9, 9, 1}, {2, 2}, tg::kInt64);
  CHECK(counts.max(1).values.to_vector<int64_t>() == std::vector<int64_t>{9, 9});
  CHECK(counts.min().item<int64_t>() == 1);
  CHECK(counts.argmax().item<int64_t>() == 1);
  // A 0-d tensor takes dim 0 and -1 and selects itself.
  const Tensor s = tg::scalar_tensor(2.5);
  CHECK(s.max(0).values.item() == 2.5);
  CHECK(s.max(-1).indices.item<int64_t>() == 0);
  CHECK(s.argmin(0).dim() == 0);
  // Empty lines are an error, but no lines at all is an empty result.
  CHECK(tg::zeros({0, 3}).max(1).values.shape() == tg::Shape{0});
}

TEST_CASE("max() gradient by hand: evenly among ties, NaN ties with NaN", "[core][select]") {
  Tensor x = tg::tensor({3, 1, 3, 3}, {}, tg::kFloat64).requires_grad_();
  x.max().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1.0 / 3, 0, 1.0 / 3, 1.0 / 3});
  Tensor y = tg::tensor({tg::testing::kNaN, 1, tg::testing::kNaN}, {}, tg::kFloat64).requires_grad_();
  y.min().backward(tg::scalar_tensor(4.0, tg::kFloat64));
  CHECK(y.grad().to_vector<double>() == std::vector<double>{2, 0, 2});
}

TEST_CASE("max and min over a dim pass gradcheck in float64", "[core][select][gradcheck]") {
  const int64_t dim = GENERATE(0, 1, -1);
  const bool keepdim = GENERATE(false, true);
  INFO("dim " << dim << " keepdim " << keepdim);
  const Tensor x = random_leaf({3, 4, 2});  // continuous values: no ties, so the max is differentiable
  TG_REQUIRE_GRADCHECK([=](const std::vector<Tensor>& in) { return in[0].max(dim, keepdim).values; },
                       (std::vector<Tensor>{x}));
  TG_REQUIRE_GRADCHECK([=](const std::vector<Tensor>& in) { return in[0].min(dim, keepdim).values; },
                       (std::vector<Tensor>{x}));
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return in[0].max() * 2.0; }, (std::vector<Tensor>{x}));
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return in[0].min(); }, (std::vector<Tensor>{x}));
}

TEST_CASE("selection refuses bad arguments with tg::Error", "[core][select][errors]") {
  using Catch::Matchers::Contains;
  const Tensor x = tg::zeros({2, 0});
  REQUIRE_TG_ERROR(x.max(1), Contains("max") && Contains("dim 1 of size 0") && Contains("[2, 0]"));
  REQUIRE_TG_ERROR(x.argmin(-1), Contains("argmin") && Contains("size 0"));
  REQUIRE_TG_ERROR(x.max(), Contains("max") && Contains("empty tensor"));
  REQUIRE_TG_ERROR(tg::zeros({0}).argmax(), Contains("argmax") && Contains("empty tensor"));
  REQUIRE_TG_ERROR(tg::zeros({2, 3}).min(2), Contains("min") && Contains("out of range"));
  REQUIRE_TG_ERROR(tg::zeros({2}, tg::kBool).max(0), Contains("max") && Contains("bool"));
}
