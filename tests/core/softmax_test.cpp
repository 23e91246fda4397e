// softmax, log_softmax, logsumexp: PyTorch fixtures over several dims, values by hand, large and
// infinite logits, gradcheck in float64, errors, and the same bits at any thread count.
#include <cmath>

#include "core_test_util.hpp"
#include "support/dim_ops.hpp"

using tg::Tensor;
using tg::testing::fixture;
using tg::testing::fixture_tol;
using tg::testing::leaf;
using tg::testing::random_leaf;

TEST_CASE("softmax and log_softmax match PyTorch forward and backward", "[core][softmax][fixture]") {
  const std::string op = GENERATE(as<std::string>{}, "softmax", "log_softmax");
  const std::string shape =
      GENERATE(as<std::string>{}, "_3x5_dimm1", "_2x3x4_dim1", "_2x3x4_dim0", "_4_dim0", "_large");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const auto& c = fixture("indexing.txt", op + shape + suffix);
  INFO(c.name);
  const double tol = fixture_tol(c.at("x").dtype());
  Tensor x = leaf(c.at("x"));
  const int64_t dim = c.ints("dim")[0];
  const Tensor y = op == "softmax" ? x.softmax(dim) : tg::log_softmax(x, dim);
  CHECK(y.grad_fn_name() == std::string(op == "softmax" ? "SoftmaxBackward" : "LogSoftmaxBackward"));
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);
}

TEST_CASE("logsumexp matches PyTorch over lists of dims", "[core][softmax][fixture]") {
  const std::string name = GENERATE(as<std::string>{}, "logsumexp_dims_1_keep0", "logsumexp_dims_0_2_keep1",
                                    "logsumexp_dims_m1_keep1", "logsumexp_dims_2_0_keep0");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const auto& c = fixture("indexing.txt", name + suffix);
  INFO(c.name);
  const double tol = fixture_tol(c.at("x").dtype());
  Tensor x = leaf(c.at("x"));
  const Tensor y = x.logsumexp(c.ints("dims"), c.scalar("keepdim") != 0.0);
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);
}

TEST_CASE("softmax by hand: exp ratios, rows summing to 1, shift invariance", "[core][softmax]") {
  // softmax([0, ln 2, ln 5]) = [1, 2, 5] / 8
  const Tensor x = tg::tensor({0.0, std::log(2.0), std::log(5.0)}, {}, tg::kFloat64);
  const std::vector<double> p = x.softmax(0).to_vector<double>();
  CHECK(p[0] == Approx(0.125).epsilon(1e-15));
  CHECK(p[1] == Approx(0.25).epsilon(1e-15));
  CHECK(p[2] == Approx(0.625).epsilon(1e-15));
  const std::vector<double> logp = x.log_softmax(-1).to_vector<double>();
  CHECK(logp[2] == Approx(std::log(0.625)).epsilon(1e-15));
  CHECK(x.logsumexp({0}).item() == Approx(std::log(8.0)).epsilon(1e-15));
  // Logits of 1e4 would overflow exp: the max shift keeps them exact.
  const Tensor big = tg::tensor({1e4, 1e4 + std::log(3.0)}, {1, 2}, tg::kFloat64);
  CHECK(big.softmax(1).to_vector<double>()[1] == Approx(0.75).epsilon(1e-12));
  CHECK(big.log_softmax(1).to_vector<double>()[0] == Approx(std::log(0.25)).epsilon(1e-12));
  CHECK(big.logsumexp({1}).item() == Approx(1e4 + std::log(4.0)).epsilon(1e-15));
  // Along dim 0 of a [2, 3] tensor every column sums to 1.
  const Tensor cols = tg::tensor({1, 2, 3, 4, 5, 9}, {2, 3}, tg::kFloat64).softmax(0);
  const std::vector<double> sums = cols.sum({0}).to_vector<double>();
  for (double s : sums) CHECK(s == Approx(1.0).epsilon(1e-15));
  CHECK(cols.to_vector<double>()[2] == Approx(1.0 / (1.0 + std::exp(6.0))).epsilon(1e-14));
  // A 0-d tensor is a line of one element.
  CHECK(tg::scalar_tensor(3.0).softmax(0).item() == 1.0);
  CHECK(tg::scalar_tensor(3.0).log_softmax(-1).item() == 0.0);
  CHECK(tg::scalar_tensor(3.0, tg::kFloat64).logsumexp({}).item() == 3.0);
}

