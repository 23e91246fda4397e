// Edge cases of the ops over one dim (as tests/core/edge_cases_test.cpp does for the others):
// empty tensors forward and backward, and NaN/Inf as PyTorch 1.13 returns them, e.g.
//   x = torch.tensor([[nan, 0.], [0., 0.]], dtype=torch.float64, requires_grad=True)
//   y = x.softmax(1); y.backward(torch.ones_like(y)); print(y, x.grad)
#include <cmath>

#include "core_test_util.hpp"
#include "support/dim_ops.hpp"

using tg::Shape;
using tg::Tensor;
using tg::testing::int64_values;
using tg::testing::kInf;
using tg::testing::kNaN;
using tg::testing::require_ieee_equal;

TEST_CASE("empty: every op over a dim, forward and backward", "[core][edge][empty][dim_ops]") {
  Tensor x = tg::zeros({0, 3}, tg::kFloat64).requires_grad_();
  const std::vector<Tensor> outputs = {
      x.softmax(1),
      x.log_softmax(0),
      x.logsumexp({1}),
      x.max(1).values,
      x.min(1, true).values,
      tg::cat({x, x}, 1),
      tg::stack({x, x}),
      x.split(1, 1)[2],
      x.chunk(2, 0)[1],
      x.index_select(1, int64_values({2, 0}, {2})),
      x.index_select(0, int64_values({}, {0})),
      x.gather(1, int64_values({}, {0, 2})),
      x.scatter_add(1, int64_values({}, {0, 1}), tg::zeros({0, 1}, tg::kFloat64)),
  };
  CHECK(outputs[0].shape() == Shape{0, 3});
  CHECK(outputs[2].shape() == Shape{0});
  CHECK(outputs[4].shape() == Shape{0, 1});
  CHECK(outputs[5].shape() == Shape{0, 6});
  CHECK(outputs[6].shape() == Shape{2, 0, 3});
  CHECK(outputs[9].shape() == Shape{0, 2});
  for (const Tensor& y : outputs) {
    x.set_grad(Tensor());
    y.sum().backward();
    REQUIRE(x.grad().shape() == Shape{0, 3});
  }
  // Over an empty dim: logsumexp is -inf with gradient 0 elsewhere; softmax has nothing to do.
  Tensor columns = tg::zeros({2, 0}, tg::kFloat64).requires_grad_();
  require_ieee_equal(columns.logsumexp({1}), {-kInf, -kInf}, 0.0);
  columns.softmax(1).sum().backward();
  CHECK(columns.grad().shape() == Shape{2, 0});
  // Embedding-style lookups of nothing, and a gradient of nothing into a table.
  Tensor table = tg::randn({4, 2}, tg::kFloat64).requires_grad_();
  table.index_select(0, int64_values({}, {0})).sum().backward();
  CHECK(table.grad().to_vector<double>() == std::vector<double>(8, 0.0));
}

TEST_CASE("NaN and Inf through the softmax family, forward and backward, as PyTorch", "[core][edge][ieee][dim_ops]") {
  // torch: softmax([[nan, 0], [0, 0]], 1) = [[nan, nan], [.5, .5]], and the NaN stays in its row.
  Tensor x = tg::tensor({kNaN, 0, 0, 0}, {2, 2}, tg::kFloat64).requires_grad_();
  const Tensor y = x.softmax(1);
  require_ieee_equal(y, {kNaN, kNaN, 0.5, 0.5}, 1e-15);
  (y * tg::tensor({1, 2, 3, 4}, {2, 2}, tg::kFloat64)).sum().backward();
  require_ieee_equal(x.grad(), {kNaN, kNaN, -0.25, 0.25}, 1e-15);
  // torch: logsumexp([[inf, 1], [-inf, -inf], [-inf, 0]], 1) = [inf, -inf, 0]; the gradient of
  // the last row is softmax = [0, 1].
  Tensor z = tg::tensor({kInf, 1, -kInf, -kInf, -kInf, 0}, {3, 2}, tg::kFloat64).requires_grad_();
  const Tensor lse = z.logsumexp({1});
  require_ieee_equal(lse, {kInf, -kInf, 0.0}, 0.0);
  lse.sum().backward();
  require_ieee_equal(z.grad(), {kNaN, 0.0, kNaN, kNaN, 0.0, 1.0}, 0.0);
  // log_softmax of a huge but finite row stays finite: x − max, never exp(x).
  const Tensor wide = tg::tensor({-1e300, 1e300}, {}, tg::kFloat64).log_softmax(0);
  require_ieee_equal(wide, {-2e300, 0.0}, 0.0);
}

TEST_CASE("NaN and Inf through max, gather and cat are kept as they are", "[core][edge][ieee][dim_ops]") {
  Tensor x = tg::tensor({1, kNaN, kInf, -kInf}, {2, 2}, tg::kFloat64).requires_grad_();
  const auto [values, indices] = x.max(1);
  require_ieee_equal(values, {kNaN, kInf}, 0.0);
  CHECK(indices.to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  values.sum().backward();
  require_ieee_equal(x.grad(), {0, 1, 1, 0}, 0.0);
  require_ieee_equal(x.gather(1, int64_values({1, 1, 0, 1}, {2, 2})), {kNaN, kNaN, kInf, -kInf}, 0.0);
  require_ieee_equal(tg::cat({x, x}, 0), {1, kNaN, kInf, -kInf, 1, kNaN, kInf, -kInf}, 0.0);
}
