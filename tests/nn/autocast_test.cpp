// tg::autocast against torch.autocast("cpu", dtype=torch.bfloat16) (tests/fixtures/autocast.txt,
// make_autocast_fixtures.py): every op's result dtype, a GPT block and a CNN block forward and
// backward; a product of bfloat16 tensors bitwise against the scalar model of the bf16 GEMM; the
// cast cache (never stale, on the tape when it must be); the guard's nesting and errors.
#include <tbb/task_arena.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <tapegrad/nn/transformer.hpp>

#include "nn_test_util.hpp"
#include "support/bf16_chain_model.hpp"
#include "support/tensor_equal.hpp"

using tg::Tensor;
using tg::testing::fixture;
namespace F = tg::nn::functional;

namespace {

// ‖actual − expected‖ / ‖expected‖ over all elements.
double normwise_error(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.shape() == expected.shape());
  const std::vector<double> a = actual.to(tg::kFloat64).to_vector<double>();
  const std::vector<double> e = expected.to(tg::kFloat64).to_vector<double>();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - e[i]) * (a[i] - e[i]);
    norm += e[i] * e[i];
  }
  return std::sqrt(diff / norm);
}

// Copies the fixture's value of each named parameter into the module (the same float32 values).
void load_parameters(tg::nn::Module& module, const tg::testing::FixtureCase& c) {
  tg::NoGradGuard no_grad;
  for (auto& [name, parameter] : module.named_parameters()) {
    INFO("parameter " << name);
    parameter.copy_(c.at(name).to(tg::kFloat32));
  }
}

}  // namespace

TEST_CASE("autocast: each op's result dtype is torch.autocast's", "[nn][autocast][fixture]") {
  const auto& c = fixture("autocast.txt", "dtypes");
  const Tensor x = tg::randn({4, 8});
  const Tensor w = tg::randn({8, 8});
  const Tensor target = tg::testing::int64_tensor({1, 2, 3, 0});
  const Tensor image = tg::randn({2, 4, 6, 6});
  using Op = std::function<Tensor(const Tensor&)>;
  const std::map<std::string, Op> ops = {
      {"linear", [&](const Tensor& a) { return F::linear(a, w); }},
      {"matmul", [&](const Tensor& a) { return tg::matmul(a, w); }},
      {"bmm", [&](const Tensor& a) { return tg::bmm(a.reshape({1, 4, 8}), w.reshape({1, 8, 8})); }},
      {"baddbmm",
       [&](const Tensor& a) { return tg::baddbmm(tg::zeros({1, 4, 8}), a.reshape({1, 4, 8}), w.reshape({1, 8, 8})); }},
      {"conv1d", [&](const Tensor& a) { return F::conv1d(a.reshape({1, 4, 8}), tg::randn({2, 4, 3})); }},
      {"conv2d", [&](const Tensor& a) { return F::conv2d(a.reshape({1, 1, 4, 8}), tg::randn({2, 1, 3, 3})); }},
      {"conv_transpose2d",
       [&](const Tensor& a) { return F::conv_transpose2d(a.reshape({1, 1, 4, 8}), tg::randn({1, 2, 3, 3})); }},
      {"cross_entropy", [&](const Tensor& a) { return tg::nn::cross_entropy(a, target); }},
      {"nll_loss", [&](const Tensor& a) { return tg::nn::nll_loss(a, target); }},
      {"mse_loss", [&](const Tensor& a) { return tg::nn::mse_loss(a, a.detach()); }},
      {"l1_loss", [&](const Tensor& a) { return tg::nn::l1_loss(a, a.detach()); }},
      {"smooth_l1_loss", [&](const Tensor& a) { return tg::nn::smooth_l1_loss(a, a.detach()); }},
      {"huber_loss", [&](const Tensor& a) { return tg::nn::huber_loss(a, a.detach()); }},
      {"binary_cross_entropy",
       [&](const Tensor& a) { return tg::nn::binary_cross_entropy(tg::sigmoid(a), tg::rand({4, 8})); }},
      {"binary_cross_entropy_with_logits",
       [&](const Tensor& a) { return tg::nn::binary_cross_entropy_with_logits(a, tg::rand({4, 8})); }},
      {"prod", [&](const Tensor& a) { return a.prod(); }},
      {"pad_reflect", [&](const Tensor& a) { return F::pad(a.reshape({1, 4, 8}), {1, 1}, {.mode = "reflect"}); }},
      {"pad_replicate", [&](const Tensor& a) { return F::pad(a.reshape({1, 4, 8}), {1, 1}, {.mode = "replicate"}); }},
      {"softmax", [&](const Tensor& a) { return tg::softmax(a, -1); }},
      {"log_softmax", [&](const Tensor& a) { return tg::log_softmax(a, -1); }},
      {"logsumexp", [&](const Tensor& a) { return tg::logsumexp(a, {1}); }},
      {"gelu", [&](const Tensor& a) { return F::gelu(a); }},
      {"relu", [&](const Tensor& a) { return F::relu(a); }},
      {"exp", [&](const Tensor& a) { return tg::exp(a); }},
      {"sum", [&](const Tensor& a) { return a.sum(); }},
      {"mean", [&](const Tensor& a) { return a.mean(); }},
      {"layer_norm", [&](const Tensor& a) { return F::layer_norm(a, {8}); }},
      {"max_pool2d", [&](const Tensor& a) { return F::max_pool2d(a.reshape({1, 1, 4, 8}), 2); }},
      {"avg_pool2d", [&](const Tensor& a) { return F::avg_pool2d(a.reshape({1, 1, 4, 8}), 2); }},
      {"add_float32", [&](const Tensor& a) { return a + x; }},
      {"mul_float32", [&](const Tensor& a) { return a * x; }},
      {"cat_float32", [&](const Tensor& a) { return tg::cat({a, x}); }},
      {"stack_float32", [&](const Tensor& a) { return tg::stack({a, x}); }},
      {"batch_norm",
       [&](const Tensor& a) {
         return F::batch_norm(a, tg::zeros({8}), tg::ones({8}), {.training = true});
       }},
      {"conv2d_image", [&](const Tensor& a) { return F::conv2d(image.to(a.dtype()), tg::randn({3, 4, 3, 3})); }},
  };
  REQUIRE(ops.size() == c.integers.size());  // every op PyTorch was asked about, and no other
  for (const auto& [name, op] : ops) {
    const std::vector<int64_t>& expected = c.ints(name);
    for (int input = 0; input < 2; ++input) {
      const Tensor operand = input == 0 ? x : x.to(tg::kBFloat16);
      tg::autocast bf16;
      const Tensor y = op(operand);
      INFO(name << " on a " << operand.dtype() << " input");
      CHECK(y.dtype() == (expected[input] == 1 ? tg::kBFloat16 : tg::kFloat32));
    }
  }
}

