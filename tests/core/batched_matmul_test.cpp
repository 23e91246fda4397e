// matmul with torch.matmul's full rules (1-D operands, broadcast batch dims), bmm and baddbmm:
// PyTorch fixtures (tests/fixtures/make_batched_matmul_fixtures.py), hand values, gradcheck, the
// batched kernel against per-matrix products, thread-count independence and errors.
#include <cstring>

#include <tbb/task_arena.h>

#include "core_test_util.hpp"

using Catch::Matchers::Contains;
using tg::Tensor;
using tg::testing::fixture;
using tg::testing::fixture_tol;
using tg::testing::leaf;
using tg::testing::random_leaf;

namespace {

// The i-th matrix [rows, cols] of a contiguous [batch, rows, cols] tensor, as a tensor of its own.
Tensor matrix_at(const Tensor& batch, int64_t i) {
  const int64_t rows = batch.shape()[1], cols = batch.shape()[2];
  const std::vector<double> all = tg::testing::values(batch);
  const std::vector<double> part(all.begin() + i * rows * cols, all.begin() + (i + 1) * rows * cols);
  return tg::tensor(part, {rows, cols}, batch.dtype());
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const size_t bytes = static_cast<size_t>(a.numel()) * tg::element_size(a.dtype());
  const void* pa = a.dtype() == tg::kFloat32 ? static_cast<const void*>(a.data<float>()) : a.data<double>();
  const void* pb = b.dtype() == tg::kFloat32 ? static_cast<const void*>(b.data<float>()) : b.data<double>();
  return std::memcmp(pa, pb, bytes) == 0;
}

}  // namespace

