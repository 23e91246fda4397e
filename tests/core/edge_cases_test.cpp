// Edge cases of the core ops: empty tensors (a dim of size 0) through every op, forward and
// backward; NaN and Inf through every op, forward and backward, compared with what PyTorch 1.13
// returns; shapes whose element count overflows; and tensors shared between threads.
//
// Every expected value below is PyTorch's output for the same input (float64, CPU), e.g.
//   x = torch.tensor([nan, inf, -inf, -1., 0., 2.], dtype=torch.float64, requires_grad=True)
//   y = x.pow(0.5); y.backward(torch.ones_like(y)); print(y, x.grad)
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core_test_util.hpp"

using tg::Shape;
using tg::Tensor;

namespace {

using tg::testing::kInf;
using tg::testing::kNaN;
using tg::testing::require_ieee_equal;
using tg::testing::values;

bool all_zero(const Tensor& t) {
  for (double v : values(t))
    if (v != 0.0) return false;
  return true;
}

// A fresh empty-or-not leaf of ones that requires grad.
Tensor ones_leaf(const Shape& shape, tg::DType dtype = tg::kFloat64) { return tg::ones(shape, dtype).requires_grad_(); }

}  // namespace

// --- empty tensors ------------------------------------------------------------------------------

TEST_CASE("empty: + - * / broadcast with an empty side, forward and backward", "[core][edge][empty]") {
  using Shapes = std::pair<Shape, Shape>;
  const Shapes shapes = GENERATE(Shapes{{0, 3}, {3}}, Shapes{{3}, {0, 3}}, Shapes{{1, 3}, {0, 1}},
                                 Shapes{{2, 0, 3}, {2, 1, 3}}, Shapes{{0}, {}}, Shapes{{0, 3}, {0, 3}},
                                 Shapes{{4, 0}, {1}});
  const std::string op = GENERATE(as<std::string>{}, "add", "sub", "mul", "div");
  INFO(op << " " << tg::to_string(shapes.first) << " " << tg::to_string(shapes.second));
  Tensor a = ones_leaf(shapes.first), b = ones_leaf(shapes.second);
  const Tensor y = op == "add" ? a + b : op == "sub" ? a - b : op == "mul" ? a * b : a / b;
  const Shape expected_shape = tg::broadcast_shapes(shapes.first, shapes.second);
  REQUIRE(y.shape() == expected_shape);
  REQUIRE(y.numel() == 0);
  REQUIRE(y.requires_grad());
  y.backward(tg::ones(expected_shape, tg::kFloat64));
  // PyTorch: the gradients have the inputs' shapes; a non-empty input broadcast over an empty
  // dim gets zeros (torch.zeros(0,3).requires_grad_() + b: b.grad = [0., 0., 0.]).
  REQUIRE(a.grad().shape() == shapes.first);
  REQUIRE(b.grad().shape() == shapes.second);
  CHECK(all_zero(a.grad()));
  CHECK(all_zero(b.grad()));
}

TEST_CASE("empty: scalar arithmetic keeps the empty shape", "[core][edge][empty]") {
  Tensor e = ones_leaf({0, 2});
  for (const Tensor& y : {e + 1.0, 1.0 - e, e * 3.0, 2.0 / e, e / 2.0, -e}) {
    CHECK(y.shape() == Shape{0, 2});
    CHECK(y.requires_grad());
  }
  ((e + 1.0) * (2.0 / e) - e).sum().backward();
  CHECK(e.grad().shape() == Shape{0, 2});
}

