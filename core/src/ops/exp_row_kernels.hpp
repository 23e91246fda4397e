// The float32 row kernels of the softmax family and cross-entropy (their max, exp and sum passes),
// compiled once per vector level (exp_row_kernels.cpp, cpu/vector_isa.hpp); ops/softmax.cpp and nn's
// cross_entropy.cpp call the chosen level's on contiguous float32 rows. Private to the library.
#pragma once

#include <cstdint>

#include "cpu/vector_isa.hpp"

namespace tg::detail {

struct ExpRowKernels {
  // x: [n] -> max_k x_k, NaN skipped as std::max(best, x_k) skips it; −inf for n = 0.
  float (*max)(const float* x, int64_t n);
  // x: [n], shift -> Σ_k e_k in double (16 interleaved accumulators folded as a fixed tree, then
  // the tail one by one: the same order at every level), where e_k = exp(x_k − shift) in float (simd_exp.hpp's exp_float: within 0.78 ulp of
  // e^(x_k − shift), the difference taken exactly; 0 below e^−103.97, +∞ above e^88.72) and,
  // unless `out` is null, out[k] = e_k: [n].
  double (*sum_exp)(const float* x, double shift, float* out, int64_t n);
  // x: [n] -> out: [n], out[k] = scale · e_k (sum_exp's e_k) taken in double and rounded once to
  // float: e_k itself for scale = 1. Cross-entropy's backward, scale · softmax.
  void (*scaled_exp)(const float* x, double shift, double scale, float* out, int64_t n);
  // e: [n] -> out: [n], out[k] = scale · e[k] in float: scale rounded to float, the product
  // rounded (within 1 ulp of the exact product). Cross-entropy's backward from the e_k its forward
  // kept (sum_exp's out): a · e_k / Σe.
  void (*scale)(const float* e, double scale, float* out, int64_t n);
  // x: [rows, n] -> shift: [rows], sum: [rows], e: [rows, n] (unless null): each row's max and
  // sum_exp at it (with its e_k). Cross-entropy, a chunk of rows per call.
  void (*max_sum_exp)(const float* x, int64_t rows, int64_t n, float* e, double* shift, double* sum);
  // x: [rows, n] -> y: [rows, n], softmax of each row (log_softmax when `log`): max, sum_exp and
  // the scale (or the shift by the log of the sum), every pass in the level's vectors.
  void (*softmax_forward)(const float* x, float* y, int64_t rows, int64_t n, bool log);
  // dy, y: [rows, n] -> dx: [rows, n], softmax's backward (log_softmax's when `log`) of each row,
  // ops/softmax_rows.hpp's formulas.
  void (*softmax_backward)(const float* dy, const float* y, float* dx, int64_t rows, int64_t n, bool log);
};

TG_DECLARE_ISA_KERNELS(ExpRowKernels, exp_row_kernels)

}  // namespace tg::detail
