// The softmax family's backward along one line, written once: ops/softmax.cpp runs it on every
// line, and exp_row_kernels.cpp compiles it per vector level for contiguous float32 rows. Private to the
// library.
#pragma once

#include <cmath>
#include <cstdint>

#include "cpu/isa_namespace.hpp"
#include "deterministic_sum.hpp"

namespace tg::detail {
inline namespace TG_ISA_HELPERS {

// The sums along a line that the backward needs (here in lane_sum's order): Σ_k v_k and Σ_k a_k b_k in
// double, and r_k = exp(v_k). This one reads a line at any stride; exp_row_kernels.cpp's contiguous float32
// rows have one in the level's vectors that adds the same terms in a tree order of its own.
template <typename T, typename Stride>
struct StridedLine {
  int64_t n;
  Stride stride;
  double sum(const T* v) const {
    return lane_sum(n, [&](int64_t k) { return static_cast<double>(v[k * stride]); });
  }
  double dot(const T* a, const T* b) const {
    return lane_sum(n, [&](int64_t k) { return static_cast<double>(a[k * stride]) * static_cast<double>(b[k * stride]); });
  }
  void exp_into(const T* v, T* r) const {
    for (int64_t k = 0; k < n; ++k) r[k * stride] = std::exp(v[k * stride]);
  }
};

// grad (dy), out (y), result (dx): lines of line.n elements at line.stride; only the saved output
// is needed:
//   softmax:      dx_k = y_k (dy_k − Σ_j dy_j y_j)
//   log_softmax:  dx_k = dy_k − exp(y_k) Σ_j dy_j
template <bool Log, typename T, typename Line>
void softmax_backward_line(const T* grad, const T* out, T* result, const Line& line) {
  const int64_t n = line.n;
  const auto stride = line.stride;
  if constexpr (Log) {
    const T grad_sum = static_cast<T>(line.sum(grad));
    line.exp_into(out, result);
    for (int64_t k = 0; k < n; ++k) result[k * stride] = grad[k * stride] - result[k * stride] * grad_sum;
  } else {
    const T dot = static_cast<T>(line.dot(grad, out));
    for (int64_t k = 0; k < n; ++k) result[k * stride] = out[k * stride] * (grad[k * stride] - dot);
  }
}

}  // namespace TG_ISA_HELPERS
}  // namespace tg::detail
