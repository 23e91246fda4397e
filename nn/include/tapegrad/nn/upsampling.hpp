/// @file
/// tg::nn::functional::interpolate (nearest, bilinear) and nn::Upsample, as torch.nn.functional.interpolate
/// and nn.Upsample.
///
/// @code
///   namespace F = tg::nn::functional;
///   tg::Tensor a = F::interpolate(x, {.scale_factor = std::vector<double>{2, 2}});   // nearest, [N, C, 2H, 2W]
///   tg::Tensor b = F::interpolate(x, {.size = std::vector<int64_t>{7, 9}, .mode = "bilinear",
///                                     .align_corners = true});
///   tg::nn::Upsample up({.scale_factor = std::vector<double>{2}, .mode = "bilinear"});
/// @endcode
///
/// Both modes are one tape node each; the backward adds each output's gradient back into the input
/// elements it was computed from (the adjoint), itself differentiable again.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tapegrad/nn/module.hpp"

namespace tg::nn {

namespace functional {

/// The arguments of torch.nn.functional.interpolate beyond the input; exactly one of size and
/// scale_factor must be given, with one value (for every spatial dim) or one per spatial dim.
struct InterpolateFuncOptions {
  std::optional<std::vector<int64_t>> size = std::nullopt;        ///< the output's spatial sizes (each > 0)
  std::optional<std::vector<double>> scale_factor = std::nullopt;  ///< output size ⌊in · scale⌋ (each > 0)
  /// "nearest" (input [N, C, W] or [N, C, H, W]) or "bilinear" ([N, C, H, W]).
  std::string mode = "nearest";
  /// bilinear only (unset means false): true maps the corner pixels' centres onto each other,
  /// false (torch's default) maps the corners of the pixel grids (half-pixel centres).
  std::optional<bool> align_corners = std::nullopt;
  /// With scale_factor: true computes the output size and then forgets the factor (the
  /// coordinates follow the sizes); unset or false uses 1/scale_factor for the coordinates.
  std::optional<bool> recompute_scale_factor = std::nullopt;
};

/// torch.nn.functional.interpolate, modes nearest and bilinear: input [N, C, W] or [N, C, H, W]
/// (batched, as torch) -> [N, C, out...]. Nearest reads input ⌊o · scale⌋ (scale = in/out, or
/// 1/scale_factor); bilinear weighs the two neighbours along each axis
/// (nodes UpsampleNearest1DBackward, UpsampleNearest2DBackward, UpsampleBilinear2DBackward).
Tensor interpolate(const Tensor& input, const InterpolateFuncOptions& options = {});

}  // namespace functional

/// The options of nn.Upsample: as InterpolateFuncOptions without recompute_scale_factor.
struct UpsampleOptions {
  std::optional<std::vector<int64_t>> size = std::nullopt;        ///< the output's spatial sizes
  std::optional<std::vector<double>> scale_factor = std::nullopt;  ///< or the factor per spatial dim
  std::string mode = "nearest";                     ///< "nearest" or "bilinear"
  std::optional<bool> align_corners = std::nullopt;                ///< bilinear only; unset means false
};

/// nn.Upsample: F::interpolate with its options.
class Upsample : public Module {
 public:
  explicit Upsample(const UpsampleOptions& options = {});  ///< size or scale_factor, mode, align_corners
  Tensor forward(const Tensor& x) override;                ///< x: [N, C, W] or [N, C, H, W]
  UpsampleOptions options;                                 ///< as given
};

}  // namespace tg::nn
