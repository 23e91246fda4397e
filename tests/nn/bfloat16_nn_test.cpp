// nn on bfloat16, against PyTorch computing in bfloat16 (tests/fixtures/bfloat16.txt,
// make_bfloat16_fixtures.py): Linear → GELU → LayerNorm → cross_entropy forward and backward,
// embedding, conv2d and mse_loss, the norms with float32 parameters (autocast's mix), batch_norm,
// dropout, attention and a TransformerEncoderLayer. Every layer computes in float32 on the exactly
// widened inputs and rounds its result (and each gradient) once to bfloat16.
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
  refuses([&] { (void)tg::nn::binary_cross_entropy(x * 0.5, x * 0.5); }, "binary_cross_entropy");
  // An optimizer steps float32 and float64 parameters (bfloat16 master weights are autocast's job).
  tg::nn::Linear linear(4, 2);
  linear.to(tg::kBFloat16);
  linear.forward(x).to(tg::kFloat32).sum().backward();
  tg::optim::SGD sgd(linear.parameters(), {.lr = 0.1});
  REQUIRE_THROWS_WITH(sgd.step(), Catch::Contains("bfloat16") && Catch::Contains(".to(tg::kFloat32)"));
}

namespace {

Tensor float32_of(const tg::testing::FixtureCase& c, const std::string& key) { return c.at(key).to(tg::kFloat32); }

// A parameter's values set in place, outside the graph.
void set_values(Tensor parameter, const Tensor& values) {
  tg::NoGradGuard no_grad;
  parameter.copy_(values);
}

// The float32 gradient of a float32 parameter, against the fixture's: both are the same float32
// computation on the same values (PyTorch's autograd, tapegrad's kernel), equal to float32 rounding.
void require_float32_grad(const Tensor& parameter, const tg::testing::FixtureCase& c, const std::string& key) {
  INFO(key);
  REQUIRE(parameter.grad().dtype() == tg::kFloat32);
  TG_REQUIRE_CLOSE(parameter.grad(), float32_of(c, key), 1e-5);
}

}  // namespace

TEST_CASE("bfloat16: LayerNorm, GroupNorm and RMSNorm take a bfloat16 input with float32 parameters",
          "[nn][bfloat16][fixture]") {
  // PyTorch 2.x's mixed-type kernels (autocast's case: a bfloat16 activation, float32 parameters):
  // the float32 op with the float32 parameters on the widened x, rounded once. torch 1.13 refuses
  // the mix, so the fixture is its float32 op on the same values, rounded once: tapegrad's float32
  // kernels agree with it to float32 rounding, which may move a result across a bfloat16 rounding
  // boundary — 1 ulp. The parameters' gradients stay float32.
  const std::string name = GENERATE(as<std::string>{}, "layer_norm_mixed", "group_norm_mixed", "rms_norm_mixed");
  CAPTURE(name);
  const auto& c = fixture("bfloat16.txt", name);
  const Tensor x = bf16_leaf(c, "x");
  Tensor y;
  std::vector<std::pair<std::string, Tensor>> parameters;
  if (name == "layer_norm_mixed") {
    tg::nn::LayerNorm norm({8});
    set_values(norm.weight, float32_of(c, "weight")), set_values(norm.bias, float32_of(c, "bias"));
    y = norm.forward(x);
    parameters = {{"dweight", norm.weight}, {"dbias", norm.bias}};
  } else if (name == "group_norm_mixed") {
    tg::nn::GroupNorm norm(3, 6);
    set_values(norm.weight, float32_of(c, "weight")), set_values(norm.bias, float32_of(c, "bias"));
    y = norm.forward(x);
    parameters = {{"dweight", norm.weight}, {"dbias", norm.bias}};
  } else {
    tg::nn::RMSNorm norm({8}, {.eps = 1e-6});
    set_values(norm.weight, float32_of(c, "weight"));
    y = norm.forward(x);
    parameters = {{"dweight", norm.weight}};
  }
  REQUIRE(y.dtype() == tg::kBFloat16);
  require_within_bfloat16_ulps(y, c.at("y"), 1);
  y.backward(c.at("dy").to(tg::kBFloat16));
  require_within_bfloat16_ulps(x.grad(), c.at("dx"), 1);
  for (const auto& [key, parameter] : parameters) require_float32_grad(parameter, c, key);
}

