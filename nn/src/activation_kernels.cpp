// float32 SiLU, ELU, Softplus and Mish, forward and backward, compiled once per vector level by
// tg_add_isa_kernels (TG_ISA = v2, v3 or avx512) into tg::detail::<level>.
//
// glibc's exp, expm1, log1p and tanh do not vectorise; here each activation is a formula over a
// lane of floats (simd_lanes.hpp: a register of floats, or one float for the tail) built from ONE
// exponential, simd_exp.hpp's exp_float (within 0.78 ulp), and a few divisions:
//   silu      x / (1 + e^−x);                      f' = σ (1 + x (1 − σ)), σ = 1 / (1 + e^−x)
//   elu       α expm1(x) for x <= 0, x above;      f' = α eˣ for x <= 0, 1 above
//   softplus  x where βx > threshold, else (max(βx, 0) + log1p(e^−|βx|)) / β
//                                                  f' = z / (z + 1), z = e^(βx), 1 above threshold
//   mish      x tanh(softplus(x)) = x · n / (n + 2), n = e (e + 2), e = eˣ, since
//             tanh(log(1 + e)) = ((1 + e)² − 1) / ((1 + e)² + 1);
//             f' = t + x σ (1 − t²), t = n / (n + 2), 1 − t² = 4 (n + 1) / (n + 2)², σ = e / (1 + e)
// with expm1 and log1p below (ELU's and Softplus's: polynomials on the small range each needs).
// softplus as max(s, 0) + log1p(e^−|s|) keeps log1p's argument in [0, 1] (PyTorch's
// log1p(e^s) is the same function); 1 − t² in mish's derivative as a quotient has no cancellation
// where t → 1. Measured against the float64 library functions over a dense grid
// (tests/nn/activations_cnn_test.cpp) the results are within a few ulp, far inside PyTorch's
// float32 OpInfo tolerances (atol 1e-5, rtol 1.3e-6). NaN, ±∞ and ±0 give what PyTorch's kernels
// give (the fixtures' non-finite cases), derivatives at the kinks included.
//
// With no FMA contraction (tg_add_isa_kernels) every level rounds each operation alike, and each
// element is computed on its own: bitwise identical across levels, lanes, the scalar tail and
// thread counts.
#include "activation_kernels.hpp"

#include "parallel_for.hpp"
#include "simd_exp.hpp"
#include "simd_lanes.hpp"

// The kernels' lambdas return SIMD vectors (see simd_lanes.hpp on -Wpsabi).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tg::detail::TG_ISA {

