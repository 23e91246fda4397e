// The softmax family's float32 row kernels (core/src/ops/exp_row_kernels.cpp: e^x in float lanes,
// simd_exp.hpp's exp_float): within a stated ulp bound of the exact functions, and bitwise the same at every
// vector level and thread count.

#include <algorithm>
#include <cmath>
#include <vector>

#include "core_test_util.hpp"
#include "support/vector_isa_levels.hpp"

using tg::Tensor;

namespace {

// |got − exact| in float32 ulps at `scale`.
double ulps(float got, long double exact, long double scale) {
  // Normal exponents from -126; below, subnormal spacing 2^-149 (and ilogb(0) is INT_MIN).
  const long double ulp = std::ldexp(1.0L, std::max(std::ilogb(static_cast<double>(scale)), -126) - 23);
  return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / ulp);
}

}  // namespace

TEST_CASE("float32 softmax, log_softmax and logsumexp are within 2.5 ulp of the exact functions",
          "[core][softmax][vector_isa]") {
  // Rows of every tail length and of several full blocks; logits spread wide enough that many
  // terms underflow to 0 and others are near the max.
  const int64_t n = GENERATE(int64_t{1}, int64_t{7}, int64_t{45}, int64_t{128}, int64_t{1000});
  CAPTURE(n);
  const int64_t rows = 64;
  tg::manual_seed(5);
  const Tensor x = tg::randn({rows, n}) * 6.0f;
  const std::vector<float> values = x.to_vector<float>();
  double worst_softmax = 0, worst_log_softmax = 0, worst_logsumexp = 0;
  for (const auto& [level, results] : tg::testing::at_every_supported_level([&] {
         return std::vector{x.softmax(1).to_vector<float>(), x.log_softmax(1).to_vector<float>(),
                            x.logsumexp({1}).to_vector<float>()};
       })) {
    CAPTURE(level);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = values.data() + r * n;
      const long double m = *std::max_element(row, row + n);
      long double sum = 0;
      for (int64_t k = 0; k < n; ++k) sum += std::exp(static_cast<long double>(row[k]) - m);
      const long double log_sum = std::log(sum);
      worst_logsumexp = std::max(worst_logsumexp, ulps(results[2][r], m + log_sum, std::fabs(m + log_sum)));
      for (int64_t k = 0; k < n; ++k) {
        const long double shifted = static_cast<long double>(row[k]) - m;
        const long double p = std::exp(shifted) / sum;
        if (p >= 0x1p-126L) worst_softmax = std::max(worst_softmax, ulps(results[0][r * n + k], p, p));
        // x − m − log s: the ulp taken at its larger part, as it may cancel to 0
        worst_log_softmax = std::max(worst_log_softmax, ulps(results[1][r * n + k], shifted - log_sum,
                                                             std::max(std::fabs(shifted), log_sum)));
      }
    }
  }
  // Measured (every level alike, bitwise): softmax ≤ 2.00, log_softmax ≤ 1.54, logsumexp ≤ 1.21 ulp:
  // e^x's own ≤ 0.78 ulp in float (exp_float_test.cpp) plus the float roundings of the two or
  // three steps after it (with e^x in double lanes, as before the float-lane exp: 1.75, 1.51, 0.79;
  // with the float-lane exp's first form, within 1.05 ulp: 2.05, 1.54, 1.21).
  CHECK(worst_softmax <= 2.5);
  CHECK(worst_log_softmax <= 2.0);
  CHECK(worst_logsumexp <= 1.5);
}

TEST_CASE("float32 softmax family is bitwise the same at every vector level and thread count",
          "[core][softmax][vector_isa]") {
  const bool log = GENERATE(false, true);
  // Rows of tails only, of blocks plus every tail piece, and enough rows for several tasks.
  const auto [rows, n] = GENERATE(std::array<int64_t, 2>{3, 5}, std::array<int64_t, 2>{9, 61},
                                  std::array<int64_t, 2>{4096, 128});
  CAPTURE(log, rows, n);
  tg::manual_seed(17);
  const Tensor values = tg::randn({rows, n}) * 4.0f;
  const Tensor grad_output = tg::randn({rows, n});
  const auto run = [&] {
    Tensor x = values.detach().clone().requires_grad_();
    const Tensor y = log ? x.log_softmax(-1) : x.softmax(-1);
    y.backward(grad_output);
    return std::vector{y.to_vector<float>(), x.grad().to_vector<float>(), values.logsumexp({1}).to_vector<float>()};
  };
  tg::testing::require_same_at_every_level_and_thread_count(run);
}

TEST_CASE("float32 softmax and log_softmax forward and backward are within PyTorch's float32 tolerance",
          "[core][softmax][vector_isa]") {
  // PyTorch's float32 OpInfo tolerance, |ours − exact| ≤ 1e-5 + 1.3e-6·|exact|, against long double
  // references of y and of dx = y (dy − Σ dy·y) (softmax), dy − e^y Σ dy (log_softmax), at every
  // level; logits wide enough that many terms underflow, upstream gradients of mixed sign.
  const bool log = GENERATE(false, true);
  const int64_t n = GENERATE(int64_t{7}, int64_t{128}, int64_t{1000});
  CAPTURE(log, n);
  const int64_t rows = 32;
  tg::manual_seed(29);
  const Tensor x = tg::randn({rows, n}) * 6.0f;
  const Tensor grad_output = tg::randn({rows, n}) * 3.0f;
  const std::vector<float> values = x.to_vector<float>(), dy = grad_output.to_vector<float>();
  const auto within = [](float got, long double exact) {
    return std::fabs(static_cast<long double>(got) - exact) <= 1e-5L + 1.3e-6L * std::fabs(exact);
  };
  for (const auto& [level, results] : tg::testing::at_every_supported_level([&] {
         Tensor leaf = x.detach().clone().requires_grad_();
         const Tensor y = log ? leaf.log_softmax(1) : leaf.softmax(1);
         y.backward(grad_output);
         return std::vector{y.to_vector<float>(), leaf.grad().to_vector<float>()};
       })) {
    CAPTURE(level);
    int64_t outside = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = values.data() + r * n;
      const float* g = dy.data() + r * n;
      const long double m = *std::max_element(row, row + n);
      long double sum = 0, grad_sum = 0, dot = 0;
      for (int64_t k = 0; k < n; ++k) sum += std::exp(static_cast<long double>(row[k]) - m);
      for (int64_t k = 0; k < n; ++k) {
        const long double p = std::exp(static_cast<long double>(row[k]) - m) / sum;
        grad_sum += g[k];
        dot += g[k] * p;
      }
      for (int64_t k = 0; k < n; ++k) {
        const long double shifted = static_cast<long double>(row[k]) - m;
        const long double p = std::exp(shifted) / sum;
        const long double y = log ? shifted - std::log(sum) : p;
        const long double dx = log ? g[k] - p * grad_sum : p * (g[k] - dot);
        outside += !within(results[0][r * n + k], y) + !within(results[1][r * n + k], dx);
      }
    }
    CHECK(outside == 0);
  }
}