TEST_CASE("bfloat16: the norms refuse a bfloat16 input with mixed parameter dtypes, naming them", "[nn][bfloat16][errors]") {
  const Tensor x = tg::ones({2, 3, 4}, tg::kBFloat16);
  const Tensor bf16_weight = tg::ones({4}, tg::kBFloat16), float32_bias = tg::zeros({4});
  REQUIRE_THROWS_WITH(F::layer_norm(x, {4}, bf16_weight, float32_bias, 1e-5),
                      Catch::StartsWith("layer_norm") && Catch::Contains("dtypes differ") && Catch::Contains("float32"));
  // float32 x with bfloat16 parameters is refused, as by PyTorch's mixed-type kernels.
  REQUIRE_THROWS_WITH(F::layer_norm(x.to(tg::kFloat32), {4}, bf16_weight, Tensor(), 1e-5),
                      Catch::StartsWith("layer_norm") && Catch::Contains("dtypes differ"));
  REQUIRE_THROWS_WITH(F::group_norm(x, 3, tg::ones({3}, tg::kBFloat16), tg::zeros({3}), 1e-5),
                      Catch::StartsWith("group_norm") && Catch::Contains("dtypes differ"));
  REQUIRE_THROWS_WITH(F::batch_norm(x, tg::zeros({3}), tg::ones({3}, tg::kBFloat16)),
                      Catch::StartsWith("batch_norm") && Catch::Contains("dtypes differ"));
}

TEST_CASE("bfloat16: batch_norm matches torch 1.13, bfloat16 or float32 parameters, train and eval",
          "[nn][bfloat16][fixture]") {
  const std::string kind = GENERATE(as<std::string>{}, "bf16", "mixed");
  const bool training = GENERATE(true, false);
  const std::string name = "batch_norm_" + kind + (training ? "_train" : "_eval");
  CAPTURE(name);
  const auto& c = fixture("bfloat16.txt", name);
  const tg::DType dtype = kind == "bf16" ? tg::kBFloat16 : tg::kFloat32;
  const Tensor x = bf16_leaf(c, "x");
  const Tensor weight = c.at("weight").to(dtype).requires_grad_(), bias = c.at("bias").to(dtype).requires_grad_();
  const Tensor running_mean = c.at("running_mean").to(dtype), running_var = c.at("running_var").to(dtype);
  const Tensor y = F::batch_norm(x, running_mean, running_var,
                                 {.weight = weight, .bias = bias, .training = training, .momentum = 0.1});
  // torch 1.13 computes the statistics and the output in float32 and rounds y once, as tapegrad
  // (which sums in float64): 1 ulp. Except that with bfloat16 parameters in training it keeps the
  // batch mean and 1/√(σ² + ε) in the parameters' dtype (bfloat16) and rounds steps of its
  // transform, where tapegrad keeps them wide and rounds once: up to 4 ulps of a value (the mean's
  // rounding times γ·rstd), within 1 ulp of the largest. (No float32 formula on the rounded
  // statistics gave its bits: tried, 21 of 72 outputs still differed.)
  const bool rounded_statistics = dtype == tg::kBFloat16 && training;
  require_within_bfloat16_ulps(y, c.at("y"), 1, rounded_statistics ? tg::testing::UlpsOf::Largest : tg::testing::UlpsOf::Each);
  y.backward(c.at("dy").to(tg::kBFloat16));
  // Its backward too (bfloat16 sums of dy and dy·x̂ accumulated in float32): dx within 1 ulp of
  // its largest value, which covers the cancellation in dx's batch-statistics terms.
  require_within_bfloat16_ulps(x.grad(), c.at("dx"), 1, tg::testing::UlpsOf::Largest);
  // The running statistics stay in their dtype, updated in place from the float32 batch statistics.
  REQUIRE(running_mean.dtype() == dtype);
  for (const auto& [key, t] : {std::pair{"running_mean_after", running_mean}, std::pair{"running_var_after", running_var}}) {
    INFO(key);
    if (dtype == tg::kBFloat16) require_within_bfloat16_ulps(t, c.at(key), 1);
    else TG_REQUIRE_CLOSE(t, float32_of(c, key), 1e-6);
  }
  for (const auto& [key, t] : {std::pair{"dweight", weight}, std::pair{"dbias", bias}}) {
    INFO(key);
    REQUIRE(t.grad().dtype() == dtype);
    if (dtype == tg::kBFloat16) require_within_bfloat16_ulps(t.grad(), c.at(key), 1);
    else TG_REQUIRE_CLOSE(t.grad(), float32_of(c, key), 1e-5);
  }
}