TEST_CASE("empty: every unary and shape op, forward and backward", "[core][edge][empty]") {
  using Op = std::function<Tensor(const Tensor&)>;
  struct Case {
    std::string name;
    Op op;
    Shape in, out;
  };
  const Case c = GENERATE(
      Case{"neg", [](const Tensor& x) { return -x; }, {0, 3}, {0, 3}},
      Case{"sqrt", [](const Tensor& x) { return x.sqrt(); }, {2, 0}, {2, 0}},
      Case{"pow 3", [](const Tensor& x) { return x.pow(3); }, {0}, {0}},
      Case{"pow 0.5", [](const Tensor& x) { return tg::pow(x, 0.5); }, {0, 3}, {0, 3}},
      Case{"pow 0", [](const Tensor& x) { return x.pow(0); }, {0, 3}, {0, 3}},
      Case{"exp", [](const Tensor& x) { return tg::exp(x); }, {3, 0, 2}, {3, 0, 2}},
      Case{"log", [](const Tensor& x) { return x.log(); }, {0, 3}, {0, 3}},
      Case{"relu", [](const Tensor& x) { return tg::relu(x); }, {0, 3}, {0, 3}},
      Case{"to float32 and back", [](const Tensor& x) { return x.to(tg::kFloat32).to(tg::kFloat64); }, {0, 3}, {0, 3}},
      Case{"clone", [](const Tensor& x) { return x.clone(); }, {0, 3}, {0, 3}},
      Case{"transpose", [](const Tensor& x) { return x.transpose(0, 2); }, {2, 0, 3}, {3, 0, 2}},
      Case{"transpose of a matrix", [](const Tensor& x) { return x.transpose(-1, -2); }, {0, 3}, {3, 0}},
      Case{"reshape -1", [](const Tensor& x) { return x.reshape({-1}); }, {2, 0, 3}, {0}},
      Case{"reshape 3 -1", [](const Tensor& x) { return x.reshape({3, -1}); }, {2, 0, 3}, {3, 0}},
      Case{"reshape 0 5", [](const Tensor& x) { return x.reshape({0, 5}); }, {2, 0, 3}, {0, 5}},
      Case{"matmul", [](const Tensor& x) { return tg::matmul(x, tg::ones({3, 4}, tg::kFloat64)); }, {0, 3}, {0, 4}});
  INFO(c.name);
  Tensor x = ones_leaf(c.in);
  const Tensor y = c.op(x);
  REQUIRE(y.shape() == c.out);
  REQUIRE(y.numel() == 0);
  REQUIRE(y.requires_grad());
  y.backward(tg::zeros(c.out, tg::kFloat64));
  REQUIRE(x.grad().defined());
  CHECK(x.grad().shape() == c.in);
  // The same op through a reduction to a scalar, as a training loss would use it.
  x.set_grad(Tensor());
  c.op(x).sum().backward();
  CHECK(x.grad().shape() == c.in);
}

TEST_CASE("empty: detach shares the (empty) storage, cut from the tape", "[core][edge][empty]") {
  const Tensor x = ones_leaf({0, 3});
  const Tensor d = (x * 2.0).detach();
  CHECK(d.shape() == Shape{0, 3});
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
}

TEST_CASE("empty: reshape with -1 is ambiguous when the other dims hold a 0, as in PyTorch", "[core][edge][empty]") {
  // torch.zeros(2, 0).reshape(0, -1): RuntimeError "cannot reshape tensor of 0 elements into
  // shape [0, -1] because the unspecified dimension size -1 can be any value and is ambiguous".
  const Tensor e = tg::zeros({2, 0});
  REQUIRE_THROWS_WITH(e.reshape({0, -1}), Catch::Contains("reshape") && Catch::Contains("[0, -1]"));
  REQUIRE_THROWS_WITH(e.reshape({-1, 0}), Catch::Contains("reshape"));
  CHECK(e.reshape({-1}).shape() == Shape{0});  // torch.zeros(2, 0).reshape(-1).shape == (0,)
  CHECK(e.reshape({5, -1, 2}).shape() == Shape{5, 0, 2});
}

