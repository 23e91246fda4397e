// float32 GELU, forward and backward, compiled once per vector level by tg_add_isa_kernels
// (TG_ISA = v2, v3 or avx512) into tg::detail::<level>.
//
// Both forms are y = x · c(x), with c a smooth step from 0 to 1:
//   "none": c(x) = Φ(x) = ½ erfc(−x/√2),                       c'(x) = φ(x) = e^(−x²/2) / √(2π)
//   "tanh": c(x) = ½ (1 + tanh u) = σ(2u), u = β (x + κ x³),   c'(x) = 2 σ(2u) σ(−2u) β (1 + 3κ x²)
// and gelu'(x) = c(x) + x c'(x). glibc's scalar erf and tanh do not vectorise, so c is built here
// in float lanes (a register of floats at a time) from a polynomial and simd_exp.hpp's exp_float.
// The exp's argument (−x²/2, −2|u|) is handed over as a float pair, high + low, since e^v's
// relative error is |v| times v's: −x²/2 from x split into exact halves, −2|u| in double lanes.
// Measured over 23.7 million float32 (every 97th in [−20, 20], every 4099th bit pattern of the
// whole range, subnormals included) against the exact functions in long double (std::erfc,
// std::exp; tests/core/gelu_test.cpp):
//   "none": y within 5.77 ulp, dx 5.70;   "tanh": y within 2.95 ulp, dx 6.32,
// dx's ulp taken at |c| + |x c'| where dx cancels to 0 (GELU's minimum, x ≈ −0.7518). That is
// more accurate than ½x(1 + erf(x/√2)) in float (PyTorch's kernel), which loses every digit of a
// small Φ(x) for x ≲ −4.
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
#include "simd_exp.hpp"
#include "simd_lanes.hpp"

// The kernels' lambdas return SIMD vectors (see simd_lanes.hpp on -Wpsabi).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tg::detail::TG_ISA {

