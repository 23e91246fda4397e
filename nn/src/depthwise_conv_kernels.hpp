// The direct kernels of the depthwise 2-D convolution (groups == C_in, C_out = multiplier·C_in),
// compiled once per vector level (depthwise_conv_kernels.cpp, cpu/vector_isa.hpp); conv.cpp calls
// the chosen level's table. Private to nn/.
//
// A depthwise convolution does kH·kW multiply-adds per output element, too few for a GEMM to pay
// for its packing: these kernels run along the rows of each channel's plane instead, a vector of
// the level's width of W at a time.
#pragma once

#include "conv_shape.hpp"
#include "cpu/vector_isa.hpp"

namespace tg::detail {

// Every function trusts the shape (conv.cpp validated it): groups == C_in, C_out = m·C_in for a
// multiplier m ≥ 1; output channel oc = c·m + j reads input channel c. Each call is parallel inside
// (oneTBB), and its results are bitwise the same at any thread count and at every vector level
// (no fused multiply-adds: each product is rounded, then added).
template <typename T>
struct DepthwiseConvKernels {
  // x: [N, C_in, H, W]; w: [C_out, 1, kH, kW]; bias: [C_out] or null -> y: [N, C_out, H_out, W_out].
  // y = (Σ_{kh, kw} w·x, in that order, padded reads 0) + bias.
  void (*forward)(const Conv2dShape&, const T* x, const T* w, const T* bias, T* y);
  // grad_y: [N, C_out, H_out, W_out]; w: [C_out, 1, kH, kW] -> grad_x: [N, C_in, H, W] (overwritten).
  void (*backward_input)(const Conv2dShape&, const T* grad_y, const T* w, T* grad_x);
  // x: [N, C_in, H, W]; grad_y: [N, C_out, H_out, W_out] -> grad_w: [C_out, 1, kH, kW] (overwritten),
  // summed over N·H_out·W_out in an order fixed by the shape alone.
  void (*backward_weight)(const Conv2dShape&, const T* x, const T* grad_y, T* grad_w);
};

TG_DECLARE_ISA_KERNELS(DtypeKernels<DepthwiseConvKernels>, depthwise_conv_kernels)

// Whether the kernels' per-plane buffers stay near the size of a plane: the padded, phase-split
// input ((H_out − 1)·sh + (kH − 1)·dh + 1 rows of sw·⌈((W_out − 1)·sw + (kW − 1)·dw + 1) / sw⌉) and
// the gradient's ((H + (kH − 1)·dh) × (W + (kW − 1)·dw)). A huge stride, dilation or padding makes
// them far larger than the tensors (or overflow int64); such a convolution, and an empty one, runs
// on the GEMM kernels, whose buffers are bounded.
inline bool depthwise_buffers_fit(const Conv2dShape& s) {
  if (s.N == 0 || s.H_out == 0 || s.W_out == 0) return false;
  int64_t rows = 0, width = 0, input = 0, grad_rows = 0, grad_cols = 0, grad = 0;
  const bool overflow =
      __builtin_mul_overflow(s.H_out - 1, s.stride_h, &rows) ||
      __builtin_add_overflow(rows, (s.kH - 1) * s.dilation_h + 1, &rows) ||
      __builtin_mul_overflow(s.W_out - 1, s.stride_w, &width) ||
      __builtin_add_overflow(width, (s.kW - 1) * s.dilation_w + 1, &width) ||
      __builtin_add_overflow(width, s.stride_w - 1, &width) ||  // at most this, once rounded up to sw
      __builtin_mul_overflow(rows, width, &input) ||
      __builtin_add_overflow(s.H, (s.kH - 1) * s.dilation_h, &grad_rows) ||
      __builtin_add_overflow(s.W, (s.kW - 1) * s.dilation_w, &grad_cols) ||
      __builtin_mul_overflow(grad_rows, grad_cols, &grad);
  // At most 16 times the planes (plus a little): a plane's size fits, 16 times it may not.
  const int64_t planes = s.H * s.W + s.H_out * s.W_out;
  return !overflow && (input - 4096) / 16 <= planes && (grad - 4096) / 16 <= planes;
}

}  // namespace tg::detail