TEST_CASE("logsumexp with infinite and empty lines follows PyTorch", "[core][softmax]") {
  const double inf = tg::testing::kInf;
  // rows: [inf, 1] -> inf; [-inf, -inf] -> -inf; [-inf, 0] -> 0
  const Tensor x = tg::tensor({inf, 1, -inf, -inf, -inf, 0}, {3, 2}, tg::kFloat64);
  tg::testing::require_ieee_equal(x.logsumexp({1}), {inf, -inf, 0.0}, 0.0);
  // An empty dim sums nothing: log 0 = -inf.
  tg::testing::require_ieee_equal(tg::zeros({2, 0}).logsumexp({1}), {-inf, -inf}, 0.0);
  CHECK(tg::zeros({0, 3}).logsumexp({0}, true).shape() == tg::Shape{1, 3});
  // softmax of a row of -inf is NaN, as in PyTorch; NaN spreads over its row only.
  const double nan = tg::testing::kNaN;
  tg::testing::require_ieee_equal(tg::tensor({-inf, -inf, 1, 1}, {2, 2}).softmax(1), {nan, nan, 0.5, 0.5}, 0.0);
  tg::testing::require_ieee_equal(tg::tensor({nan, 0, 0, 0}, {2, 2}).log_softmax(1),
                                  {nan, nan, -std::log(2.0), -std::log(2.0)}, 1e-7);
  CHECK(tg::zeros({0, 4}).softmax(1).shape() == tg::Shape{0, 4});
}

TEST_CASE("softmax family gradcheck in float64 over every dim", "[core][softmax][gradcheck]") {
  const int64_t dim = GENERATE(0, 1, 2, -1);
  INFO("dim " << dim);
  const Tensor x = random_leaf({2, 3, 4}, -2.0, 2.0);
  TG_REQUIRE_GRADCHECK([dim](const std::vector<Tensor>& in) { return in[0].softmax(dim); }, (std::vector<Tensor>{x}));
  TG_REQUIRE_GRADCHECK([dim](const std::vector<Tensor>& in) { return in[0].log_softmax(dim); },
                       (std::vector<Tensor>{x}));
  TG_REQUIRE_GRADCHECK([dim](const std::vector<Tensor>& in) { return in[0].logsumexp({dim}, dim == 1); },
                       (std::vector<Tensor>{x}));
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return in[0].logsumexp({0, 2}); }, (std::vector<Tensor>{x}));
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return in[0].logsumexp({}, true); },
                       (std::vector<Tensor>{x}));
}

TEST_CASE("softmax family refuses bad arguments with tg::Error", "[core][softmax][errors]") {
  using Catch::Matchers::Contains;
  const Tensor x = tg::zeros({2, 3});
  REQUIRE_TG_ERROR(x.softmax(2), Contains("softmax") && Contains("dim 2 is out of range"));
  REQUIRE_TG_ERROR(x.log_softmax(-3), Contains("log_softmax") && Contains("dim -3"));
  REQUIRE_TG_ERROR(x.logsumexp({0, -2}), Contains("logsumexp") && Contains("more than once"));
  REQUIRE_TG_ERROR(tg::zeros({2}, tg::kInt64).softmax(0), Contains("softmax") && Contains("int64"));
  REQUIRE_TG_ERROR(tg::softmax(Tensor(), 0), Contains("softmax") && Contains("undefined"));
}

TEST_CASE("softmax family gives the same bits at any thread count", "[core][softmax][threads]") {
  tg::manual_seed(5);
  Tensor x = tg::randn({300, 257}).requires_grad_();
  tg::testing::require_same_bits_at_any_thread_count([&] {
    x.set_grad(Tensor());
    const Tensor rows = x.softmax(1), cols = x.log_softmax(0), lse = x.logsumexp({1});
    ((rows * rows).sum() + cols.mean() + lse.sum()).backward();
    return std::vector<Tensor>{rows, cols, lse, x.grad()};
  });
}
