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

}  // namespace tg::detail
