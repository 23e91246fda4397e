// The sizes of one 2-D convolution, as the kernels take them (conv.cpp validates and fills them;
// conv_kernels.cpp and depthwise_conv_kernels.cpp trust them). A 1-D convolution is the 2-D one
// with H = kH = 1. Private to nn/.
#pragma once

#include <cstdint>

namespace tg::detail {

// input: [N, C_in, H, W], weight: [C_out, C_in / groups, kH, kW], output: [N, C_out, H_out, W_out].
// Output pixel (oh, ow) reads input rows oh·stride_h − pad_h + kh·dilation_h (kh < kH), likewise
// columns; reads outside [0, H) × [0, W) are zeros (other padding modes pad the input first).
struct Conv2dShape {
  int64_t N, C_in, H, W;
  int64_t C_out, kH, kW;
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  int64_t groups;
  int64_t H_out, W_out;
};

// A stride only spaces the output rows (columns): with a single one it multiplies nothing, so 1
// computes the same convolution and keeps the kernels' offsets (oh·stride·row_stride, padded plane
// sizes) within int64 for any stride the caller passes.
inline void drop_unused_strides(Conv2dShape& s) {
  if (s.H_out == 1) s.stride_h = 1;
  if (s.W_out == 1) s.stride_w = 1;
}

}  // namespace tg::detail
