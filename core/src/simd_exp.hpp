// e^v in double lanes, for the kernels compiled once per vector level (GELU, the softmax family,
// cross-entropy): v = k ln2 + r, e^r by a polynomial and 2^k made in the exponent bits, so that
// it vectorises (glibc's exp does not). Written once for a lane of doubles or one double
// (simd_lanes.hpp's VectorLane::Wide or a ScalarLane's double), with no FMA contraction
// (tg_add_isa_kernels): the same bits at every level, in a vector lane and in the scalar tail.
// Private to the library.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <numbers>
#include <type_traits>

#include "cpu/isa_namespace.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"  // see simd_lanes.hpp

namespace tg::detail {
inline namespace TG_ISA_HELPERS {

// D is double (the tail of a row) or a vector of doubles (VectorLane::Wide); LanesOf<Int, D> is
// the integer type Int in the same shape, for the exponent bits. Int64<D> for masks and sign bits;
// UInt64<D> for the exponent arithmetic, which must wrap instead of overflowing (UB) in the lanes
// that the final select discards (below the underflow bound, ±∞, NaN).
template <typename Int, typename D>
struct LanesOf {
  using type = Int;
};
template <typename Int, typename D>
  requires(sizeof(D) > sizeof(double))
struct LanesOf<Int, D> {
  typedef Int type __attribute__((vector_size(sizeof(D))));
};
template <typename D>
using Int64 = typename LanesOf<int64_t, D>::type;
template <typename D>
using UInt64 = typename LanesOf<uint64_t, D>::type;

// condition ? if_true : if_false, lane by lane. On vectors wider than the level's registers, GCC
// splits `?:` into 128-bit blends lane pair by lane pair; the same select as bit operations stays
// at full width.
template <typename D, typename Mask>
D select(Mask condition, D if_true, D if_false) {
  if constexpr (std::is_same_v<D, double>) {
    return condition ? if_true : if_false;
  } else {
    const Int64<D> mask = condition;  // all ones where true
    return std::bit_cast<D>((mask & std::bit_cast<Int64<D>>(if_true)) | (~mask & std::bit_cast<Int64<D>>(if_false)));
  }
}

// |v|, with the sign bit cleared (−0 → +0, NaN stays NaN).
template <typename D>
D absolute(D v) {
  if constexpr (std::is_same_v<D, double>) return std::bit_cast<double>(std::bit_cast<int64_t>(v) & INT64_MAX);
  else return std::bit_cast<D>(std::bit_cast<Int64<D>>(v) & INT64_MAX);
}

// e^v for v ≤ 1 (the only arguments here). v = k ln2 + r with k an integer and |r| ≤ ln2/2;
// e^r by its Taylor polynomial to r⁹/9! (truncation below 1e-11 relative), times 2^k built in the
// exponent bits. Below −708, where 2^k would leave the normal range, the result is 0 (exactly 0
// at −∞, as a product with ±∞ needs for PyTorch's NaN at ±∞ in backward); NaN stays NaN.
// Always inlined: called out of line, its vectors and constants go through memory on every call
// (measured 8x slower in a loop of cross-entropy's).
template <typename D>
[[gnu::always_inline]] inline D exp_nonpositive(D v) {
  constexpr double kRoundToInteger = 0x1.8p52;  // adding it rounds any |w| < 2^51 to an integer
  constexpr double kLog2e = std::numbers::log2e;
  // ln 2 = kLn2High + kLn2Low, with kLn2High's low 21 bits zero: k · kLn2High is exact for |k| < 2^21.
  constexpr double kLn2High = 0x1.62e42fee00000p-1, kLn2Low = 0x1.a39ef35793c76p-33;
  constexpr double kUnderflow = -708.0;
  const D shifted = v * kLog2e + kRoundToInteger;  // k in the low mantissa bits
  const D k = shifted - kRoundToInteger;
  const D r = (v - k * kLn2High) - k * kLn2Low;
  // Σ_{i≤9} rⁱ/i! = low(r) + r⁵ · high(r), low the terms to r⁴ and high those from r⁵ over r⁵: two
  // Horner chains of 4 steps that run side by side (one chain of 9 made exp latency-bound).
  constexpr std::array<double, 5> kLowTerms{1.0 / 24, 1.0 / 6, 1.0 / 2, 1.0, 1.0};  // 1/4! ... 1/0!
  constexpr std::array<double, 5> kHighTerms{1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120};  // 1/9! ... 1/5!
  D low = D{} + kLowTerms[0], high = D{} + kHighTerms[0];
  for (size_t i = 1; i < kLowTerms.size(); ++i) {
    low = low * r + kLowTerms[i];
    high = high * r + kHighTerms[i];
  }
  const D r_squared = r * r;
  const D power_series = low + (r_squared * r_squared * r) * high;
  const UInt64<D> k_bits = std::bit_cast<UInt64<D>>(shifted) - std::bit_cast<uint64_t>(kRoundToInteger);
  const D two_to_k = std::bit_cast<D>((k_bits + 1023) << 52);
  return select(v < kUnderflow, D{}, power_series * two_to_k);
}

// A lane's doubles rounded to its floats.
template <typename Lane, typename D>
auto to_float(D v) {
  if constexpr (std::is_same_v<D, double>) return static_cast<float>(v);
  else return __builtin_convertvector(v, typename Lane::Vec);
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
