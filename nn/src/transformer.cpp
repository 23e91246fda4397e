// TransformerEncoderLayer and TransformerEncoder (torch.nn): composites of MultiheadAttention,
// Linear, LayerNorm and Dropout, written as PyTorch's forward:
//   post-norm: x = norm1(x + sa(x));        x = norm2(x + ff(x))
//   pre-norm:  x = x + sa(norm1(x));        x = x + ff(norm2(x))
// with sa(x) = dropout1(self_attn(x, x, x)) and ff(x) = dropout2(linear2(dropout(act(linear1(x))))).
#include "tapegrad/nn/transformer.hpp"

#include <utility>

#include "tapegrad/nn/functional.hpp"

namespace tg::nn {

namespace {

constexpr const char* kLayer = "TransformerEncoderLayer";

LayerNorm layer_norm(const TransformerEncoderLayerOptions& o) {
  return LayerNorm({o.d_model}, {.eps = o.layer_norm_eps, .bias = o.bias});
}

}  // namespace

TransformerEncoderLayer::TransformerEncoderLayer(TransformerEncoderLayerOptions options)
    : self_attn({.embed_dim = options.d_model, .num_heads = options.nhead, .dropout = options.dropout,
                 .bias = options.bias, .batch_first = options.batch_first}),
      linear1(options.d_model, options.dim_feedforward, {.bias = options.bias}),
      dropout(options.dropout),
      linear2(options.dim_feedforward, options.d_model, {.bias = options.bias}),
      norm1(layer_norm(options)),
      norm2(layer_norm(options)),
      dropout1(options.dropout),
      dropout2(options.dropout),
      activation(options.activation),
      norm_first(options.norm_first) {
  check(options.dim_feedforward > 0, kLayer, "expected dim_feedforward > 0, got ", options.dim_feedforward);
}

void TransformerEncoderLayer::members(Members& m) {
  m.module("self_attn", self_attn);
  m.module("linear1", linear1);
  m.module("dropout", dropout);
  m.module("linear2", linear2);
  m.module("norm1", norm1);
  m.module("norm2", norm2);
  m.module("dropout1", dropout1);
  m.module("dropout2", dropout2);
}

Tensor TransformerEncoderLayer::forward(const Tensor& src) { return forward(src, {}); }

Tensor TransformerEncoderLayer::forward(const Tensor& src, const TransformerEncoderForwardOptions& options) {
  const auto self_attention = [&](const Tensor& x) {
    return dropout1(self_attn
                        .forward(x, x, x,
                                 {.key_padding_mask = options.src_key_padding_mask,
                                  .need_weights = false,
                                  .attn_mask = options.src_mask,
                                  .is_causal = options.is_causal})
                        .first);
  };
  const auto feed_forward = [&](const Tensor& x) {
    const Tensor hidden = linear1(x);
    return dropout2(linear2(dropout(activation == Activation::gelu ? functional::gelu(hidden) : functional::relu(hidden))));
  };
  if (norm_first) {
    const Tensor x = src + self_attention(norm1(src));
    return x + feed_forward(norm2(x));
  }
  const Tensor x = norm1(src + self_attention(src));
  return norm2(x + feed_forward(x));
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& encoder_layer, int64_t num_layers,
                                       std::optional<LayerNorm> norm)
    : norm(std::move(norm)), num_layers(num_layers) {
  check(num_layers >= 0, "TransformerEncoder", "expected num_layers >= 0, got ", num_layers);
  for (int64_t i = 0; i < num_layers; ++i) {
    TransformerEncoderLayer copy = encoder_layer;  // shares the prototype's parameters ...
    detail::give_own_parameters(copy);            // ... until each gets a copy of its own (copy.deepcopy)
    layers.push_back(std::move(copy));
  }
}

void TransformerEncoder::members(Members& m) {
  m.module("layers", layers);
  if (norm) m.module("norm", *norm);
}

Tensor TransformerEncoder::forward(const Tensor& src) { return forward(src, {}); }

Tensor TransformerEncoder::forward(const Tensor& src, const TransformerEncoderForwardOptions& options) {
  Tensor output = src;
  for (size_t i = 0; i < layers.size(); ++i) output = layer(i).forward(output, options);
  return norm ? (*norm)(output) : output;
}

}  // namespace tg::nn