TEST_CASE("bfloat16: BatchNorm2d trains on a bfloat16 input with its float32 parameters and statistics",
          "[nn][bfloat16][fixture]") {
  // The module as autocast leaves it (float32), fed the fixture's bfloat16 batch: torch 1.13's output
  // and float32 running statistics (momentum 0.1, from the fixture's starting statistics).
  const auto& c = fixture("bfloat16.txt", "batch_norm_mixed_train");
  tg::nn::BatchNorm2d bn(3);
  {
    tg::NoGradGuard no_grad;
    bn.weight.copy_(float32_of(c, "weight")), bn.bias.copy_(float32_of(c, "bias"));
    bn.running_mean.copy_(float32_of(c, "running_mean")), bn.running_var.copy_(float32_of(c, "running_var"));
  }
  const Tensor y = bn.forward(bf16_leaf(c, "x"));
  require_within_bfloat16_ulps(y, c.at("y"), 1);
  REQUIRE(bn.running_mean.dtype() == tg::kFloat32);
  TG_REQUIRE_CLOSE(bn.running_mean, float32_of(c, "running_mean_after"), 1e-6);
  TG_REQUIRE_CLOSE(bn.running_var, float32_of(c, "running_var_after"), 1e-6);
  y.backward(c.at("dy").to(tg::kBFloat16));
  require_float32_grad(bn.weight, c, "dweight");
  require_float32_grad(bn.bias, c, "dbias");
  // Converted to bfloat16, its eval forward is the bfloat16 eval case's.
  const auto& eval = fixture("bfloat16.txt", "batch_norm_bf16_eval");
  bn.to(tg::kBFloat16);
  bn.eval();
  {
    tg::NoGradGuard no_grad;
    bn.weight.copy_(eval.at("weight").to(tg::kBFloat16)), bn.bias.copy_(eval.at("bias").to(tg::kBFloat16));
    bn.running_mean.copy_(eval.at("running_mean").to(tg::kBFloat16));
    bn.running_var.copy_(eval.at("running_var").to(tg::kBFloat16));
  }
  require_within_bfloat16_ulps(bn.forward(bf16_leaf(eval, "x")), eval.at("y"), 1);
}

TEST_CASE("bfloat16: dropout draws torch 1.13's mask and gives its bits", "[nn][bfloat16][fixture]") {
  // The keep decisions are float32's (one double draw per element); the noise is 1/(1 − p) computed
  // in bfloat16 (1/0.69921875 = 1.4296875, not 1/0.7) and x·noise, exact in float32, is rounded
  // once: PyTorch's bits, forward and backward.
  const auto& c = fixture("bfloat16.txt", "dropout");
  const Tensor x = bf16_leaf(c, "x");
  tg::manual_seed(static_cast<uint64_t>(c.scalar("seed")));
  const Tensor y = F::dropout(x, c.scalar("p"), true);
  REQUIRE(y.dtype() == tg::kBFloat16);
  require_within_bfloat16_ulps(y, c.at("y"), 0);
  y.backward(c.at("dy").to(tg::kBFloat16));
  require_within_bfloat16_ulps(x.grad(), c.at("dx"), 0);
  // The module: the same draws for the same seed; eval mode is the identity.
  tg::nn::Dropout dropout(c.scalar("p"));
  tg::manual_seed(static_cast<uint64_t>(c.scalar("seed")));
  require_within_bfloat16_ulps(dropout.forward(x), c.at("y"), 0);
  dropout.eval();
  REQUIRE(dropout.forward(x).is_same(x));
}

