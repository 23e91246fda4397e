// MultiheadAttention (torch.nn.MultiheadAttention): the projections, the head split and merge, the
// masks, and attention either by an explicit softmax (need_weights: the weights are an output) or
// by the fused scaled_dot_product_attention (nn/src/attention*.cpp).
//
// Shapes (N batch, L query length, S key length, E = H·D):
//   x [N, L, E] --in_proj--> q [N, L, E] --split_heads--> [N, H, L, D]
//   attention(q, k, v) [N, H, L, D] --merge_heads--> [N, L, E] --out_proj--> [N, L, E]
// Without batch_first the inputs and the output are [L, N, E]; projections act row by row, so the
// layout only changes where the heads are split and merged.
#include "tapegrad/nn/multihead_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "out_of_memory.hpp"
#include "tapegrad/nn/functional.hpp"
#include "tapegrad/nn/init.hpp"

namespace tg::nn {

namespace F = functional;

namespace {

constexpr const char* kOp = "MultiheadAttention";

// x [N, L, E] (batch_first) or [L, N, E] -> [N, H, L, D].
Tensor split_heads(const Tensor& x, int64_t num_heads, bool batch_first) {
  const int64_t E = x.size(2), D = E / num_heads;
  if (batch_first) return x.reshape({x.size(0), x.size(1), num_heads, D}).transpose(1, 2);  // [N, L, H, D] -> [N, H, L, D]
  return x.reshape({x.size(0), x.size(1), num_heads, D}).permute({1, 2, 0, 3});            // [L, N, H, D] -> [N, H, L, D]
}

// o [N, H, L, D] -> [N, L, E] (batch_first) or [L, N, E].
Tensor merge_heads(const Tensor& o, bool batch_first) {
  const int64_t N = o.size(0), H = o.size(1), L = o.size(2), D = o.size(3);
  if (batch_first) return o.transpose(1, 2).reshape({N, L, H * D});  // [N, L, H, D]
  return o.permute({2, 0, 1, 3}).reshape({L, N, H * D});             // [L, N, H, D]
}

// A mask as PyTorch's MultiheadAttention takes it, made additive: bool true -> −∞ (masked out),
// false -> 0; a floating mask as it is, but a float32 one with a bfloat16 query rounded to bfloat16,
// as torch 1.13's baddbmm(mask, q, kᵀ) rounds it. `what` names it in errors.
Tensor additive_mask(const Tensor& mask, DType dtype, const char* what) {
  if (mask.dtype() == kBool) return zeros(mask.shape(), dtype).masked_fill(mask, -std::numeric_limits<double>::infinity());
  if (dtype == kBFloat16 && mask.dtype() == kFloat32) return mask.to(kBFloat16);
  check(mask.dtype() == dtype, kOp, "expected ", what, " of dtype bool or ", dtype, " (the query's), got ", mask.dtype());
  return mask;
}

// The causal mask [L, S]: query i may attend to keys j ≤ i (−∞ above the diagonal), as
// torch.nn.Transformer.generate_square_subsequent_mask for L = S.
Tensor causal_mask(int64_t L, int64_t S, DType dtype) {
  Tensor mask = empty({L, S}, kBool);
  bool* above = mask.mutable_data<bool>();
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < S; ++j) above[i * S + j] = j > i;
  return additive_mask(mask, dtype, "the causal mask");
}

// The rows of an additive mask [.., L, S] that mask every key (all −∞), as a bool [.., L, 1]; or
// undefined when there are none (the common case, which then costs one pass over the mask).
Tensor rows_without_key(const Tensor& mask) {
  NoGradGuard no_grad;  // a constant of the graph, whatever the mask's requires_grad
  const Tensor row_max = mask.max(-1, true).values;
  const Tensor none = row_max.eq(-std::numeric_limits<double>::infinity());
  const bool* flags = none.data<bool>();
  return std::any_of(flags, flags + none.numel(), [](bool flag) { return flag; }) ? none : Tensor();
}

}  // namespace

MultiheadAttention::MultiheadAttention(MultiheadAttentionOptions options)
    : in_proj_weight("MultiheadAttention.in_proj_weight", empty({3 * options.embed_dim, options.embed_dim})),
      in_proj_bias("MultiheadAttention.in_proj_bias", options.bias ? zeros({3 * options.embed_dim}) : Tensor()),
      // Built before the body draws in_proj_weight: PyTorch draws out_proj's default init first.
      out_proj(options.embed_dim, options.embed_dim, {.bias = options.bias}),
      embed_dim(options.embed_dim),
      num_heads(options.num_heads),
      head_dim(options.num_heads > 0 ? options.embed_dim / options.num_heads : 0),
      dropout(options.dropout),
      batch_first(options.batch_first) {
  check(embed_dim > 0 && num_heads > 0, kOp, "expected embed_dim > 0 and num_heads > 0, got embed_dim = ", embed_dim,
        ", num_heads = ", num_heads);
  check(embed_dim % num_heads == 0, kOp, "embed_dim must be divisible by num_heads, got embed_dim = ", embed_dim,
        ", num_heads = ", num_heads);
  check(dropout >= 0.0 && dropout <= 1.0, kOp, "dropout must be a probability in [0, 1], got ", dropout);
  // PyTorch's _reset_parameters: xavier_uniform_ on the stacked [3E, E] weight, zero biases.
  init::xavier_uniform_(in_proj_weight);
  if (out_proj.bias.defined()) init::zeros_(out_proj.bias);
}

