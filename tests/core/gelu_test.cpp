// float32 GELU's vectorised kernels (core/src/ops/gelu_kernels.cpp): a dense sweep against the
// exact function in long double (std::erfc, std::exp) with PyTorch's float32 OpInfo tolerance
// (|error| ≤ 1e-5 + 1.3e-6 |exact|), PyTorch's values at ±inf, NaN and −0, and bitwise-equal
// results at every vector level and thread count.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <vector>


#include "core_test_util.hpp"
#include "support/vector_isa_levels.hpp"

using tg::Tensor;

namespace {

// The exact GELU and its derivative in long double, as y = x c(x), y' = c(x) + x c'(x):
//   "none": c = Φ(x) = ½ erfc(−x/√2), c' = e^(−x²/2)/√(2π)
//   "tanh": c = σ(2u) = ½(1 + tanh u), c' = 2 σ(2u) σ(−2u) β(1 + 3κx²), u = β(x + κx³)
struct Exact {
  long double y, dy;
};
Exact exact_gelu(float x_float, bool tanh_form) {
  const long double x = x_float;
  if (!tanh_form) {
    const long double cdf = 0.5L * std::erfc(-x / std::numbers::sqrt2_v<long double>);
    const long double density = std::exp(-0.5L * x * x) / std::sqrt(2 * std::numbers::pi_v<long double>);
    return {x * cdf, cdf + x * density};
  }
  const long double beta = std::sqrt(2 / std::numbers::pi_v<long double>), kappa = 0.044715L;
  const long double u = beta * (x + kappa * x * x * x);
  // σ(±2|u|) from e^(−2|u|), so that neither overflows.
  const long double e = std::exp(-2 * std::fabs(u));
  const long double sigmoid_2u = u < 0 ? e / (1 + e) : 1 / (1 + e), sigmoid_minus_2u = u < 0 ? 1 / (1 + e) : e / (1 + e);
  const long double slope = 2 * sigmoid_2u * sigmoid_minus_2u * beta * (1 + 3 * kappa * x * x);
  return {x * sigmoid_2u, sigmoid_2u + x * slope};
}

// PyTorch's default float32 tolerance in its OpInfo tests (torch.testing: rtol 1.3e-6, atol 1e-5),
// the accuracy float32 GELU is documented to: |got − exact| ≤ kAtol + kRtol |exact|.
constexpr double kAtol = 1e-5, kRtol = 1.3e-6;

// |got − exact| as a fraction of that tolerance (≤ 1 passes); NaN where got is NaN and exact not.
double tolerance_used(float got, long double exact) {
  return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / (kAtol + kRtol * std::fabs(exact)));
}

// Every finite float32 of a dense sweep: all floats in [−20, 20] at a stride of 97 bit patterns (a
// few million, through the whole transition of Φ and σ), and every float32 bit pattern at a stride
// of 4099, which covers subnormals and magnitudes out to 3.4e38.
std::vector<float> sweep_points() {
  std::vector<float> points;
  for (float sign : {1.0f, -1.0f})
    for (uint32_t bits = 0; bits <= std::bit_cast<uint32_t>(20.0f); bits += 97)
      points.push_back(sign * std::bit_cast<float>(bits));
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 4099) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (std::isfinite(x)) points.push_back(x);
  }
  return points;
}

}  // namespace

TEST_CASE("float32 gelu is within PyTorch's float32 tolerance of the exact function over a dense sweep",
          "[core][gelu]") {
  const bool tanh_form = GENERATE(false, true);
  const char* approximate = tanh_form ? "tanh" : "none";
  INFO("approximate=" << approximate);
  const std::vector<float> points = sweep_points();
  const int64_t n = static_cast<int64_t>(points.size());
  Tensor x = tg::tensor(std::vector<double>(points.begin(), points.end())).requires_grad_();
  const Tensor y = x.gelu(approximate);
  y.backward(tg::ones({n}));
  const std::vector<float> got_y = y.to_vector<float>(), got_dy = x.grad().to_vector<float>();
  double max_y = 0, max_dy = 0;
  float worst_x_for_y = 0, worst_x_for_dy = 0;
  int64_t nan_y = 0, nan_dy = 0;
  // The tanh form's gelu'(x) is NaN where x² overflows (|x| ≥ 2^64): ∞ · 0 in x σ(2u)σ(−2u) β(1 + 3κx²),
  // as PyTorch's float32 kernel gives (inner_derivative = ∞ times tanh_derivative = 0).
  const auto dy_may_be_nan = [&](float v) { return tanh_form && std::fabs(v) >= 0x1p64f; };
  for (int64_t i = 0; i < n; ++i) {
    const Exact exact = exact_gelu(points[i], tanh_form);
    const double error_y = tolerance_used(got_y[i], exact.y), error_dy = tolerance_used(got_dy[i], exact.dy);
    if (std::isnan(error_y)) ++nan_y;
    if (std::isnan(error_dy) && !dy_may_be_nan(points[i])) ++nan_dy;
    if (error_y > max_y) {
      max_y = error_y;
      worst_x_for_y = points[i];
    }
    if (error_dy > max_dy) {
      max_dy = error_dy;
      worst_x_for_dy = points[i];
    }
  }
  // Measured (every level alike, bitwise), as a fraction of the tolerance: see gelu_kernels.cpp.
  CAPTURE(n, max_y, worst_x_for_y, max_dy, worst_x_for_dy);
  CHECK(nan_y == 0);
  CHECK(nan_dy == 0);
  CHECK(max_y <= 1.0);
  CHECK(max_dy <= 1.0);
}