TEST_CASE("bfloat16: scaled_dot_product_attention computes in float32 on bf16 products and rounds once",
          "[nn][bfloat16][fixture]") {
  // PyTorch 2.x's CPU kernel for bfloat16 accumulates in float32 (a float32 mask added there as it
  // is), multiplies exp(scores − max) rounded to bfloat16 by v, divides by the float32 sum and
  // rounds the output once; the fixture is that maths on the same values (torch 1.13 has no
  // scaled_dot_product_attention). tapegrad runs its fused kernels on the bf16 products, which
  // round the same factors: the output within 1 ulp. Its backward products round their float32 factors too (dS before ·k and ·q), where the
  // fixture's backward keeps them float32: the gradients (sums of terms of both signs) within 4 ulps
  // of each tensor's largest value.
  const std::string name = GENERATE(as<std::string>{}, "sdpa_mask", "sdpa_causal");
  CAPTURE(name);
  const auto& c = fixture("bfloat16.txt", name);
  const Tensor q = bf16_leaf(c, "q"), k = bf16_leaf(c, "k"), v = bf16_leaf(c, "v");
  const bool causal = name == "sdpa_causal";
  const Tensor y = F::scaled_dot_product_attention(
      q, k, v, {.attn_mask = causal ? Tensor() : float32_of(c, "mask"), .is_causal = causal});
  REQUIRE(y.dtype() == tg::kBFloat16);
  require_within_bfloat16_ulps(y, c.at("y"), 1);
  y.backward(c.at("dy").to(tg::kBFloat16));
  for (const auto& [key, leaf] : {std::pair{"dq", q}, std::pair{"dk", k}, std::pair{"dv", v}}) {
    INFO(key);
    require_within_bfloat16_ulps(leaf.grad(), c.at(key), 4, tg::testing::UlpsOf::Largest);
  }
  // A bool mask, and a float64 one refused (bfloat16 and float32 masks are taken).
  const Tensor keep = tg::ones({5, causal ? 5 : 6}, tg::kBool);
  REQUIRE(F::scaled_dot_product_attention(q, k, v, {.attn_mask = keep}).dtype() == tg::kBFloat16);
  REQUIRE_THROWS_WITH(F::scaled_dot_product_attention(q, k, v, {.attn_mask = keep.to(tg::kFloat64)}),
                      Catch::StartsWith("scaled_dot_product_attention") && Catch::Contains("float64"));
}

TEST_CASE("bfloat16: MultiheadAttention converted to bfloat16 takes a float32 mask as torch 1.13 does",
          "[nn][bfloat16]") {
  // torch 1.13 adds a float32 attn_mask to bfloat16 scores through baddbmm, which rounds it to
  // bfloat16 first: the same output as the mask rounded by the caller, on both attention paths.
  tg::manual_seed(3);
  tg::nn::MultiheadAttention mha({.embed_dim = 8, .num_heads = 2, .batch_first = true});
  mha.to(tg::kBFloat16);
  const Tensor x = tg::randn({2, 3, 8}).to(tg::kBFloat16), mask = tg::randn({3, 3});
  for (const bool need_weights : {false, true}) {
    INFO("need_weights " << need_weights);
    const auto [y, weights] = mha.forward(x, x, x, {.need_weights = need_weights, .attn_mask = mask});
    REQUIRE(y.dtype() == tg::kBFloat16);
    TG_REQUIRE_EQUAL(y, mha.forward(x, x, x, {.need_weights = need_weights, .attn_mask = mask.to(tg::kBFloat16)}).first);
  }
}

TEST_CASE("bfloat16: a TransformerEncoderLayer converted to bfloat16 matches torch 1.13's", "[nn][bfloat16][fixture]") {
  const auto& c = fixture("bfloat16.txt", "encoder_layer");
  tg::nn::TransformerEncoderLayer layer({.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.0,
                                         .activation = tg::nn::Activation::gelu, .batch_first = true,
                                         .norm_first = true});
  layer.to(tg::kBFloat16);
  tg::nn::StateDict state;
  for (const std::string& name : layer.state_dict().keys()) state.insert(name, c.at(name).to(tg::kBFloat16));
  layer.load_state_dict(state);
  const Tensor src = bf16_leaf(c, "src");
  const Tensor y = layer.forward(src, {.is_causal = true});
  REQUIRE(y.dtype() == tg::kBFloat16);
  // torch 1.13 rounds every op of the block to bfloat16 (each projection's partial sums, the
  // scaled q, the scores, the softmax, GELU's input and output, both residual sums); tapegrad rounds
  // each layer's output once. Normwise: 2 ulps of the largest output measured, 4 allowed.
  using tg::testing::UlpsOf;
  require_within_bfloat16_ulps(y, c.at("y"), 4, UlpsOf::Largest);
  y.backward(c.at("dy").to(tg::kBFloat16));
  // The backward passes go through the same roundings on both sides, and more of them: 6 ulps of
  // each gradient's largest value measured, 8 allowed.
  require_within_bfloat16_ulps(src.grad(), c.at("dsrc"), 8, UlpsOf::Largest);
  for (const auto& [name, parameter] : layer.named_parameters()) {
    INFO("d" << name);
    require_within_bfloat16_ulps(parameter.grad(), c.at("d" + name), 8, UlpsOf::Largest);
  }
}

