// nn on bfloat16, against PyTorch computing in bfloat16 (tests/fixtures/bfloat16.txt,
// make_bfloat16_fixtures.py): Linear → GELU → LayerNorm → cross_entropy forward and backward, and
// embedding, conv2d and mse_loss. Every layer computes in float32 on the exactly widened inputs and
// rounds its result (and each gradient) once to bfloat16.
#include <functional>
#include <string>
#include <vector>

#include "nn_test_util.hpp"
#include "support/bfloat16_ulps.hpp"
#include "support/tensor_equal.hpp"

using tg::Tensor;
using tg::testing::fixture;
using tg::testing::require_within_bfloat16_ulps;
namespace F = tg::nn::functional;

namespace {

Tensor bf16_leaf(const tg::testing::FixtureCase& c, const std::string& key) {
  return c.at(key).to(tg::kBFloat16).requires_grad_();
}

Tensor int64_of(const tg::testing::FixtureCase& c, const std::string& key) {
  const std::vector<int64_t>& values = c.ints(key);
  Tensor t = tg::empty({static_cast<int64_t>(values.size())}, tg::kInt64);
  std::copy(values.begin(), values.end(), t.mutable_data<int64_t>());
  return t;
}

}  // namespace

TEST_CASE("bfloat16: Linear → GELU → LayerNorm → cross_entropy matches PyTorch's bfloat16 run",
          "[nn][bfloat16][fixture]") {
  const auto& c = fixture("bfloat16.txt", "pipeline");
  const Tensor x = bf16_leaf(c, "x"), weight = bf16_leaf(c, "weight"), bias = bf16_leaf(c, "bias");
  const Tensor gamma = bf16_leaf(c, "gamma"), beta = bf16_leaf(c, "beta");
  const Tensor hidden = F::gelu(F::linear(x, weight, bias));
  const Tensor normalized = F::layer_norm(hidden, {8}, gamma, beta, 1e-5);
  const Tensor loss = tg::nn::cross_entropy(normalized, int64_of(c, "target"));
  REQUIRE(loss.dtype() == tg::kBFloat16);
  // PyTorch's bfloat16 linear at this size (torch 1.13's CPU gemm) rounds each product and partial
  // sum to bfloat16, where tapegrad accumulates in float32 and rounds once (the products test in
  // bfloat16_test.cpp shows tapegrad within 1 ulp of the exact product): the hidden activations, and
  // the LayerNorm of them, agree normwise, within 8 ulps of the largest value (6 terms per output).
  // GELU, LayerNorm and the loss are each computed in float32 and rounded once on both sides;
  // PyTorch's cross_entropy rounds log_softmax before nll_loss: the loss within 1 ulp.
  using tg::testing::UlpsOf;
  require_within_bfloat16_ulps(hidden, c.at("hidden"), 8, UlpsOf::Largest);
  require_within_bfloat16_ulps(normalized, c.at("normalized"), 8, UlpsOf::Largest);
  require_within_bfloat16_ulps(loss, c.at("loss"), 1);
  loss.backward();
  // The gradients: PyTorch rounds every backward step to bf16 (nll_loss's, log_softmax's, layer_norm's,
  // gelu's, addmm's), from bf16-rounded saved tensors, tapegrad only at each layer's exit: normwise,
  // within 4 ulps of each tensor's largest gradient (LayerNorm's backward cancels terms).
  const std::vector<std::pair<std::string, Tensor>> leaves = {
      {"x", x}, {"weight", weight}, {"bias", bias}, {"gamma", gamma}, {"beta", beta}};
  for (const auto& [name, leaf] : leaves) {
    INFO("gradient d" << name);
    require_within_bfloat16_ulps(leaf.grad(), c.at("d" + name), 4, UlpsOf::Largest);
  }
}

TEST_CASE("bfloat16: embedding, conv2d and mse_loss compute in float32 and round once", "[nn][bfloat16][fixture]") {
  {
    const auto& c = fixture("bfloat16.txt", "embedding");
    const Tensor weight = bf16_leaf(c, "weight");
    Tensor indices = int64_of(c, "indices").reshape({2, 3});
    const Tensor y = F::embedding(indices, weight);
    require_within_bfloat16_ulps(y, c.at("y"), 0);  // a gather: PyTorch's bits exactly
    y.backward(c.at("dy").to(tg::kBFloat16));
    require_within_bfloat16_ulps(weight.grad(), c.at("dweight"), 1);  // index 2's two rows summed
  }
  {
    const auto& c = fixture("bfloat16.txt", "conv2d");
    const Tensor x = bf16_leaf(c, "x"), weight = bf16_leaf(c, "weight"), bias = bf16_leaf(c, "bias");
    const Tensor y = F::conv2d(x, weight, {.bias = bias, .padding = 1});
    require_within_bfloat16_ulps(y, c.at("y"), 1);
    y.backward(c.at("dy").to(tg::kBFloat16));
    for (const auto& [name, leaf] : {std::pair{"dx", x}, std::pair{"dweight", weight}, std::pair{"dbias", bias}}) {
      INFO(name);
      require_within_bfloat16_ulps(leaf.grad(), c.at(name), 1);
    }
  }
  {
    // torch 1.13 has no bfloat16 mse_loss: the reference is its float32 loss rounded once.
    const auto& c = fixture("bfloat16.txt", "mse_loss");
    const Tensor input = bf16_leaf(c, "input"), target = bf16_leaf(c, "target");
    const Tensor loss = tg::nn::mse_loss(input, target);
    require_within_bfloat16_ulps(loss, c.at("y"), 1);
    loss.backward(c.at("dy").to(tg::kBFloat16));
    require_within_bfloat16_ulps(input.grad(), c.at("dinput"), 1);
    require_within_bfloat16_ulps(target.grad(), c.at("dtarget"), 1);
  }
}