TEST_CASE("empty: sum, mean and var over every combination of dims follow PyTorch", "[core][edge][empty]") {
  // x: [2, 0, 3]. PyTorch: reducing over dim 1 (0 elements per output) gives 0 for sum and nan
  // for mean and var (biased or not); reducing only over non-empty dims gives an empty result.
  using Dims = std::vector<int64_t>;
  struct Case {
    Dims dims;
    Shape out;       // keepdim = false
    bool over_empty; // the reduction reads 0 elements per output element
  };
  const Case c = GENERATE(Case{{}, {}, true}, Case{{0}, {0, 3}, false}, Case{{1}, {2, 3}, true},
                          Case{{-2}, {2, 3}, true}, Case{{2}, {2, 0}, false}, Case{{0, 2}, {0}, false},
                          Case{{1, 2}, {2}, true}, Case{{0, 1}, {3}, true}, Case{{0, 1, 2}, {}, true});
  const bool keepdim = GENERATE(false, true);
  const std::string op = GENERATE(as<std::string>{}, "sum", "mean", "var", "var biased");
  INFO(op << " over " << tg::to_string(c.dims) << (keepdim ? " keepdim" : ""));
  Tensor x = ones_leaf({2, 0, 3});
  const Tensor y = op == "sum"    ? x.sum(c.dims, keepdim)
                   : op == "mean" ? x.mean(c.dims, keepdim)
                   : op == "var"  ? x.var(c.dims, true, keepdim)
                                  : x.var(c.dims, false, keepdim);
  Shape expected_shape = c.out;
  if (keepdim) {
    expected_shape = {2, 0, 3};
    for (int64_t d : c.dims.empty() ? Dims{0, 1, 2} : c.dims) expected_shape[(d + 3) % 3] = 1;
  }
  REQUIRE(y.shape() == expected_shape);
  for (double v : values(y)) {
    if (op == "sum") CHECK(v == 0.0);
    else CHECK(std::isnan(v));
  }
  CHECK((y.numel() > 0) == c.over_empty);
  y.backward(tg::ones(y.shape(), tg::kFloat64));
  REQUIRE(x.grad().defined());
  CHECK(x.grad().shape() == Shape{2, 0, 3});
}

TEST_CASE("empty: the no-dims forms of sum, mean and var on a [0] tensor", "[core][edge][empty]") {
  // torch.zeros(0).sum() = 0, .mean() = nan, .var() = nan, .var(unbiased=False) = nan
  const Tensor e = tg::zeros({0});
  CHECK(e.sum().item() == 0.0);
  CHECK(std::isnan(e.mean().item()));
  CHECK(std::isnan(e.var().item()));
  CHECK(std::isnan(e.var(false).item()));
  // One element: the unbiased variance divides by n - 1 = 0 and gives nan; the biased one is 0.
  CHECK(std::isnan(tg::ones({1}).var().item()));
  CHECK(tg::ones({1}).var(false).item() == 0.0);
}

TEST_CASE("empty: matmul with M = 0, K = 0 or N = 0, forward and backward", "[core][edge][empty]") {
  struct Case {
    Shape a, b, out;
  };
  const Case c = GENERATE(Case{{0, 4}, {4, 3}, {0, 3}}, Case{{2, 0}, {0, 3}, {2, 3}}, Case{{2, 4}, {4, 0}, {2, 0}},
                          Case{{0, 0}, {0, 0}, {0, 0}}, Case{{0, 2, 4}, {4, 3}, {0, 2, 3}},
                          Case{{3, 2, 0}, {0, 5}, {3, 2, 5}});
  INFO(tg::to_string(c.a) << " x " << tg::to_string(c.b));
  Tensor a = ones_leaf(c.a), b = ones_leaf(c.b);
  const Tensor y = tg::matmul(a, b);
  REQUIRE(y.shape() == c.out);
  CHECK(all_zero(y));  // K = 0: a sum of no products, 0 (torch.ones(2, 0) @ torch.ones(0, 3) = zeros)
  y.backward(tg::ones(c.out, tg::kFloat64));
  REQUIRE(a.grad().shape() == c.a);
  REQUIRE(b.grad().shape() == c.b);
  // An empty M or N: nothing flows back, so the non-empty operand's gradient is zeros.
  CHECK(all_zero(a.grad()));
  CHECK(all_zero(b.grad()));
}

