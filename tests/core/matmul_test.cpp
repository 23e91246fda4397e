// matmul: 2-D x 2-D and batched [..., M, K] x [K, N]: PyTorch fixtures, hand values, gradcheck.
#include "core_test_util.hpp"

using tg::Tensor;
using tg::testing::fixture;
using tg::testing::fixture_tol;
using tg::testing::leaf;
using tg::testing::random_leaf;

TEST_CASE("matmul matches PyTorch forward and backward", "[core][matmul][fixture]") {
  const std::string name = GENERATE(as<std::string>{}, "matmul_3x4_4x5", "matmul_2x3x4_4x5");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  INFO("case " << name + suffix);
  const auto& c = fixture("core_ops.txt", name + suffix);
  const double tol = fixture_tol(c.at("a").dtype());
  Tensor a = leaf(c.at("a")), b = leaf(c.at("b"));
  const Tensor y = tg::matmul(a, b);
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(a.grad(), c.at("da"), tol);
  TG_REQUIRE_NEAR(b.grad(), c.at("db"), tol);
}

TEST_CASE("matmul by hand", "[core][matmul]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  const Tensor a = tg::tensor({1, 2, 3, 4, 5, 6}, {2, 3}, dtype);
  const Tensor b = tg::tensor({1, 0, 0, 1, 1, 1}, {3, 2}, dtype);
  const Tensor y = a.matmul(b);
  CHECK(y.shape() == tg::Shape{2, 2});
  CHECK(y.to(tg::kFloat64).to_vector<double>() == std::vector<double>{4, 5, 10, 11});

  // Batch dims fold into rows: [2, 1, 2, 3] x [3, 2] -> [2, 1, 2, 2]
  const Tensor batched = tg::matmul(tg::tensor({1, 2, 3, 4, 5, 6, 0, 0, 1, 1, 0, 0}, {2, 1, 2, 3}, dtype), b);
  CHECK(batched.shape() == tg::Shape{2, 1, 2, 2});
  CHECK(batched.to(tg::kFloat64).to_vector<double>() == std::vector<double>{4, 5, 10, 11, 1, 1, 1, 0});
}

TEST_CASE("matmul gradients by hand", "[core][matmul][autograd]") {
  Tensor a = tg::tensor({1, 2, 3, 4}, {2, 2}, tg::kFloat64).requires_grad_();
  Tensor b = tg::tensor({5, 6, 7, 8}, {2, 2}, tg::kFloat64).requires_grad_();
  tg::matmul(a, b).sum().backward();
  // d/da Σ (ab) = 1 · bᵀ: rows of b summed; d/db = aᵀ · 1: columns of a summed
  CHECK(a.grad().to_vector<double>() == std::vector<double>{11, 15, 11, 15});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{4, 4, 6, 6});
}

TEST_CASE("matmul with an empty inner or outer size", "[core][matmul]") {
  const Tensor y = tg::matmul(tg::ones({2, 0}, tg::kFloat64), tg::ones({0, 3}, tg::kFloat64));
  CHECK(y.shape() == tg::Shape{2, 3});
  CHECK(y.to_vector<double>() == std::vector<double>(6, 0.0));
  CHECK(tg::matmul(tg::ones({0, 4}), tg::ones({4, 3})).shape() == tg::Shape{0, 3});
}

TEST_CASE("gradcheck: matmul shape families", "[core][matmul][gradcheck]") {
  using Shapes = std::pair<tg::Shape, tg::Shape>;
  const Shapes shapes = GENERATE(Shapes{{3, 4}, {4, 5}}, Shapes{{1, 1}, {1, 1}}, Shapes{{2, 3, 4}, {4, 2}},
                                 Shapes{{2, 1, 2, 3}, {3, 3}}, Shapes{{5, 1}, {1, 4}});
  INFO(tg::to_string(shapes.first) << " x " << tg::to_string(shapes.second));
  tg::manual_seed(31);
  const Tensor a = random_leaf(shapes.first), b = random_leaf(shapes.second);
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return tg::matmul(in[0], in[1]); },
                       (std::vector<Tensor>{a, b}));
}

