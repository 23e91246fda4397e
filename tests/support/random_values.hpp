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

}  // namespace tg::testing
