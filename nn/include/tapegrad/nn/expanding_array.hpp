/// @file
/// tg::nn::ExpandingArray — libtorch's argument type for per-dimension sizes: one value for every
/// dimension, or exactly one value per dimension.
///
/// @code
///   tg::nn::Conv2d conv(3, 16, 3);                           // kernel_size 3 means {3, 3}
///   tg::nn::Conv2d wide(3, 16, {3, 5}, {.stride = {1, 2}});  // one value per dimension
/// @endcode
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tapegrad/error.hpp"

namespace tg::nn {

/// D sizes (a kernel's extent, a stride, a padding per spatial dimension), written as one value
/// repeated for every dimension or as D values, as torch::ExpandingArray<D>. Any other count is a
/// tg::Error naming both counts.
template <size_t D>
class ExpandingArray {
 public:
  /// The same value for every dimension: `3` means {3, 3} for D = 2.
  ExpandingArray(int64_t value) { values_.fill(value); }  // NOLINT(google-explicit-constructor): `.stride = 2` reads as PyTorch
  /// One value per dimension, in order: `{1, 2}` for (height, width).
  ExpandingArray(std::initializer_list<int64_t> values) : ExpandingArray(std::vector<int64_t>(values)) {}
  /// As the initializer list; a vector of one value also expands.
  ExpandingArray(const std::vector<int64_t>& values) {  // NOLINT(google-explicit-constructor)
    if (values.size() == 1) {
      values_.fill(values[0]);
      return;
    }
    if (values.size() != D)
      throw Error("ExpandingArray: expected 1 or " + std::to_string(D) + " values, got " +
                  std::to_string(values.size()));
    for (size_t i = 0; i < D; ++i) values_[i] = values[i];
  }

  int64_t operator[](size_t i) const { return values_[i]; }   ///< the i-th dimension's value
  const std::array<int64_t, D>& values() const { return values_; }  ///< all D values
  std::vector<int64_t> vec() const { return {values_.begin(), values_.end()}; }  ///< as a vector
  static constexpr size_t size() { return D; }                 ///< D
  bool operator==(const ExpandingArray&) const = default;      ///< value equality

 private:
  std::array<int64_t, D> values_{};
};

}  // namespace tg::nn
