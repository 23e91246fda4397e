// float32 GELU's vectorised kernels (core/src/ops/gelu_kernels.cpp): a dense sweep against the
// exact function in long double (std::erfc, std::exp), PyTorch's values at ±inf, NaN and −0, and
// bitwise-equal results at every vector level and thread count.
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
// dy_terms = |c| + |x c'|: dy cancels to 0 at GELU's minimum (x ≈ −0.7518 for "none"), where no
// float formula keeps dy's relative accuracy, so dy's error is measured against this scale.
struct Exact {
  long double y, dy, dy_terms;
};
Exact exact_gelu(float x_float, bool tanh_form) {
  const long double x = x_float;
  if (!tanh_form) {
    const long double cdf = 0.5L * std::erfc(-x / std::numbers::sqrt2_v<long double>);
    const long double density = std::exp(-0.5L * x * x) / std::sqrt(2 * std::numbers::pi_v<long double>);
    return {x * cdf, cdf + x * density, cdf + std::fabs(x * density)};
  }
  const long double beta = std::sqrt(2 / std::numbers::pi_v<long double>), kappa = 0.044715L;
  const long double u = beta * (x + kappa * x * x * x);
  // σ(±2|u|) from e^(−2|u|), so that neither overflows.
  const long double e = std::exp(-2 * std::fabs(u));
  const long double sigmoid_2u = u < 0 ? e / (1 + e) : 1 / (1 + e), sigmoid_minus_2u = u < 0 ? 1 / (1 + e) : e / (1 + e);
  const long double slope = 2 * sigmoid_2u * sigmoid_minus_2u * beta * (1 + 3 * kappa * x * x);
  return {x * sigmoid_2u, sigmoid_2u + x * slope, sigmoid_2u + std::fabs(x * slope)};
}

// |got − exact| in units of the float32 ulp at `scale` (2^−149 below the normal range).
double ulp_error(float got, long double exact, long double scale) {
  const long double magnitude = std::fabs(scale);
  int exponent = 0;
  std::frexp(static_cast<double>(magnitude), &exponent);  // magnitude ∈ [2^(e−1), 2^e)
  const long double ulp = std::ldexp(1.0L, std::max(exponent - 24, -149));
  return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / ulp);
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

TEST_CASE("float32 gelu is within 6.5 ulp of the exact function over a dense sweep", "[core][gelu]") {
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
  for (int64_t i = 0; i < n; ++i) {
    const Exact exact = exact_gelu(points[i], tanh_form);
    const double error_y = ulp_error(got_y[i], exact.y, exact.y),
                 error_dy = ulp_error(got_dy[i], exact.dy, std::max(std::fabs(exact.dy), exact.dy_terms));
    if (error_y > max_y) {
      max_y = error_y;
      worst_x_for_y = points[i];
    }
    if (error_dy > max_dy) {
      max_dy = error_dy;
      worst_x_for_dy = points[i];
    }
  }
  // Measured (every level alike, bitwise): "none" y ≤ 5.77 and dy ≤ 5.70 ulp (worst near x = 0,
  // where the float evaluation of erfc's 13-term polynomial carries its roundings into Φ ≈ ½);
  // "tanh" y ≤ 2.95 and dy ≤ 6.32 ulp (worst at x ≈ −1.9 and −3.2, σ's and the slope's float
  // roundings).
  CAPTURE(n, max_y, worst_x_for_y, max_dy, worst_x_for_dy);
  CHECK(max_y <= (tanh_form ? 3.5 : 6.0));
  CHECK(max_dy <= (tanh_form ? 6.5 : 6.0));
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

TEST_CASE("float32 gelu keeps a tiny Φ(x) that ½(1 + erf) in float would lose", "[core][gelu]") {
  // GELU(−10) = −10 Φ(−10) = −7.6198530241605e−23; the tanh form's ½x(1 + tanh u) at x = −10:
  // −10 σ(2u), u = β(−10 − 44.715).
  const Tensor x = tg::tensor({-10.0});
  const double exact_none = -10 * 0.5 * std::erfc(10 / std::numbers::sqrt2);
  const double u = std::sqrt(2 / std::numbers::pi) * (-10 - 0.044715 * 1000);
  const double exact_tanh = -10 / (1 + std::exp(-2 * u));
  CHECK(std::fabs(x.gelu().item<float>() - exact_none) <= 1e-7 * std::fabs(exact_none));
  CHECK(std::fabs(x.gelu("tanh").item<float>() - exact_tanh) <= 1e-7 * std::fabs(exact_tanh));
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
  // float32's own error, up to 6.5 ulp (above), is within 8 · 2^−23 ≈ 1e-6 relative
  TG_REQUIRE_NEAR(y32.to(tg::kFloat64), y64, 1e-6);
  TG_REQUIRE_NEAR(x32.grad().to(tg::kFloat64), x32_in64.grad(), 1e-6);
}
