/// @file
/// tg::nn::Conv1d, Conv2d, ConvTranspose2d and their functional forms — convolution over NCHW
/// (NCL) tensors with PyTorch's options, names and defaults.
///
/// @code
///   namespace F = tg::nn::functional;
///   tg::nn::Conv2d conv(3, 16, 3, {.padding = 1});              // nn.Conv2d(3, 16, 3, padding=1)
///   tg::Tensor y = conv(tg::randn({8, 3, 32, 32}));            // [8, 16, 32, 32]
///   tg::Tensor z = F::conv2d(y, conv.weight, {.padding = "same", .groups = 1});  // [8, 16, 32, 32]
/// @endcode
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tapegrad/nn/expanding_array.hpp"
#include "tapegrad/nn/module.hpp"
#include "tapegrad/tensor.hpp"

namespace tg::nn {

/// A convolution's padding: explicit sizes per spatial dimension (as ExpandingArray: one value
/// for all, or D values), or the strings "valid" (no padding) and "same" (the output has the
/// input's size; stride 1 only; an odd total padding puts the extra row/column at the end, as
/// PyTorch does). Any other string is a tg::Error.
template <size_t D>
class ConvPadding {
 public:
  /// The same size on every side of every dimension: `.padding = 1`. (An int overload of its
  /// own, so that a literal 0 is a size, not a null `const char*`.)
  ConvPadding(int p) : values_(p) {}  // NOLINT(google-explicit-constructor)
  /// As the int: the same size everywhere.
  ConvPadding(int64_t p) : values_(p) {}  // NOLINT(google-explicit-constructor)
  /// One value per dimension, in order: `{1, 2}` for (height, width).
  ConvPadding(std::initializer_list<int64_t> p) : values_(p) {}
  /// As the initializer list.
  ConvPadding(const std::vector<int64_t>& p) : values_(p) {}  // NOLINT(google-explicit-constructor)
  /// The sizes of an ExpandingArray.
  ConvPadding(const ExpandingArray<D>& p) : values_(p) {}  // NOLINT(google-explicit-constructor)
  /// "same" or "valid"; anything else throws tg::Error naming the accepted values.
  ConvPadding(const char* mode) : ConvPadding(std::string(mode)) {}  // NOLINT(google-explicit-constructor)
  /// "same" or "valid"; anything else throws tg::Error naming the accepted values.
  ConvPadding(std::string mode) : values_(0), mode_(std::move(mode)) {  // NOLINT(google-explicit-constructor)
    if (mode_ != "same" && mode_ != "valid")
      throw Error("conv: invalid padding string '" + mode_ + "', should be one of {'valid', 'same'}");
  }

  bool is_same() const { return mode_ == "same"; }    ///< padding = "same"
  bool is_valid() const { return mode_ == "valid"; }  ///< padding = "valid" (no padding)
  /// "same", "valid", or "" for explicit sizes.
  const std::string& mode() const { return mode_; }
  /// The explicit sizes (zeros for "valid"; not meaningful for "same").
  const ExpandingArray<D>& values() const { return values_; }

 private:
  ExpandingArray<D> values_;
  std::string mode_;
};

/// The functional forms (torch.nn.functional.conv1d, conv2d, conv_transpose2d).
namespace functional {

/// conv1d's optional arguments (torch::nn::functional::Conv1dFuncOptions).
struct Conv1dFuncOptions {
  Tensor bias{};                      ///< [C_out], or absent (the default)
  ExpandingArray<1> stride = 1;       ///< step between output positions
  ConvPadding<1> padding = 0;       ///< zeros on both ends, or "same" / "valid"
  ExpandingArray<1> dilation = 1;     ///< spacing between kernel taps
  int64_t groups = 1;                 ///< C_in and C_out split into this many independent groups
};

/// conv2d's optional arguments (torch::nn::functional::Conv2dFuncOptions).
struct Conv2dFuncOptions {
  Tensor bias{};                      ///< [C_out], or absent (the default)
  ExpandingArray<2> stride = 1;       ///< (height, width) step between output pixels
  ConvPadding<2> padding = 0;       ///< zeros on each side, or "same" / "valid"
  ExpandingArray<2> dilation = 1;     ///< spacing between kernel taps
  int64_t groups = 1;                 ///< C_in and C_out split into this many independent groups
};

/// conv_transpose2d's optional arguments (torch::nn::functional::ConvTranspose2dFuncOptions).
struct ConvTranspose2dFuncOptions {
  Tensor bias{};                          ///< [C_out], or absent (the default)
  ExpandingArray<2> stride = 1;           ///< the stride of the convolution this one transposes
  ExpandingArray<2> padding = 0;          ///< that convolution's padding: removed from the output's borders
  ExpandingArray<2> output_padding = 0;   ///< extra rows/columns at the end (< stride or < dilation)
  int64_t groups = 1;                     ///< independent groups
  ExpandingArray<2> dilation = 1;         ///< spacing between kernel taps
};

/// input [N, C_in, L] or [C_in, L], weight [C_out, C_in/groups, k] -> [N, C_out, L_out]
/// (node ConvolutionBackward)
Tensor conv1d(const Tensor& input, const Tensor& weight, const Conv1dFuncOptions& options = {});
/// input [N, C_in, H, W] or [C_in, H, W], weight [C_out, C_in/groups, kH, kW] ->
/// [N, C_out, H_out, W_out], H_out = ⌊(H + 2·pad − dilation·(kH − 1) − 1)/stride⌋ + 1
/// (node ConvolutionBackward)
Tensor conv2d(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& options = {});
/// The adjoint of conv2d's input (its gradient with respect to the input): input [N, C_in, H, W]
/// or [C_in, H, W], weight [C_in, C_out/groups, kH, kW] -> [N, C_out, H_out, W_out],
/// H_out = (H − 1)·stride − 2·pad + dilation·(kH − 1) + output_padding + 1
/// (node ConvolutionBackward)
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const ConvTranspose2dFuncOptions& options = {});

}  // namespace functional

