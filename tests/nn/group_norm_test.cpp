// GroupNorm: PyTorch fixtures, gradcheck and gradgradcheck in float64, agreement with its
// definition on a large input, thread-count determinism, the module, and errors.
#include <limits>
#include <string>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

TEST_CASE("group_norm matches PyTorch's output and gradients", "[group_norm][fixture]") {
  const std::string base = GENERATE(as<std::string>{}, "gn_2x6x5_g3", "gn_2x4x3x3_g2", "gn_3x6_g3", "gn_2x4x2x2_g4",
                                    "gn_2x4x3_g1", "gn_2x6x2x3_g2_noaffine");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(base, suffix);
  const auto& c = tg::testing::fixture("batch_norm.txt", base + suffix);
  // float32 is held to the float64 case's values, relative to each tensor's scale: a group of two
  // elements (gn_3x6_g3) is ill-conditioned enough that PyTorch's own float32 dx is 1e-4 off.
  const auto& exact = tg::testing::fixture("batch_norm.txt", base + "_f64");
  const auto require_close = [&](const Tensor& actual, const std::string& name) {
    INFO(name);
    if (suffix == "_f64") TG_REQUIRE_CLOSE(actual, c.at(name), 1e-12);
    else REQUIRE(relative_error(actual, exact.at(name)) < 2e-5);
  };
  Tensor x = leaf(c.at("x"));
  const bool affine = c.has("weight");
  Tensor weight = affine ? leaf(c.at("weight")) : Tensor(), bias = affine ? leaf(c.at("bias")) : Tensor();
  Tensor y = F::group_norm(x, c.ints("num_groups")[0], weight, bias, c.scalar("eps"));
  REQUIRE(std::string(y.grad_fn_name()) == "GroupNormBackward");
  require_close(y, "y");
  y.backward(c.at("dy"));
  require_close(x.grad(), "dx");
  if (affine) {
    require_close(weight.grad(), "dweight");
    require_close(bias.grad(), "dbias");
  }
}

TEST_CASE("group_norm passes gradcheck and gradgradcheck in float64", "[group_norm][gradcheck]") {
  const Shape shape = GENERATE(Shape{2, 6, 3}, Shape{3, 4}, Shape{2, 4, 2, 3});
  const int64_t groups = GENERATE(1, 2);
  const bool affine = GENERATE(true, false);
  CAPTURE(shape, groups, affine);
  tg::manual_seed(5);
  const int64_t C = shape[1];
  const Tensor x = (tg::randn(shape, tg::kFloat64) * 2 + 1).requires_grad_();
  const Tensor weight = (tg::randn({C}, tg::kFloat64) * 0.5 + 1).requires_grad_();
  const Tensor bias = tg::randn({C}, tg::kFloat64).requires_grad_();
  auto fn = [&](const std::vector<Tensor>& in) {
    return F::group_norm(in[0], groups, affine ? in[1] : Tensor(), affine ? in[2] : Tensor());
  };
  const std::vector<Tensor> inputs = {x, weight, bias};
  TG_REQUIRE_GRADCHECK(fn, inputs);
  const tg::GradcheckResult second = tg::gradgradcheck(fn, inputs);
  INFO(second.message);
  REQUIRE(second.passed);
}

TEST_CASE("group_norm agrees with its definition on a large input", "[group_norm]") {
  // 16.6 MB of float32: y and dx are written with streaming stores.
  tg::manual_seed(9);
  const Tensor x = (tg::randn({8, 16, 180, 180}) * 3 + 5).requires_grad_();
  const Tensor weight = (tg::randn({16}) * 0.5 + 1).requires_grad_(), bias = tg::randn({16}).requires_grad_();
  const Tensor y = F::group_norm(x, 4, weight, bias);
  const Tensor dy = tg::randn(x.shape());
  y.backward(dy);
  const Tensor x64 = x.detach().to(tg::kFloat64).requires_grad_();
  const Tensor w64 = weight.detach().to(tg::kFloat64).requires_grad_(), b64 = bias.detach().to(tg::kFloat64).requires_grad_();
  const Tensor rows = x64.reshape({8, 4, -1});
  const Tensor x_hat = ((rows - rows.mean({2}, true)) * (rows.var({2}, false, true) + 1e-5).rsqrt()).reshape(x.shape());
  const Tensor y64 = x_hat * w64.reshape({1, 16, 1, 1}) + b64.reshape({1, 16, 1, 1});
  y64.backward(dy.to(tg::kFloat64));
  CHECK(relative_error(y, y64) < 1e-6);
  CHECK(relative_error(x.grad(), x64.grad()) < 1e-5);
  CHECK(relative_error(weight.grad(), w64.grad()) < 1e-5);
  CHECK(relative_error(bias.grad(), b64.grad()) < 1e-5);
}

