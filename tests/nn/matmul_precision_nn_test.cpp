// "medium" matmul precision (tapegrad/matmul_precision.hpp) in the nn layers that run products:
// Linear's three products bitwise against the scalar model of the bf16 chain
// (tests/support/bf16_chain_model.hpp); conv2d, the fused attention and LSTM within bf16's bound of
// float64 (or of float32) and not float32's result, and bitwise the same at 1, 2 and 3 threads.
#include <tbb/task_arena.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "nn_test_util.hpp"
#include "support/bf16_chain_model.hpp"

namespace F = tg::nn::functional;
using tg::testing::bf16_chain_model;
using tg::testing::PrecisionScope;

namespace {

std::vector<float> values_of(const tg::Tensor& t) {
  const tg::Tensor c = t.contiguous();
  return {c.data<float>(), c.data<float>() + c.numel()};
}

// Runs `make` at 1, 2 and 3 threads; requires the same bits each time, returns the result.
template <typename Make>
std::vector<float> same_at_every_thread_count(const Make& make) {
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    std::vector<float> result;
    tbb::task_arena(threads).execute([&] { result = make(); });
    if (first.empty()) first = result;
    CAPTURE(threads);
    REQUIRE(std::memcmp(first.data(), result.data(), first.size() * sizeof(float)) == 0);
  }
  return first;
}

// max |y − exact| / Σ|a·b| over the elements (y float32, exact and magnitude float64).
double largest_relative_error(const tg::Tensor& y, const tg::Tensor& exact, const tg::Tensor& magnitude) {
  const tg::Tensor error = (y.to(tg::kFloat64) - exact).abs() / magnitude;
  return error.max().item();
}

}  // namespace

TEST_CASE("Linear at medium precision: forward, dx and dW are the bf16 chain, bitwise", "[nn][linear][matmul]") {
  const int64_t batch = 37, in = 70, out = 45;  // off every tile
  tg::manual_seed(2);
  tg::nn::Linear linear(in, out);
  const tg::Tensor x = tg::randn({batch, in}).requires_grad_();
  const tg::Tensor dy = tg::randn({batch, out});
  const PrecisionScope medium("medium");
  const tg::Tensor y = linear.forward(x);
  y.backward(dy);
  const std::vector<float> X = values_of(x), W = values_of(linear.weight), DY = values_of(dy);
  // y = x·Wᵀ continuing from the bias; dx = dy·W; dW = dyᵀ·x.
  std::vector<float> bias_rows;
  for (int64_t i = 0; i < batch; ++i) {
    const std::vector<float> b = values_of(linear.bias);
    bias_rows.insert(bias_rows.end(), b.begin(), b.end());
  }
  CHECK(values_of(y) == bf16_chain_model(false, true, batch, out, in, X, in, W, in, bias_rows, out, true));
  CHECK(values_of(x.grad()) ==
        bf16_chain_model(false, false, batch, in, out, DY, out, W, in, std::vector<float>(batch * in), in, false));
  CHECK(values_of(linear.weight.grad()) ==
        bf16_chain_model(true, false, out, in, batch, DY, out, X, in, std::vector<float>(out * in), in, false));
}

TEST_CASE("conv2d at medium precision: within bf16's bound, not float32's result, the same at any thread count",
          "[nn][conv][matmul]") {
  tg::manual_seed(4);
  const tg::Tensor x = tg::randn({3, 8, 13, 11}), w = tg::randn({16, 8, 3, 3});
  const F::Conv2dFuncOptions options{.padding = 1};
  const tg::Tensor exact = F::conv2d(x.to(tg::kFloat64), w.to(tg::kFloat64), options);
  const tg::Tensor magnitude = F::conv2d(x.abs().to(tg::kFloat64), w.abs().to(tg::kFloat64), options);
  const int64_t K = 8 * 3 * 3;
  const double bound = std::ldexp(1.0, -8) + K * std::ldexp(1.0, -24);
  const tg::Tensor highest = F::conv2d(x, w, options);
  const PrecisionScope medium("medium");
  const std::vector<float> y = same_at_every_thread_count([&] { return values_of(F::conv2d(x, w, options)); });
  const tg::Tensor y_tensor = tg::tensor(std::vector<double>(y.begin(), y.end()), exact.shape(), tg::kFloat32);
  const double medium_error = largest_relative_error(y_tensor, exact, magnitude);
  CHECK(medium_error <= bound);
  CHECK(medium_error > 16 * largest_relative_error(highest, exact, magnitude));
}

TEST_CASE("attention at medium precision: close to float32, not float32's result, the same at any thread count",
          "[nn][attention][matmul]") {
  tg::manual_seed(6);
  const tg::Tensor q = tg::randn({2, 3, 70, 32}), k = tg::randn({2, 3, 70, 32}), v = tg::randn({2, 3, 70, 32});
  const tg::Tensor highest = F::scaled_dot_product_attention(q, k, v, {.is_causal = true});
  const PrecisionScope medium("medium");
  const std::vector<float> y = same_at_every_thread_count(
      [&] { return values_of(F::scaled_dot_product_attention(q, k, v, {.is_causal = true})); });
  const std::vector<float> h = values_of(highest);
  double largest = 0.0;
  for (size_t i = 0; i < y.size(); ++i) largest = std::max(largest, std::fabs(double{y[i]} - h[i]));
  // Scores of 32 bf16 products (relative 2^-8 each) shift the weights by about 1%; the output is a
  // convex combination of v's rows (|v| < 5).
  CHECK(largest < 0.1);
  CHECK(largest > 1e-4);
}

TEST_CASE("LSTM at medium precision: close to float32, not float32's result, the same at any thread count",
          "[nn][rnn][matmul]") {
  tg::manual_seed(8);
  tg::nn::LSTM lstm(24, 40, {.num_layers = 2});
  const tg::Tensor x = tg::randn({9, 5, 24});
  const std::vector<float> highest = values_of(lstm.forward(x));
  const PrecisionScope medium("medium");
  const std::vector<float> y = same_at_every_thread_count([&] { return values_of(lstm.forward(x)); });
  double largest = 0.0;
  for (size_t i = 0; i < y.size(); ++i) largest = std::max(largest, std::fabs(double{y[i]} - highest[i]));
  CHECK(largest < 0.05);  // outputs in (−1, 1), gates of 64 bf16 products
  CHECK(largest > 1e-5);
}
