// 2-D pooling: PyTorch fixtures (kernel, stride, padding, dilation, ceil_mode, unbatched, indices),
// hand-derived ties, NaN and −inf, gradcheck and gradgradcheck in float64, errors naming the
// shapes, and thread-count determinism.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;
using Catch::Matchers::Contains;

namespace {

tg::nn::ExpandingArray<2> pair_of(const std::vector<int64_t>& v) { return tg::nn::ExpandingArray<2>(v); }

F::MaxPool2dFuncOptions max_pool_options(const tg::testing::FixtureCase& c) {
  F::MaxPool2dFuncOptions o{.padding = pair_of(c.ints("padding")), .dilation = pair_of(c.ints("dilation")),
                            .ceil_mode = c.scalar("ceil_mode") != 0};
  if (c.has("stride")) o.stride = pair_of(c.ints("stride"));
  return o;
}

using NamedBytes = std::vector<std::pair<std::string, std::vector<unsigned char>>>;

}  // namespace

TEST_CASE("max_pool2d matches PyTorch: values, indices and gradients", "[pooling][max_pool][fixture]") {
  int cases = 0;
  for (const auto& [name, c] : tg::testing::load_fixtures("pooling.txt")) {
    if (name.rfind("max_pool_", 0) != 0) continue;
    CAPTURE(name);
    ++cases;
    const std::string suffix = name.substr(name.size() - 4);
    Tensor x = leaf(c.at("x"));
    auto [y, indices] = F::max_pool2d_with_indices(x, pair_of(c.ints("kernel_size")), max_pool_options(c));
    REQUIRE(std::string(y.grad_fn_name()) == "MaxPool2DWithIndicesBackward");
    TG_REQUIRE_CLOSE(y, c.at("y"), fixture_atol(suffix));
    REQUIRE(indices.dtype() == tg::kInt64);
    REQUIRE(indices.shape() == y.shape());
    REQUIRE(indices.to_vector<int64_t>() == c.ints("indices"));
    y.backward(c.at("dy"));
    TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), fixture_atol(suffix));

    Tensor x2 = leaf(c.at("x"));
    Tensor y2 = F::max_pool2d(x2, pair_of(c.ints("kernel_size")), max_pool_options(c));
    TG_REQUIRE_CLOSE(y2, c.at("y"), 0.0);
    y2.backward(c.at("dy"));
    TG_REQUIRE_CLOSE(x2.grad(), c.at("dx"), 0.0);
    tg::NoGradGuard no_grad;  // inference computes no indices: its own kernel
    TG_REQUIRE_CLOSE(F::max_pool2d(c.at("x"), pair_of(c.ints("kernel_size")), max_pool_options(c)), c.at("y"), 0.0);
  }
  REQUIRE(cases == 20);
}

TEST_CASE("max_pool2d: ties take the first element, NaN wins, −inf keeps the window's first index",
          "[pooling][max_pool]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Tensor x = tg::tensor({3, 3, 1, nan,   //
                               3, 1, 2, 5,     //
                               -inf, -inf, nan, 4,  //
                               -inf, -inf, 7, nan},
                              {1, 1, 4, 4}, tg::kFloat64);
  // The 2×2 fast path: the tie 3, 3 takes the first; a NaN wins and is replaced only by a later
  // NaN; a window of −inf keeps its first position.
  auto [y, idx] = F::max_pool2d_with_indices(x, 2);
  const std::vector<double> v = tg::testing::values(y);
  CHECK(v[0] == 3);
  CHECK(std::isnan(v[1]));
  CHECK(v[2] == -inf);
  CHECK(std::isnan(v[3]));
  CHECK(idx.to_vector<int64_t>() == std::vector<int64_t>{0, 3, 8, 15});
  // The general path, padding 1: windows at rows {0}, {1, 2}, {3}, and the same columns.
  auto [y_padded, idx_padded] = F::max_pool2d_with_indices(x, 2, {.stride = 2, .padding = 1, .ceil_mode = true});
  CHECK(y_padded.shape() == Shape{1, 1, 3, 3});
  CHECK(idx_padded.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 3, 4, 10, 7, 12, 14, 15});
  // The gradient reaches the argmax only, summed where windows overlap (stride 1, kernel 2).
  Tensor ramp = tg::arange(0, 9, 1, tg::kFloat64).reshape({1, 1, 3, 3}).requires_grad_();
  F::max_pool2d(ramp, 2, {.stride = 1}).sum().backward();
  CHECK(tg::testing::values(ramp.grad()) == std::vector<double>{0, 0, 0, 0, 1, 1, 0, 1, 1});
}

