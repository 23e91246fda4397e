/// @file
/// Gradient clipping, as torch.nn.utils: rescale or clamp the gradients of parameters in place,
/// between backward() and optimizer.step().
///
/// @code
///   loss.backward();
///   tg::Tensor norm = tg::nn::utils::clip_grad_norm_(model.parameters(), /*max_norm=*/1.0);
///   optimizer.step();
/// @endcode
///
/// Parameters whose grad is undefined are skipped. A clipped gradient is a new tensor set with
/// set_grad (a stored gradient is never modified, only replaced); a gradient that needs no change
/// is left as it is.
#pragma once

#include <vector>

#include "tapegrad/tensor.hpp"

/// Utilities on parameters, as torch.nn.utils: gradient clipping.
namespace tg::nn::utils {

/// Scales every gradient by min(1, max_norm / (total_norm + 1e-6)), where total_norm is the
/// norm_type-norm of all gradients together (the norm of the per-parameter norms). norm_type is any
/// p (2 the Euclidean norm, 1 the sum of magnitudes, 0 the count of non-zeros, +-infinity the
/// largest / smallest magnitude). Returns total_norm as a 0-d tensor, float64 if any gradient is,
/// else float32 (0 when no parameter has a gradient). The sums are deterministic: the same bits at
/// any thread count. tg::Error for max_norm < 0 or NaN, a NaN norm_type, an undefined parameter,
/// and — only with error_if_nonfinite — a NaN or infinite total norm (nothing is changed then).
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

/// Clamps every gradient element into [-clip_value, clip_value] (NaN stays NaN). tg::Error for
/// clip_value < 0 or NaN, or an undefined parameter.
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace tg::nn::utils
