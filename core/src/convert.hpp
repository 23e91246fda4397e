// Value conversions between dtypes, with PyTorch's rules where PyTorch defines them:
//   → bool            value != 0 (so NaN is true)
//   bool → number     0 or 1
//   float → int64     truncates toward zero (-2.7 → -2)
//   int64 → float     the nearest representable value
//   float64 → float32 rounds to nearest; out of range becomes ±inf
//   → bfloat16        through float32 (float64 and int64 round twice, as PyTorch), then to nearest
//                     even (BFloat16's constructor); bfloat16 → float32 is exact
// PyTorch leaves float → int64 undefined for NaN, ±inf and values outside int64's range (x86 gives
// INT64_MIN); tapegrad refuses them with tg::Error naming the value and its index.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "tapegrad/dtype.hpp"
#include "tapegrad/error.hpp"
#include "tapegrad/tensor.hpp"

namespace tg::detail {

// Whether converting `value` to To is defined: the int64 range check above, true otherwise.
template <typename To, typename From>
bool convertible(From value) {
  if constexpr (std::is_same_v<To, int64_t> && !std::numeric_limits<From>::is_integer)  // float, double, BFloat16
    return value >= From(-0x1p63) && value < From(0x1p63);  // false for NaN
  else
    return true;
}

template <typename To, typename From>
To convert_value(From value) {
  if constexpr (std::is_same_v<To, bool>)
    return value != From(0);
  else
    return static_cast<To>(value);
}

// out[i] = convert_value<To>(in[i]) for i < n, or tg::Error naming `op` before anything is written.
template <typename To, typename From>
void convert_values(const From* in, To* out, int64_t n, const char* op) {
  for (int64_t i = 0; i < n; ++i)
    check(convertible<To>(in[i]), op, "cannot convert ", in[i], " (element ", i, ") to ", dtype_of<To>(),
          ": NaN, infinities and values outside [-2^63, 2^63) have no int64 value");
  for (int64_t i = 0; i < n; ++i) out[i] = convert_value<To>(in[i]);
}

// After a file's bytes were copied into a bool tensor: any nonzero byte is true, as NumPy and
// PyTorch read it, and each byte becomes exactly 0 or 1, the only values a C++ bool may hold.
inline void normalize_bools(Tensor& t) {
  auto* bytes = reinterpret_cast<unsigned char*>(t.mutable_data<bool>());
  for (int64_t i = 0; i < t.numel(); ++i) bytes[i] = bytes[i] != 0;
}

}  // namespace tg::detail
