// cumsum and cumprod (core/src/ops/scan.cpp): PyTorch fixtures in every dtype
// (tests/fixtures/make_reduction_fixtures.py: float forward and backward, cumprod with zeros,
// int64 and bool to int64 with wrap-around), hand-derived values, gradcheck and gradgradcheck in
// float64 (with zeros for cumprod), higher orders, and the same bits at any thread count.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core_test_util.hpp"
#include "support/dim_ops.hpp"

using tg::Tensor;
using tg::testing::fixture_tol;
using tg::testing::leaf;

namespace {

const std::map<std::string, tg::testing::FixtureCase>& reduction_cases() {
  return tg::testing::load_fixtures("reductions.txt");
}

Tensor scan(const std::string& op, const Tensor& x, int64_t dim) { return op == "cumsum" ? x.cumsum(dim) : x.cumprod(dim); }

}  // namespace

TEST_CASE("cumsum and cumprod match PyTorch forward and backward", "[core][scan][fixture]") {
  const std::string op = GENERATE(as<std::string>{}, "cumsum", "cumprod");
  size_t checked = 0;
  for (const auto& [name, c] : reduction_cases()) {
    if (name.rfind(op + "_", 0) != 0) continue;
    INFO("case " << name);
    const double tol = fixture_tol(c.at("x").dtype());
    Tensor x = leaf(c.at("x"));
    const Tensor y = scan(op, x, static_cast<int64_t>(c.scalar("dim")));
    TG_REQUIRE_NEAR(y, c.at("y"), tol);
    y.backward(c.at("dy"));
    TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);
    ++checked;
  }
  // dims: [5] 2, [3, 4] 3, [2, 3, 4] 4; cumprod with 0, 1 and 2 zeros per line; f32 and f64
  CHECK(checked == (2 + 3 + 4) * (op == "cumsum" ? 1 : 3) * 2);
}

TEST_CASE("cumsum and cumprod of bool and int64 tensors give int64 as in PyTorch, wrapping around",
          "[core][scan][int][fixture]") {
  size_t checked = 0;
  for (const auto& [name, c] : reduction_cases()) {
    const bool is_cumsum = name.find("_cumsum_") != std::string::npos;
    if (name.rfind("int_", 0) != 0 || (!is_cumsum && name.find("_cumprod_") == std::string::npos)) continue;
    INFO("case " << name);
    Tensor x = tg::tensor(c.ints("x"), c.ints("x_shape"));
    if (c.scalar("is_bool") != 0.0) x = x.to(tg::kBool);
    const Tensor y = scan(is_cumsum ? "cumsum" : "cumprod", x, static_cast<int64_t>(c.scalar("dim")));
    REQUIRE(y.dtype() == tg::kInt64);
    REQUIRE(y.shape() == tg::Shape(c.ints("y_shape")));
    CHECK(y.to_vector<int64_t>() == c.ints("y"));
    ++checked;
  }
  CHECK(checked == 2 * 2 * (2 + 3 + 4));  // bool and int64, cumsum and cumprod, every dim
}

TEST_CASE("cumsum and cumprod by hand", "[core][scan]") {
  // x[i][j] = [[1, 2, 3], [4, 5, 6]]
  Tensor x = tg::tensor({1, 2, 3, 4, 5, 6}, {2, 3}, tg::kFloat64).requires_grad_();
  CHECK(x.cumsum(1).to_vector<double>() == std::vector<double>{1, 3, 6, 4, 9, 15});
  CHECK(x.cumsum(0).to_vector<double>() == std::vector<double>{1, 2, 3, 5, 7, 9});
  CHECK(x.cumsum(-1).to_vector<double>() == x.cumsum(1).to_vector<double>());
  CHECK(x.cumprod(1).to_vector<double>() == std::vector<double>{1, 2, 6, 4, 20, 120});
  CHECK(x.cumprod(-2).to_vector<double>() == std::vector<double>{1, 2, 3, 4, 10, 18});
  // d Σ_k cumsum(x)[k] / d x[j] = number of k >= j: [3, 2, 1] per row
  x.cumsum(1).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 2, 1, 3, 2, 1});
  CHECK(std::string(x.cumsum(0).grad_fn_name()) == "CumsumBackward");

  // cumprod of [2, 0, 3, 4] is [2, 0, 0, 0]: d/dx0 = 1 + 0 ... = 1 (only y0 = x0 does not hold the
  // zero), d/dx1 = x0 + x0·x2 + x0·x2·x3 = 2 + 6 + 24, d/dx2 = d/dx3 = 0 (every product holds x1 = 0)
  Tensor z = tg::tensor({2, 0, 3, 4}, {}, tg::kFloat64).requires_grad_();
  const Tensor cz = z.cumprod(0);
  CHECK(cz.to_vector<double>() == std::vector<double>{2, 0, 0, 0});
  cz.sum().backward();
  CHECK(z.grad().to_vector<double>() == std::vector<double>{1, 32, 0, 0});

  // A 0-d tensor scans to itself (dim 0 or -1); dim 1 is out of range.
  const Tensor s = tg::scalar_tensor(2.5, tg::kFloat64);
  CHECK(s.cumsum(0).dim() == 0);
  CHECK(s.cumprod(-1).item() == 2.5);
  REQUIRE_TG_ERROR(s.cumsum(1), Catch::StartsWith("cumsum: dim 1 is out of range"));
  REQUIRE_TG_ERROR(x.cumprod(2), Catch::StartsWith("cumprod: dim 2 is out of range"));
  REQUIRE_TG_ERROR(Tensor().cumsum(0), Catch::StartsWith("cumsum: undefined tensor"));

  // Empty lines: an empty result of the right dtype.
  CHECK(tg::zeros({0, 3}).cumsum(0).shape() == tg::Shape{0, 3});
  CHECK(tg::zeros({2, 0}, tg::kBool).cumprod(1).dtype() == tg::kInt64);

  // bool counts: the running number of trues
  const Tensor mask = tg::tensor(std::vector<bool>{true, false, true, true});
  CHECK(mask.cumsum(0).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 2, 3});
  CHECK(mask.cumprod(0).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 0});
}