TEST_CASE("matmul's broadcasting rules match PyTorch forward and backward", "[core][matmul][fixture]") {
  const std::string name = GENERATE(as<std::string>{}, "matmul_3_3", "matmul_4_4x5", "matmul_3x4_4", "matmul_4_2x4x3",
                                    "matmul_2x3x4_4", "matmul_3x4_2x4x5", "matmul_2x1x3x4_5x4x2",
                                    "matmul_3x2x4_3x4x5", "matmul_2x3x4_1x4x5", "matmul_1x3x4_2x2x4x3");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  INFO("case " << name + suffix);
  const auto& c = fixture("batched_matmul.txt", name + suffix);
  const double tol = fixture_tol(c.at("a").dtype());
  Tensor a = leaf(c.at("a")), b = leaf(c.at("b"));
  const Tensor y = tg::matmul(a, b);
  REQUIRE(y.shape() == c.at("y").shape());
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  TG_REQUIRE_NEAR(a.matmul(b), c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(a.grad(), c.at("da"), tol);
  TG_REQUIRE_NEAR(b.grad(), c.at("db"), tol);
}

TEST_CASE("bmm matches PyTorch forward and backward", "[core][matmul][bmm][fixture]") {
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const auto& c = fixture("batched_matmul.txt", "bmm_3x2x4_3x4x5" + suffix);
  const double tol = fixture_tol(c.at("a").dtype());
  Tensor a = leaf(c.at("a")), b = leaf(c.at("b"));
  const Tensor y = tg::bmm(a, b);
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  TG_REQUIRE_NEAR(a.bmm(b), c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(a.grad(), c.at("da"), tol);
  TG_REQUIRE_NEAR(b.grad(), c.at("db"), tol);
}

TEST_CASE("baddbmm matches PyTorch forward and backward", "[core][matmul][baddbmm][fixture]") {
  const std::string name = GENERATE(as<std::string>{}, "baddbmm_3x2x5_beta0p5_alpha2", "baddbmm_5_beta0p5_alpha2",
                                    "baddbmm_2x1_beta1_alpha1", "baddbmm_3x2x5_beta0_alpha2");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  INFO("case " << name + suffix);
  const auto& c = fixture("batched_matmul.txt", name + suffix);
  const double tol = fixture_tol(c.at("input").dtype());
  Tensor input = leaf(c.at("input")), batch1 = leaf(c.at("batch1")), batch2 = leaf(c.at("batch2"));
  const double beta = c.scalar("beta"), alpha = c.scalar("alpha");
  const Tensor y = tg::baddbmm(input, batch1, batch2, beta, alpha);
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  TG_REQUIRE_NEAR(input.baddbmm(batch1, batch2, beta, alpha), c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(input.grad(), c.at("dinput"), tol);
  TG_REQUIRE_NEAR(batch1.grad(), c.at("dbatch1"), tol);
  TG_REQUIRE_NEAR(batch2.grad(), c.at("dbatch2"), tol);
}

TEST_CASE("matmul of 1-D operands by hand", "[core][matmul]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  const Tensor v = tg::tensor({1, 2, 3}, {}, dtype);
  const Tensor dot = tg::matmul(v, tg::tensor({4, 5, 6}, {}, dtype));
  CHECK(dot.shape() == tg::Shape{});
  CHECK(dot.item<double>() == 32.0);
  const Tensor m = tg::tensor({1, 0, 0, 1, 1, 1}, {3, 2}, dtype);  // [[1, 0], [0, 1], [1, 1]]
  CHECK(tg::testing::values(tg::matmul(v, m)) == std::vector<double>{4, 5});  // row · matrix
  const Tensor mt = tg::tensor({1, 0, 1, 0, 1, 1}, {2, 3}, dtype);
  CHECK(tg::testing::values(tg::matmul(mt, v)) == std::vector<double>{4, 5});  // matrix · column
  // [2, 2, 3] · [3]: each matrix times the column
  const Tensor stacked = tg::tensor({1, 0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 0}, {2, 2, 3}, dtype);
  const Tensor y = tg::matmul(stacked, v);
  CHECK(y.shape() == tg::Shape{2, 2});
  CHECK(tg::testing::values(y) == std::vector<double>{4, 5, 6, 0});
}

TEST_CASE("matmul: an operand repeated over the batch gets its gradients summed", "[core][matmul][autograd]") {
  // y_i = A · B_i for i = 0, 1, with B_0 = I and B_1 = 2I: Σ y = Σ A·(3I), so dA = 3·1 ([2, 2] of 3s)
  Tensor a = tg::tensor({1, 2, 3, 4}, {2, 2}, tg::kFloat64).requires_grad_();
  Tensor b = tg::tensor({1, 0, 0, 1, 2, 0, 0, 2}, {2, 2, 2}, tg::kFloat64).requires_grad_();
  const Tensor y = tg::matmul(a, b);
  CHECK(y.shape() == tg::Shape{2, 2, 2});
  CHECK(tg::testing::values(y) == std::vector<double>{1, 2, 3, 4, 2, 4, 6, 8});
  y.sum().backward();
  CHECK(tg::testing::values(a.grad()) == std::vector<double>{3, 3, 3, 3});
  // dB_i = Aᵀ · 1: column sums of A in every row (4, 6), the same for both matrices
  CHECK(tg::testing::values(b.grad()) == std::vector<double>{4, 4, 6, 6, 4, 4, 6, 6});
}

TEST_CASE("baddbmm with beta = 0 does not read input: NaN in it do not reach the result", "[core][matmul][baddbmm]") {
  Tensor input = tg::full({2, 1, 2}, std::nan(""), tg::kFloat64).requires_grad_();
  Tensor batch1 = tg::tensor({1, 2, 3, 4}, {2, 1, 2}, tg::kFloat64).requires_grad_();
  Tensor batch2 = tg::tensor({1, 0, 0, 1, 1, 1, 1, 1}, {2, 2, 2}, tg::kFloat64).requires_grad_();
  const Tensor y = tg::baddbmm(input, batch1, batch2, 0.0, 3.0);
  CHECK(tg::testing::values(y) == std::vector<double>{3, 6, 21, 21});
  y.sum().backward();
  CHECK(tg::testing::values(input.grad()) == std::vector<double>{0, 0, 0, 0});  // β · G with β = 0, as PyTorch
  CHECK(tg::testing::values(batch1.grad()) == std::vector<double>{3, 3, 6, 6});
  // With beta = 1, NaN do propagate.
  const Tensor with_input = tg::baddbmm(input.detach(), batch1.detach(), batch2.detach());
  CHECK(std::isnan(tg::testing::values(with_input)[0]));
}

TEST_CASE("gradcheck: matmul, bmm and baddbmm shape families", "[core][matmul][gradcheck]") {
  using Shapes = std::pair<tg::Shape, tg::Shape>;
  const Shapes shapes =
      GENERATE(Shapes{{3}, {3}}, Shapes{{3}, {3, 2}}, Shapes{{2, 3}, {3}}, Shapes{{4}, {2, 4, 3}},
               Shapes{{2, 3, 4}, {4}}, Shapes{{3, 4}, {2, 4, 2}}, Shapes{{2, 1, 3, 4}, {3, 4, 2}},
               Shapes{{2, 2, 3}, {2, 3, 2}}, Shapes{{2, 2, 3}, {1, 3, 2}}, Shapes{{1, 2, 3}, {2, 1, 3, 2}});
  INFO(tg::to_string(shapes.first) << " x " << tg::to_string(shapes.second));
  tg::manual_seed(41);
  const Tensor a = random_leaf(shapes.first), b = random_leaf(shapes.second);
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return tg::matmul(in[0], in[1]); },
                       (std::vector<Tensor>{a, b}));
}

TEST_CASE("gradcheck: bmm and baddbmm", "[core][matmul][gradcheck]") {
  tg::manual_seed(42);
  const Tensor a = random_leaf({2, 3, 4}), b = random_leaf({2, 4, 2});
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return tg::bmm(in[0], in[1]); },
                       (std::vector<Tensor>{a, b}));
  const tg::Shape input_shape = GENERATE(tg::Shape{2, 3, 2}, tg::Shape{2}, tg::Shape{3, 1});
  const double beta = GENERATE(0.0, 0.5), alpha = GENERATE(1.0, -2.0);
  CAPTURE(tg::to_string(input_shape), beta, alpha);
  const Tensor input = random_leaf(input_shape);
  const auto baddbmm = [beta, alpha](const std::vector<Tensor>& in) {
    return tg::baddbmm(in[0], in[1], in[2], beta, alpha);
  };
  TG_REQUIRE_GRADCHECK(baddbmm, (std::vector<Tensor>{input, a, b}));
}

