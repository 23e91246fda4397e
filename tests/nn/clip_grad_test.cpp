// Gradient clipping against torch.nn.utils (tests/fixtures/clip_grad.txt, from
// make_optim_fixtures.py), values derived by hand, errors and thread-count independence.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <tbb/task_arena.h>

#include "support/fixtures.hpp"

namespace {

using tg::nn::utils::clip_grad_norm_;
using tg::nn::utils::clip_grad_value_;

// Parameters of the fixture's shapes and dtype whose grads are the fixture's grad_a, grad_b.
std::vector<tg::Tensor> parameters_with_grads(const tg::testing::FixtureCase& f) {
  std::vector<tg::Tensor> params;
  for (const char* x : {"a", "b"}) {
    const tg::Tensor& grad = f.at(std::string("grad_") + x);
    tg::Tensor p = tg::zeros(grad.shape(), grad.dtype()).requires_grad_();
    p.set_grad(grad.clone());
    params.push_back(p);
  }
  return params;
}

void require_clipped(const std::vector<tg::Tensor>& params, const tg::testing::FixtureCase& f, double tol) {
  TG_REQUIRE_CLOSE(params[0].grad(), f.at("clipped_a"), tol);
  TG_REQUIRE_CLOSE(params[1].grad(), f.at("clipped_b"), tol);
}

}  // namespace

TEST_CASE("clip_grad_norm_ matches torch.nn.utils for every norm type", "[nn][clip_grad][fixture]") {
  const std::string name = GENERATE(as<std::string>{}, "norm2_clips", "norm2_keeps", "norm1", "norm3", "norm_inf",
                                    "norm_neg_inf", "norm0", "norm2_clips_f32");
  CAPTURE(name);
  const auto& f = tg::testing::fixture("clip_grad.txt", name);
  std::vector<tg::Tensor> params = parameters_with_grads(f);
  const tg::Tensor total = clip_grad_norm_(params, f.scalar("max_norm"), f.scalar("norm_type"));
  const bool f32 = f.at("total_norm").dtype() == tg::kFloat32;
  REQUIRE(total.shape() == tg::Shape{});
  REQUIRE(total.dtype() == f.at("total_norm").dtype());
  REQUIRE(total.item() == Approx(f.at("total_norm").item()).epsilon(f32 ? 1e-6 : 1e-14));
  require_clipped(params, f, f32 ? 1e-6 : 1e-14);
}

TEST_CASE("clip_grad_value_ matches torch.nn.utils", "[nn][clip_grad][fixture]") {
  const std::string name = GENERATE(as<std::string>{}, "value", "value_f32");
  const auto& f = tg::testing::fixture("clip_grad.txt", name);
  std::vector<tg::Tensor> params = parameters_with_grads(f);
  clip_grad_value_(params, f.scalar("max_norm"));
  require_clipped(params, f, 0.0);
}

TEST_CASE("clip_grad_norm_ by hand: a 3-4-5 triangle, skipped and shared gradients", "[nn][clip_grad]") {
  tg::Tensor a = tg::zeros({2}, tg::kFloat64).requires_grad_();
  tg::Tensor unused = tg::zeros({3}, tg::kFloat64).requires_grad_();
  const tg::Tensor grad = tg::tensor({3.0, 4.0}, {2}, tg::kFloat64);
  a.set_grad(grad);
  const tg::Tensor total = clip_grad_norm_({a, unused}, 1.0);
  REQUIRE(total.item() == 5.0);
  // scaled by 1 / (5 + 1e-6); the caller's tensor is replaced, never written
  tg::testing::require_ieee_equal(a.grad(), {3.0 / (5.0 + 1e-6), 4.0 / (5.0 + 1e-6)}, 1e-16);
  tg::testing::require_ieee_equal(grad, {3.0, 4.0}, 0.0);
  REQUIRE_FALSE(unused.grad().defined());
  // No gradient at all: PyTorch's tensor(0.)
  const tg::Tensor none = clip_grad_norm_({unused}, 1.0);
  REQUIRE(none.item() == 0.0);
  REQUIRE(none.dtype() == tg::kFloat32);
}

TEST_CASE("clip_grad_norm_ with non-finite gradients", "[nn][clip_grad][errors]") {
  tg::Tensor a = tg::zeros({2}, tg::kFloat64).requires_grad_();
  const tg::Tensor grad = tg::tensor({1.0, INFINITY}, {2}, tg::kFloat64);
  a.set_grad(grad);
  REQUIRE_TG_ERROR(clip_grad_norm_({a}, 1.0, 2.0, true),
                   Catch::Contains("clip_grad_norm_") && Catch::Contains("is inf") &&
                       Catch::Contains("error_if_nonfinite = false"));
  REQUIRE(a.grad().is_same(grad));  // nothing changed
  // As PyTorch: the coefficient is 0, so finite entries become 0 and inf * 0 is NaN.
  REQUIRE(std::isinf(clip_grad_norm_({a}, 1.0).item()));
  tg::testing::require_ieee_equal(a.grad(), {0.0, tg::testing::kNaN}, 0.0);
}

TEST_CASE("gradient clipping rejects invalid arguments", "[nn][clip_grad][errors]") {
  tg::Tensor a = tg::zeros({2}).requires_grad_();
  a.set_grad(tg::ones({2}));
  REQUIRE_TG_ERROR(clip_grad_norm_({a}, -1.0), Catch::Contains("clip_grad_norm_: expected max_norm >= 0, got -1"));
  REQUIRE_TG_ERROR(clip_grad_norm_({a}, NAN), Catch::Contains("max_norm"));
  REQUIRE_TG_ERROR(clip_grad_norm_({a}, 1.0, NAN), Catch::Contains("norm_type"));
  REQUIRE_TG_ERROR(clip_grad_norm_({a, tg::Tensor()}, 1.0), Catch::Contains("parameter 1 is an undefined tensor"));
  REQUIRE_TG_ERROR(clip_grad_value_({a}, -0.5), Catch::Contains("clip_grad_value_: expected clip_value >= 0"));
  REQUIRE_TG_ERROR(clip_grad_value_({tg::Tensor(), a}, 0.5), Catch::Contains("parameter 0 is an undefined tensor"));
  tg::testing::require_ieee_equal(a.grad(), {1.0, 1.0}, 0.0);
}

TEST_CASE("clip_grad_norm_ gives the same bits at any thread count", "[nn][clip_grad][parallel]") {
  const int64_t n = int64_t{1} << 21;  // many chunks: the sums and the scaling run in parallel
  tg::manual_seed(4);
  const tg::Tensor grad = tg::randn({n});
  const auto run = [&](int threads) {
    tg::Tensor p = tg::zeros({n}).requires_grad_();
    p.set_grad(grad);
    tg::Tensor total;
    tbb::task_arena arena(threads);
    arena.execute([&] { total = clip_grad_norm_({p}, 1.0, 3.0); });
    return std::pair{total.item(), p.grad()};
  };
  const auto [total1, grad1] = run(1);
  // The float64 reference: (Σ |g|^3)^(1/3)
  double sum = 0;
  for (float g : grad.to_vector<float>()) sum += std::pow(std::fabs(static_cast<double>(g)), 3.0);
  REQUIRE(total1 == Approx(std::cbrt(sum)).epsilon(1e-6));
  for (int threads : {2, 3}) {
    const auto [total, clipped] = run(threads);
    REQUIRE(total == total1);
    REQUIRE(std::memcmp(clipped.data<float>(), grad1.data<float>(), sizeof(float) * n) == 0);
  }
}
