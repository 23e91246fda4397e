// e^v in float lanes, for the kernels compiled once per vector level (the softmax family,
// cross-entropy; GELU, which needs less accuracy, has a cheaper one): v = (k/8) ln2 + r,
// 2^((k mod 8)/8) from a table of eight, e^r by a short polynomial and 2^⌊k/8⌋ applied last, so
// that it vectorises (glibc's exp does not), 16 floats to an AVX-512 vector, 8 to AVX2's, 4 to
// SSE's. Written once for a vector of floats or one float (simd_lanes.hpp's VectorLane::Vec or a
// ScalarLane's float), with no FMA contraction (tg_add_isa_kernels), and where a level has an
// instruction of its own (the table's permute, AVX-512's vscalefps, x86's minps and maxps), it
// computes exactly what the portable form does: the same bits at every level, in a vector lane
// and in the scalar tail. Private to the library.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numbers>
#include <type_traits>
#include <utility>

#include <immintrin.h>

#include "cpu/isa_namespace.hpp"
#include "simd_lanes.hpp"

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

// v clamped to [lowest, highest] lane by lane, NaN kept, as max(lowest, v) then min(highest, v) of
// x86's maxps and minps (which return their second operand where either is NaN): one instruction
// each at every level, where a comparison and a blend take two or three. (AVX-512 in the zero-masked
// forms, every lane kept: see times_eighths_power_of_two.)
template <typename F>
[[gnu::always_inline]] inline F clamp_keeping_nan(F v, float lowest, float highest) {
  if constexpr (std::is_same_v<F, float>) {
    v = lowest > v ? lowest : v;
    return highest < v ? highest : v;
  } else if constexpr (sizeof(F) == 16) {
    return _mm_min_ps(_mm_set1_ps(highest), _mm_max_ps(_mm_set1_ps(lowest), v));
#if defined(__AVX__)
  } else if constexpr (sizeof(F) == 32) {
    return _mm256_min_ps(_mm256_set1_ps(highest), _mm256_max_ps(_mm256_set1_ps(lowest), v));
#endif
#if defined(__AVX512F__)
  } else if constexpr (sizeof(F) == 64) {
    return _mm512_maskz_min_ps(0xFFFF, _mm512_set1_ps(highest), _mm512_maskz_max_ps(0xFFFF, _mm512_set1_ps(lowest), v));
#endif
  } else {
    v = select(F{} + lowest > v, F{} + lowest, v);
    return select(F{} + highest < v, F{} + highest, v);
  }
}

// 2^(j/8), j = 0 … 7, as float pairs: high is 2^(j/8) rounded to float, low the rest rounded (high +
// low is within 1.3e-15 relative of 2^(j/8)).
inline constexpr std::array<float, 8> kEighthPowersHigh{0x1p+0f,         0x1.172b84p+0f, 0x1.306fe0p+0f, 0x1.4bfdaep+0f,
                                                        0x1.6a09e6p+0f,  0x1.8ace54p+0f, 0x1.ae89fap+0f, 0x1.d5818ep+0f};
inline constexpr std::array<float, 8> kEighthPowersLow{0.0f,            -0x1.c15742p-27f, 0x1.4636e2p-25f, -0x1.593abcp-25f,
                                                       0x1.9fcef4p-26f, 0x1.15506ep-27f,  -0x1.a94b14p-26f, -0x1.822dbcp-27f};

// f(v), or for a vector wider than kBytes f of each half (halved again as needed) joined back in
// lane order: lane by lane the same arithmetic, each half at full register width, where GCC would
// spill a wider vector and split its operations element by element.
template <size_t kBytes, typename V, typename F>
[[gnu::always_inline]] inline auto in_halves_of_at_most(V v, const F& f) {
  if constexpr (sizeof(V) <= kBytes) {
    return f(v);
  } else {
    constexpr size_t kHalf = sizeof(V) / sizeof(v[0]) / 2;
    return [&]<size_t... I>(std::index_sequence<I...>) {
      const auto low = in_halves_of_at_most<kBytes>(__builtin_shufflevector(v, v, I...), f);
      const auto high = in_halves_of_at_most<kBytes>(__builtin_shufflevector(v, v, (I + kHalf)...), f);
      return __builtin_shufflevector(low, high, I..., (I + kHalf)...);
    }(std::make_index_sequence<kHalf>{});
  }
}