TEST_CASE("autocast: a product of bfloat16 tensors is the bf16 GEMM, forward and backward, at any thread count",
          "[nn][autocast][bfloat16]") {
  // Large enough for the blocked loops (and their parallel tiles) and for the small kernel below.
  for (const auto& [M, N, K] : {std::array<int64_t, 3>{64, 96, 81}, std::array<int64_t, 3>{5, 7, 13}}) {
    CAPTURE(M, N, K);
    const Tensor a = tg::randn({M, K}).to(tg::kBFloat16);
    const Tensor b = tg::randn({K, N}).to(tg::kBFloat16);
    const Tensor dy = tg::randn({M, N}).to(tg::kBFloat16);
    const auto values = [](const Tensor& t) { return t.to(tg::kFloat32).contiguous().to_vector<float>(); };
    // The model: exact products of the bf16 values summed in float32 along k, rounded once.
    const auto rounded = [](std::vector<float> v, int64_t rows, int64_t cols) {
      return tg::tensor(v, {rows, cols}).to(tg::kBFloat16);
    };
    const Tensor y_model =
        rounded(tg::testing::bf16_chain_model(false, false, M, N, K, values(a), K, values(b), N,
                                              std::vector<float>(M * N), N, false), M, N);
    const Tensor da_model =  // dy · bᵀ
        rounded(tg::testing::bf16_chain_model(false, true, M, K, N, values(dy), N, values(b), N,
                                              std::vector<float>(M * K), K, false), M, K);
    const Tensor db_model =  // aᵀ · dy
        rounded(tg::testing::bf16_chain_model(true, false, K, N, M, values(a), K, values(dy), N,
                                              std::vector<float>(K * N), N, false), K, N);
    for (int threads : {1, 2, 3}) {
      CAPTURE(threads);
      tbb::task_arena(threads).execute([&] {
        const Tensor la = a.detach().requires_grad_(), lb = b.detach().requires_grad_();
        const Tensor y = tg::matmul(la, lb);
        REQUIRE(y.dtype() == tg::kBFloat16);
        y.backward(dy);
        CHECK(tg::testing::equal(y, y_model));
        CHECK(tg::testing::equal(la.grad(), da_model));
        CHECK(tg::testing::equal(lb.grad(), db_model));
      });
    }
  }
}

