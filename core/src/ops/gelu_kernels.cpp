// float32 GELU, forward and backward, compiled once per vector level by tg_add_isa_kernels
// (TG_ISA = v2, v3 or avx512) into tg::detail::<level>.
//
// Both forms are y = x · c(x), with c a smooth step from 0 to 1:
//   "none": c(x) = Φ(x) = ½ erfc(−x/√2),                       c'(x) = φ(x) = e^(−x²/2) / √(2π)
//   "tanh": c(x) = ½ (1 + tanh u) = σ(2u), u = β (x + κ x³),   c'(x) = 2 σ(2u) σ(−2u) β (1 + 3κ x²)
// and gelu'(x) = c(x) + x c'(x). glibc's scalar erf and tanh do not vectorise, so c is built here
// in float lanes (a register of floats at a time) from a polynomial and a table-free exp.
// Accuracy is PyTorch's float32 OpInfo tolerance, |error| ≤ 1e-5 + 1.3e-6 |exact|, and no more:
// every digit beyond it costs time. Measured over 23.7 million float32 (every 97th in [−20, 20],
// every 4099th bit pattern of the whole range, subnormals included) against the exact functions in
// long double (std::erfc, std::exp; tests/core/gelu_test.cpp), the worst error as a fraction of
// that tolerance: "none" y 0.055, gelu' 0.16 (the erfc fit's 3.5e-6 near x = 0);
// "tanh" y 0.032, gelu' 0.018. Where a result is below the absolute tolerance (x ≲ −9) it may be
// −0: the exp flushes below e^−87.
//
// Forward writes y and gelu'(x) in one pass and backward multiplies (GeluKernels::backward):
// measured faster than PyTorch's recomputation of gelu'(x) from x in backward, which saves one
// array's write and read but runs the exp and erfc twice.
//
// Each formula is written once, for a lane of floats or one float (simd_lanes.hpp); with no FMA
// contraction (tg_add_isa_kernels) every level rounds each operation alike, so the results are
// bitwise identical across levels, lanes and the scalar tail, and across thread counts (each
// element is computed on its own).
#include "ops/gelu_kernels.hpp"

#include <array>
#include <bit>
#include <numbers>
#include <type_traits>

#include "parallel_for.hpp"
#include "simd_exp.hpp"  // select, absolute, UInt32 (GELU has its own exp below)
#include "simd_lanes.hpp"

// The kernels' lambdas return SIMD vectors (see simd_lanes.hpp on -Wpsabi).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tg::detail::TG_ISA {

