// n values drawn from N(0, 1) by `rng`, rounded to T: inputs for kernel tests that compare against
// a reference computed from the same values.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tg::testing {

template <typename T>
std::vector<T> random_values(int64_t n, std::mt19937& rng) {
  std::normal_distribution<double> normal;
  std::vector<T> values(static_cast<size_t>(n));
  for (T& v : values) v = static_cast<T>(normal(rng));
  return values;
}

// n values uniform on [-1, 1) in steps of 2^-31, one 32-bit draw each: operands of millions of
// elements, where the normal draws above took longer than the kernel and its check together.
template <typename T>
std::vector<T> uniform_values(int64_t n, std::mt19937& rng) {
  std::vector<T> values(static_cast<size_t>(n));
  for (T& v : values) v = static_cast<T>(static_cast<double>(rng()) * 0x1p-31 - 1.0);
  return values;
}

}  // namespace tg::testing