TEST_CASE("autocast: a GPT block matches torch.autocast, with float32 gradients for the float32 parameters",
          "[nn][autocast][fixture]") {
  const auto& c = fixture("autocast.txt", "gpt_block");
  tg::nn::TransformerEncoderLayer layer({.d_model = 16,
                                         .nhead = 2,
                                         .dim_feedforward = 64,
                                         .dropout = 0.0,
                                         .activation = tg::nn::Activation::gelu,
                                         .batch_first = true,
                                         .norm_first = true});
  load_parameters(layer, c);
  const Tensor x = c.at("x").to(tg::kFloat32).requires_grad_();
  Tensor y;
  {
    tg::autocast bf16;
    y = layer.forward(x, {.is_causal = true});
  }
  // PyTorch's: the residual stream float32 (float32 x + bfloat16 sublayer), every product in bf16.
  REQUIRE(y.dtype() == tg::kFloat32);
  // Both sides round each product to bfloat16 (8 bits) but accumulate in different orders (oneDNN's
  // blocking, tapegrad's chain), so a product may round to the neighbouring bfloat16 value: the
  // block's output agrees within a few bf16 ulps normwise (2⁻⁸ relative per rounding, a handful in
  // sequence), where the float32 block differs from the bf16 one by about that much too.
  CHECK(normwise_error(y, c.at("y")) < 2e-2);
  y.backward(c.at("dy").to(tg::kFloat32));
  CHECK(x.grad().dtype() == tg::kFloat32);
  CHECK(normwise_error(x.grad(), c.at("dx")) < 3e-2);
  for (auto& [name, parameter] : layer.named_parameters()) {
    INFO("gradient of " << name);
    REQUIRE(parameter.grad().dtype() == tg::kFloat32);
    CHECK(normwise_error(parameter.grad(), c.at("d" + name)) < 3e-2);
  }
}

TEST_CASE("autocast: a CNN block with BatchNorm matches torch.autocast", "[nn][autocast][fixture]") {
  const auto& c = fixture("autocast.txt", "cnn_block");
  tg::nn::Conv2d conv(1, 4, 3, {.bias = false, .padding = 1});
  tg::nn::BatchNorm2d bn(4);
  tg::nn::Linear fc(64, 3);
  {
    tg::NoGradGuard no_grad;
    conv.weight.copy_(c.at("conv_weight").to(tg::kFloat32));
    bn.weight.copy_(c.at("bn_weight").to(tg::kFloat32));
    bn.bias.copy_(c.at("bn_bias").to(tg::kFloat32));
    fc.weight.copy_(c.at("fc_weight").to(tg::kFloat32));
    fc.bias.copy_(c.at("fc_bias").to(tg::kFloat32));
  }
  const Tensor x = c.at("x").to(tg::kFloat32);
  Tensor logits, loss;
  {
    tg::autocast bf16;
    const Tensor features = F::relu(bn(conv(x)));
    CHECK(features.dtype() == tg::kBFloat16);
    logits = fc(F::max_pool2d(features, 2).flatten(1));
    loss = tg::nn::cross_entropy(logits, tg::testing::int64_tensor(c.ints("target")));
  }
  REQUIRE(logits.dtype() == tg::kBFloat16);
  REQUIRE(loss.dtype() == tg::kFloat32);
  // As the GPT block: a few bf16 roundings in sequence, in different accumulation orders.
  CHECK(normwise_error(logits, c.at("logits")) < 2e-2);
  CHECK(std::fabs(loss.item() - c.at("loss").item()) < 2e-2 * std::fabs(c.at("loss").item()));
  loss.backward();
  const std::vector<std::pair<std::string, Tensor>> parameters = {{"conv_weight", conv.weight},
                                                                  {"bn_weight", bn.weight},
                                                                  {"bn_bias", bn.bias},
                                                                  {"fc_weight", fc.weight},
                                                                  {"fc_bias", fc.bias}};
  for (const auto& [name, parameter] : parameters) {
    INFO("gradient of " << name);
    REQUIRE(parameter.grad().dtype() == tg::kFloat32);
    CHECK(normwise_error(parameter.grad(), c.at("d" + name)) < 3e-2);
  }
  // The running statistics stay float32, updated from the float32 statistics of the batch.
  REQUIRE(bn.running_mean.dtype() == tg::kFloat32);
  CHECK(normwise_error(bn.running_mean, c.at("running_mean")) < 1e-2);
  CHECK(normwise_error(bn.running_var, c.at("running_var")) < 1e-2);
}

