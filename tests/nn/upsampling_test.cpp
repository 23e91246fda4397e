// F::interpolate (nearest, bilinear) and nn::Upsample: PyTorch fixtures (size, scale_factor with
// and without recompute_scale_factor, align_corners, 1-D and 2-D), hand-derived values, gradcheck
// and gradgradcheck, errors, and thread-count determinism.
#include <string>
#include <vector>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;
using Catch::Matchers::Contains;

namespace {
using NamedBytes = std::vector<std::pair<std::string, std::vector<unsigned char>>>;
}

TEST_CASE("interpolate matches PyTorch: nearest and bilinear", "[upsampling][fixture]") {
  int cases = 0;
  for (const auto& [name, c] : tg::testing::load_fixtures("pooling.txt")) {
    if (name.rfind("interpolate_", 0) != 0) continue;
    CAPTURE(name);
    ++cases;
    const std::string suffix = name.substr(name.size() - 4);
    F::InterpolateFuncOptions o;
    o.mode = name.find("bilinear") != std::string::npos ? "bilinear" : "nearest";
    if (c.has("size")) o.size = c.ints("size");
    if (c.has("scale_factor")) o.scale_factor = c.at("scale_factor").to_vector<double>();
    if (c.has("align_corners")) o.align_corners = c.scalar("align_corners") != 0;
    if (c.has("recompute_scale_factor")) o.recompute_scale_factor = c.scalar("recompute_scale_factor") != 0;
    Tensor x = leaf(c.at("x"));
    Tensor y = F::interpolate(x, o);
    TG_REQUIRE_CLOSE(y, c.at("y"), fixture_atol(suffix));
    y.backward(c.at("dy"));
    TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), fixture_atol(suffix));
  }
  REQUIRE(cases == 30);
}

TEST_CASE("interpolate: hand-derived values", "[upsampling]") {
  const Tensor x = tg::tensor({0, 1, 2}, {1, 1, 3}, tg::kFloat64);
  CHECK(tg::testing::values(F::interpolate(x, {.scale_factor = std::vector<double>{2}})) ==
        std::vector<double>{0, 0, 1, 1, 2, 2});
  CHECK(tg::testing::values(F::interpolate(x, {.size = std::vector<int64_t>{2}})) == std::vector<double>{0, 1});
  // Bilinear with aligned corners on [[0, 1, 2]] to width 5: the corners stay, the rest halves.
  const Tensor row = x.reshape({1, 1, 1, 3});
  CHECK(tg::testing::values(F::interpolate(
            row, {.size = std::vector<int64_t>{1, 5}, .mode = "bilinear", .align_corners = true})) ==
        std::vector<double>{0, 0.5, 1, 1.5, 2});
  // Half-pixel centres, width 6: x(o) = (o + ½)/2 − ½ clamped at 0 -> 0, 0.25, 0.75, 1.25, 1.75, 2.
  const std::vector<double> half = tg::testing::values(
      F::interpolate(row, {.scale_factor = std::vector<double>{1, 2}, .mode = "bilinear"}));
  const std::vector<double> expected{0, 0.25, 0.75, 1.25, 1.75, 2};
  for (size_t i = 0; i < half.size(); ++i) CHECK(half[i] == Approx(expected[i]));
  // The nearest backward sums the copies: each input is read twice.
  Tensor leaf_x = x.clone().requires_grad_();
  F::interpolate(leaf_x, {.scale_factor = std::vector<double>{2}}).sum().backward();
  CHECK(tg::testing::values(leaf_x.grad()) == std::vector<double>{2, 2, 2});
}