void MultiheadAttention::members(Members& m) {
  m.parameter("in_proj_weight", in_proj_weight);
  m.parameter("in_proj_bias", in_proj_bias);
  m.module("out_proj", out_proj);
}

Tensor MultiheadAttention::forward(const Tensor& x) { return forward(x, x, x, {.need_weights = false}).first; }

std::pair<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                      const MultiheadAttentionForwardOptions& options) try {
  // --- validate at the edge ---
  check(query.defined() && key.defined() && value.defined(), kOp, "undefined query, key or value");
  const int64_t E = embed_dim, H = num_heads;
  check(query.dim() == 3 || query.dim() == 2, kOp, "expected a query of shape ",
        batch_first ? "[N, L, E]" : "[L, N, E]", " or [L, E] (unbatched), got ", query.shape());
  check(key.dim() == query.dim() && value.dim() == query.dim(), kOp, "query, key and value must have the same number ",
        "of dims, got ", query.shape(), ", ", key.shape(), ", ", value.shape());
  check(query.size(-1) == E && key.size(-1) == E && value.size(-1) == E, kOp, "expected embed_dim ", E,
        " as the last dim of query, key and value, got ", query.shape(), ", ", key.shape(), ", ", value.shape());
  check(query.dtype() == key.dtype() && key.dtype() == value.dtype(), kOp, "dtypes differ: query ", query.dtype(),
        ", key ", key.dtype(), ", value ", value.dtype());
  const bool batched = query.dim() == 3;
  const int64_t batch_dim = batch_first ? 0 : 1;
  // Unbatched inputs [L, E] are a batch of one, in the batch_first layout.
  const bool layout_batch_first = batch_first || !batched;
  const auto as_batch = [&](const Tensor& t) { return batched ? t : t.reshape({1, t.size(0), t.size(1)}); };
  const Tensor q_in = as_batch(query), k_in = as_batch(key), v_in = as_batch(value);
  const int64_t N = q_in.size(layout_batch_first ? 0 : 1), L = q_in.size(layout_batch_first ? 1 : 0);
  const int64_t S = k_in.size(layout_batch_first ? 1 : 0);
  check(k_in.shape() == v_in.shape(), kOp, "key and value must have the same shape, got ", key.shape(), " and ",
        value.shape());
  check(!batched || key.size(batch_dim) == N, kOp, "query and key must have the same batch size (dim ", batch_dim,
        "), got ", query.shape(), " and ", key.shape());
  const DType dtype = query.dtype();

  // --- masks, as one additive mask broadcast to [N, H, L, S] (undefined when there is none) ---
  Tensor mask;
  if (options.attn_mask.defined()) {
    const Tensor& m = options.attn_mask;
    if (m.dim() == 2) {
      check(m.shape() == Shape{L, S}, kOp, "the shape of the 2-D attn_mask is ", m.shape(), ", but should be ",
            Shape{L, S}, " [L, S] for query ", query.shape(), " and key ", key.shape());
      mask = additive_mask(m, dtype, "attn_mask").reshape({1, 1, L, S});
    } else {
      check(m.dim() == 3 && m.shape() == Shape{N * H, L, S}, kOp, "the shape of the attn_mask is ", m.shape(),
            ", but should be ", Shape{L, S}, " [L, S] or ", Shape{N * H, L, S}, " [N·num_heads, L, S] for query ",
            query.shape(), " and key ", key.shape());
      mask = additive_mask(m, dtype, "attn_mask").reshape({N, H, L, S});
    }
  }
  if (options.key_padding_mask.defined()) {
    const Tensor& m = options.key_padding_mask;
    const Shape expected = batched ? Shape{N, S} : Shape{S};
    check(m.shape() == expected, kOp, "expected a key_padding_mask of shape ", expected, " [N, S] for key ",
          key.shape(), ", got ", m.shape());
    const Tensor padding = additive_mask(m, dtype, "key_padding_mask").reshape({N, 1, 1, S});
    mask = mask.defined() ? mask + padding : padding;
  }
  // Causal alone goes to the fused kernel as is_causal (its tiles above the diagonal are skipped);
  // with another mask, or for the explicit weights, it is one more additive mask.
  const bool causal_in_kernel = options.is_causal && !mask.defined() && !options.need_weights;
  if (options.is_causal && !causal_in_kernel) {
    const Tensor causal = causal_mask(L, S, dtype).reshape({1, 1, L, S});
    mask = mask.defined() ? mask + causal : causal;
  }

  // --- projections: one matmul for self-attention, two when key is value, else three ---
  Tensor q, k, v;
  if (query.is_same(key) && key.is_same(value)) {
    // [N, L, 3E] -> [N, L, 3, H, D] -> [3, N, H, L, D] (from [L, N, 3E] likewise): one copy
    // splits the heads of all three, then q, k and v are its three contiguous blocks.
    const Tensor packed = F::linear(q_in, in_proj_weight, in_proj_bias);
    const Tensor heads = packed.reshape({packed.size(0), packed.size(1), 3, H, E / H})
                             .permute(layout_batch_first ? std::vector<int64_t>{2, 0, 3, 1, 4}
                                                         : std::vector<int64_t>{2, 1, 3, 0, 4});
    const std::vector<Tensor> qkv = heads.chunk(3, 0);
    const Shape one = {N, H, L, E / H};
    q = qkv[0].reshape(one), k = qkv[1].reshape(one), v = qkv[2].reshape(one);
  } else {
    const std::vector<Tensor> w = in_proj_weight.chunk(3, 0);  // W_q, W_k, W_v: [E, E] each
    const std::vector<Tensor> b = in_proj_bias.defined() ? in_proj_bias.chunk(3, 0) : std::vector<Tensor>(3);
    q = F::linear(q_in, w[0], b[0]);
    if (key.is_same(value)) {
      const Tensor w_kv = in_proj_weight.split({E, 2 * E}, 0)[1];
      const Tensor b_kv = in_proj_bias.defined() ? in_proj_bias.split({E, 2 * E}, 0)[1] : Tensor();
      std::vector<Tensor> kv = F::linear(k_in, w_kv, b_kv).chunk(2, -1);
      k = kv[0], v = kv[1];
    } else {
      k = F::linear(k_in, w[1], b[1]);
      v = F::linear(v_in, w[2], b[2]);
    }
    q = split_heads(q, H, layout_batch_first);  // [N, H, L, D]
    k = split_heads(k, H, layout_batch_first);  // [N, H, S, D]
    v = split_heads(v, H, layout_batch_first);  // [N, H, S, D]
  }
  const double dropout_p = is_training() ? dropout : 0.0;

  // --- attention ---
  Tensor attended, weights;  // [N, H, L, D], [N, H, L, S]
  if (options.need_weights) {
    // weights = softmax(q·kᵀ/√D + mask), dropped out in training; attended = weights·v.
    Tensor scores = tg::matmul(q * std::sqrt(1.0 / static_cast<double>(head_dim)), k.transpose(-2, -1));
    // The mask is in the input's dtype; the scores are in the projections' (bfloat16 when autocast
    // computes the in-projection in bfloat16): it is rounded to theirs, as torch's baddbmm does.
    if (mask.defined()) scores = scores + mask.to(scores.dtype());
    // A query whose every key is masked (a sequence of padding only) has nothing to attend to: its
    // weights are 0, and so its output row, as the fused kernel's (attention.md), instead of
    // softmax's NaN over a row of −∞, which would also send NaN gradients into the batch's
    // parameters. Its scores are made finite first, so that backward through softmax stays finite.
    const Tensor no_key = mask.defined() ? rows_without_key(mask) : Tensor();  // [.., L, 1] bool
    if (no_key.defined()) scores = scores.masked_fill(no_key, 0.0);
    weights = F::softmax(scores, -1);
    if (no_key.defined()) weights = weights.masked_fill(no_key, 0.0);
    weights = F::dropout(weights, dropout_p, dropout_p > 0.0);
    attended = tg::matmul(weights, v);
  } else {
    attended = F::scaled_dot_product_attention(
        q, k, v, {.attn_mask = mask, .dropout_p = dropout_p, .is_causal = causal_in_kernel});
  }
  Tensor output = out_proj(merge_heads(attended, layout_batch_first));
  if (!batched) output = output.reshape({L, E});
  if (weights.defined()) {
    if (options.average_attn_weights) weights = weights.mean({1});  // [N, L, S]
    if (!batched) weights = weights.reshape(options.average_attn_weights ? Shape{L, S} : Shape{H, L, S});
  }
  return {output, weights};
} catch (...) {
  tg::detail::rethrow_out_of_memory_as(kOp);
}

}  // namespace tg::nn
