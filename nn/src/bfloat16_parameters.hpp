// The norms' bfloat16 route (layer_norm, group_norm, rms_norm, batch_norm): a bfloat16 input with
// parameters that are all bfloat16 or all float32. Private to nn/.
#pragma once

#include "bfloat16_compute.hpp"
#include "tapegrad/tensor.hpp"

namespace tg::nn::detail {

// Whether x is bfloat16 and its parameters (undefined ones skipped) are all bfloat16 or all
// float32. Such a call computes in float32 and rounds its output once (tg::detail::in_float32, which
// widens only the bfloat16 operands): float32 parameters are used as they are and get float32
// gradients, as PyTorch's mixed-type norm kernels (batch_norm's since 1.12, layer_norm's and
// group_norm's since 2.0) do with a bfloat16 activation under autocast. Any other mix is left to
// the op's dtype check, which names the two dtypes.
template <typename... Tensors>
bool bfloat16_input_with_parameters(const Tensor& x, const Tensors&... parameters) {
  const auto all_of = [&](DType dtype) { return ((!parameters.defined() || parameters.dtype() == dtype) && ...); };
  return tg::detail::is_bfloat16(x) && (all_of(kBFloat16) || all_of(kFloat32));
}

}  // namespace tg::nn::detail
