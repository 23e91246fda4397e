// The dense (and grouped) convolution kernels on core's GEMM, compiled once per vector level
// (conv_kernels.cpp, cpu/vector_isa.hpp); conv.cpp validates the sizes and calls the chosen
// level's table. Private to nn/.
#pragma once

#include "conv_shape.hpp"
#include "cpu/vector_isa.hpp"

namespace tg::detail {

// Shapes as in conv_shape.hpp: x [N, C_in, H, W], w [C_out, C_in / groups, kH, kW],
// y [N, C_out, H_out, W_out], all contiguous. Each call runs in parallel inside (oneTBB) over
// pieces fixed by the sizes, and writes the same bits at any thread count.
template <typename T>
struct ConvKernels {
  // y = conv(x, w) + bias (bias [C_out] or null); overwrites y.
  void (*forward)(const Conv2dShape&, const T* x, const T* w, const T* bias, T* y);
  // grad_x = the adjoint of x ↦ conv(x, w) applied to grad_y (conv_transpose2d); overwrites grad_x.
  void (*backward_input)(const Conv2dShape&, const T* grad_y, const T* w, T* grad_x);
  // grad_w = the adjoint of w ↦ conv(x, w) applied to grad_y; overwrites grad_w, summed over the
  // images in a fixed order.
  void (*backward_weight)(const Conv2dShape&, const T* x, const T* grad_y, T* grad_w);
};

TG_DECLARE_ISA_KERNELS(DtypeKernels<ConvKernels>, conv_kernels)

}  // namespace tg::detail