namespace {

// e^v for v ≤ 0 (or NaN), within 2e-7 relative where |v| ≲ 8 (and 4e-6 by e^−87, where it only
// scales results far below the absolute tolerance); 0 for v < −87 (e^v < 1.7e-38): GELU's
// exponentials are never positive. v = k ln2 + r, k = round(v / ln2) (by the 1.5 · 2^23 rounding
// trick), |r| ≤ ln2/2, r = v − k ln2 with k ln2 rounded once (|v| 2^−24 absolute, as v's own
// rounding); e^r = 1 + r + r² q(r), q a degree-3 least-squares fit in relative error (1.6e-7
// evaluated in float); 2^k (k ≥ −126, a normal float) built in the exponent bits. No table, no
// subnormal path. Below −87 (and at −∞, where r is NaN) k's bits are meaningless and the result
// is replaced by 0; NaN goes through the arithmetic as NaN.
template <typename F>
[[gnu::always_inline]] inline F exp_nonpositive(F v) {
  constexpr float kLowest = -87.0f, kRoundToInteger = 0x1.8p23f, kLog2E = std::numbers::log2e_v<float>;
  constexpr float kLn2 = std::numbers::ln2_v<float>;
  const F shifted = v * kLog2E + kRoundToInteger;  // k in the low mantissa bits
  const F k = shifted - kRoundToInteger;
  const F r = v - k * kLn2;
  const F q = ((8.333837613e-03f * r + 4.189857841e-02f) * r + 1.666688621e-01f) * r + 4.999914169e-01f;
  const F e_r = 1.0f + (r + (r * r) * q);
  // (k + 127) << 23: shifted's bits are k plus a constant whose bits all leave in the shift
  const F two_to_k = std::bit_cast<F>((std::bit_cast<UInt32<F>>(shifted) + 127u) << 23);
  return select(v < kLowest, F{}, e_r * two_to_k);
}

// approximate = "none": c = Φ, the standard normal CDF, and e = e^(−x²/2). With
// h = ½ erfc(|x|/√2) e^(x²/2) (scaled erfc, smooth and never 0):
//   Φ(x) = h e for x < 0 (no cancellation, unlike ½(1 + erf)), 1 − h e for x ≥ 0;
//   gelu' = Φ(x) + x φ(x), φ(x) = e/√(2π).
// h = t H(t), t = 1/(1 + z/2), z = |x|/√2 (the variable of Numerical Recipes' erfcc), H a degree-7
// least-squares fit in relative error at 40,000 Chebyshev nodes of t ∈ (0, 1] against
// torch.special.erfcx in float64: 3.5e-6 relative evaluated in float, so Φ within 1.8e-6 where
// h e ≤ ½; fitted with H(1) = ½ exactly, so that Φ(0) = ½ and gelu'(0) = ½ as PyTorch gives.
struct ErfGelu {
  static constexpr float kInvSqrt2Pi = std::numbers::inv_sqrtpi / std::numbers::sqrt2;
  template <typename F>
  static F cdf_and_exp(F x, F& e) {
    constexpr float kHalfOverSqrt2 = std::numbers::sqrt2 / 4;  // t = 1/(1 + |x| · ½/√2)
    e = exp_nonpositive((x * x) * -0.5f);
    const F t = 1.0f / (1.0f + absolute(x) * kHalfOverSqrt2);
    F scaled = F{} + 2.524873242e-02f;
    for (float c : {-5.484332517e-02f, -2.031553723e-02f, 6.216643378e-02f, 8.133345842e-02f, 1.243605837e-01f,
                    1.410019249e-01f, 1.410477310e-01f})
      scaled = scaled * t + c;
    const F h_e = (t * scaled) * e;
    return select(x < 0.0f, h_e, 1.0f - h_e);
  }
  template <typename F>
  static F value(F x) {
    F e;
    return x * cdf_and_exp(x, e);
  }
  template <typename F>
  static void value_and_derivative(F x, F& y, F& derivative) {
    F e;
    const F cdf = cdf_and_exp(x, e);
    y = x * cdf;
    derivative = cdf + x * (e * kInvSqrt2Pi);
  }
};

// approximate = "tanh": c = ½(1 + tanh u) = σ(2u), u = β(x + κx³) with x's sign, and ½(1 − tanh u) =
// σ(−2u), both from one e = e^(−2|u|) ≤ 1 (no overflow): with a = σ(2|u|) = 1/(1 + e),
//   σ(2u) = a e for u < 0, a for u ≥ 0;   σ(2u) σ(−2u) = a (a e);
//   gelu' = σ(2u) + x · 2 σ(2u) σ(−2u) · β (1 + 3κ x²)   (1 − tanh² u = 4 σ(2u) σ(−2u)).
// 2u in float: its rounding costs e a relative |2u| · 2^−24, which matters only where e, and with
// it σ(2u) for x < 0 and gelu' − 1, is far below the absolute tolerance.
struct TanhGelu {
  static constexpr double kBeta = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // √(2/π)
  static constexpr double kKappa = 0.044715;
  static constexpr float kTwoBeta = 2 * kBeta, kTwoBetaKappa = 2 * kBeta * kKappa,
                         kSixBetaKappa = 6 * kBeta * kKappa;
  template <typename F>
  static F sigmoid(F x, F x_squared, F& a, F& a_e) {
    const F two_u = x * (kTwoBeta + kTwoBetaKappa * x_squared);
    const F e = exp_nonpositive(-absolute(two_u));
    a = 1.0f / (1.0f + e);
    a_e = a * e;
    return select(x < 0.0f, a_e, a);
  }
  template <typename F>
  static F value(F x) {
    F a, a_e;
    return x * sigmoid(x, x * x, a, a_e);
  }
  template <typename F>
  static void value_and_derivative(F x, F& y, F& derivative) {
    F a, a_e;
    const F x_squared = x * x;
    const F c = sigmoid(x, x_squared, a, a_e);
    y = x * c;
    derivative = c + x * ((a * a_e) * (kTwoBeta + kSixBetaKappa * x_squared));
  }
};

// x: [n] -> y: [n], y = gelu(x) = x · c(x), and with kDerivative derivative: [n] = gelu'(x) from
// the same exponential.
template <typename Form, bool kDerivative>
void gelu_forward(const float* x, float* y, float* derivative, int64_t n) {
  parallel_for(n, kElementwiseGrain, [=](int64_t begin, int64_t end) {
    for_each_lane<float>(end - begin, [&](auto at) {
      const auto x_lane = at(x + begin);
      if constexpr (kDerivative) {
        std::remove_const_t<decltype(x_lane)> y_lane, derivative_lane;
        Form::value_and_derivative(x_lane, y_lane, derivative_lane);
        at.store(y + begin, y_lane);
        at.store(derivative + begin, derivative_lane);
      } else {
        at.store(y + begin, Form::value(x_lane));
      }
    });
  });
}

template <typename Form>
void gelu_forward(const float* x, float* y, float* derivative, int64_t n) {
  if (derivative) gelu_forward<Form, true>(x, y, derivative, n);
  else gelu_forward<Form, false>(x, y, nullptr, n);
}

void forward(const float* x, float* y, float* derivative, int64_t n, GeluApproximation approximation) {
  if (approximation == GeluApproximation::tanh) gelu_forward<TanhGelu>(x, y, derivative, n);
  else gelu_forward<ErfGelu>(x, y, derivative, n);
}

void backward(const float* grad, const float* derivative, float* grad_input, int64_t n) {
  parallel_for(n, kElementwiseGrain, [=](int64_t begin, int64_t end) {
    for_each_lane<float>(end - begin, [&](auto at) {
      at.store(grad_input + begin, at(grad + begin) * at(derivative + begin));
    });
  });
}

}  // namespace

const GeluKernels gelu_kernels = {.forward = forward, .backward = backward};

}  // namespace tg::detail::TG_ISA

#pragma GCC diagnostic pop