TEST_CASE("gradcheck and gradgradcheck: cumsum and cumprod over every dim, cumprod with zeros",
          "[core][scan][gradcheck]") {
  const std::string op = GENERATE(as<std::string>{}, "cumsum", "cumprod");
  const int64_t dim = GENERATE(0, 1, -1);
  const int zeros = GENERATE(0, 1, 2);
  INFO(op << " over dim " << dim << ", " << zeros << " zeros");
  tg::manual_seed(41);
  Tensor x = tg::empty({3, 4}, tg::kFloat64).uniform_(0.5, 1.5);
  double* values = x.mutable_data<double>();
  for (int k = 0; k < zeros; ++k) values[(5 * k + 1) % 12] = 0.0, values[(5 * k + 7) % 12] = 0.0;
  x.requires_grad_();
  const tg::DifferentiableFunction f = [&](const std::vector<Tensor>& in) { return scan(op, in[0], dim); };
  TG_REQUIRE_GRADCHECK(f, std::vector<Tensor>{x});
  const tg::GradcheckResult second = tg::gradgradcheck(f, {x});
  INFO(second.message);
  REQUIRE(second.passed);
}

TEST_CASE("cumsum, cumprod and prod differentiate to the third order", "[core][scan][prod][higher-order]") {
  // f(x) = Σ cumprod(x) on [a, b]: a + a·b; its third derivatives are 0 — and prod's: x0·x1·x2 has
  // ∂³/∂x0∂x1∂x2 = 1, reached through three recorded backwards.
  Tensor x = tg::tensor({2, 3, 5}, {}, tg::kFloat64).requires_grad_();
  const tg::autograd::GradOptions create{.create_graph = true};
  const Tensor d1 = tg::autograd::grad({x.prod()}, {x}, {}, create)[0];  // [15, 10, 6]
  CHECK(d1.to_vector<double>() == std::vector<double>{15, 10, 6});
  const Tensor d2 = tg::autograd::grad({d1.select(0, 0)}, {x}, {}, create)[0];  // ∂(x1·x2): [0, 5, 3]
  CHECK(d2.to_vector<double>() == std::vector<double>{0, 5, 3});
  const Tensor d3 = tg::autograd::grad({d2.select(0, 1)}, {x})[0];  // ∂x2: [0, 0, 1]
  CHECK(d3.to_vector<double>() == std::vector<double>{0, 0, 1});

  // cumsum is linear: its gradient's gradient is 0, its gradient the running sum from the end.
  const Tensor g1 = tg::autograd::grad({x.cumsum(0).pow(2).sum()}, {x}, {}, create)[0];
  // y = [2, 5, 10], dL/dy = 2y = [4, 10, 20], dx = [34, 30, 20]
  CHECK(g1.to_vector<double>() == std::vector<double>{34, 30, 20});
}

TEST_CASE("scans are the same at any thread count", "[core][scan][threads]") {
  tg::manual_seed(43);
  const Tensor x = tg::randn({64, 300, 7});
  tg::testing::require_same_bits_at_any_thread_count([&] {
    return std::vector<Tensor>{x.cumsum(0), x.cumsum(1), x.cumprod(2), x.prod(1), (x > 0).cumsum(1).to(tg::kFloat32)};
  });
}