TEST_CASE("max_pool2d passes gradcheck and gradgradcheck in float64", "[pooling][max_pool][gradcheck]") {
  tg::manual_seed(17);
  struct Case {
    Shape shape;
    int64_t kernel, stride, padding, dilation;
    bool ceil_mode;
  };
  const Case c = GENERATE(Case{{2, 2, 4, 6}, 2, 2, 0, 1, false}, Case{{1, 2, 5, 5}, 3, 2, 1, 1, true},
                          Case{{2, 6, 7}, 2, 1, 1, 2, false});
  CAPTURE(c.shape, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
  auto fn = [&](const std::vector<Tensor>& in) {
    return F::max_pool2d(in[0], c.kernel,
                         {.stride = c.stride, .padding = c.padding, .dilation = c.dilation, .ceil_mode = c.ceil_mode});
  };
  std::vector<Tensor> inputs{randn_leaf(c.shape, tg::kFloat64)};
  TG_REQUIRE_GRADCHECK(fn, inputs);
  const tg::GradcheckResult second = tg::gradgradcheck(fn, inputs);
  INFO(second.message);
  REQUIRE(second.passed);
}

TEST_CASE("max_pool2d: errors name the sizes", "[pooling][max_pool]") {
  const Tensor x = tg::randn({2, 3, 4, 5});
  REQUIRE_TG_ERROR(F::max_pool2d(tg::randn({5, 5}), 2), Contains("3-D [C, H, W] or 4-D") && Contains("[5, 5]"));
  REQUIRE_TG_ERROR(F::max_pool2d(tg::randn({2, 0, 5, 5}), 2), Contains("non-empty") && Contains("[2, 0, 5, 5]"));
  REQUIRE_TG_ERROR(F::max_pool2d(x, 6), Contains("too small") && Contains("[2, 3, 4, 5]") && Contains("[6, 6]"));
  REQUIRE_TG_ERROR(F::max_pool2d(x, 3, {.padding = 2}), Contains("half the kernel size"));
  REQUIRE_TG_ERROR(F::max_pool2d(x, 0), Contains("kernel_size must be positive"));
  REQUIRE_TG_ERROR(F::max_pool2d(x, 2, {.stride = 0}), Contains("stride must be positive"));
  REQUIRE_TG_ERROR(F::max_pool2d(x, 2, {.dilation = {1, 0}}), Contains("dilation must be positive") && Contains("[1, 0]"));
  REQUIRE_TG_ERROR(F::max_pool2d(x.to(tg::kInt64), 2), Contains("max_pool2d") && Contains("int64"));
  CHECK(F::max_pool2d(tg::randn({0, 3, 4, 4}), 2).shape() == Shape{0, 3, 2, 2});
}

TEST_CASE("max_pool2d is bitwise identical at any thread count", "[pooling][max_pool][determinism]") {
  tg::manual_seed(1);
  const int64_t kernel = GENERATE(2, 3);
  CAPTURE(kernel);
  const Tensor x0 = tg::randn({8, 16, 28, 28});
  require_bitwise_identical_across_threads([&] {
    Tensor x = x0.clone().requires_grad_();
    auto [y, idx] = F::max_pool2d_with_indices(x, kernel, {.stride = 2, .padding = 1});
    y.backward(tg::ones_like(y));
    return NamedBytes{{"y", bytes(y)}, {"dx", bytes(x.grad())}};
  });
}

TEST_CASE("MaxPool2d is F::max_pool2d with its options", "[pooling][module]") {
  tg::manual_seed(2);
  const Tensor x = tg::randn({2, 3, 9, 8});
  tg::nn::MaxPool2d pool(3, {.stride = 2, .padding = 1, .ceil_mode = true});
  TG_REQUIRE_CLOSE(pool(x), F::max_pool2d(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true}), 0.0);
  auto [y, idx] = pool.forward_with_indices(x);
  CHECK(idx.to_vector<int64_t>() ==
        F::max_pool2d_with_indices(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true}).second.to_vector<int64_t>());
  CHECK(pool.parameters().empty());
  CHECK(tg::nn::MaxPool2d(2)(x).shape() == Shape{2, 3, 4, 4});
}