// table[k mod 8] lane by lane, k in the low mantissa bits of `shifted` (k + 0x1.8p23, so that k's
// two's complement bits are there: their lowest three are k mod 8). A vector lane takes its entries
// by the level's permute: vpermps with the table repeated to 16 entries at AVX-512 (its index has
// four bits), vpermps at AVX2, vpermt2ps for 4 lanes at AVX-512, two vpermilps and a blend at AVX2,
// two byte shuffles and a blend at SSE4.2; a vector wider than the level's registers goes in halves.
template <typename F>
[[gnu::always_inline]] inline F eighth_power(const std::array<float, 8>& t, F shifted) {
  if constexpr (std::is_same_v<F, float>) {
    return t[std::bit_cast<uint32_t>(shifted) & 7];
  } else if constexpr (sizeof(F) > kRegisterBytes) {
    return in_halves_of_at_most<kRegisterBytes>(shifted, [&](auto half) { return eighth_power(t, half); });
#if defined(__AVX512F__)
  } else if constexpr (sizeof(F) == 64) {
    const __m512 table = _mm512_setr_ps(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]);
    return _mm512_maskz_permutexvar_ps(0xFFFF, _mm512_castps_si512(shifted), table);  // (zero-masked: see clamp_keeping_nan)
#endif
#if defined(__AVX2__)
  } else if constexpr (sizeof(F) == 32) {
    return _mm256_permutevar8x32_ps(_mm256_setr_ps(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]), _mm256_castps_si256(shifted));
#endif
  } else {
    static_assert(sizeof(F) == 16);
    const __m128 low = _mm_setr_ps(t[0], t[1], t[2], t[3]), high = _mm_setr_ps(t[4], t[5], t[6], t[7]);
    const __m128i index = _mm_castps_si128(shifted);
#if defined(__AVX512VL__)
    return _mm_permutex2var_ps(low, index, high);  // index mod 8
#else
    const __m128 use_high = _mm_castsi128_ps(_mm_slli_epi32(index, 29));  // bit 2 of the index, as the sign
#if defined(__AVX__)
    return _mm_blendv_ps(_mm_permutevar_ps(low, index), _mm_permutevar_ps(high, index), use_high);  // index mod 4
#else
    // the entry's four bytes: byte b of lane i takes byte 4 · (index_i mod 4) + b of a half
    const __m128i first_byte = _mm_shuffle_epi8(_mm_slli_epi32(index, 2), _mm_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12));
    const __m128i bytes = _mm_add_epi8(_mm_and_si128(first_byte, _mm_set1_epi8(12)), _mm_setr_epi8(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3));
    return _mm_blendv_ps(_mm_castsi128_ps(_mm_shuffle_epi8(_mm_castps_si128(low), bytes)),
                         _mm_castsi128_ps(_mm_shuffle_epi8(_mm_castps_si128(high), bytes)), use_high);
#endif
#endif
  }
}

// p · 2^(⌊k/8⌋ + kScale), rounded once, for p in [½, 2] and an integer k in [−1640, 1155] given
// twice: as a float, and in the low mantissa bits of `shifted` = k + 0x1.8p23. The one rounding
// gives a subnormal, 0 or +∞ where the product leaves float's normal range, as IEEE does.
// AVX-512's vscalefps (p · 2^⌊s⌋) is exactly that, one instruction. Elsewhere 2^⌊k/8⌋ is made in the
// exponent bits, as 2^(m − ⌊m/2⌋) · 2^⌊m/2⌋ for m = ⌊k/8⌋ + kScale, two normal powers: the first
// product is exact and the second rounds once, so both ways give the same bits.
// Adding it to a float w with |w| < 2^22 rounds w to an integer k and leaves k's two's complement
// bits in the sum's low mantissa bits.
inline constexpr float kRoundToInteger = 0x1.8p23f;