namespace {

template <typename F>
[[gnu::always_inline]] inline F exp_lanes(F v) {
  return exp_float(v, F{});
}

// eˣ − 1, within about 2 ulp: for |x| < 0.35 its Taylor polynomial to x⁸ (truncation below 7e-10
// relative), where e^x − 1 would lose the digits of a small result; beyond, eˣ − 1 (≥ 0.29 in
// magnitude: exp_float's error grows by at most 3.4×). NaN stays NaN, −∞ gives −1.
template <typename F>
[[gnu::always_inline]] inline F expm1_lanes(F x) {
  const F high_terms = 1.0f / 120 + x * (1.0f / 720 + x * (1.0f / 5040 + x * (1.0f / 40320)));
  const F series = x + (x * x) * (0.5f + x * (1.0f / 6 + x * (1.0f / 24 + x * high_terms)));
  return select(absolute(x) < 0.35f, series, exp_lanes(x) - 1.0f);
}

// log(1 + u) for u in [0, 1] (and NaN), within about 3 ulp: 2 atanh(z), z = u / (2 + u) in
// [0, ⅓], by its series 2 (z + z³/3 + … + z¹⁵/15) (truncation below 1.5e-9 relative). No
// cancellation: for a tiny u, z = u/2 to the last bit.
template <typename F>
[[gnu::always_inline]] inline F log1p_unit_lanes(F u) {
  const F z = u / (2.0f + u);
  const F z2 = z * z;
  const F high_terms = 1.0f / 9 + z2 * (1.0f / 11 + z2 * (1.0f / 13 + z2 * (1.0f / 15)));
  const F tail = z2 * (1.0f / 3 + z2 * (1.0f / 5 + z2 * (1.0f / 7 + z2 * high_terms)));
  return 2.0f * (z + z * tail);
}

struct Silu {
  template <typename F>
  static F value(F x, const ActivationOptions&) {
    return x / (1.0f + exp_lanes(-x));
  }
  template <typename F>
  static F gradient(F g, F x, const ActivationOptions&) {
    const F e = exp_lanes(-x), sigmoid = 1.0f / (1.0f + e);
    // 1 − σ as e^−x σ for x >= 0, where σ → 1 would cancel it (and e^−x <= 1 cannot overflow)
    const F one_minus_sigmoid = select(x < 0.0f, 1.0f - sigmoid, e * sigmoid);
    return g * sigmoid * (1.0f + x * one_minus_sigmoid);
  }
};

struct Elu {
  template <typename F>
  static F value(F x, const ActivationOptions& options) {
    const float alpha = options.alpha;
    return select(x <= 0.0f, expm1_lanes(x) * alpha, x);
  }
  template <typename F>
  static F gradient(F g, F x, const ActivationOptions& options) {
    const float alpha = options.alpha;
    return select(x <= 0.0f, g * alpha * exp_lanes(x), g);
  }
};

struct Softplus {
  template <typename F>
  static F value(F x, const ActivationOptions& options) {
    const float beta = options.beta, threshold = options.threshold;
    const F scaled = x * beta;
    // max(s, 0) is 0 for a NaN s, whose log1p term is NaN
    const F softplus = (select(scaled > 0.0f, scaled, F{}) + log1p_unit_lanes(exp_lanes(-absolute(scaled)))) / beta;
    return select(scaled > threshold, x, softplus);
  }
  template <typename F>
  static F gradient(F g, F x, const ActivationOptions& options) {
    const float beta = options.beta, threshold = options.threshold;
    const F scaled = x * beta;
    const F z = exp_lanes(scaled);
    return select(scaled > threshold, g, g * z / (z + 1.0f));
  }
};

// Above x = 20, t = tanh(softplus(x)) is 1 in float (1 − t < 2e−17) and n would overflow: t is
// taken as 1 and 1 − t² as 0 there, so that x = +∞ still gives ∞ · 0 = NaN in the derivative,
// as PyTorch's formula does.
struct Mish {
  static constexpr float kSaturated = 20.0f;
  template <typename F>
  static F value(F x, const ActivationOptions&) {
    const F e = exp_lanes(x);
    const F n = e * (e + 2.0f);
    return x * select(x > kSaturated, F{} + 1.0f, n / (n + 2.0f));
  }
  template <typename F>
  static F gradient(F g, F x, const ActivationOptions&) {
    const F e = exp_lanes(x);
    const F n = e * (e + 2.0f), d = n + 2.0f;
    const auto saturated = x > kSaturated;
    const F t = select(saturated, F{} + 1.0f, n / d);
    const F one_minus_t2 = select(saturated, F{}, (4.0f * (n + 1.0f)) / (d * d));
    const F sigmoid = select(saturated, F{} + 1.0f, e / (1.0f + e));
    return g * (t + x * sigmoid * one_minus_t2);
  }
};

template <typename Formula>
void forward(const float* x, float* y, int64_t n, const ActivationOptions& options) {
  parallel_for(n, kElementwiseGrain, [=, &options](int64_t begin, int64_t end) {
    for_each_lane<float>(end - begin, [&](auto at) { at.store(y + begin, Formula::value(at(x + begin), options)); });
  });
}

template <typename Formula>
void backward(const float* g, const float* x, float* dx, int64_t n, const ActivationOptions& options) {
  parallel_for(n, kElementwiseGrain, [=, &options](int64_t begin, int64_t end) {
    for_each_lane<float>(end - begin, [&](auto at) {
      at.store(dx + begin, Formula::gradient(at(g + begin), at(x + begin), options));
    });
  });
}

template <typename Formula>
constexpr PointwiseActivationKernels kernels_of{.forward = forward<Formula>, .backward = backward<Formula>};

}  // namespace

const ActivationKernels activation_kernels = {
    .silu = kernels_of<Silu>,
    .elu = kernels_of<Elu>,
    .softplus = kernels_of<Softplus>,
    .mish = kernels_of<Mish>,
};

}  // namespace tg::detail::TG_ISA

#pragma GCC diagnostic pop