TEST_CASE("empty: printing empty tensors that take part in autograd", "[core][edge][empty]") {
  // torch.zeros(0, 3, requires_grad=True) -> tensor([], size=(0, 3), requires_grad=True)
  // torch.zeros(0, 3, requires_grad=True) * 2 -> tensor([], size=(0, 3), grad_fn=<MulBackward0>)
  const Tensor e = ones_leaf({0, 3}, tg::kFloat32);
  std::ostringstream leaf_text, result_text, empty_3d;
  leaf_text << e;
  result_text << e * 2.0;
  empty_3d << tg::zeros({2, 0, 4});
  CHECK(leaf_text.str() == "tensor([], size=(0, 3), requires_grad=True)");
  CHECK(result_text.str() == "tensor([], size=(0, 3), grad_fn=<MulBackward>)");
  CHECK(empty_3d.str() == "tensor([], size=(2, 0, 4))");
}

TEST_CASE("overflow: a shape whose dims multiply past int64 is an error, even with a 0 dim", "[core][edge][empty]") {
  const int64_t huge = int64_t{1} << 62;
  // PyTorch refuses torch.empty(2**62, 2**62, 0) ("Storage size calculation overflowed") but
  // accepts torch.empty(0, 2**62, 2**62), whose every later op must then guard its index maths.
  // tapegrad refuses both: the product of the non-zero dims must fit.
  REQUIRE_THROWS_WITH(tg::zeros({huge, huge, 0}), Catch::Contains("too many elements"));
  REQUIRE_THROWS_WITH(tg::zeros({0, huge, huge}), Catch::Contains("too many elements"));
  REQUIRE_THROWS_WITH(tg::empty({huge, 0, huge}, tg::kFloat64), Catch::Contains("empty") &&
                                                                     Catch::Contains("too many elements"));
  // reshape checks the product of the sizes it is given before inferring -1.
  REQUIRE_THROWS_WITH(tg::zeros({0}).reshape({huge, huge, -1}), Catch::Contains("reshape") &&
                                                                    Catch::Contains("too many elements"));
  REQUIRE_THROWS_WITH(tg::zeros({0}).reshape({0, huge, huge}), Catch::Contains("reshape"));
  // Large but addressable dims next to a 0 are fine.
  const Tensor e = tg::zeros({0, int64_t{1} << 20, int64_t{1} << 20});
  CHECK(e.numel() == 0);
  CHECK(e.sum({1, 2}).shape() == Shape{0});
  CHECK(e.transpose(0, 2).shape() == Shape{int64_t{1} << 20, int64_t{1} << 20, 0});
  CHECK(e.exp().shape() == e.shape());
}

// --- NaN and Inf ----------------------------------------------------------------------------------