TEST_CASE("autocast: a parameter's cast is made once per region and never used stale", "[nn][autocast]") {
  Tensor w = tg::randn({6, 5}).requires_grad_();
  const Tensor x = tg::randn({3, 5});
  // The reference of F::linear(x, w) under autocast: x and w rounded to bfloat16, the bf16 product.
  const auto expected = [&] { return F::linear(x.to(tg::kBFloat16), w.detach().to(tg::kBFloat16)); };

  SECTION("two uses share the cast; the gradient is the sum of both, in float32") {
    Tensor loss;
    {
      tg::autocast bf16;
      loss = (F::linear(x, w) + F::linear(x * 2.0, w)).to(tg::kFloat32).sum();
    }
    loss.backward();
    REQUIRE(w.grad().dtype() == tg::kFloat32);
    // d/dw Σ (x·wᵀ + 2x·wᵀ) = 3 · Σ_rows x, each row of w's gradient (exact in bf16: x·3 sums).
    const Tensor expected_grad = (x.to(tg::kBFloat16).to(tg::kFloat32) * 3.0).sum({0}).expand({6, 5});
    CHECK(normwise_error(w.grad(), expected_grad) < 1e-2);
  }
  SECTION("an in-place update inside the region makes a new cast") {
    tg::autocast bf16;
    const Tensor before = F::linear(x, w);
    CHECK(tg::testing::equal(before, expected()));
    {
      tg::NoGradGuard no_grad;
      w.copy_(w.detach() * -3.0);
    }
    const Tensor after = F::linear(x, w);
    CHECK(tg::testing::equal(after, expected()));
    CHECK_FALSE(tg::testing::equal(after, before));
  }
  SECTION("a cast made under NoGradGuard does not cut the next use off the tape") {
    tg::autocast bf16;
    {
      tg::NoGradGuard no_grad;
      (void)F::linear(x, w);
    }
    F::linear(x, w).to(tg::kFloat32).sum().backward();
    REQUIRE(w.grad().defined());
    CHECK(w.grad().dtype() == tg::kFloat32);
  }
  SECTION("forward and backward twice in one region: the second pass records a new cast") {
    tg::autocast bf16;
    F::linear(x, w).to(tg::kFloat32).sum().backward();
    const Tensor first = w.grad().clone();
    F::linear(x, w).to(tg::kFloat32).sum().backward();  // backward under autocast runs the forward's dtypes
    CHECK(tg::testing::equal(w.grad(), first * 2.0));
  }
  SECTION("cache_enabled = false and clear_autocast_cache give the same results") {
    tg::autocast bf16({.cache_enabled = false});
    CHECK(tg::testing::equal(F::linear(x, w), expected()));
    tg::clear_autocast_cache();
    CHECK(tg::testing::equal(F::linear(x, w), expected()));
  }
}

TEST_CASE("autocast: the guard nests, is per thread, and refuses other dtypes", "[nn][autocast]") {
  const Tensor x = tg::randn({2, 3});
  const Tensor w = tg::randn({4, 3});
  CHECK_FALSE(tg::is_autocast_cpu_enabled());
  CHECK(tg::get_autocast_cpu_dtype() == tg::kBFloat16);
  {
    tg::autocast bf16;
    CHECK(tg::is_autocast_cpu_enabled());
    CHECK(F::linear(x, w).dtype() == tg::kBFloat16);
    {
      tg::autocast off({.enabled = false});
      CHECK_FALSE(tg::is_autocast_cpu_enabled());
      CHECK(F::linear(x, w).dtype() == tg::kFloat32);
    }
    CHECK(F::linear(x, w).dtype() == tg::kBFloat16);
    // float64 is never cast (PyTorch's autocast leaves double alone).
    CHECK(F::linear(x.to(tg::kFloat64), w.to(tg::kFloat64)).dtype() == tg::kFloat64);
    // Another thread has its own state: off.
    bool other_thread_enabled = true;
    std::thread([&] { other_thread_enabled = tg::is_autocast_cpu_enabled(); }).join();
    CHECK_FALSE(other_thread_enabled);
  }
  CHECK_FALSE(tg::is_autocast_cpu_enabled());
  CHECK(F::linear(x, w).dtype() == tg::kFloat32);
  REQUIRE_THROWS_WITH(tg::autocast({.dtype = tg::kFloat32}),
                      Catch::StartsWith("autocast") && Catch::Contains("bfloat16") && Catch::Contains("float32"));
  CHECK_FALSE(tg::is_autocast_cpu_enabled());
}

TEST_CASE("autocast: backward called inside the region gives the gradients of backward outside it",
          "[nn][autocast]") {
  const Tensor x = tg::randn({4, 6});
  tg::nn::Linear first(6, 8), second(8, 3);
  const auto run = [&](bool backward_inside) {
    first.zero_grad();
    second.zero_grad();
    Tensor loss;
    {
      tg::autocast bf16;
      loss = tg::nn::cross_entropy(second(F::gelu(first(x))), tg::testing::int64_tensor({0, 2, 1, 2}));
      if (backward_inside) loss.backward();
    }
    if (!backward_inside) loss.backward();
    return std::vector<Tensor>{first.weight.grad().clone(), second.weight.grad().clone()};
  };
  const std::vector<Tensor> outside = run(false), inside = run(true);
  for (size_t i = 0; i < outside.size(); ++i) {
    CHECK(outside[i].dtype() == tg::kFloat32);
    CHECK(tg::testing::equal(outside[i], inside[i]));
  }
}