TEST_CASE("interpolate passes gradcheck and gradgradcheck in float64", "[upsampling][gradcheck]") {
  tg::manual_seed(8);
  const int which = GENERATE(0, 1, 2, 3);
  const std::vector<std::pair<Shape, F::InterpolateFuncOptions>> cases{
      {{1, 2, 3, 4}, {.size = std::vector<int64_t>{5, 6}}},
      {{2, 2, 5}, {.scale_factor = std::vector<double>{0.6}}},
      {{1, 2, 3, 4}, {.size = std::vector<int64_t>{5, 3}, .mode = "bilinear"}},
      {{1, 1, 4, 3}, {.scale_factor = std::vector<double>{1.5, 2}, .mode = "bilinear", .align_corners = true}},
  };
  const auto& [shape, options] = cases[static_cast<size_t>(which)];
  CAPTURE(which);
  auto fn = [&](const std::vector<Tensor>& in) { return F::interpolate(in[0], options); };
  std::vector<Tensor> inputs{randn_leaf(shape, tg::kFloat64)};
  TG_REQUIRE_GRADCHECK(fn, inputs);
  const tg::GradcheckResult second = tg::gradgradcheck(fn, inputs);
  INFO(second.message);
  REQUIRE(second.passed);
}

TEST_CASE("interpolate: errors name the input and the arguments", "[upsampling]") {
  const Tensor x = tg::randn({2, 3, 4, 5});
  using V = std::vector<int64_t>;
  using S = std::vector<double>;
  REQUIRE_TG_ERROR(F::interpolate(x), Contains("either size or scale_factor"));
  REQUIRE_TG_ERROR(F::interpolate(x, {.size = V{3, 3}, .scale_factor = S{2}}), Contains("not both"));
  REQUIRE_TG_ERROR(F::interpolate(x, {.size = V{3, 3, 3}}), Contains("1 or 2 values of size") && Contains("[2, 3, 4, 5]"));
  REQUIRE_TG_ERROR(F::interpolate(x, {.size = V{3, 3}, .align_corners = true}), Contains("align_corners"));
  REQUIRE_TG_ERROR(F::interpolate(tg::randn({2, 3, 4}), {.size = V{3}, .mode = "bilinear"}),
                   Contains("4-D") && Contains("[2, 3, 4]"));
  REQUIRE_TG_ERROR(F::interpolate(tg::randn({3, 4}), {.size = V{3}}), Contains("[3, 4]"));
  REQUIRE_TG_ERROR(F::interpolate(x, {.size = V{3, 3}, .mode = "bicubic"}), Contains("bicubic"));
  REQUIRE_TG_ERROR(F::interpolate(x, {.scale_factor = S{0.1}}), Contains("output size 0"));
  REQUIRE_TG_ERROR(F::interpolate(x, {.scale_factor = S{-1}}), Contains("positive"));
  REQUIRE_TG_ERROR(F::interpolate(x, {.size = V{3, 3}, .recompute_scale_factor = true}), Contains("recompute_scale_factor"));
}

TEST_CASE("interpolate is bitwise identical at any thread count", "[upsampling][determinism]") {
  tg::manual_seed(12);
  const std::string mode = GENERATE(as<std::string>{}, "nearest", "bilinear");
  CAPTURE(mode);
  const Tensor x0 = tg::randn({4, 16, 20, 24});
  require_bitwise_identical_across_threads([&] {
    Tensor x = x0.clone().requires_grad_();
    Tensor y = F::interpolate(x, {.size = std::vector<int64_t>{37, 29}, .mode = mode});
    y.backward(tg::ones_like(y) * 0.5 + y);
    return NamedBytes{{"y", bytes(y)}, {"dx", bytes(x.grad())}};
  });
}

TEST_CASE("Upsample is F::interpolate with its options", "[upsampling][module]") {
  tg::manual_seed(13);
  const Tensor x = tg::randn({2, 3, 4, 5});
  tg::nn::Upsample up({.scale_factor = std::vector<double>{2}, .mode = "bilinear", .align_corners = true});
  TG_REQUIRE_CLOSE(up(x), F::interpolate(x, {.scale_factor = std::vector<double>{2, 2}, .mode = "bilinear",
                                             .align_corners = true}),
                   0.0);
  CHECK(tg::nn::Upsample({.size = std::vector<int64_t>{7, 7}})(x).shape() == Shape{2, 3, 7, 7});
  CHECK(up.parameters().empty());
}