TEST_CASE("NaN and Inf through every unary op, forward and backward, as PyTorch", "[core][edge][ieee]") {
  struct Case {
    std::string name;
    std::function<Tensor(const Tensor&)> op;
    std::vector<double> y, dx;  // PyTorch's y and x.grad for x = [nan, inf, -inf, -1, 0, 2], dy = 1
  };
  const Case c = GENERATE(
      Case{"neg", [](const Tensor& x) { return -x; }, {kNaN, -kInf, kInf, 1.0, -0.0, -2.0}, {-1, -1, -1, -1, -1, -1}},
      Case{"sqrt", [](const Tensor& x) { return x.sqrt(); }, {kNaN, kInf, kNaN, kNaN, 0.0, 1.4142135623730951},
           {kNaN, 0.0, kNaN, kNaN, kInf, 0.35355339059327373}},
      Case{"exp", [](const Tensor& x) { return x.exp(); }, {kNaN, kInf, 0.0, 0.36787944117144233, 1.0, 7.38905609893065},
           {kNaN, kInf, 0.0, 0.36787944117144233, 1.0, 7.38905609893065}},
      Case{"log", [](const Tensor& x) { return x.log(); }, {kNaN, kInf, kNaN, kNaN, -kInf, 0.6931471805599453},
           {kNaN, 0.0, -0.0, -1.0, kInf, 0.5}},
      // torch.relu(nan) = nan, and its gradient passes there (threshold_backward masks x <= 0 only).
      Case{"relu", [](const Tensor& x) { return x.relu(); }, {kNaN, kInf, 0.0, 0.0, 0.0, 2.0}, {1, 1, 0, 0, 0, 1}},
      Case{"pow 2", [](const Tensor& x) { return x.pow(2); }, {kNaN, kInf, kInf, 1.0, 0.0, 4.0},
           {kNaN, kInf, -kInf, -2.0, 0.0, 4.0}},
      Case{"pow 0", [](const Tensor& x) { return x.pow(0); }, {1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0}},
      // x.pow(0.5) is x.sqrt() in PyTorch, so (-inf)^0.5 = nan (C's pow would say +inf).
      Case{"pow 0.5", [](const Tensor& x) { return x.pow(0.5); }, {kNaN, kInf, kNaN, kNaN, 0.0, 1.4142135623730951},
           {kNaN, 0.0, kNaN, kNaN, kInf, 0.35355339059327373}},
      Case{"pow -0.5", [](const Tensor& x) { return x.pow(-0.5); }, {kNaN, 0.0, kNaN, kNaN, kInf, 0.7071067811865475},
           {kNaN, -0.0, -0.0, kNaN, -kInf, -0.1767766952966369}},
      Case{"pow 1.5", [](const Tensor& x) { return x.pow(1.5); }, {kNaN, kInf, kInf, kNaN, 0.0, 2.8284271247461903},
           {kNaN, kInf, kNaN, kNaN, 0.0, 2.121320343559643}},
      Case{"pow 3", [](const Tensor& x) { return x.pow(3); }, {kNaN, kInf, -kInf, -1.0, 0.0, 8.0},
           {kNaN, kInf, kInf, 3.0, 0.0, 12.0}},
      Case{"pow -1", [](const Tensor& x) { return x.pow(-1); }, {kNaN, 0.0, -0.0, -1.0, kInf, 0.5},
           {kNaN, -0.0, -0.0, -1.0, -kInf, -0.25}});
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  INFO(c.name << " in " << dtype);
  const double tol = dtype == tg::kFloat32 ? 1e-6 : 1e-15;
  Tensor x = tg::tensor({kNaN, kInf, -kInf, -1.0, 0.0, 2.0}, {}, dtype).requires_grad_();
  const Tensor y = c.op(x);
  require_ieee_equal(y, c.y, tol);
  y.backward(tg::ones({6}, dtype));
  require_ieee_equal(x.grad(), c.dx, tol);
}

TEST_CASE("relu keeps the sign of -0, as PyTorch", "[core][edge][ieee]") {
  // torch.relu(torch.tensor([-0.])) = tensor([-0.])
  const std::vector<float> y = tg::tensor({-0.0}).relu().to_vector<float>();
  CHECK(std::signbit(y[0]));
}

TEST_CASE("NaN and Inf through + - * /, forward and backward, as PyTorch", "[core][edge][ieee]") {
  struct Case {
    std::string op;
    std::vector<double> y, da, db;  // a = [nan, inf, -inf, 1], b = [1, inf, inf, 0], dy = 1
  };
  const Case c = GENERATE(Case{"add", {kNaN, kInf, kNaN, 1.0}, {1, 1, 1, 1}, {1, 1, 1, 1}},
                          Case{"sub", {kNaN, kNaN, -kInf, 1.0}, {1, 1, 1, 1}, {-1, -1, -1, -1}},
                          Case{"mul", {kNaN, kInf, -kInf, 0.0}, {1.0, kInf, kInf, 0.0}, {kNaN, kInf, -kInf, 1.0}},
                          Case{"div", {kNaN, kNaN, kNaN, kInf}, {1.0, 0.0, 0.0, kInf}, {kNaN, kNaN, kNaN, -kInf}});
  INFO(c.op);
  Tensor a = tg::tensor({kNaN, kInf, -kInf, 1.0}, {}, tg::kFloat64).requires_grad_();
  Tensor b = tg::tensor({1.0, kInf, kInf, 0.0}, {}, tg::kFloat64).requires_grad_();
  const Tensor y = c.op == "add" ? a + b : c.op == "sub" ? a - b : c.op == "mul" ? a * b : a / b;
  require_ieee_equal(y, c.y, 0.0);
  y.backward(tg::ones({4}, tg::kFloat64));
  require_ieee_equal(a.grad(), c.da, 0.0);
  require_ieee_equal(b.grad(), c.db, 0.0);
}

