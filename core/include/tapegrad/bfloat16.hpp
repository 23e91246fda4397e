/// @file
/// tg::BFloat16, the element type of kBFloat16 tensors: the upper 16 bits of an IEEE float32
/// (1 sign bit, 8 exponent bits, 7 mantissa bits), as c10::BFloat16.
///
/// It converts to and from float implicitly, as c10::BFloat16 does: float → bfloat16 rounds to
/// nearest, ties to even (PyTorch's round_to_nearest_even), keeps ±inf and denormals (rounded like
/// any value) and turns every NaN into the quiet NaN 0x7FC0; bfloat16 → float is exact. A double
/// goes through float, rounding twice, exactly as PyTorch converts a float64 tensor to bfloat16.
/// There is no arithmetic of its own: an expression of BFloat16 values computes in float.
///
/// @code
///   tg::BFloat16 x = 1.00390625f;         // a tie between 1 and 1.0078125: rounds to even, 1
///   float back = x;                       // exact: 1.0f
///   uint16_t bits = tg::BFloat16(-2.0f).bits;  // 0xC000
/// @endcode
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <ostream>

namespace tg {

/// A bfloat16 value: 16 bits, the upper half of the float32 with the same value.
struct BFloat16 {
  uint16_t bits = 0;  ///< sign, 8 exponent bits, 7 mantissa bits

  BFloat16() = default;  ///< +0
  /// `value` rounded to nearest, ties to even; NaN becomes 0x7FC0. Implicit, as c10::BFloat16's.
  constexpr BFloat16(float value) : bits(round_to_nearest_even(value)) {}  // NOLINT(google-explicit-constructor)
  /// The exact float value. Implicit, as c10::BFloat16's.
  constexpr operator float() const { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }  // NOLINT

  /// The value whose bits are `bits` (no rounding).
  static constexpr BFloat16 from_bits(uint16_t bits) {
    BFloat16 value;
    value.bits = bits;
    return value;
  }

  /// PyTorch's round_to_nearest_even (c10/util/BFloat16.h): add 0x7FFF plus the lowest kept bit,
  /// then truncate. A carry out of the mantissa moves to the exponent, so the largest values round
  /// to ±inf; NaN is caught first, where the addition could carry it into an infinity.
  static constexpr uint16_t round_to_nearest_even(float value) {
    if (value != value) return 0x7FC0;
    const uint32_t u = std::bit_cast<uint32_t>(value);
    const uint32_t rounding_bias = 0x7FFF + ((u >> 16) & 1);
    return static_cast<uint16_t>((u + rounding_bias) >> 16);
  }
};

/// Prints the float value.
inline std::ostream& operator<<(std::ostream& out, BFloat16 value) { return out << static_cast<float>(value); }

}  // namespace tg

/// The limits of tg::BFloat16, as c10's: 8 significant bits, float32's exponent range.
template <>
struct std::numeric_limits<tg::BFloat16> {
  static constexpr bool is_specialized = true;   ///< yes
  static constexpr bool is_signed = true;        ///< yes
  static constexpr bool is_integer = false;      ///< no
  static constexpr bool is_exact = false;        ///< no
  static constexpr bool has_infinity = true;     ///< yes
  static constexpr bool has_quiet_NaN = true;    ///< yes
  static constexpr bool is_iec559 = false;       ///< not an IEEE interchange format
  static constexpr int digits = 8;               ///< significant bits, the implicit one included
  static constexpr int max_exponent = 128;       ///< float32's
  static constexpr int min_exponent = -125;      ///< float32's
  /// 1.17549435e-38, the smallest normal value
  static constexpr tg::BFloat16 min() { return tg::BFloat16::from_bits(0x0080); }
  /// -3.38953139e38
  static constexpr tg::BFloat16 lowest() { return tg::BFloat16::from_bits(0xFF7F); }
  /// 3.38953139e38, the largest finite value
  static constexpr tg::BFloat16 max() { return tg::BFloat16::from_bits(0x7F7F); }
  /// 0.0078125, the gap between 1 and the next value
  static constexpr tg::BFloat16 epsilon() { return tg::BFloat16::from_bits(0x3C00); }
  /// +inf
  static constexpr tg::BFloat16 infinity() { return tg::BFloat16::from_bits(0x7F80); }
  /// the quiet NaN 0x7FC0
  static constexpr tg::BFloat16 quiet_NaN() { return tg::BFloat16::from_bits(0x7FC0); }
  /// 9.18354962e-41, the smallest denormal
  static constexpr tg::BFloat16 denorm_min() { return tg::BFloat16::from_bits(0x0001); }
};
