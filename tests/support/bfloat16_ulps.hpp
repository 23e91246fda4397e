// Comparing bfloat16 results with PyTorch's in units of bfloat16's spacing (ulp), and counting the
// elements that match exactly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>
#include <tapegrad/tapegrad.hpp>

namespace tg::testing {

// The spacing of bfloat16 values at v: 2^(e − 7) for 2^e <= |v| < 2^(e+1), and 2^−133 (the
// denormals' spacing) below 2^−126. 8 significant bits: 1 ulp is 2^−7 relative at most.
inline double bfloat16_ulp(double v) {
  const double magnitude = std::fabs(v);
  if (magnitude < 0x1p-126) return 0x1p-133;
  return std::ldexp(1.0, std::ilogb(magnitude) - 7);
}

// What a tolerance of n ulps is measured at: each expected value's own spacing, or the spacing at
// the tensor's largest magnitude (a normwise bound, for results that PyTorch computes from
// bfloat16-rounded intermediate values, whose errors scale with the largest term, not with the value).
enum class UlpsOf { Each, Largest };

// Requires `actual` (a bfloat16 tensor) to hold `expected`'s values within `ulps` bfloat16 ulps
// (NaN and ±inf exactly where expected has them); returns how many elements match exactly.
inline int64_t require_within_bfloat16_ulps(const Tensor& actual, const Tensor& expected, double ulps,
                                            UlpsOf of = UlpsOf::Each) {
  REQUIRE(actual.defined());
  REQUIRE(actual.dtype() == kBFloat16);
  REQUIRE(actual.shape() == expected.shape());
  const std::vector<double> got = actual.to(kFloat64).to_vector<double>();
  const std::vector<double> want = expected.to(kFloat64).to_vector<double>();
  double largest = 0;
  for (double v : want)
    if (std::isfinite(v)) largest = std::max(largest, std::fabs(v));
  int64_t exact = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", expected " << want[i] << " (" << ulps << " ulps of "
                    << (of == UlpsOf::Each ? "the value" : "the largest value") << " allowed)");
    if (std::isnan(want[i])) {
      CHECK(std::isnan(got[i]));
    } else if (std::isinf(want[i])) {
      CHECK(got[i] == want[i]);
    } else {
      CHECK(std::fabs(got[i] - want[i]) <= ulps * bfloat16_ulp(of == UlpsOf::Each ? want[i] : largest));
    }
    exact += got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]));
  }
  return exact;
}

}  // namespace tg::testing
