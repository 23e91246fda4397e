/// @file
/// tg::nn::functional::pad and the padding modules (torch.nn.functional.pad, nn.ZeroPad2d,
/// nn.ConstantPad2d, nn.ReflectionPad2d, nn.ReplicationPad2d).
///
/// @code
///   namespace F = tg::nn::functional;
///   tg::Tensor y = F::pad(x, {1, 1, 2, 0});                       // W: 1 left, 1 right; H: 2 top
///   tg::Tensor r = F::pad(x, {2, 2, 2, 2}, {.mode = "reflect"});  // x: [N, C, H, W] or [C, H, W]
///   tg::nn::ReflectionPad2d layer(2);                              // the same as a module
/// @endcode
///
/// `pad` lists (before, after) pairs starting from the LAST dim, as torch: {left, right, top,
/// bottom, ...}. A negative entry removes that many elements at that side. Each mode is one tape
/// node whose backward adds the gradient back into the elements read (its adjoint), itself
/// differentiable again.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tapegrad/nn/expanding_array.hpp"
#include "tapegrad/nn/module.hpp"

namespace tg::nn {

namespace functional {

/// The options of torch.nn.functional.pad beyond the input and the pads.
struct PadFuncOptions {
  /// "constant" (fill with `value`), "reflect" (mirror without repeating the edge), "replicate"
  /// (repeat the edge), or "circular" (wrap around).
  std::string mode = "constant";
  double value = 0;  ///< the fill of mode "constant"; any other mode refuses a non-zero value
};

/// torch.nn.functional.pad: `pad` holds 2·k sizes, (before, after) for the last k dims from the
/// last one back. Mode "constant": any k ≤ x.dim(), negative pads crop, an output dim may become 0
/// but not negative. Modes "reflect", "replicate", "circular": k = 1, 2 or 3 on an input of k + 1
/// or k + 2 dims (unbatched or batched); the padded dims must be non-empty; reflect needs each pad
/// < the dim's size, circular ≤ it (a negative pad crops first, then the cropped tensor is
/// padded). Nodes ConstantPadNdBackward, ReflectionPadBackward, ReplicationPadBackward,
/// CircularPadBackward.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, const PadFuncOptions& options = {});

}  // namespace functional

/// Pads the last two dims of [N, C, H, W] or [C, H, W] by {left, right, top, bottom}: `2` means 2
/// on every side, as torch's padding argument of the 2-D padding modules.
class PaddingSize2d {
 public:
  PaddingSize2d(int64_t p) : values_{p, p, p, p} {}  // NOLINT(google-explicit-constructor): `ZeroPad2d(1)` as torch
  /// {left, right, top, bottom}; any other count is a tg::Error.
  PaddingSize2d(std::initializer_list<int64_t> p) : PaddingSize2d(std::vector<int64_t>(p)) {}
  /// As the initializer list.
  PaddingSize2d(const std::vector<int64_t>& p);  // NOLINT(google-explicit-constructor)
  const std::vector<int64_t>& values() const { return values_; }  ///< {left, right, top, bottom}

 private:
  std::vector<int64_t> values_;
};

/// nn.ZeroPad2d: F::pad(x, padding) with zeros.
class ZeroPad2d : public Module {
 public:
  explicit ZeroPad2d(PaddingSize2d padding);  ///< {left, right, top, bottom}, or one size for all
  Tensor forward(const Tensor& x) override;   ///< x: [N, C, H, W] or [C, H, W]
  std::vector<int64_t> padding;               ///< {left, right, top, bottom}
};

/// nn.ConstantPad2d: F::pad(x, padding, {.value = value}).
class ConstantPad2d : public Module {
 public:
  ConstantPad2d(PaddingSize2d padding, double value);  ///< the sizes and the fill
  Tensor forward(const Tensor& x) override;            ///< x: [N, C, H, W] or [C, H, W]
  std::vector<int64_t> padding;                        ///< {left, right, top, bottom}
  double value;                                        ///< the fill
};

/// nn.ReflectionPad2d: F::pad(x, padding, {.mode = "reflect"}).
class ReflectionPad2d : public Module {
 public:
  explicit ReflectionPad2d(PaddingSize2d padding);  ///< each size < the padded dim's size
  Tensor forward(const Tensor& x) override;         ///< x: [N, C, H, W] or [C, H, W]
  std::vector<int64_t> padding;                     ///< {left, right, top, bottom}
};

/// nn.ReplicationPad2d: F::pad(x, padding, {.mode = "replicate"}).
class ReplicationPad2d : public Module {
 public:
  explicit ReplicationPad2d(PaddingSize2d padding);  ///< {left, right, top, bottom}, or one size for all
  Tensor forward(const Tensor& x) override;          ///< x: [N, C, H, W] or [C, H, W]
  std::vector<int64_t> padding;                      ///< {left, right, top, bottom}
};

}  // namespace tg::nn
