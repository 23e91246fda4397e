// The softmax family's backward along one line, written once: ops/softmax.cpp runs it on every
// line, and exp_rows.cpp compiles it per vector level for contiguous float32 rows. Private to the
// library.
#pragma once

#include <cstdint>

#include "cpu/isa_namespace.hpp"
#include "deterministic_sum.hpp"

namespace tg::detail {
inline namespace TG_ISA_HELPERS {

// grad (dy), out (y), result (dx): lines of n elements at `stride`; only the saved output is needed:
//   softmax:      dx_k = y_k (dy_k − Σ_j dy_j y_j)
//   log_softmax:  dx_k = dy_k − exp(y_k) Σ_j dy_j
// exp_into(y, r) writes r_k = exp(y_k) along the line (log_softmax only).
template <bool Log, typename T, typename Stride, typename ExpInto>
void softmax_backward_line(const T* grad, const T* out, T* result, int64_t n, Stride stride, const ExpInto& exp_into) {
  if constexpr (Log) {
    const T grad_sum = static_cast<T>(lane_sum(n, [&](int64_t k) { return static_cast<double>(grad[k * stride]); }));
    exp_into(out, result);
    for (int64_t k = 0; k < n; ++k) result[k * stride] = grad[k * stride] - result[k * stride] * grad_sum;
  } else {
    const T dot = static_cast<T>(lane_sum(
        n, [&](int64_t k) { return static_cast<double>(grad[k * stride]) * static_cast<double>(out[k * stride]); }));
    for (int64_t k = 0; k < n; ++k) result[k * stride] = out[k * stride] * (grad[k * stride] - dot);
  }
}

}  // namespace TG_ISA_HELPERS
}  // namespace tg::detail