template <int kScale, typename F>
[[gnu::always_inline]] inline F times_eighths_power_of_two(F p, [[maybe_unused]] F k, F shifted) {
#if defined(__AVX512F__)
  // (the zero-masked forms with every lane kept: the plain ones start from an undefined vector,
  // which GCC 12 reports as maybe-uninitialized)
  if constexpr (sizeof(F) == 16 || sizeof(F) == 32 || sizeof(F) == 64) {
    F exponent = k * 0.125f;  // ⌊·⌋ is vscalefps'
    if constexpr (kScale != 0) exponent = exponent + static_cast<float>(kScale);  // (+0 would be an instruction)
    if constexpr (sizeof(F) == 64) return _mm512_maskz_scalef_ps(0xFFFF, p, exponent);
    else if constexpr (sizeof(F) == 32) return _mm256_maskz_scalef_ps(0xFF, p, exponent);
    else return _mm_maskz_scalef_ps(0xF, p, exponent);
  }
#endif
  const auto k_int = std::bit_cast<Int32<F>>(std::bit_cast<UInt32<F>>(shifted) - std::bit_cast<uint32_t>(kRoundToInteger));
  const auto m = (k_int >> 3) + kScale;  // ⌊k/8⌋ (arithmetic shift)
  const auto m_half = m >> 1;            // ⌊m/2⌋
  const auto two_to = [](auto exponent) { return std::bit_cast<F>((exponent + 127) << 23); };  // exponent in [−87, 88]
  return (p * two_to(m - m_half)) * two_to(m_half);
}

// e^(v + v_low) in float lanes, v_low a correction below ulp(v) (the rounding error of the
// difference or product that made v: e^v's relative error is |v| times v's, 80 ulp at v = −80, so
// the softmax family passes the part that rounding lost). Within 0.78 ulp of the exact value
// over the whole float range (0.776 at worst, at a subnormal result, 0.630 over the normal ones;
// checked over every float, tests/core/exp_float_test.cpp):
//   v = (k/8) ln2 + r, k = round(8v / ln2), |r| ≤ ln2/16, with r = (v − k c_high) + (v_low − k c_low),
//   c = ln2/8: c_high has 12 significant bits, so k · c_high is exact for the |k| ≤ 1640 that occur
//   and v − k · c_high is exact too (Sterbenz: the two are within a factor 2);
//   e^v = 2^⌊k/8⌋ · 2^((k mod 8)/8) · e^r, the middle factor a table entry as a float pair
//   t_high + t_low and e^r = 1 + q, q = r + r²/2 + r³/6 + r⁴/24 (truncation below 1.3e-9
//   relative, 0.02 ulp); t_high + (t_high q + t_low) rounds at full weight only in its last
//   addition, the rest being 1/20 of it (|q| < 0.045);
//   times 2^⌊k/8⌋ rounded once (times_eighths_power_of_two), to a subnormal, to 0 below e^−103.97
//   or to +∞ above e^88.72, as IEEE does.
// kScale ≥ 0 returns e^(v + v_low) · 2^kScale instead, for a caller that multiplies a tiny e by
// more factors: the scaled value stays a normal float where e alone would be subnormal and lose
// digits, and the caller scales back last.
// v is clamped to [−110 − kScale, 100] first (beyond, the result is 0 or +∞ anyway), so that k's
// bits stay in range; there v_low is ignored (and wherever v is NaN), so that −∞ gives exactly 0
// (and +∞ gives +∞) even when v_low is NaN from ∞ − ∞. NaN stays NaN. Always inlined: called out
// of line, its vectors and constants go through memory on every call.
template <int kScale = 0, typename F>
[[gnu::always_inline]] inline F exp_float(F v, F v_low) {
  static_assert(0 <= kScale && kScale <= 32);
  constexpr float kLowest = -110.0f - kScale, kHighest = 100.0f;
  constexpr float kEighthsPerUnit = 0x1.715476p+3f;  // 8 / ln 2
  constexpr float kEighthHigh = 0x1.62ep-4f, kEighthLow = 0x1.0bfbe8p-18f;  // ln2/8 and the rest, rounded
  const F clamped = clamp_keeping_nan(v, kLowest, kHighest);
  v_low = select(clamped == v, v_low, F{});
  v = clamped;
  const F shifted = v * kEighthsPerUnit + kRoundToInteger;  // k in the low mantissa bits
  const F k = shifted - kRoundToInteger;
  const F r = (v - k * kEighthHigh) + (v_low - k * kEighthLow);
  const F r_squared = r * r;
  const F q = r + r_squared * (0.5f + r * (1.0f / 6 + r * (1.0f / 24)));  // e^r − 1
  const F t_high = eighth_power(kEighthPowersHigh, shifted), t_low = eighth_power(kEighthPowersLow, shifted);
  return times_eighths_power_of_two<kScale>(t_high + (t_high * q + t_low), k, shifted);
}

}  // namespace TG_ISA_HELPERS
}  // namespace tg::detail

#pragma GCC diagnostic pop