TEST_CASE("batched products equal the products of each matrix", "[core][matmul]") {
  // A batch of small products runs each matrix as one serial call of the kernel its size selects,
  // as a lone 2-D product of that size does: the same bits. Larger ones (BLIS, several pieces)
  // are within the rounding bound of the per-matrix product.
  struct Sizes {
    int64_t batch, M, K, N;
  };
  const Sizes s = GENERATE(Sizes{48, 64, 32, 64}, Sizes{5, 3, 7, 2}, Sizes{2, 600, 300, 200});
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  CAPTURE(s.batch, s.M, s.K, s.N, dtype);
  tg::manual_seed(43);
  const Tensor a = tg::randn({s.batch, s.M, s.K}, dtype), b = tg::randn({s.batch, s.K, s.N}, dtype);
  const Tensor y = tg::bmm(a, b);
  const bool small = s.M * s.N * s.K < (int64_t{1} << 20);
  for (int64_t i = 0; i < s.batch; ++i) {
    INFO("matrix " << i);
    const Tensor expected = tg::matmul(matrix_at(a, i), matrix_at(b, i));
    const Tensor got = matrix_at(y, i);
    if (small) REQUIRE(same_bits(got, expected));
    else TG_REQUIRE_NEAR(got, expected, dtype == tg::kFloat32 ? 1e-4 : 1e-12);
  }
}

TEST_CASE("batched products and their gradients are bitwise identical at 1 and 2 threads", "[core][matmul][threads]") {
  struct Operands {
    tg::Shape a, b;
  };
  // attention-sized products, a broadcast operand, one big product split into tiles
  const Operands o = GENERATE(Operands{{48, 64, 32}, {48, 32, 64}}, Operands{{2, 1, 130, 70}, {3, 70, 90}},
                              Operands{{200, 300}, {8, 300, 100}}, Operands{{2, 600, 300}, {2, 300, 200}});
  CAPTURE(tg::to_string(o.a), tg::to_string(o.b));
  tg::manual_seed(44);
  const Tensor a0 = tg::randn(o.a), b0 = tg::randn(o.b);
  std::vector<Tensor> reference;
  for (int threads : {1, 2}) {
    INFO(threads << " threads");
    std::vector<Tensor> results;
    tbb::task_arena arena(threads);
    arena.execute([&] {
      Tensor a = a0.detach().clone().requires_grad_(), b = b0.detach().clone().requires_grad_();
      const Tensor y = tg::matmul(a, b);
      y.backward(tg::ones_like(y) * 0.5 + y.detach() * 0.25);
      results = {y, a.grad(), b.grad()};
    });
    if (reference.empty()) {
      reference = results;
      continue;
    }
    for (size_t i = 0; i < results.size(); ++i) {
      INFO("result " << i);
      CHECK(same_bits(results[i], reference[i]));
    }
  }
}

