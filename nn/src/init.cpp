// tg::nn::init: PyTorch's torch/nn/init.py, formula by formula. The bounds and standard deviations
// are computed in double with the same operations in the same order as the Python code, because a
// bound one ulp away can round to a different float32 and change every drawn value.
#include "tapegrad/nn/init.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "dispatch.hpp"
#include "tapegrad/autograd.hpp"

namespace tg::nn::init {

namespace {

// erf⁻¹(y) in double, for y in [−1, 1]: Winitzki's closed form as the start (relative error ~2e-3),
// then Newton steps on erf (or, in the tails, on erfc, whose small values keep their relative
// precision where erf(x) rounds to ±1). Four steps take the start to full double precision.
double erfinv(double y) {
  if (std::isnan(y) || std::fabs(y) > 1.0) return std::numeric_limits<double>::quiet_NaN();
  if (std::fabs(y) == 1.0) return std::copysign(std::numeric_limits<double>::infinity(), y);
  if (y == 0.0) return y;
  constexpr double kWinitzki = 0.147;
  const double log_term = std::log((1.0 - y) * (1.0 + y));
  const double first = 2.0 / (std::numbers::pi * kWinitzki) + log_term / 2.0;
  double x = std::copysign(std::sqrt(std::sqrt(first * first - log_term / kWinitzki) - first), y);
  const double tail = 1.0 - std::fabs(y);  // exact for |y| ≥ 0.5 (Sterbenz)
  for (int step = 0; step < 4; ++step) {
    const double slope = 2.0 / std::sqrt(std::numbers::pi) * std::exp(-x * x);  // erf'(x)
    // erf(x) − y, which for y ≥ 0.5 is (1 − y) − erfc(x), and mirrored for y ≤ −0.5.
    const double sign = y < 0 ? -1.0 : 1.0;
    const double residual = std::fabs(y) < 0.5 ? std::erf(x) - y : sign * (tail - std::erfc(sign * x));
    x -= residual / slope;
  }
  return x;
}

// PyTorch's _calculate_correct_fan.
int64_t fan(const Tensor& tensor, FanMode mode) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  return mode == FanMode::FanIn ? fan_in : fan_out;
}

// The standard deviation kaiming_* draw with: gain / √fan.
double kaiming_std(const Tensor& tensor, double a, FanMode mode, Nonlinearity nonlinearity) {
  return calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan(tensor, mode)));
}

double xavier_std(const Tensor& tensor, double gain) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  return gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
}

}  // namespace

double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param) {
  switch (nonlinearity) {
    case Nonlinearity::Tanh:
      return 5.0 / 3;
    case Nonlinearity::ReLU:
      return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: {
      const double slope = param.value_or(0.01);
      check(std::isfinite(slope), "calculate_gain", "expected a finite negative slope, got ", slope);
      return std::sqrt(2.0 / (1 + std::pow(slope, 2.0)));  // Python's slope ** 2 is pow()
    }
    case Nonlinearity::SELU:
      return 3.0 / 4;  // the value PyTorch picked for self-normalising networks
    default:
      return 1.0;  // linear, the convolutions and sigmoid
  }
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor) {
  check(tensor.defined(), "calculate_fan_in_and_fan_out", "called on an undefined tensor");
  check(tensor.dim() >= 2, "calculate_fan_in_and_fan_out",
        "fan in and fan out can not be computed for a tensor with fewer than 2 dims, got shape ", tensor.shape());
  int64_t receptive_field = 1;  // the kernel's elements, for convolution weights [out, in, k...]
  for (int64_t d = 2; d < tensor.dim(); ++d) receptive_field *= tensor.size(d);
  return {tensor.size(1) * receptive_field, tensor.size(0) * receptive_field};
}

Tensor& uniform_(Tensor& tensor, double low, double high, Generator* generator) {
  NoGradGuard no_grad;
  return tensor.uniform_(low, high, generator);
}

Tensor& normal_(Tensor& tensor, double mean, double std, Generator* generator) {
  NoGradGuard no_grad;
  return tensor.normal_(mean, std, generator);
}

Tensor& constant_(Tensor& tensor, double value) {
  NoGradGuard no_grad;
  return tensor.fill_(value);
}

Tensor& zeros_(Tensor& tensor) { return constant_(tensor, 0.0); }

Tensor& ones_(Tensor& tensor) { return constant_(tensor, 1.0); }

Tensor& xavier_uniform_(Tensor& tensor, double gain, Generator* generator) {
  const double bound = std::sqrt(3.0) * xavier_std(tensor, gain);  // U(−b, b) has std b/√3
  return uniform_(tensor, -bound, bound, generator);
}

Tensor& xavier_normal_(Tensor& tensor, double gain, Generator* generator) {
  return normal_(tensor, 0.0, xavier_std(tensor, gain), generator);
}

Tensor& kaiming_uniform_(Tensor& tensor, double a, FanMode mode, Nonlinearity nonlinearity, Generator* generator) {
  if (tensor.defined() && tensor.numel() == 0) return tensor;  // PyTorch: a no-op, and no fan to divide by
  const double bound = std::sqrt(3.0) * kaiming_std(tensor, a, mode, nonlinearity);
  return uniform_(tensor, -bound, bound, generator);
}

Tensor& kaiming_normal_(Tensor& tensor, double a, FanMode mode, Nonlinearity nonlinearity, Generator* generator) {
  if (tensor.defined() && tensor.numel() == 0) return tensor;
  return normal_(tensor, 0.0, kaiming_std(tensor, a, mode, nonlinearity), generator);
}

Tensor& trunc_normal_(Tensor& tensor, double mean, double std, double a, double b, Generator* generator) {
  check(std > 0, "trunc_normal_", "expected std > 0, got ", std);
  check(a < b, "trunc_normal_", "expected a < b, got a = ", a, ", b = ", b);
  const auto normal_cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  const double cdf_low = normal_cdf((a - mean) / std), cdf_high = normal_cdf((b - mean) / std);
  // erf(z/√2) = 2Φ(z) − 1, so u ~ U(2Φ(α) − 1, 2Φ(β) − 1) maps to z = √2·erf⁻¹(u) ~ N(0, 1) on [α, β].
  uniform_(tensor, 2 * cdf_low - 1, 2 * cdf_high - 1, generator);
  const double scale = std * std::sqrt(2.0);
  tg::detail::dispatch_floating("trunc_normal_", tensor.dtype(), [&]<typename T>() {
    // In T step by step, as PyTorch's erfinv_, mul_, add_ and clamp_ are.
    T* values = tensor.mutable_data<T>();
    for (int64_t i = 0; i < tensor.numel(); ++i) {
      const T z = static_cast<T>(erfinv(static_cast<double>(values[i])));
      values[i] = std::clamp(z * static_cast<T>(scale) + static_cast<T>(mean), static_cast<T>(a), static_cast<T>(b));
    }
  });
  return tensor;
}

}  // namespace tg::nn::init
