// Size arithmetic on values the user gave (kernel sizes, paddings, strides, dilations, output
// sizes): every step checked, so that a value near 2^63 is refused with tg::Error instead of
// wrapping around into a small or negative size (a hang, a wrong shape, a write out of bounds).
// The sizes of tensors themselves are checked by checked_numel (tensor_impl.hpp).
//
//   const int64_t padded = checked_add(in, checked_mul(2, pad, op, what...), op, what...);
//
// `what...` are the message pieces after "<op>: " that name the offending argument; they are
// formatted only on failure. Private to the library.
#pragma once

#include <cstdint>

#include "tapegrad/error.hpp"

namespace tg::detail {

// "<op>: <what...> (<a> <sign> <b> overflows int64)".
template <typename... What>
[[noreturn, gnu::cold, gnu::noinline]] void fail_overflow(int64_t a, const char* sign, int64_t b, const char* op,
                                                          const What&... what) {
  fail(op, what..., " (", a, sign, b, " overflows int64)");
}

// a + b, or tg::Error naming `op` and `what...`.
template <typename... What>
int64_t checked_add(int64_t a, int64_t b, const char* op, const What&... what) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) [[unlikely]] fail_overflow(a, " + ", b, op, what...);
  return sum;
}

// a − b, or tg::Error naming `op` and `what...`.
template <typename... What>
int64_t checked_sub(int64_t a, int64_t b, const char* op, const What&... what) {
  int64_t difference = 0;
  if (__builtin_sub_overflow(a, b, &difference)) [[unlikely]] fail_overflow(a, " - ", b, op, what...);
  return difference;
}

// a · b, or tg::Error naming `op` and `what...`.
template <typename... What>
int64_t checked_mul(int64_t a, int64_t b, const char* op, const What&... what) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) [[unlikely]] fail_overflow(a, " * ", b, op, what...);
  return product;
}

// ⌈a / b⌉ for a ≥ 0, b > 0, without the a + b − 1 that overflows near 2^63.
inline int64_t ceil_div_nonnegative(int64_t a, int64_t b) { return a / b + (a % b != 0); }

}  // namespace tg::detail