TEST_CASE("matmul, bmm and baddbmm with empty sizes", "[core][matmul][edge]") {
  const Tensor y = tg::matmul(tg::ones({2, 2, 0}, tg::kFloat64), tg::ones({2, 0, 3}, tg::kFloat64));
  CHECK(y.shape() == tg::Shape{2, 2, 3});
  CHECK(tg::testing::values(y) == std::vector<double>(12, 0.0));
  CHECK(tg::matmul(tg::ones({0, 2, 3}), tg::ones({3, 4})).shape() == tg::Shape{0, 2, 4});
  // A batch of 0 matrices broadcast against one: the one's gradient is a sum of nothing, 0.
  Tensor shared = tg::ones({2, 3}, tg::kFloat64).requires_grad_();
  Tensor batch = tg::ones({0, 3, 2}, tg::kFloat64).requires_grad_();
  tg::matmul(shared, batch).sum().backward();
  CHECK(tg::testing::values(shared.grad()) == std::vector<double>(6, 0.0));
  CHECK(batch.grad().shape() == tg::Shape{0, 3, 2});
  CHECK(tg::matmul(tg::ones({0, 1, 2, 3}), tg::ones({1, 3, 4})).shape() == tg::Shape{0, 1, 2, 4});
  Tensor c = tg::ones({3, 4}, tg::kFloat64).requires_grad_();
  Tensor d = tg::ones({2, 0, 2, 3}, tg::kFloat64).requires_grad_();
  tg::matmul(d, c).sum().backward();
  CHECK(d.grad().shape() == tg::Shape{2, 0, 2, 3});
  CHECK(c.grad().shape() == tg::Shape{3, 4});
  CHECK(tg::testing::values(c.grad()) == std::vector<double>(12, 0.0));
  CHECK(tg::bmm(tg::ones({0, 2, 3}), tg::ones({0, 3, 4})).shape() == tg::Shape{0, 2, 4});
  CHECK(tg::baddbmm(tg::ones({4}), tg::ones({0, 2, 3}), tg::ones({0, 3, 4})).shape() == tg::Shape{0, 2, 4});
}

TEST_CASE("matmul, bmm and baddbmm refuse bad shapes and dtypes, naming both shapes", "[core][matmul][errors]") {
  REQUIRE_TG_ERROR(tg::matmul(tg::ones({2, 3, 4}), tg::ones({2, 5, 2})),
                   Contains("matmul") && Contains("[2, 3, 4]") && Contains("[2, 5, 2]"));
  REQUIRE_TG_ERROR(tg::matmul(tg::ones({4}), tg::ones({3})), Contains("matmul") && Contains("[4]") && Contains("[3]"));
  REQUIRE_TG_ERROR(tg::matmul(tg::ones({2, 2, 3}), tg::ones({3, 3, 5})),
                   Contains("matmul") && Contains("[2, 2, 3]") && Contains("[3, 3, 5]") && Contains("broadcast"));
  REQUIRE_TG_ERROR(tg::matmul(tg::scalar_tensor(1), tg::ones({3})), Contains("matmul") && Contains("at least 1 dim"));
  REQUIRE_TG_ERROR(tg::matmul(tg::ones({2, 2, 2}), tg::ones({2, 2, 2}, tg::kFloat64)),
                   Contains("matmul") && Contains("float32") && Contains("float64") && Contains("[2, 2, 2]"));
  REQUIRE_TG_ERROR(tg::matmul(tg::ones({2, 2, 2}, tg::kInt64), tg::ones({2, 2}, tg::kInt64)),
                   Contains("matmul: not implemented for int64") && Contains("[2, 2, 2]"));
  REQUIRE_TG_ERROR(tg::bmm(tg::ones({2, 3}), tg::ones({3, 4})),
                   Contains("bmm") && Contains("3-D") && Contains("[2, 3]") && Contains("[3, 4]"));
  REQUIRE_TG_ERROR(tg::bmm(tg::ones({2, 2, 3}), tg::ones({3, 3, 4})),
                   Contains("bmm") && Contains("[2, 2, 3]") && Contains("[3, 3, 4]"));
  REQUIRE_TG_ERROR(tg::bmm(tg::ones({2, 2, 3}), tg::ones({2, 4, 4})),
                   Contains("bmm") && Contains("inner") && Contains("[2, 4, 4]"));
  REQUIRE_TG_ERROR(tg::baddbmm(tg::ones({3, 5}), tg::ones({2, 2, 3}), tg::ones({2, 3, 4})),
                   Contains("baddbmm") && Contains("[3, 5]") && Contains("[2, 2, 4]"));
  REQUIRE_TG_ERROR(tg::baddbmm(tg::ones({1, 2, 2, 4}), tg::ones({2, 2, 3}), tg::ones({2, 3, 4})),
                   Contains("baddbmm") && Contains("[1, 2, 2, 4]"));
  REQUIRE_TG_ERROR(tg::baddbmm(tg::ones({4}, tg::kFloat64), tg::ones({2, 2, 3}), tg::ones({2, 3, 4})),
                   Contains("baddbmm") && Contains("float64"));
}