namespace {

// erfc(z) e^(z²) for z ≥ 0 (and +∞): t · G(s), t = 1/(1 + z/2) and s = 2t − 1 ∈ (−1, 1] (the variable
// of Numerical Recipes' erfcc), with our own G = e^(z²) erfc(z) / t, smooth on [−1, 1] and never 0:
// degree 12, a least-squares fit in relative error at 20,000 Chebyshev nodes against
// torch.special.erfcx in float64 (relative error below 1.3e-9, far below float's), evaluated in float.
template <typename F>
F scaled_erfc_nonnegative(F z) {
  constexpr std::array<float, 13> kScaledErfc{
      -9.2858521412652418e-06f, -1.4586321680191164e-06f, 7.0005550503938216e-05f, -3.2591187631987875e-05f,
      -0.00033068941703106648f, 0.00042666049084625691f,  0.0015453784436636675f,  -0.0032416979372440029f,
      -0.010755424474042456f,   0.018221356312462779f,    0.13973605867870029f,    0.34358033435997021f,
      0.51079135240792606f,
  };  // G's coefficients, highest power of s first
  const F t = 1.0f / (1.0f + 0.5f * z);
  const F s = 2.0f * t - 1.0f;
  F scaled = F{} + kScaledErfc[0];
  for (std::size_t i = 1; i < kScaledErfc.size(); ++i) scaled = scaled * s + kScaledErfc[i];
  return t * scaled;
}

// Each form gives y = x c(x) and gelu' = c + x c' from x and e, the one exponential both need,
// passed as scaled_e = e · 2^32 (exp_float<kScale>). Where the result is tiny (x ≲ −9), e is
// subnormal or close to it, so scaled_e is multiplied in last and the 2^−32 after it: e itself, or
// an earlier product, would go subnormal and lose the digits that y keeps as a normal float.
constexpr int kScale = 32;
constexpr float kUnscale = 0x1p-32f;

// exponent(x) computed in double lanes and split into a float pair, high + low: the argument that
// exp_float takes. x is a float or a vector of at most 8 (whose doubles fill one AVX-512 register,
// two AVX2 ones: halving those too gains nothing at v3); a vector of 16 goes in two halves,
// so that GCC keeps every operation at full register width.
template <typename F, typename Exponent>
[[gnu::always_inline]] inline ExactSum<F> exponent_in_double(F x, const Exponent& exponent) {
  if constexpr (std::is_same_v<F, float>) {
    const double wide = exponent(static_cast<double>(x));
    const float high = static_cast<float>(wide);
    return {high, static_cast<float>(wide - high)};
  } else if constexpr (sizeof(F) <= 32) {
    using Wide = typename VectorLane<float, sizeof(F)>::Wide;
    const Wide wide = exponent(__builtin_convertvector(x, Wide));
    const F high = __builtin_convertvector(wide, F);
    return {high, __builtin_convertvector(wide - __builtin_convertvector(high, Wide), F)};
  } else {
    const auto low_half = exponent_in_double(__builtin_shufflevector(x, x, 0, 1, 2, 3, 4, 5, 6, 7), exponent);
    const auto high_half = exponent_in_double(__builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15), exponent);
    const auto join = [](auto first, auto second) {
      return __builtin_shufflevector(first, second, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    };
    return {join(low_half.value, high_half.value), join(low_half.error, high_half.error)};
  }
}

// approximate = "none": c = Φ, the standard normal CDF, and e = e^(−x²/2) (its argument is exact in
// double, x being a float). With h = ½ erfc(|x|/√2) e^(x²/2):
//   Φ(x) = h e for x < 0 (no cancellation, unlike ½(1 + erf), so a tiny Φ keeps its digits),
//   1 − h e for x ≥ 0;   gelu' = Φ(x) + x φ(x), φ(x) = e/√(2π).
struct ErfGelu {
  static constexpr float kInvSqrt2Pi = std::numbers::inv_sqrtpi / std::numbers::sqrt2;
  // −x²/2 as a float pair, high + low, in float lanes: x = head + tail with head x's leading 12
  // bits, so that head², head·tail and tail² are exact floats (24 bits at most); only their sum
  // rounds, at 2^−24 of a term below 2^−10 of x². (Cheaper than widening to double lanes.)
  template <typename F>
  static ExactSum<F> exponent_pair(F x) {
    const F head = std::bit_cast<F>(std::bit_cast<UInt32<F>>(x) & 0xFFFFF000u);
    const F tail = x - head;
    const F high = (head * head) * -0.5f;
    const F low_or_nan = -((head * tail) + (tail * tail) * 0.5f);
    // x = ±∞ makes tail NaN: high (−∞) alone is the exponent; exp_float ignores the low part there
    const F low = select(low_or_nan == low_or_nan, low_or_nan, F{});
    const F sum = high + low;  // |high| ≥ |low|: the rounding error of the sum is exact (Fast2Sum)
    return {sum, low - (sum - high)};
  }
  template <typename F>
  static F half_scaled_erfc(F x) {
    return 0.5f * scaled_erfc_nonnegative(absolute(x) * (std::numbers::sqrt2_v<float> / 2));
  }
  template <typename F>
  static F value(F x, F scaled_e) {
    const F h = half_scaled_erfc(x), e = scaled_e * kUnscale;
    return select(x < 0.0f, ((x * h) * scaled_e) * kUnscale, x * (1.0f - h * e));
  }
  template <typename F>
  static F derivative(F x, F scaled_e) {
    const F h = half_scaled_erfc(x), e = scaled_e * kUnscale;
    return select(x < 0.0f, ((h + x * kInvSqrt2Pi) * scaled_e) * kUnscale, (1.0f - h * e) + x * (e * kInvSqrt2Pi));
  }
};

// approximate = "tanh": c = ½(1 + tanh u) = σ(2u), u = β(x + κx³) with x's sign, and ½(1 − tanh u) =
// σ(−2u), both from one e = e^(−2|u|) ≤ 1 (no overflow): with a = σ(2|u|) = 1/(1 + e),
//   σ(2u) = a e for u < 0, a for u ≥ 0;   σ(2u) σ(−2u) = a² e;
//   gelu' = σ(2u) + x · 2 σ(2u) σ(−2u) · β (1 + 3κ x²)   (1 − tanh² u = 4 σ(2u) σ(−2u)).
struct TanhGelu {
  static constexpr double kBeta = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // √(2/π)
  static constexpr double kKappa = 0.044715;
  // −2|u| in double lanes: in float its rounding (and κ's) would cost |2u| · 2^−24 relative in e,
  // 45 ulp where σ(2u) is still a normal float.
  template <typename F>
  static ExactSum<F> exponent_pair(F x) {
    return exponent_in_double(x, [](auto d) { return -2.0 * absolute(kBeta * (d + kKappa * (d * d * d))); });
  }
  template <typename F>
  static F value(F x, F scaled_e) {
    const F a = 1.0f / (1.0f + scaled_e * kUnscale);
    return select(x < 0.0f, ((x * a) * scaled_e) * kUnscale, x * a);
  }
  template <typename F>
  static F derivative(F x, F scaled_e) {
    constexpr float kBetaFloat = kBeta, kThreeKappa = 3 * kKappa;
    const F e = scaled_e * kUnscale, a = 1.0f / (1.0f + e);
    const F slope_over_e = x * (2.0f * a * a) * (kBetaFloat * (1.0f + kThreeKappa * (x * x)));  // x c' / e
    return select(x < 0.0f, ((a + slope_over_e) * scaled_e) * kUnscale, a + slope_over_e * e);
  }
};

// e^(Form's exponent of x) · 2^kScale for a lane of floats, within exp_float's 0.78 ulp.
template <typename Form, typename F>
[[gnu::always_inline]] inline F exp_term(F x) {
  const ExactSum<F> exponent = Form::exponent_pair(x);
  return exp_float<kScale>(exponent.value, exponent.error);
}

// x: [n] -> y: [n], y = gelu(x) = x · c(x), and with kDerivative derivative: [n] = gelu'(x) from
// the same exponential.
template <typename Form, bool kDerivative>
void gelu_forward(const float* x, float* y, float* derivative, int64_t n) {
  parallel_for(n, kElementwiseGrain, [=](int64_t begin, int64_t end) {
    for_each_lane<float>(end - begin, [&](auto at) {
      const auto x_lane = at(x + begin);
      const auto e = exp_term<Form>(x_lane);
      at.store(y + begin, Form::value(x_lane, e));
      if constexpr (kDerivative) at.store(derivative + begin, Form::derivative(x_lane, e));
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

}  // namespace

const GeluKernels gelu_kernels = {.forward = forward};

}  // namespace tg::detail::TG_ISA

#pragma GCC diagnostic pop