/// Conv1d's options (torch::nn::Conv1dOptions without the sizes).
struct Conv1dOptions {
  bool bias = true;                     ///< false: no bias parameter
  ExpandingArray<1> stride = 1;         ///< step between output positions
  ConvPadding<1> padding = 0;           ///< sizes, or "same" / "valid"
  ExpandingArray<1> dilation = 1;       ///< spacing between kernel taps
  int64_t groups = 1;                   ///< independent channel groups
  std::string padding_mode = "zeros";   ///< zeros, reflect, replicate or circular
};

/// Conv2d's options (torch::nn::Conv2dOptions without the sizes).
struct Conv2dOptions {
  bool bias = true;                     ///< false: no bias parameter
  ExpandingArray<2> stride = 1;         ///< (height, width) step between output pixels
  ConvPadding<2> padding = 0;           ///< sizes, or "same" / "valid"
  ExpandingArray<2> dilation = 1;       ///< spacing between kernel taps
  int64_t groups = 1;                   ///< independent channel groups
  std::string padding_mode = "zeros";   ///< zeros, reflect, replicate or circular
};

/// ConvTranspose2d's options (torch::nn::ConvTranspose2dOptions without the sizes).
struct ConvTranspose2dOptions {
  bool bias = true;                          ///< false: no bias parameter
  ExpandingArray<2> stride = 1;              ///< the transposed convolution's stride
  ExpandingArray<2> padding = 0;             ///< removed from the output's borders
  ExpandingArray<2> output_padding = 0;      ///< extra rows/columns at the end
  int64_t groups = 1;                        ///< independent channel groups
  ExpandingArray<2> dilation = 1;            ///< spacing between kernel taps
};

/// 1-D convolution over [N, C_in, L] (nn.Conv1d). weight and bias drawn as PyTorch does:
/// kaiming_uniform_(a = √5), then U(±1/√fan_in), fan_in = C_in/groups · k, from the global generator.
class Conv1d : public Module {
 public:
  /// in_channels → out_channels with a kernel of kernel_size taps.
  Conv1d(int64_t in_channels, int64_t out_channels, ExpandingArray<1> kernel_size, const Conv1dOptions& options = {});
  Tensor forward(const Tensor& x) override;  ///< [N, C_in, L] or [C_in, L] -> [N, C_out, L_out]
  void members(Members& m) override;

  Parameter weight;       ///< [out_channels, in_channels/groups, k]
  Parameter bias;         ///< [out_channels], or absent
  Conv1dOptions options;  ///< as constructed
  ExpandingArray<1> kernel_size;  ///< k
};

/// 2-D convolution over [N, C_in, H, W] (nn.Conv2d). weight and bias drawn as PyTorch does:
/// kaiming_uniform_(a = √5), then U(±1/√fan_in), fan_in = C_in/groups · kH · kW.
class Conv2d : public Module {
 public:
  /// in_channels → out_channels with a kernel_size window.
  Conv2d(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size, const Conv2dOptions& options = {});
  Tensor forward(const Tensor& x) override;  ///< [N, C_in, H, W] or [C_in, H, W] -> [N, C_out, H_out, W_out]
  void members(Members& m) override;

  Parameter weight;       ///< [out_channels, in_channels/groups, kH, kW]
  Parameter bias;         ///< [out_channels], or absent
  Conv2dOptions options;  ///< as constructed
  ExpandingArray<2> kernel_size;  ///< (kH, kW)
};

/// 2-D transposed convolution (nn.ConvTranspose2d): the adjoint of Conv2d's input. Its weight is
/// drawn as PyTorch does, with fan_in = out_channels/groups · kH · kW (the weight's dim 1).
class ConvTranspose2d : public Module {
 public:
  /// in_channels → out_channels with a kernel_size window.
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size,
                  const ConvTranspose2dOptions& options = {});
  Tensor forward(const Tensor& x) override;  ///< [N, C_in, H, W] or [C_in, H, W] -> [N, C_out, H_out, W_out]
  void members(Members& m) override;

  Parameter weight;                ///< [in_channels, out_channels/groups, kH, kW]
  Parameter bias;                  ///< [out_channels], or absent
  ConvTranspose2dOptions options;  ///< as constructed
  ExpandingArray<2> kernel_size;   ///< (kH, kW)
};

}  // namespace tg::nn
