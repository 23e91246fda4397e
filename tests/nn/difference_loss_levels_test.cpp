// The difference losses (mse, l1, smooth_l1, huber) on their per-level kernels
// (nn/src/difference_loss_kernels.cpp): bitwise the same at every vector level and thread count,
// and equal to the formula summed in long double within double rounding.

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "nn_test_util.hpp"
#include "support/vector_isa_levels.hpp"

using tg::Tensor;
using namespace tg::nn_test;

namespace {

struct DifferenceLoss {
  std::string name;
  std::function<Tensor(const Tensor&, const Tensor&, tg::nn::Reduction)> loss;
  std::function<long double(long double)> value;  // of d = input − target
};

std::vector<DifferenceLoss> difference_losses() {
  using R = tg::nn::Reduction;
  const auto abs = [](long double d) { return std::fabs(d); };
  return {
      {"mse", [](const Tensor& x, const Tensor& t, R r) { return tg::nn::mse_loss(x, t, r); },
       [](long double d) { return d * d; }},
      {"l1", [](const Tensor& x, const Tensor& t, R r) { return tg::nn::l1_loss(x, t, r); }, abs},
      {"smooth_l1 beta 0.5", [](const Tensor& x, const Tensor& t, R r) { return tg::nn::smooth_l1_loss(x, t, r, 0.5); },
       [=](long double d) { return abs(d) < 0.5L ? 0.5L * d * d / 0.5L : abs(d) - 0.25L; }},
      {"smooth_l1 beta 0", [](const Tensor& x, const Tensor& t, R r) { return tg::nn::smooth_l1_loss(x, t, r, 0.0); }, abs},
      {"huber delta 0.7", [](const Tensor& x, const Tensor& t, R r) { return tg::nn::huber_loss(x, t, r, 0.7); },
       [=](long double d) { return abs(d) < 0.7L ? 0.5L * d * d : 0.7L * (abs(d) - 0.35L); }},
  };
}

}  // namespace

TEST_CASE("difference losses are bitwise the same at every vector level and thread count",
          "[loss][vector_isa]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  const tg::nn::Reduction reduction = GENERATE(tg::nn::Reduction::None, tg::nn::Reduction::Sum, tg::nn::Reduction::Mean);
  // One element, every vector tail, and several parallel chunks.
  const int64_t n = GENERATE(int64_t{1}, int64_t{29}, int64_t{100003});
  tg::manual_seed(11);
  const Tensor input_values = tg::randn({n}, dtype), target_values = tg::randn({n}, dtype);
  const Tensor grad_values = reduction == tg::nn::Reduction::None ? tg::randn({n}, dtype) : tg::scalar_tensor(0.75, dtype);
  for (const DifferenceLoss& loss : difference_losses()) {
    CAPTURE(loss.name, dtype, n, static_cast<int>(reduction));
    const auto run = [&] {
      Tensor input = leaf(input_values), target = leaf(target_values);
      const Tensor out = loss.loss(input, target, reduction);
      out.backward(grad_values);
      return std::vector{bytes(out), bytes(input.grad()), bytes(target.grad())};
    };
    tg::testing::require_same_at_every_level_and_thread_count(run);
    if (reduction == tg::nn::Reduction::Sum) {
      // The sum, against the formula in long double: only the double sum's rounding apart.
      const std::vector<double> x = input_values.to(tg::kFloat64).to_vector<double>();
      const std::vector<double> t = target_values.to(tg::kFloat64).to_vector<double>();
      long double exact = 0, magnitude = 0;
      for (int64_t i = 0; i < n; ++i) {
        const long double term = loss.value(static_cast<long double>(x[i]) - t[i]);
        exact += term;
        magnitude += std::fabs(term);
      }
      const double sum = loss.loss(input_values, target_values, reduction).to(tg::kFloat64).item();
      const double bound = (dtype == tg::kFloat32 ? 6e-8 : 1e-15) * static_cast<double>(magnitude) + 1e-300;
      CHECK(std::fabs(sum - static_cast<double>(exact)) <= bound);
    }
  }
}
