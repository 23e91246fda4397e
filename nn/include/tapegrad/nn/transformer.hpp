/// @file
/// tg::nn::TransformerEncoderLayer and tg::nn::TransformerEncoder — PyTorch's modules, with its
/// member names (so state_dict keys equal PyTorch's: "layers.0.self_attn.in_proj_weight").
///
/// @code
///   // A GPT block stack: pre-norm, GELU, batch-first, causal.
///   tg::nn::TransformerEncoderLayer layer({.d_model = 128, .nhead = 4, .dim_feedforward = 512, .dropout = 0.0,
///                                          .activation = tg::nn::Activation::gelu, .batch_first = true,
///                                          .norm_first = true});
///   tg::nn::TransformerEncoder blocks(layer, 4, tg::nn::LayerNorm({128}));
///   tg::Tensor h = blocks.forward(x, {.is_causal = true});  // x [N, T, 128]
/// @endcode
#pragma once

#include <cstdint>
#include <optional>

#include "tapegrad/nn/dropout.hpp"
#include "tapegrad/nn/layer_norm.hpp"
#include "tapegrad/nn/linear.hpp"
#include "tapegrad/nn/module.hpp"
#include "tapegrad/nn/module_list.hpp"
#include "tapegrad/nn/multihead_attention.hpp"

namespace tg::nn {

/// The feed-forward block's activation (PyTorch's activation="relu" / "gelu"; gelu is the exact
/// erf form).
enum class Activation { relu, gelu };

/// TransformerEncoderLayer's arguments, by PyTorch's names and defaults.
struct TransformerEncoderLayerOptions {
  int64_t d_model = 0;             ///< E: the size of the features
  int64_t nhead = 1;               ///< the attention heads; must divide d_model
  int64_t dim_feedforward = 2048;  ///< the feed-forward block's hidden size
  double dropout = 0.1;            ///< every dropout of the layer (attention weights included)
  Activation activation = Activation::relu;  ///< the feed-forward block's activation
  double layer_norm_eps = 1e-5;    ///< ε of norm1 and norm2
  bool batch_first = false;        ///< inputs and output [N, S, E] instead of [S, N, E]
  bool norm_first = false;         ///< pre-norm (x + f(norm(x))) instead of post-norm (norm(x + f(x)))
  bool bias = true;                ///< biases of the linear layers and the layer norms
};

/// The forward arguments of TransformerEncoderLayer and TransformerEncoder, by PyTorch's names.
struct TransformerEncoderForwardOptions {
  Tensor src_mask = {};            ///< attn_mask of the self-attention: [S, S] or [N·nhead, S, S]; bool true = masked
  Tensor src_key_padding_mask = {};  ///< [N, S]: bool true = padding, ignored as a key
  bool is_causal = false;       ///< the causal mask (position i attends to j ≤ i), combined with src_mask if any
};

/// One encoder block (nn.TransformerEncoderLayer): self-attention and a feed-forward block, each
/// with a residual connection and a LayerNorm (after it, or before it with norm_first).
class TransformerEncoderLayer : public Module {
 public:
  /// Parameters initialised as PyTorch's: MultiheadAttention's, then Linear's defaults, LayerNorm 1/0.
  explicit TransformerEncoderLayer(TransformerEncoderLayerOptions options);

  /// src [N, S, E] (batch_first), [S, N, E] or unbatched [S, E] -> the same shape.
  Tensor forward(const Tensor& src, const TransformerEncoderForwardOptions& options);
  Tensor forward(const Tensor& src) override;  ///< forward(src, {})
  void members(Members& m) override;

  MultiheadAttention self_attn;  ///< the self-attention
  Linear linear1;                ///< d_model -> dim_feedforward
  Dropout dropout;               ///< after the activation
  Linear linear2;                ///< dim_feedforward -> d_model
  LayerNorm norm1;               ///< around the self-attention
  LayerNorm norm2;               ///< around the feed-forward block
  Dropout dropout1;              ///< on the self-attention's output
  Dropout dropout2;              ///< on the feed-forward block's output
  Activation activation;         ///< the feed-forward block's activation
  bool norm_first;               ///< pre-norm when true
};

/// A stack of encoder layers (nn.TransformerEncoder) and an optional final norm.
class TransformerEncoder : public Module {
 public:
  /// `num_layers` deep copies of `encoder_layer` (the same initial values, each with its own
  /// parameters, as PyTorch's _get_clones), named layers.0, layers.1, ...; `norm` is applied after
  /// the last layer when given.
  TransformerEncoder(const TransformerEncoderLayer& encoder_layer, int64_t num_layers,
                     std::optional<LayerNorm> norm = std::nullopt);

  /// Every layer in turn with the same options, then the norm.
  Tensor forward(const Tensor& src, const TransformerEncoderForwardOptions& options);
  Tensor forward(const Tensor& src) override;  ///< forward(src, {})
  void members(Members& m) override;

  /// The layer at `index`.
  TransformerEncoderLayer& layer(size_t index) { return layers.at<TransformerEncoderLayer>(index); }

  ModuleList layers;              ///< the TransformerEncoderLayer copies
  std::optional<LayerNorm> norm;  ///< the final norm, or none
  int64_t num_layers;             ///< layers.size()
};

}  // namespace tg::nn