TEST_CASE("bfloat16: the other norms and pooling are their float32 kernels on the widened values, rounded once", "[nn][bfloat16]") {
  tg::manual_seed(9);
  const Tensor x = tg::randn({2, 4, 3}).to(tg::kBFloat16), weight = tg::randn({4}).to(tg::kBFloat16);
  const Tensor bias = tg::randn({4}).to(tg::kBFloat16), scale = tg::randn({3}).to(tg::kBFloat16);
  const auto wide = [](const Tensor& t) { return t.to(tg::kFloat32); };
  TG_REQUIRE_EQUAL(F::group_norm(x, 2, weight, bias, 1e-5),
                   F::group_norm(wide(x), 2, wide(weight), wide(bias), 1e-5).to(tg::kBFloat16));
  TG_REQUIRE_EQUAL(F::rms_norm(x, {3}, scale, 1e-6), F::rms_norm(wide(x), {3}, wide(scale), 1e-6).to(tg::kBFloat16));
  // Pooling: a selection (max, exact) and an average rounded once.
  const Tensor image = tg::randn({1, 2, 4, 4}).to(tg::kBFloat16);
  TG_REQUIRE_EQUAL(F::max_pool2d(image, 2), F::max_pool2d(wide(image), 2).to(tg::kBFloat16));
  TG_REQUIRE_EQUAL(F::avg_pool2d(image, 2), F::avg_pool2d(wide(image), 2).to(tg::kBFloat16));
  TG_REQUIRE_EQUAL(F::adaptive_avg_pool2d(image, 1), F::adaptive_avg_pool2d(wide(image), 1).to(tg::kBFloat16));
}

TEST_CASE("bfloat16: a module converted with to(kBFloat16) trains its forward and backward in bfloat16",
          "[nn][bfloat16]") {
  tg::manual_seed(5);
  tg::nn::Linear linear(4, 3);
  tg::nn::Linear reference(4, 3);
  {
    tg::NoGradGuard no_grad;
    reference.weight.copy_(linear.weight);
    reference.bias.copy_(linear.bias);
  }
  linear.to(tg::kBFloat16);
  REQUIRE(linear.weight.dtype() == tg::kBFloat16);
  const Tensor x = tg::randn({2, 4});
  const Tensor y = linear.forward(x.to(tg::kBFloat16));
  REQUIRE(y.dtype() == tg::kBFloat16);
  y.to(tg::kFloat32).sum().backward();
  REQUIRE(linear.weight.grad().dtype() == tg::kBFloat16);
  // The reference: the same float32 product on the rounded values, rounded once.
  const Tensor rounded_x = x.to(tg::kBFloat16).to(tg::kFloat32);
  const Tensor w32 = linear.weight.detach().to(tg::kFloat32), b32 = linear.bias.detach().to(tg::kFloat32);
  TG_REQUIRE_EQUAL(y, F::linear(rounded_x, w32, b32).to(tg::kBFloat16));
  // Mixed dtypes are refused, as for float32 with float64.
  REQUIRE_THROWS_WITH(linear.forward(x), Catch::Contains("linear") && Catch::Contains("dtypes differ"));
}

TEST_CASE("bfloat16: the layers without a bfloat16 route refuse it, naming the cast", "[nn][bfloat16][errors]") {
  const Tensor x = tg::ones({2, 3, 4}, tg::kBFloat16);
  const auto refuses = [](const std::function<void()>& op, const std::string& name) {
    INFO(name);
    REQUIRE_THROWS_WITH(op(), Catch::StartsWith(name) && Catch::Contains("bfloat16") &&
                                  Catch::Contains(".to(tg::kFloat32)"));
  };
  refuses([&] { (void)F::dropout(x, 0.5, true); }, "dropout");
  refuses([&] { (void)F::batch_norm(x, tg::zeros({3}, tg::kBFloat16), tg::ones({3}, tg::kBFloat16)); }, "batch_norm");
  refuses([&] { (void)F::scaled_dot_product_attention(x, x, x); }, "scaled_dot_product_attention");
  refuses([&] { (void)tg::nn::binary_cross_entropy(x * 0.5, x * 0.5); }, "binary_cross_entropy");
  // An optimizer steps float32 and float64 parameters (bfloat16 master weights are autocast's job).
  tg::nn::Linear linear(4, 2);
  linear.to(tg::kBFloat16);
  linear.forward(x).to(tg::kFloat32).sum().backward();
  tg::optim::SGD sgd(linear.parameters(), {.lr = 0.1});
  REQUIRE_THROWS_WITH(sgd.step(), Catch::Contains("bfloat16") && Catch::Contains(".to(tg::kFloat32)"));
}
