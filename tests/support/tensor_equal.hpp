// Exact comparison of tensors of any dtype, for tests whose expected values are exact (integers,
// bools, conversions): the same dtype, the same shape and identical elements, where NaN equals NaN
// and -0.0 differs from 0.0 (a conversion that loses a sign is a bug).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include <tapegrad/tapegrad.hpp>

namespace tg::testing {

template <typename T>
bool same_elements(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a[i]) && std::isnan(b[i])) continue;
      if (a[i] != b[i] || std::signbit(a[i]) != std::signbit(b[i])) return false;
    } else if (a[i] != b[i]) {
      return false;
    }
  }
  return true;
}

inline bool equal(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  switch (a.dtype()) {
    case DType::Float32: return same_elements(a.to_vector<float>(), b.to_vector<float>());
    case DType::Float64: return same_elements(a.to_vector<double>(), b.to_vector<double>());
    case DType::Int64: return same_elements(a.to_vector<int64_t>(), b.to_vector<int64_t>());
    case DType::Bool: return same_elements(a.to_vector<bool>(), b.to_vector<bool>());
    case DType::BFloat16: {  // the bits, any NaN equal to any other as above
      const std::vector<BFloat16> x = a.to_vector<BFloat16>(), y = b.to_vector<BFloat16>();
      for (size_t i = 0; i < x.size(); ++i)
        if (x[i].bits != y[i].bits && !(std::isnan(float(x[i])) && std::isnan(float(y[i])))) return false;
      return true;
    }
  }
  return false;
}

// An int64 tensor holding exactly `values` (tg::tensor goes through double, exact only to 2^53).
inline Tensor int64_tensor(const std::vector<int64_t>& values) {
  Tensor t = empty({static_cast<int64_t>(values.size())}, kInt64);
  std::copy(values.begin(), values.end(), t.mutable_data<int64_t>());
  return t;
}

}  // namespace tg::testing

// REQUIRE that two tensors are equal as tg::testing::equal defines it, printing both otherwise.
#define TG_REQUIRE_EQUAL(actual, expected)                                                       \
  do {                                                                                           \
    const ::tg::Tensor tg_equal_actual_ = (actual), tg_equal_expected_ = (expected);             \
    INFO("actual:   " << tg_equal_actual_ << "\nexpected: " << tg_equal_expected_);             \
    REQUIRE(::tg::testing::equal(tg_equal_actual_, tg_equal_expected_));                        \
  } while (false)
