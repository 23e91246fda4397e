/// @file
/// 2-D pooling (torch.nn.functional.max_pool2d, avg_pool2d, adaptive_avg_pool2d,
/// adaptive_max_pool2d) and the modules MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, AdaptiveMaxPool2d.
///
/// @code
///   namespace F = tg::nn::functional;
///   tg::Tensor y = F::max_pool2d(x, 2);                                    // [N, C, H, W] -> [N, C, H/2, W/2]
///   auto [m, idx] = F::max_pool2d_with_indices(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true});
///   tg::Tensor a = F::avg_pool2d(x, {2, 3}, {.count_include_pad = false});
///   tg::Tensor g = F::adaptive_avg_pool2d(x, 1);                           // global average: [N, C, 1, 1]
///   tg::nn::MaxPool2d pool(2);                                             // the same as a module
/// @endcode
///
/// Inputs are [N, C, H, W] or unbatched [C, H, W], float32 or float64, with C, H, W > 0 (N may be 0).
/// Each op is one tape node with an analytic backward, differentiable again. A window's maximum is
/// its first largest element in row-major order; a NaN wins (torch's rule). Output sizes follow
/// torch: out = ⌊(in + 2·padding − dilation·(kernel − 1) − 1 + (ceil_mode ? stride − 1 : 0)) / stride⌋ + 1,
/// less one when ceil_mode would start the last window in the right padding.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "tapegrad/nn/expanding_array.hpp"
#include "tapegrad/nn/module.hpp"

namespace tg::nn {

namespace functional {

/// The options of torch.nn.functional.max_pool2d beyond the input and kernel_size.
struct MaxPool2dFuncOptions {
  std::optional<ExpandingArray<2>> stride;  ///< unset: kernel_size (torch's stride=None)
  ExpandingArray<2> padding = 0;            ///< implicit −∞ at each side, ≤ kernel_size / 2
  ExpandingArray<2> dilation = 1;           ///< spacing between the window's elements
  bool ceil_mode = false;                   ///< round the output size up (a last partial window)
};

/// torch.nn.functional.max_pool2d: x [N, C, H, W] or [C, H, W] -> the maximum of each window
/// (node MaxPool2DWithIndicesBackward; the backward sends each gradient to the window's argmax).
Tensor max_pool2d(const Tensor& x, ExpandingArray<2> kernel_size, const MaxPool2dFuncOptions& options = {});

/// max_pool2d with return_indices=True: {values, indices}, indices int64 of the values' shape
/// holding each maximum's flat position h·W + w in its input plane, as torch.
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, ExpandingArray<2> kernel_size,
                                                  const MaxPool2dFuncOptions& options = {});

}  // namespace functional

/// The options of nn.MaxPool2d beyond kernel_size: `MaxPool2d(3, {.stride = 2, .padding = 1})`.
struct MaxPool2dOptions {
  std::optional<ExpandingArray<2>> stride;  ///< unset: kernel_size
  ExpandingArray<2> padding = 0;            ///< implicit −∞ at each side, ≤ kernel_size / 2
  ExpandingArray<2> dilation = 1;           ///< spacing between the window's elements
  bool ceil_mode = false;                   ///< round the output size up
};

/// nn.MaxPool2d: F::max_pool2d with its options. forward_with_indices is return_indices=True.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(ExpandingArray<2> kernel_size, const MaxPool2dOptions& options = {});  ///< torch's arguments
  Tensor forward(const Tensor& x) override;                       ///< x: [N, C, H, W] or [C, H, W]
  std::pair<Tensor, Tensor> forward_with_indices(const Tensor& x);  ///< {values, int64 indices}
  ExpandingArray<2> kernel_size;  ///< the window's extent (kH, kW)
  MaxPool2dOptions options;       ///< stride, padding, dilation, ceil_mode
};

}  // namespace tg::nn