TEST_CASE("NaN and Inf through broadcasting and its summed gradient", "[core][edge][ieee]") {
  // a: [2, 2], b: [2] broadcast over rows; db = Σ_rows dy·a-ish terms pick up the NaN.
  Tensor a = tg::tensor({1.0, kNaN, 2.0, 3.0}, {2, 2}, tg::kFloat64).requires_grad_();
  Tensor b = tg::tensor({kInf, 1.0}, {}, tg::kFloat64).requires_grad_();
  const Tensor y = a * b;  // torch: [[inf, nan], [inf, 3.]]; a.grad = [[inf, 1], [inf, 1]]; b.grad = [3., nan]
  require_ieee_equal(y, {kInf, kNaN, kInf, 3.0}, 0.0);
  y.sum().backward();
  require_ieee_equal(a.grad(), {kInf, 1.0, kInf, 1.0}, 0.0);
  require_ieee_equal(b.grad(), {3.0, kNaN}, 0.0);
}

TEST_CASE("NaN and Inf through sum, mean and var over rows, forward and backward, as PyTorch",
          "[core][edge][ieee]") {
  const std::vector<double> rows{1.0, kNaN, 2.0, 1.0, kInf, 2.0, 1.0, 2.0, 3.0, kInf, -kInf, 0.0};
  struct Case {
    std::string op;
    std::vector<double> y, dx;  // reduced over dim 1 of the [4, 3] `rows`, dy = 1
  };
  const double third = 1.0 / 3.0;
  const Case c = GENERATE_COPY(
      Case{"sum", {kNaN, kInf, 6.0, kNaN}, std::vector<double>(12, 1.0)},
      Case{"mean", {kNaN, kInf, 2.0, kNaN}, std::vector<double>(12, third)},
      Case{"var", {kNaN, kNaN, 1.0, kNaN}, {kNaN, kNaN, kNaN, -kInf, kNaN, -kInf, -1.0, 0.0, 1.0, kNaN, kNaN, kNaN}});
  INFO(c.op);
  Tensor x = tg::tensor(rows, {4, 3}, tg::kFloat64).requires_grad_();
  const Tensor y = c.op == "sum" ? x.sum({1}) : c.op == "mean" ? x.mean({1}) : x.var({1});
  require_ieee_equal(y, c.y, 1e-15);
  y.backward(tg::ones({4}, tg::kFloat64));
  require_ieee_equal(x.grad(), c.dx, 1e-15);
}

TEST_CASE("NaN and Inf through a long parallel sum propagate", "[core][edge][ieee]") {
  // Many chunks: the NaN sits in one chunk's partial sum, the Inf in another's.
  Tensor big = tg::ones({1 << 20}, tg::kFloat32);
  big.mutable_data<float>()[123457] = static_cast<float>(kInf);
  CHECK(big.sum().item() == kInf);
  big.mutable_data<float>()[900001] = static_cast<float>(kNaN);
  CHECK(std::isnan(big.sum().item()));
  CHECK(std::isnan(big.mean().item()));
}

TEST_CASE("NaN and Inf through matmul, forward and backward, as PyTorch", "[core][edge][ieee]") {
  // torch: A = [[1, nan], [2, 3]], B = I -> A @ B = [[nan, nan], [2, 3]],
  // A.grad = ones @ B^T = [[1, 1], [1, 1]], B.grad = A^T @ ones = [[3, 3], [nan, nan]]
  Tensor a = tg::tensor({1.0, kNaN, 2.0, 3.0}, {2, 2}, tg::kFloat64).requires_grad_();
  Tensor b = tg::tensor({1.0, 0.0, 0.0, 1.0}, {2, 2}, tg::kFloat64).requires_grad_();
  const Tensor y = tg::matmul(a, b);
  require_ieee_equal(y, {kNaN, kNaN, 2.0, 3.0}, 0.0);
  y.backward(tg::ones({2, 2}, tg::kFloat64));
  require_ieee_equal(a.grad(), {1.0, 1.0, 1.0, 1.0}, 0.0);
  require_ieee_equal(b.grad(), {3.0, 3.0, kNaN, kNaN}, 0.0);
  // Inf times 0 is NaN: [1, inf] @ I = [1·1 + inf·0, 1·0 + inf·1] = [nan, inf], as in torch.
  const Tensor inf_row = tg::tensor({1.0, kInf, 2.0, 3.0}, {2, 2}, tg::kFloat64);
  require_ieee_equal(tg::matmul(inf_row, b.detach()), {kNaN, kInf, 2.0, 3.0}, 0.0);
}

