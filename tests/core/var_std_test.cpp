// var and std with `correction` (core/src/ops/reduction.cpp): PyTorch fixtures, hand-derived
// values, gradcheck, and the overloads that must keep meaning what they meant.
#include <cmath>

#include "core_test_util.hpp"

using tg::Tensor;
using tg::testing::fixture;
using tg::testing::leaf;
using tg::testing::random_leaf;

TEST_CASE("var and std with correction match PyTorch", "[core][reduction][var_std][fixture]") {
  const std::string op = GENERATE(as<std::string>{}, "var", "std");
  const std::string rest =
      GENERATE(as<std::string>{}, "3x4_d1_c0_k0", "3x4_d0_c2_k1", "2x3x4_d02_c1_k0", "2x3x4_d1_c2_k1", "5_d0_c0_k1");
  const std::string name = op + "_" + rest + "_f64";
  INFO("case " << name);
  const auto& c = fixture("elementwise.txt", name);
  Tensor x = leaf(c.at("x"));
  const std::vector<int64_t>& dims = c.ints("dims");
  const int correction = static_cast<int>(c.scalar("correction"));
  const bool keepdim = c.scalar("keepdim") != 0.0;
  const Tensor y = op == "var" ? x.var(dims, correction, keepdim) : x.std(dims, correction, keepdim);
  TG_REQUIRE_NEAR(y, c.at("y"), 1e-12);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(x.grad(), c.at("dx"), 1e-12);
}

TEST_CASE("var and std: corrections by hand and the unbiased overloads", "[core][reduction][var_std]") {
  // x = [1, 2, 4]: mean 7/3, Σ(x − mean)² = 14/3.
  const Tensor x = tg::tensor({1, 2, 4}, {}, tg::kFloat64);
  tg::testing::require_ieee_equal(x.var({0}, 0), {14.0 / 9}, 1e-15);
  tg::testing::require_ieee_equal(x.var({0}, 2), {14.0 / 3}, 1e-15);
  tg::testing::require_ieee_equal(x.var({0}, 0.5), {14.0 / 3 / 2.5}, 1e-15);  // a fractional correction
  tg::testing::require_ieee_equal(x.std({0}, 2, true), {std::sqrt(14.0 / 3)}, 1e-15);
  CHECK(x.std({0}, 2, true).shape() == tg::Shape{1});
  // correction >= n divides by max(n − c, 0) = 0: inf for var, as PyTorch.
  tg::testing::require_ieee_equal(x.var({0}, 3), {tg::testing::kInf}, 0.0);
  // The bool overloads still mean `unbiased`, and agree with corrections 1 and 0.
  tg::testing::require_ieee_equal(x.var({0}, true), tg::testing::values(x.var({0}, 1)), 0.0);
  tg::testing::require_ieee_equal(x.var(false), {14.0 / 9}, 1e-15);
  tg::testing::require_ieee_equal(x.std(), {std::sqrt(14.0 / 6)}, 1e-15);
  tg::testing::require_ieee_equal(x.std(false), {std::sqrt(14.0 / 9)}, 1e-15);
  tg::testing::require_ieee_equal(x.std({0}), {std::sqrt(14.0 / 6)}, 1e-15);
  // float32 stays float32.
  CHECK(x.to(tg::kFloat32).std({0}, 0).dtype() == tg::kFloat32);
}

TEST_CASE("std's gradient is 0 where std is 0, as PyTorch's", "[core][reduction][var_std]") {
  Tensor x = tg::full({2, 3}, 1.5, tg::kFloat64).requires_grad_();
  x.std({1}).sum().backward();
  tg::testing::require_ieee_equal(x.grad(), {0, 0, 0, 0, 0, 0}, 0.0);
}

TEST_CASE("var and std with correction pass gradcheck", "[core][reduction][var_std][gradcheck]") {
  const int correction = GENERATE(0, 1, 2);
  const bool keepdim = GENERATE(false, true);
  Tensor x = random_leaf({3, 4, 5});
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return in[0].var({0, 2}, correction, keepdim); }, std::vector{x});
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return in[0].std({1}, correction, keepdim); }, std::vector{x});
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return in[0].std(); }, std::vector{x});
}

TEST_CASE("var and std refuse bad arguments", "[core][reduction][var_std][errors]") {
  const Tensor x = tg::ones({2, 3});
  REQUIRE_TG_ERROR(x.std({2}, 1), Catch::Contains("std") && Catch::Contains("2"));
  REQUIRE_TG_ERROR(x.var({0}, NAN), Catch::Contains("var") && Catch::Contains("NaN"));
  REQUIRE_TG_ERROR(tg::ones({2}, tg::kInt64).std(), Catch::Contains("std") && Catch::Contains("int64"));
  REQUIRE_TG_ERROR(x.std({0, 0}), Catch::Contains("std") && Catch::Contains("more than once"));
}
