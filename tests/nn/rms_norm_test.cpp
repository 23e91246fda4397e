// RMSNorm and LayerNorm without bias: PyTorch fixtures (torch 2.4's formulas, written out in the
// generating script), gradcheck, the module's parameters and options, errors, and thread-count
// determinism. Tagged [layer_norm] too: they share its row kernels, so they run at every vector level.
#include <limits>
#include <string>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

TEST_CASE("rms_norm matches PyTorch's output and gradients", "[rms_norm][layer_norm][fixture]") {
  const std::string base = GENERATE(as<std::string>{}, "rmsnorm_4x6_ns6", "rmsnorm_2x3x5_ns5", "rmsnorm_2x3x4_ns3x4",
                                    "rmsnorm_3x8_ns8_noaffine", "rmsnorm_5x1_ns1");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(base, suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("rms_norm.txt", base + suffix);
  const double atol = fixture_atol(suffix);
  const bool affine = c.has("weight");
  Tensor x = leaf(c.at("x"));
  Tensor weight = affine ? leaf(c.at("weight")) : Tensor();
  const std::optional<double> eps = c.has("eps") ? std::optional(c.scalar("eps")) : std::nullopt;

  Tensor y = F::rms_norm(x, c.ints("normalized_shape"), weight, eps);
  REQUIRE(std::string(y.grad_fn_name()) == "RmsNormBackward");
  TG_REQUIRE_CLOSE(y, c.at("y"), atol);
  y.backward(c.at("dy"));
  TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), atol);
  if (affine) TG_REQUIRE_CLOSE(weight.grad(), c.at("dweight"), atol);
}

TEST_CASE("LayerNorm with bias = false matches PyTorch's layer_norm without bias", "[layer_norm][fixture]") {
  const std::string base = GENERATE(as<std::string>{}, "layernorm_nobias_4x6_ns6", "layernorm_nobias_2x3x4_ns3x4");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(base, suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("rms_norm.txt", base + suffix);
  const Shape normalized_shape = c.ints("normalized_shape");
  tg::nn::LayerNorm ln(normalized_shape, {.bias = false});
  ln.to(fixture_dtype(suffix));
  REQUIRE(ln.named_parameters().size() == 1);
  REQUIRE(ln.named_parameters()[0].first == "weight");
  REQUIRE_FALSE(ln.bias.defined());
  ln.weight = c.at("weight");
  Tensor x = leaf(c.at("x"));
  Tensor y = ln(x);
  TG_REQUIRE_CLOSE(y, c.at("y"), fixture_atol(suffix));
  y.backward(c.at("dy"));
  TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), fixture_atol(suffix));
  TG_REQUIRE_CLOSE(ln.weight.grad(), c.at("dweight"), fixture_atol(suffix));
}

TEST_CASE("rms_norm passes gradcheck in float64", "[rms_norm][layer_norm][gradcheck]") {
  tg::manual_seed(21);
  const Shape x_shape = GENERATE(Shape{4, 6}, Shape{2, 3, 4}, Shape{3, 1});
  const Shape normalized_shape = x_shape.size() == 3 ? Shape{3, 4} : Shape{x_shape.back()};
  const bool affine = GENERATE(true, false);
  CAPTURE(x_shape, affine);
  std::vector<Tensor> inputs{randn_leaf(x_shape, tg::kFloat64)};
  if (affine) inputs.push_back(randn_leaf(normalized_shape, tg::kFloat64));
  auto fn = [normalized_shape](const std::vector<Tensor>& in) {
    return F::rms_norm(in[0], normalized_shape, in.size() == 2 ? in[1] : Tensor(), 1e-5);
  };
  TG_REQUIRE_GRADCHECK(fn, inputs);
}

TEST_CASE("RMSNorm's default eps is the input dtype's machine epsilon", "[rms_norm][layer_norm]") {
  // One element per row: y = x / √(x² + ε) · γ, so ε is visible for x of the size of √ε.
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  const double eps = dtype == tg::kFloat32 ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
  tg::nn::RMSNorm norm({1});
  norm.to(dtype);
  REQUIRE_FALSE(norm.eps.has_value());
  const double x = std::sqrt(eps);  // y = x / √(2x²) = 1/√2
  const Tensor y = norm(tg::full({2, 1}, x, dtype));
  for (double v : tg::testing::values(y)) CHECK(v == Approx(1.0 / std::sqrt(2.0)).epsilon(1e-6));
}

TEST_CASE("RMSNorm: parameters, options and errors", "[rms_norm][layer_norm]") {
  tg::nn::RMSNorm norm({2, 3}, {.eps = 1e-6});
  const auto named = norm.named_parameters();
  REQUIRE(named.size() == 1);
  REQUIRE(named[0].first == "weight");
  REQUIRE(tg::testing::values(norm.weight) == std::vector<double>(6, 1.0));
  REQUIRE(norm.eps == 1e-6);
  REQUIRE(tg::nn::RMSNorm({4}, {.elementwise_affine = false}).parameters().empty());

  REQUIRE_THROWS_WITH(norm(tg::zeros({2, 4})), Catch::Contains("rms_norm") && Catch::Contains("[2, 3]") &&
                                                   Catch::Contains("[2, 4]"));
  REQUIRE_THROWS_WITH(F::rms_norm(tg::zeros({2, 3}), {3}, tg::ones({4})),
                      Catch::Contains("rms_norm") && Catch::Contains("weight") && Catch::Contains("[4]"));
  REQUIRE_THROWS_WITH(F::rms_norm(tg::zeros({2, 3}), {3}, tg::ones({3}, tg::kFloat64)),
                      Catch::Contains("rms_norm") && Catch::Contains("dtypes differ"));
  REQUIRE_THROWS_WITH(F::rms_norm(tg::zeros({2, 3}), {3}, {}, -1.0), Catch::Contains("rms_norm") && Catch::Contains("eps"));
  REQUIRE_THROWS_WITH(tg::nn::RMSNorm(Shape{}), Catch::Contains("RMSNorm") && Catch::Contains("non-empty"));
  REQUIRE_THROWS_WITH(F::rms_norm(tg::zeros({2, 3}, tg::kInt64), {3}), Catch::Contains("rms_norm"));
}

TEST_CASE("rms_norm forward and backward are bitwise identical for 1, 2, 3 and 8 threads",
          "[rms_norm][layer_norm][determinism]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  const Shape shape = GENERATE(Shape{4096, 256}, Shape{64, 4096});
  CAPTURE(dtype, shape);
  tg::manual_seed(23);
  const Tensor x_values = tg::randn(shape, dtype) * 2.0 + 0.5;
  const Tensor w_values = tg::randn({shape[1]}, dtype);
  const Tensor dy = tg::randn(shape, dtype);
  auto run = [&] {
    Tensor x = leaf(x_values), w = leaf(w_values);
    Tensor y = F::rms_norm(x, {shape[1]}, w);
    y.backward(dy);
    return std::vector<std::pair<std::string, std::vector<unsigned char>>>{
        {"y", bytes(y)}, {"dx", bytes(x.grad())}, {"dγ", bytes(w.grad())}};
  };
  require_bitwise_identical_across_threads(run);
}
