/// @file
/// tg::set_float32_matmul_precision: how float32 products are computed, as
/// torch.set_float32_matmul_precision.
///
/// @code
///   tg::set_float32_matmul_precision("medium");  // bf16 products, float32 accumulation
///   auto y = model.forward(x);                    // Linear, matmul, attention, conv: all float32 in and out
///   tg::set_float32_matmul_precision("highest");  // back to float32 products (the default)
/// @endcode
///
/// The setting applies to every float32 product: Linear (forward and both backward products),
/// matmul / bmm / baddbmm, the fused attention, the convolutions (im2col products;
/// depthwise convolutions have their own float32 kernels) and the recurrent layers. Tensors stay
/// float32; only the arithmetic inside the product changes. float64 products are never affected.
///
/// - "highest" (the default): float32 products, each element one chain of float32 multiply-adds.
/// - "medium": both factors rounded to bfloat16 (round to nearest even), their products (exact in
///   float32) summed in float32, in the same single chain. On a CPU with AVX512-BF16 this runs on
///   vdpbf16ps at twice the float32 rate; elsewhere the same arithmetic runs on float32
///   instructions with the same bits (see docs/guide/mixed-precision.md for the one bound).
/// - "high": PyTorch's meaning: bf16x3 or float32, whichever the CPU runs faster. bf16x3 is
///   faster only on matrix hardware (AMX), which tapegrad does not use yet, so "high" computes as
///   "highest" on every CPU today.
///
/// The setting is global to the process (all threads), read by each product when it runs, so a
/// backward pass uses the setting in force when it runs, as in PyTorch.
#pragma once

#include <string>
#include <string_view>

namespace tg {

/// Sets the precision of float32 products: "highest", "high" or "medium"; anything else throws
/// tg::Error naming the three.
void set_float32_matmul_precision(std::string_view precision);

/// The precision in force: "highest" (the default), "high" or "medium".
std::string get_float32_matmul_precision();

}  // namespace tg