TEST_CASE("bfloat16: the CNN and MLP blocks run on bfloat16 activations with float32 norms, as under autocast",
          "[nn][bfloat16]") {
  // autocast's layout by hand: the products (conv, linear) converted to bfloat16, the norms left in
  // float32, so every activation is bfloat16 and each norm takes the mix. The reference: the same
  // layers in float32 on the same (rounded) parameters and input, with the same dropout draws. Each
  // bfloat16 layer rounds its output once (½ ulp) and the next layer carries that error on, and
  // bfloat16's dropout noise 1/(1 − p) is rounded (1.3359375 for 1/0.75): the outputs agree
  // normwise, 2 ulps of the largest measured, 4 allowed.
  using tg::testing::UlpsOf;
  const tg::DType bf16 = tg::kBFloat16;
  const auto wide = [](const Tensor& t) { return t.detach().to(tg::kFloat32); };
  tg::manual_seed(2);
  {
    // Conv2d → BatchNorm2d → ReLU → MaxPool2d → Dropout → Linear
    tg::nn::Conv2d conv(1, 4, 3, {.padding = 1});
    tg::nn::BatchNorm2d norm(4);
    tg::nn::Dropout dropout(0.25);
    tg::nn::Linear head(4 * 3 * 3, 5);
    conv.to(bf16), head.to(bf16);
    const Tensor image = tg::randn({2, 1, 6, 6}).to(bf16);
    tg::manual_seed(7);
    const Tensor features = norm.forward(conv.forward(image));
    REQUIRE(features.dtype() == bf16);
    const Tensor y = head.forward(dropout.forward(F::max_pool2d(F::relu(features), 2)).reshape({2, 36}));
    REQUIRE(y.dtype() == bf16);
    y.to(tg::kFloat32).sum().backward();
    REQUIRE(conv.weight.grad().dtype() == bf16);
    REQUIRE(norm.weight.grad().dtype() == tg::kFloat32);
    REQUIRE(norm.running_mean.dtype() == tg::kFloat32);
    tg::manual_seed(7);
    Tensor reference = F::conv2d(wide(image), wide(conv.weight), {.bias = wide(conv.bias), .padding = 1});
    reference = F::batch_norm(reference, Tensor(), Tensor(),
                              {.weight = wide(norm.weight), .bias = wide(norm.bias), .training = true});
    reference = F::dropout(F::max_pool2d(F::relu(reference), 2), 0.25, true);
    reference = F::linear(reference.reshape({2, 36}), wide(head.weight), wide(head.bias));
    require_within_bfloat16_ulps(y, reference, 4, UlpsOf::Largest);
  }
  {
    // Linear → LayerNorm → GELU → Dropout → Linear
    tg::nn::Linear in(8, 16), out(16, 3);
    tg::nn::LayerNorm norm({16});
    tg::nn::Dropout dropout(0.25);
    in.to(bf16), out.to(bf16);
    const Tensor x = tg::randn({4, 8}).to(bf16);
    tg::manual_seed(9);
    const Tensor y = out.forward(dropout.forward(F::gelu(norm.forward(in.forward(x)))));
    REQUIRE(y.dtype() == bf16);
    y.to(tg::kFloat32).sum().backward();
    REQUIRE(in.weight.grad().dtype() == bf16);
    REQUIRE(norm.weight.grad().dtype() == tg::kFloat32);
    tg::manual_seed(9);
    Tensor reference = F::linear(wide(x), wide(in.weight), wide(in.bias));
    reference = F::dropout(F::gelu(F::layer_norm(reference, {16}, wide(norm.weight), wide(norm.bias), 1e-5)), 0.25, true);
    reference = F::linear(reference, wide(out.weight), wide(out.bias));
    require_within_bfloat16_ulps(y, reference, 4, UlpsOf::Largest);
  }
}
