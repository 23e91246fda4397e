/// @file
/// tg::autocast: mixed precision by op, as torch.autocast("cpu", dtype=torch.bfloat16).
///
/// @code
///   for (auto& batch : loader) {
///     tg::Tensor loss;
///     {
///       tg::autocast bf16;                         // this thread, until the end of the scope
///       loss = tg::nn::cross_entropy(model(batch.data), batch.target);
///     }
///     optimizer.zero_grad();
///     loss.backward();                             // float32 gradients for the float32 parameters
///     optimizer.step();
///   }
/// @endcode
///
/// While an autocast guard is alive, each op runs in the dtype PyTorch 1.13's CPU autocast gives it:
/// - in bfloat16, its float32 operands cast first: the products — Linear, matmul / bmm / baddbmm,
///   conv1d / conv2d — and the fused scaled_dot_product_attention (as PyTorch 2's list);
/// - in float32, its bfloat16 operands cast first: the losses (cross_entropy, nll_loss, mse_loss,
///   l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy(_with_logits)), prod,
///   conv_transpose2d, the reflect and replicate modes of pad;
/// - every other op in its inputs' dtype, with PyTorch's promotion (float32 + bfloat16 is float32).
///
/// Parameters stay float32 (the "master" copy): a float32 leaf that requires grad is cast to
/// bfloat16 once per autocast region and the cast reused (PyTorch's cast cache; a cast is made
/// again after an in-place update of the parameter), and its gradient arrives in float32. The
/// backward pass runs the dtypes of the forward, with autocast off, wherever backward is called.
/// A product of bfloat16 tensors is a bf16 GEMM: exact products summed in float32, on
/// vdpbf16ps where the CPU has AVX512-BF16 (docs/guide/mixed-precision.md).
///
/// The state is per thread, as PyTorch's. Guards nest: an inner
/// `tg::autocast off({.enabled = false});` runs its scope in full precision. A guard must be a named
/// object: `tg::autocast({...});` alone makes a temporary that ends at the semicolon.
#pragma once

#include "tapegrad/dtype.hpp"

namespace tg {

/// The arguments of torch.autocast on the CPU.
struct AutocastOptions {
  DType dtype = kBFloat16;    ///< the lower precision; bfloat16 is the CPU's only one
  bool enabled = true;        ///< false: the scope runs every op in its inputs' dtype
  bool cache_enabled = true;  ///< reuse the bfloat16 cast of each parameter within the region
};

/// While alive, ops on this thread run in the dtypes of PyTorch's CPU autocast (see the file
/// comment). tg::Error for a dtype other than bfloat16. The outermost guard's destruction frees the
/// cached casts.
class autocast {
 public:
  // [[nodiscard]]: `tg::autocast({...});` alone would be a temporary that ends at the semicolon, a
  // guard that guards nothing; the compiler warns about it.
  [[nodiscard]] autocast() : autocast(AutocastOptions{}) {}  ///< on, in bfloat16, with the cast cache
  /// With torch.autocast's arguments: `tg::autocast region({.enabled = use_bf16});`.
  [[nodiscard]] explicit autocast(const AutocastOptions& options);
  ~autocast();
  autocast(const autocast&) = delete;
  autocast& operator=(const autocast&) = delete;

 private:
  bool enabled_before_;
  DType dtype_before_;
  bool cache_enabled_before_;
};

/// Whether autocast is on for this thread (torch.is_autocast_cpu_enabled).
bool is_autocast_cpu_enabled();
/// The lower-precision dtype of autocast on this thread (torch.get_autocast_cpu_dtype): bfloat16.
DType get_autocast_cpu_dtype();
/// Frees the cached parameter casts of this thread (torch.clear_autocast_cache).
void clear_autocast_cache();

}  // namespace tg
