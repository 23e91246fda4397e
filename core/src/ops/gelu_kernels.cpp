// float32 GELU, forward and backward, compiled once per vector level by tg_add_isa_kernels
// (TG_ISA = v2, v3 or avx512) into tg::detail::<level>.
//
// Both forms are y = x · c(x), with c a smooth step from 0 to 1:
//   "none": c(x) = Φ(x) = ½ erfc(−x/√2),                       c'(x) = φ(x) = e^(−x²/2) / √(2π)
//   "tanh": c(x) = ½ (1 + tanh u) = σ(2u), u = β (x + κ x³),   c'(x) = 2 σ(2u) σ(−2u) β (1 + 3κ x²)
// and gelu'(x) = c(x) + x c'(x). glibc's scalar erf and tanh do not vectorise, so c is built here
// from a polynomial and an exp made of exponent bits (simd_exp.hpp), in double lanes: each float is widened, c is
// computed with a relative error below 2e-9, and y or dx is rounded to float once. Measured over 23.7
// million float32 (every 97th in [−20, 20], every 4099th bit pattern of the whole range, subnormals
// included) against the exact functions in long double (std::erfc, std::exp; tests/core/gelu_test.cpp):
//   "none": y and dx within 0.521 ulp;   "tanh": y and dx within 0.5001 ulp,
// dx's ulp taken at |c| + |x c'| where dx cancels to 0 (GELU's minimum, x ≈ −0.7518). That is
// more accurate than ½x(1 + erf(x/√2)) in float (PyTorch's kernel), which loses every digit of a
// small Φ(x) for x ≲ −4.
//
// Each formula is written once, for a lane of doubles or one double (simd_lanes.hpp); with no FMA
// contraction (tg_add_isa_kernels) every level rounds each operation alike, so the results are
// bitwise identical across levels, lanes and the scalar tail, and across thread counts (each
// element is computed on its own).
#include "ops/gelu_kernels.hpp"

#include <array>
#include <bit>
#include <numbers>
#include <type_traits>

#include "parallel_for.hpp"
#include "simd_exp.hpp"
#include "simd_lanes.hpp"

// The kernels' lambdas return SIMD vectors (see simd_lanes.hpp on -Wpsabi).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tg::detail::TG_ISA {