TEST_CASE("group_norm is bitwise identical at any thread count", "[group_norm][threads]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  tg::manual_seed(13);
  const Tensor x_values = tg::randn({24, 6, 37, 29}, dtype) + 2, dy = tg::randn(x_values.shape(), dtype);
  const Tensor weight_values = tg::randn({6}, dtype), bias_values = tg::randn({6}, dtype);
  require_bitwise_identical_across_threads([&] {
    Tensor x = leaf(x_values), weight = leaf(weight_values), bias = leaf(bias_values);
    Tensor y = F::group_norm(x, 3, weight, bias);
    y.backward(dy);
    return std::vector<std::pair<std::string, std::vector<unsigned char>>>{
        {"y", bytes(y)}, {"dx", bytes(x.grad())}, {"dweight", bytes(weight.grad())}, {"dbias", bytes(bias.grad())}};
  });
}

TEST_CASE("GroupNorm: parameters, options, errors naming the shapes", "[group_norm][errors]") {
  using Catch::Contains;
  tg::nn::GroupNorm gn(2, 4);
  REQUIRE(gn.state_dict().keys() == std::vector<std::string>{"weight", "bias"});
  REQUIRE(gn.weight.shape() == Shape{4});
  tg::nn::GroupNorm plain(2, 4, {.eps = 1e-3, .affine = false});
  REQUIRE(plain.parameters().empty());
  // Train and eval agree: no running statistics.
  const Tensor x = tg::randn({3, 4, 5});
  const Tensor y_train = gn(x);
  gn.eval();
  REQUIRE(bytes(gn(x)) == bytes(y_train));

  REQUIRE_TG_ERROR(tg::nn::GroupNorm(3, 4), Contains("GroupNorm") && Contains("divisible"));
  REQUIRE_TG_ERROR(F::group_norm(tg::zeros({2, 3, 5}), 2),
                   Contains("group_norm") && Contains("divisible by num_groups") && Contains("[2, 3, 5]"));
  REQUIRE_TG_ERROR(gn(tg::zeros({2, 6, 5})), Contains("weight") && Contains("[4]") && Contains("[2, 6, 5]"));
  REQUIRE_TG_ERROR(F::group_norm(tg::zeros({4}), 2), Contains("at least 2 dims") && Contains("[4]"));
  REQUIRE_TG_ERROR(F::group_norm(tg::zeros({2, 4}), 2, tg::ones({4}, tg::kFloat64)), Contains("dtypes differ"));
}

// PyTorch 1.13 takes a negative ε in every norm (group_norm, layer_norm, batch_norm), a NaN wherever
// a variance is below −ε; tapegrad refuses it in all of them, and a NaN or infinite one
// (docs/differences-from-pytorch.md).
TEST_CASE("every norm refuses a negative or non-finite eps, naming it", "[group_norm][layer_norm][batch_norm][errors]") {
  using Catch::Contains;
  const double eps = GENERATE(-1e-3, -1.0, std::numeric_limits<double>::infinity(),
                              std::numeric_limits<double>::quiet_NaN());
  CAPTURE(eps);
  const Tensor x = tg::randn({3, 4, 5});
  REQUIRE_TG_ERROR(tg::nn::GroupNorm(2, 4, {.eps = eps})(x), Contains("group_norm") && Contains("eps"));
  REQUIRE_TG_ERROR(F::group_norm(x, 2, {}, {}, eps), Contains("group_norm") && Contains("eps"));
  REQUIRE_TG_ERROR(tg::nn::LayerNorm({5}, {.eps = eps})(x), Contains("layer_norm") && Contains("eps"));
  REQUIRE_TG_ERROR(F::layer_norm(x, {5}, {}, {}, eps), Contains("layer_norm") && Contains("eps"));
  REQUIRE_TG_ERROR(tg::nn::RMSNorm({5}, {.eps = eps})(x), Contains("rms_norm") && Contains("eps"));
  REQUIRE_TG_ERROR(tg::nn::BatchNorm1d(4, {.eps = eps})(x), Contains("batch_norm") && Contains("eps"));
  REQUIRE_TG_ERROR(tg::nn::BatchNorm1d(4, {.eps = eps}).eval()(x), Contains("batch_norm") && Contains("eps"));
  // ε = 0 is allowed everywhere (a constant channel then divides by 0, as in PyTorch).
  REQUIRE(tg::nn::GroupNorm(2, 4, {.eps = 0.0})(x).shape() == x.shape());
  REQUIRE(tg::nn::LayerNorm({5}, {.eps = 0.0})(x).shape() == x.shape());
}
