/// @file
/// tg::nn::functional::scaled_dot_product_attention — softmax(q·kᵀ·scale + mask)·v as one fused
/// op (PyTorch 2.x's torch.nn.functional.scaled_dot_product_attention):
/// @code
///   namespace F = tg::nn::functional;
///   // q: [B, H, L, E], k: [B, H, S, E], v: [B, H, S, Ev] -> [B, H, L, Ev]
///   tg::Tensor y = F::scaled_dot_product_attention(q, k, v, {.is_causal = true});
///   tg::Tensor z = F::scaled_dot_product_attention(q, k, v, {.attn_mask = keep, .scale = 0.125});
/// @endcode
///
/// The kernel is FlashAttention's: tiles of queries meet tiles of keys with an online softmax
/// (a running maximum and sum per query), the output is accumulated per query tile, and only each
/// query's log-sum-exp is saved for backward, which recomputes the probabilities tile by tile.
/// Memory is O(B·H·(L + S)·E), never O(L·S); causal tiles entirely above the diagonal are skipped.
/// Results are bitwise identical at any thread count.
#pragma once

#include <optional>

#include "tapegrad/generator.hpp"
#include "tapegrad/tensor.hpp"

namespace tg::nn::functional {

/// The optional arguments of scaled_dot_product_attention, by PyTorch's names and defaults.
struct ScaledDotProductAttentionOptions {
  /// Absent, or broadcastable to [..., L, S]: bool (true = the query may attend to the key) or
  /// of the query's floating dtype (added to the scores; −inf masks). Not differentiated: a mask
  /// that requires grad is an error.
  Tensor attn_mask = {};
  /// Dropout on the attention weights, in [0, 1]; applied whenever > 0 (as PyTorch, which has no
  /// training flag here: a module passes 0 in eval mode). The kept weights are scaled by 1/(1 − p).
  double dropout_p = 0.0;
  /// Mask with the lower triangle, diagonal included, aligned top-left as PyTorch's: query i sees
  /// keys 0…i. Together with attn_mask an error, as in PyTorch.
  bool is_causal = false;
  /// The factor of the scores; unset: 1/√E.
  std::optional<double> scale = std::nullopt;
  /// Dropout's draws; the default generator when null.
  Generator* generator = nullptr;
};

/// Attention: softmax(query·keyᵀ·scale + mask)·value over the last two dims  (node
/// ScaledDotProductAttentionBackward).
///
/// query [..., L, E], key [..., S, E], value [..., S, Ev] with equal leading dims, float32,
/// float64 or bfloat16 (one dtype; bfloat16 computed in float32 and rounded once, a float32 mask
/// taken with it) -> [..., L, Ev]. A query whose every key is masked gets a zero output row
/// (and zero gradients), as PyTorch ≥ 2.5 (its math path's safe softmax and its CPU flash kernel;
/// 2.0–2.4 gave NaN). With dropout_p > 0 a weight is kept with probability 1 − p from a
/// counter-based stream seeded by one draw of the generator, so a seed reproduces the result
/// (forward and backward, at any thread count) but the kept set differs from PyTorch's. Shapes,
/// dtypes and the mask are checked here and a tg::Error names them.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const ScaledDotProductAttentionOptions& options = {});

}  // namespace tg::nn::functional