namespace {

// erfc(z) for z ≥ 0 (and +∞), given e^(−z²): erfc(z) = t · G(s) · e^(−z²) with t = 1/(1 + z/2) and
// s = 2t − 1 ∈ (−1, 1] (the variable of Numerical Recipes' erfcc), and our own G = e^(z²) erfc(z) / t,
// smooth on [−1, 1] and never 0: degree 12, a least-squares fit in relative error at 20,000
// Chebyshev nodes against torch.special.erfcx in float64. Relative error of erfc below 1.3e-9 for
// every z ≥ 0.
template <typename D>
D erfc_nonnegative(D z, D exp_minus_z_squared) {
  constexpr std::array<double, 13> kScaledErfc{
      -9.2858521412652418e-06, -1.4586321680191164e-06, 7.0005550503938216e-05, -3.2591187631987875e-05,
      -0.00033068941703106648, 0.00042666049084625691,  0.0015453784436636675,  -0.0032416979372440029,
      -0.010755424474042456,   0.018221356312462779,    0.13973605867870029,    0.34358033435997021,
      0.51079135240792606,
  };  // G's coefficients, highest power of s first
  const D t = 1.0 / (1.0 + 0.5 * z);
  const D s = 2.0 * t - 1.0;
  D scaled = D{} + kScaledErfc[0];
  for (size_t i = 1; i < kScaledErfc.size(); ++i) scaled = scaled * s + kScaledErfc[i];
  return t * scaled * exp_minus_z_squared;
}

// approximate = "none": c = Φ, the standard normal CDF. Both Φ and φ need e^(−x²/2) (the
// argument is exact: x is a widened float), so the backward computes it once.
struct ErfGelu {
  // Φ(x) = ½ erfc(|x|/√2) for x < 0 (no cancellation, unlike ½(1 + erf), so a tiny Φ keeps its
  // digits), 1 − ½ erfc(x/√2) for x ≥ 0.
  template <typename D>
  static D cdf(D x, D gaussian) {
    const D half_erfc = 0.5 * erfc_nonnegative(absolute(x) * (std::numbers::sqrt2 / 2), gaussian);
    return select(x < 0.0, half_erfc, 1.0 - half_erfc);
  }
  template <typename D>
  static D gaussian(D x) {
    return exp_nonpositive(x * x * -0.5);  // e^(−x²/2)
  }
  template <typename D>
  static D cdf(D x) {
    return cdf(x, gaussian(x));
  }
  // gelu' = Φ(x) + x φ(x), φ(x) = e^(−x²/2)/√(2π).
  template <typename D>
  static D derivative(D x) {
    const D e = gaussian(x);
    return cdf(x, e) + x * (e * (std::numbers::inv_sqrtpi / std::numbers::sqrt2));
  }
};

// approximate = "tanh": c = ½(1 + tanh u) = σ(2u), and ½(1 − tanh u) = σ(−2u), both from one
// e = e^(−2|u|) ≤ 1 (no overflow): σ(2|u|) = 1/(1 + e), σ(−2|u|) = e/(1 + e).
struct TanhGelu {
  static constexpr double kBeta = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // √(2/π)
  static constexpr double kKappa = 0.044715;
  template <typename D>
  struct Sigmoids {
    D of_2u, of_minus_2u, x_squared;
  };
  template <typename D>
  static Sigmoids<D> sigmoids(D x) {
    const D x_squared = x * x;
    const D u = kBeta * (x + kKappa * (x_squared * x));
    const D e = exp_nonpositive(-2.0 * absolute(u));
    const D of_abs = 1.0 / (1.0 + e), of_minus_abs = e * of_abs;
    const auto u_negative = u < 0.0;
    return {select(u_negative, of_minus_abs, of_abs), select(u_negative, of_abs, of_minus_abs), x_squared};
  }
  template <typename D>
  static D cdf(D x) {
    return sigmoids(x).of_2u;
  }
  // gelu' = σ(2u) + x · 2 σ(2u) σ(−2u) · β (1 + 3κ x²)   (1 − tanh² u = 4 σ(2u) σ(−2u))
  template <typename D>
  static D derivative(D x) {
    const Sigmoids<D> s = sigmoids(x);
    return s.of_2u + x * (2.0 * s.of_2u * s.of_minus_2u) * (kBeta * (1.0 + 3.0 * kKappa * s.x_squared));
  }
};

// x: [n] -> y: [n], y = x · c(x).
template <typename Form>
void gelu_forward(const float* x, float* y, int64_t n) {
  parallel_for(n, kElementwiseGrain, [=](int64_t begin, int64_t end) {
    for_each_lane<float>(end - begin, [&](auto at) {
      const auto y_wide = in_register_halves(at.wide(x + begin), [](auto x_wide) { return x_wide * Form::cdf(x_wide); });
      at.store(y + begin, to_float<decltype(at)>(y_wide));
    });
  });
}

// grad_output, x: [n] -> grad_input: [n] = grad_output · gelu'(x), rounded once.
template <typename Form>
void gelu_backward(const float* grad_output, const float* x, float* grad_input, int64_t n) {
  parallel_for(n, kElementwiseGrain, [=](int64_t begin, int64_t end) {
    for_each_lane<float>(end - begin, [&](auto at) {
      const auto derivative = in_register_halves(at.wide(x + begin), [](auto x_wide) { return Form::derivative(x_wide); });
      at.store(grad_input + begin, to_float<decltype(at)>(at.wide(grad_output + begin) * derivative));
    });
  });
}

void forward(const float* x, float* y, int64_t n, GeluApproximation approximation) {
  if (approximation == GeluApproximation::tanh) gelu_forward<TanhGelu>(x, y, n);
  else gelu_forward<ErfGelu>(x, y, n);
}

void backward(const float* grad_output, const float* x, float* grad_input, int64_t n,
              GeluApproximation approximation) {
  if (approximation == GeluApproximation::tanh) gelu_backward<TanhGelu>(grad_output, x, grad_input, n);
  else gelu_backward<ErfGelu>(grad_output, x, grad_input, n);
}

}  // namespace

const GeluKernels gelu_kernels = {.forward = forward, .backward = backward};

}  // namespace tg::detail::TG_ISA

#pragma GCC diagnostic pop