TEST_CASE("gradcheck: matmul where only one operand requires grad", "[core][matmul][gradcheck]") {
  tg::manual_seed(32);
  const Tensor a = random_leaf({3, 4});
  const Tensor b = tg::randn({4, 2}, tg::kFloat64);
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return tg::matmul(in[0], in[1]); },
                       (std::vector<Tensor>{a, b}));
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return tg::matmul(in[1], in[0]); },
                       (std::vector<Tensor>{tg::testing::random_leaf({4, 2}), tg::randn({3, 4}, tg::kFloat64)}));
}

TEST_CASE("matmul and its gradients agree with a plain sum on shapes that take each GEMM kernel",
          "[core][matmul]") {
  // The forward is C = A·B, the backward dA = dC·Bᵀ and dB = Aᵀ·dC: three operand layouts. Small
  // products run on Eigen, larger ones on BLIS (TG_GEMM=blis), the largest in two parallel tiles.
  // Each result must be within the rounding bound of a K-term sum: |error| ≤ K·u·Σ|a·b|.
  struct Sizes {
    int64_t M, K, N;
  };
  const Sizes s = GENERATE(Sizes{3, 5, 4}, Sizes{64, 32, 64}, Sizes{67, 33, 129}, Sizes{300, 200, 250});
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  CAPTURE(s.M, s.K, s.N, dtype);
  const double unit_roundoff = dtype == tg::kFloat32 ? 0x1p-24 : 0x1p-53;
  tg::manual_seed(37);
  Tensor a = tg::randn({s.M, s.K}, dtype).requires_grad_();
  Tensor b = tg::randn({s.K, s.N}, dtype).requires_grad_();
  const Tensor dc = tg::randn({s.M, s.N}, dtype);
  const Tensor c = tg::matmul(a, b);
  c.backward(dc);

  // X[rows, cols] with X(i, j) = Σ_k P(i, k)·Q(k, j), checked against `actual` element by element.
  auto check_product = [&](const char* what, const Tensor& actual, int64_t rows, int64_t cols, int64_t inner,
                           auto p, auto q) {
    INFO(what);
    const std::vector<double> got = actual.to(tg::kFloat64).to_vector<double>();
    REQUIRE(static_cast<int64_t>(got.size()) == rows * cols);
    int64_t wrong = 0;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        double sum = 0.0, magnitude = 0.0;
        for (int64_t k = 0; k < inner; ++k) {
          sum += p(i, k) * q(k, j);
          magnitude += std::abs(p(i, k) * q(k, j));
        }
        wrong += std::abs(got[i * cols + j] - sum) > static_cast<double>(inner) * unit_roundoff * magnitude + 1e-300;
      }
    REQUIRE(wrong == 0);
  };
  const std::vector<double> av = a.detach().to(tg::kFloat64).to_vector<double>();
  const std::vector<double> bv = b.detach().to(tg::kFloat64).to_vector<double>();
  const std::vector<double> dcv = dc.to(tg::kFloat64).to_vector<double>();
  auto A = [&](int64_t i, int64_t k) { return av[i * s.K + k]; };
  auto B = [&](int64_t k, int64_t j) { return bv[k * s.N + j]; };
  auto dC = [&](int64_t i, int64_t j) { return dcv[i * s.N + j]; };
  check_product("C = A·B", c, s.M, s.N, s.K, A, B);
  check_product("dA = dC·Bᵀ", a.grad(), s.M, s.K, s.N, dC, [&](int64_t j, int64_t k) { return B(k, j); });
  check_product("dB = Aᵀ·dC", b.grad(), s.K, s.N, s.M, [&](int64_t k, int64_t i) { return A(i, k); }, dC);
}