TEST_CASE("float32 gelu at ±inf, NaN and -0 gives PyTorch's values and gradients", "[core][gelu][edge]") {
  // As torch 1.13 gives for both forms, float32 and float64 alike: gelu(−∞) = −∞ · 0 = NaN, and
  // the gradient at ±∞ is NaN (∞ · 0 in x φ(x)).
  const double inf = tg::testing::kInf, nan = tg::testing::kNaN;
  for (const char* approximate : {"none", "tanh"}) {
    INFO(approximate);
    Tensor x = tg::tensor({-inf, inf, nan, -0.0, 0.0}).requires_grad_();
    const Tensor y = x.gelu(approximate);
    tg::testing::require_ieee_equal(y, {nan, inf, nan, -0.0, 0.0}, 0.0);
    y.sum().backward();
    tg::testing::require_ieee_equal(x.grad(), {nan, nan, nan, 0.5, 0.5}, 0.0);
  }
}

TEST_CASE("float32 gelu's far negative tail is within the tolerance, never positive", "[core][gelu]") {
  // GELU(x) → 0⁻ for x → −∞: −3 Φ(−3) = −4.05e-3, ..., −10 Φ(−10) = −7.6e−23, and the tanh form's
  // x σ(2u), u = β(x + κx³). Where Φ(x) falls below the absolute tolerance the kernel may return
  // −0 (its exponential flushes below e^−87), but never a positive value or one off by more.
  for (const char* approximate : {"none", "tanh"}) {
    const bool tanh_form = approximate[0] == 't';
    for (double v : {-3.0, -4.0, -5.5, -7.0, -10.0, -13.0, -30.0}) {
      CAPTURE(approximate, v);
      const Tensor x = tg::tensor({v});
      const float got = x.gelu(approximate).item<float>();
      const Exact exact = exact_gelu(static_cast<float>(v), tanh_form);
      CHECK(got <= 0.0f);
      CHECK(tolerance_used(got, exact.y) <= 1.0);
    }
  }
}

TEST_CASE("float32 gelu is bitwise the same at every vector level and thread count", "[core][gelu][vector_isa]") {
  const char* approximate = GENERATE("none", "tanh");
  // Lengths with whole 16-float vectors, each tail (8, 4, scalars) and several parallel chunks.
  const int64_t n = GENERATE(int64_t{1}, int64_t{29}, int64_t{100003});
  CAPTURE(approximate, n);
  tg::manual_seed(7);
  const Tensor values = tg::randn({n}) * 4.0f;
  const Tensor grad_output = tg::randn({n});
  const auto run = [&] {
    Tensor x = values.detach().clone().requires_grad_();
    const Tensor y = x.gelu(approximate);
    y.backward(grad_output);
    // As bytes: the comparison is of bits (a NaN equals itself, -0 differs from 0).
    const auto as_bytes = [](const Tensor& t) {
      const auto* data = reinterpret_cast<const unsigned char*>(t.data<float>());
      return std::vector<unsigned char>(data, data + t.numel() * sizeof(float));
    };
    return std::vector{as_bytes(y), as_bytes(x.grad())};
  };
  tg::testing::require_same_at_every_level_and_thread_count(run);
}

TEST_CASE("float32 gelu agrees with the float64 path, PyTorch's formulas, to float32 rounding", "[core][gelu]") {
  const char* approximate = GENERATE("none", "tanh");
  CAPTURE(approximate);
  tg::manual_seed(3);
  Tensor x64 = (tg::randn({4097}, tg::kFloat64) * 3.0).requires_grad_();
  Tensor x32 = x64.detach().to(tg::kFloat32).requires_grad_();
  const Tensor grad_output = tg::randn({4097}, tg::kFloat64);
  const Tensor y64 = x64.to(tg::kFloat32).to(tg::kFloat64).gelu(approximate);
  const Tensor y32 = x32.gelu(approximate);
  y32.backward(grad_output.to(tg::kFloat32));
  Tensor x32_in64 = x32.detach().to(tg::kFloat64).requires_grad_();
  x32_in64.gelu(approximate).backward(grad_output.to(tg::kFloat32).to(tg::kFloat64));
  // float32's own error is within PyTorch's float32 tolerance (above); float64's is far below it
  CHECK(tg::testing::allclose(y32.to(tg::kFloat64), y64, kAtol, kRtol));
  CHECK(tg::testing::allclose(x32.grad().to(tg::kFloat64), x32_in64.grad(), kAtol, kRtol));
}