TEST_CASE("NaN and Inf through to(), clone, reshape and transpose are kept as they are", "[core][edge][ieee]") {
  Tensor x = tg::tensor({kNaN, kInf, -kInf, 1.5, -0.0, 7.0}, {2, 3}, tg::kFloat64).requires_grad_();
  require_ieee_equal(x.to(tg::kFloat32), {kNaN, kInf, -kInf, 1.5, 0.0, 7.0}, 0.0);
  require_ieee_equal(x.clone(), {kNaN, kInf, -kInf, 1.5, 0.0, 7.0}, 0.0);
  require_ieee_equal(x.reshape({3, 2}), {kNaN, kInf, -kInf, 1.5, 0.0, 7.0}, 0.0);
  const Tensor t = x.transpose(0, 1);
  require_ieee_equal(t, {kNaN, 1.5, kInf, 0.0, -kInf, 7.0}, 0.0);
  t.backward(tg::tensor({kNaN, 1.0, 2.0, 3.0, 4.0, kInf}, {3, 2}, tg::kFloat64));
  require_ieee_equal(x.grad(), {kNaN, 2.0, 4.0, 1.0, 3.0, kInf}, 0.0);
  std::ostringstream text;
  text << x.detach();  // torch: tensor([[nan, inf, -inf], [1.5000, -0.0000, 7.0000]], dtype=torch.float64)
  CHECK(text.str().find("nan") != std::string::npos);
  CHECK(text.str().find("-inf") != std::string::npos);
}

TEST_CASE("NaN gradients do not stop backward unless anomaly detection is on", "[core][edge][ieee]") {
  Tensor x = tg::tensor({-1.0, 4.0}, {}, tg::kFloat64).requires_grad_();
  REQUIRE_NOTHROW(x.sqrt().sum().backward());
  require_ieee_equal(x.grad(), {kNaN, 0.25}, 0.0);
}

// --- tensors shared between threads -------------------------------------------------------------

TEST_CASE("a Tensor handle copied into other threads is safe for read-only use", "[core][edge][threads]") {
  tg::manual_seed(601);
  const Tensor shared = tg::randn({512, 300}, tg::kFloat64);
  const Tensor w = tg::randn({300, 64}, tg::kFloat64);
  // Single-threaded reference results.
  const std::vector<double> sum_ref = values(shared.sum({0}));
  const std::vector<double> mm_ref = values(tg::matmul(shared, w).relu());
  const std::vector<double> var_ref = values(shared.var({1}));
  std::ostringstream print_ref;
  print_ref << shared;
  const long uses_before = shared.use_count();

  constexpr int kThreads = 4, kIterations = 20;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([shared, w, t, &mismatches, &sum_ref, &mm_ref, &var_ref, &print_ref] {
      tg::NoGradGuard no_grad;
      try {  // no Catch2 assertions off the main thread: count, and CHECK afterwards
        for (int i = 0; i < kIterations; ++i) {
          const Tensor copy = shared;  // handle copies on several threads at once: refcounts only
          mismatches[t] += values(copy.sum({0})) != sum_ref;
          mismatches[t] += values(tg::matmul(copy, w).relu()) != mm_ref;
          mismatches[t] += values(copy.var({1})) != var_ref;
          std::ostringstream text;
          text << copy;
          mismatches[t] += text.str() != print_ref.str();
        }
      } catch (const std::exception&) {
        mismatches[t] += 1000;
      }
    });
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) CHECK(mismatches[t] == 0);
  CHECK(shared.use_count() == uses_before);
}
