// e^v in float lanes, for the kernels compiled once per vector level (GELU, the softmax family,
// cross-entropy): v = k ln2 + r, e^r by a polynomial and 2^k made in the exponent bits, so that
// it vectorises (glibc's exp does not), 16 floats to an AVX-512 vector, 8 to AVX2's, 4 to SSE's.
// Written once for a vector of floats or one float (simd_lanes.hpp's VectorLane::Vec or a
// ScalarLane's float), with no FMA contraction (tg_add_isa_kernels): the same bits at every level,
// in a vector lane and in the scalar tail. Private to the library.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numbers>
#include <type_traits>

#include "cpu/isa_namespace.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"  // see simd_lanes.hpp

namespace tg::detail {
inline namespace TG_ISA_HELPERS {

// D is a scalar (the tail of a row) or a vector of them (simd_lanes.hpp's lanes); LanesOf<Int, D>
// is the integer type Int in the same shape, for the exponent bits: Int32<F> for a float's
// exponent, UInt32<F> for arithmetic on its bits that must wrap instead of overflowing (UB) in
// lanes whose value is discarded (NaN).
template <typename Int, typename D>
struct LanesOf {
  using type = Int;
};
template <typename Int, typename D>
  requires(!std::is_arithmetic_v<D>)
struct LanesOf<Int, D> {
  typedef Int type __attribute__((vector_size(sizeof(D))));
};
template <typename F>
using Int32 = typename LanesOf<int32_t, F>::type;
template <typename F>
using UInt32 = typename LanesOf<uint32_t, F>::type;

// The element type of D: D itself for a scalar, the lane type of a vector.
template <typename D>
struct ElementOf {
  using type = D;
};
template <typename D>
  requires(!std::is_arithmetic_v<D>)
struct ElementOf<D> {
  using type = std::remove_cvref_t<decltype(std::declval<D>()[0])>;
};
// Signed integers as wide as D's elements, in D's shape: a comparison's mask, the sign bits.
template <typename D>
using MaskOf =
    typename LanesOf<std::conditional_t<sizeof(typename ElementOf<D>::type) == 4, int32_t, int64_t>, D>::type;

// condition ? if_true : if_false, lane by lane. On vectors wider than the level's registers, GCC
// splits `?:` into 128-bit blends lane pair by lane pair; the same select as bit operations stays
// at full width.
template <typename D, typename Mask>
D select(Mask condition, D if_true, D if_false) {
  if constexpr (std::is_arithmetic_v<D>) {
    return condition ? if_true : if_false;
  } else {
    const MaskOf<D> mask = condition;  // all ones where true
    return std::bit_cast<D>((mask & std::bit_cast<MaskOf<D>>(if_true)) | (~mask & std::bit_cast<MaskOf<D>>(if_false)));
  }
}

// |v|, with the sign bit cleared (−0 → +0, NaN stays NaN).
template <typename D>
D absolute(D v) {
  using Element = typename ElementOf<D>::type;
  using Bits = typename ElementOf<MaskOf<D>>::type;
  constexpr Bits kAllButSign = std::numeric_limits<Bits>::max();
  static_assert(sizeof(Element) == sizeof(Bits));
  return std::bit_cast<D>(std::bit_cast<MaskOf<D>>(v) & kAllButSign);
}

// a + b as the rounded sum and its rounding error, exactly: value + error = a + b (Knuth's TwoSum,
// six operations, no branch, any order of magnitude; needs the no-contraction build).
template <typename F>
struct ExactSum {
  F value, error;
};
template <typename F>
ExactSum<F> exact_sum(F a, F b) {
  const F value = a + b;
  const F b_part = value - a;
  return {value, (a - (value - b_part)) + (b - b_part)};
}

// e^(v + v_low) in float lanes, v_low a correction below ulp(v) (the rounding error of the
// difference or product that made v: e^v's relative error is |v| times v's, 80 ulp at v = −80, so
// the softmax family and GELU pass the part that rounding lost). Within 1.05 ulp of the exact value
// over the whole float range (1.044 at worst, checked over every float; tests/core/exp_float_test.cpp),
// subnormal results included:
//   v = k ln2 + r, k = round(v / ln2), |r| ≤ ln2/2, with r = (v − k ln2_high) + (v_low − k ln2_low):
//   ln2_high has 9 significant bits, so k · ln2_high is exact for the |k| ≤ 159 that occur and
//   v − k · ln2_high is exact too (Sterbenz: the two are within a factor 2);
//   e^r = Σ_{i≤7} rⁱ/i! (truncation below 5.2e-9 relative, 0.04 ulp);
//   2^k as 2^(k − ⌊k/2⌋) · 2^⌊k/2⌋, two normal powers built in the exponent bits: the first product
//   is exact and the second rounds once, to a subnormal, to 0 below e^−103.97 or to +∞ above
//   e^88.72, as IEEE does.
// kScale ≥ 0 returns e^(v + v_low) · 2^kScale instead, for a caller that multiplies a tiny e by
// more factors: the scaled value stays a normal float where e alone would be subnormal and lose
// digits, and the caller scales back last.
// v is clamped to [−110 − kScale, 100] first (beyond, the result is 0 or +∞ anyway), so that k's
// bits stay in range; there v_low is ignored, so that −∞ gives exactly 0 (and +∞ gives +∞) even
// when v_low is NaN from ∞ − ∞. NaN stays NaN. Always inlined: called out of line, its vectors
// and constants go through memory on every call.
template <int kScale = 0, typename F>
[[gnu::always_inline]] inline F exp_float(F v, F v_low) {
  static_assert(0 <= kScale && kScale <= 32);
  constexpr float kLowest = -110.0f - kScale, kHighest = 100.0f;
  constexpr float kRoundToInteger = 0x1.8p23f;  // adding it rounds any |w| < 2^22 to an integer
  constexpr float kLog2e = std::numbers::log2e_v<float>;
  constexpr float kLn2High = 0x1.63p-1f, kLn2Low = -0x1.bd0106p-13f;  // ln 2 − kLn2High, rounded
  const auto in_range = (v >= kLowest) & (v <= kHighest);
  v = select(v < kLowest, F{} + kLowest, select(v > kHighest, F{} + kHighest, v));
  v_low = select(in_range, v_low, F{});
  const F shifted = v * kLog2e + kRoundToInteger;  // k in the low mantissa bits
  const F k = shifted - kRoundToInteger;
  const F r = (v - k * kLn2High) + (v_low - k * kLn2Low);
  // Σ_{i≤7} rⁱ/i! = 1 + (r + r² q(r)), q = Σ_{2≤i≤7} r^(i−2)/i!: the 1 added last, so that only two
  // roundings reach the result at full weight. q = low(r) + r³ · high(r), two Horner chains of 2
  // steps that run side by side.
  constexpr std::array<float, 3> kLowTerms{1.0f / 24, 1.0f / 6, 1.0f / 2};        // 1/4! ... 1/2!
  constexpr std::array<float, 3> kHighTerms{1.0f / 5040, 1.0f / 720, 1.0f / 120};  // 1/7! ... 1/5!
  F low = F{} + kLowTerms[0], high = F{} + kHighTerms[0];
  for (std::size_t i = 1; i < kLowTerms.size(); ++i) {
    low = low * r + kLowTerms[i];
    high = high * r + kHighTerms[i];
  }
  const F r_squared = r * r;
  const F q = low + (r_squared * r) * high;
  const F power_series = 1.0f + (r + r_squared * q);
  const auto k_int = std::bit_cast<Int32<F>>(std::bit_cast<UInt32<F>>(shifted) - std::bit_cast<uint32_t>(kRoundToInteger)) + kScale;
  const auto k_half = k_int >> 1;  // ⌊k/2⌋ (arithmetic shift)
  const auto two_to = [](auto exponent) { return std::bit_cast<F>((exponent + 127) << 23); };  // exponent in [−87, 89]
  return (power_series * two_to(k_int - k_half)) * two_to(k_half);
}

// f(v) for a lane's doubles, in halves of at most 64 bytes (8 doubles): a full lane of 16 floats
// widens to 128 bytes, which no level's registers hold; the halves keep GCC from spilling and from
// splitting its integer and select operations element by element. Lane by lane the same arithmetic.
template <typename D, typename F>
D in_register_halves(D v, const F& f) {
  if constexpr (sizeof(D) <= 64) {
    return f(v);
  } else {
    const auto low = f(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7));
    const auto high = f(__builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
    return __builtin_shufflevector(low, high, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  }
}

}  // namespace TG_ISA_HELPERS
}  // namespace tg::detail

#pragma GCC diagnostic pop
