/// @file
/// tg::nn::MultiheadAttention — torch.nn.MultiheadAttention: H heads of scaled dot-product
/// attention over projections of the query, key and value, and an output projection.
///
/// @code
///   tg::nn::MultiheadAttention attn({.embed_dim = 64, .num_heads = 4, .batch_first = true});
///   auto [y, weights] = attn.forward(x, x, x);                        // y [N, L, 64], weights [N, L, L]
///   auto [z, none] = attn.forward(x, x, x, {.need_weights = false, .is_causal = true});  // fused path
/// @endcode
///
/// Dimension letters: N batch, L target (query) length, S source (key/value) length, E embed_dim,
/// H num_heads, D = E / H the size of one head.
#pragma once

#include <cstdint>
#include <utility>

#include "tapegrad/nn/linear.hpp"
#include "tapegrad/nn/module.hpp"

namespace tg::nn {

/// The constructor's arguments, by PyTorch's names and defaults.
struct MultiheadAttentionOptions {
  int64_t embed_dim = 0;     ///< E: the size of the query, key, value and output features
  int64_t num_heads = 1;     ///< H: must divide embed_dim
  double dropout = 0.0;      ///< dropout on the attention weights, in training mode
  bool bias = true;          ///< in_proj_bias and out_proj.bias
  bool batch_first = false;  ///< inputs and output [N, L, E] instead of [L, N, E]
};

/// forward's optional arguments, by PyTorch's names and defaults.
struct MultiheadAttentionForwardOptions {
  /// [N, S]: bool, true = this key is padding and is ignored; or floating, added to the scores.
  Tensor key_padding_mask = {};
  /// true: also return the attention weights (computed by an explicit softmax); false: only the
  /// output, on the fused scaled_dot_product_attention kernel (memory O(L·D), not O(L·S)).
  bool need_weights = true;
  /// [L, S] or [N·H, L, S]: bool, true = NOT allowed to attend (PyTorch's MultiheadAttention
  /// convention, the opposite of scaled_dot_product_attention's); or floating, added to the scores.
  Tensor attn_mask = {};
  bool average_attn_weights = true;  ///< the weights averaged over the heads [N, L, S], else [N, H, L, S]
  /// The causal mask (position i attends to keys j ≤ i), combined with attn_mask when both are given.
  bool is_causal = false;
};

/// Multi-head attention (nn.MultiheadAttention), with PyTorch's parameters and state_dict keys.
class MultiheadAttention : public Module {
 public:
  /// in_proj_weight by xavier_uniform_, the biases 0, out_proj.weight by Linear's default, drawn
  /// in PyTorch's order (out_proj first) from the global generator. tg::Error when num_heads does
  /// not divide embed_dim.
  explicit MultiheadAttention(MultiheadAttentionOptions options);

  /// query [N, L, E] ([L, N, E] unless batch_first, or unbatched [L, E]), key and value [N, S, E]
  /// likewise → (output shaped as query, weights [N, L, S] or [N, H, L, S] — undefined when
  /// need_weights is false). When query, key and value are one tensor (self-attention) the three
  /// projections are one matmul.
  std::pair<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const MultiheadAttentionForwardOptions& options = {});
  /// Self-attention without masks: forward(x, x, x, {.need_weights = false}).first.
  Tensor forward(const Tensor& x) override;
  void members(Members& m) override;

  Parameter in_proj_weight;  ///< [3E, E]: the query, key and value projections stacked
  Parameter in_proj_bias;    ///< [3E], or absent
  Linear out_proj;           ///< E → E
  int64_t embed_dim;         ///< E
  int64_t num_heads;         ///< H
  int64_t head_dim;          ///< D = E / H
  double dropout;            ///< the attention weights' dropout probability in training
  bool batch_first;          ///< the layout of inputs and output
};

}  // namespace tg::nn
