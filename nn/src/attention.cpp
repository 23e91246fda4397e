// scaled_dot_product_attention: the checks, the mask's broadcast, and one tape node around the
// fused kernels of attention_kernels.cpp (whose opening comment derives forward and backward).
//
// Shapes: query [..., L, E], key [..., S, E], value [..., S, Ev], the leading dims equal and
// flattened to `batch` heads; the output is [..., L, Ev]. Saved for backward: q, k, v, the output
// and lse [batch, L] — O(batch·(L + S)·E) memory, no L×S tensor (except in a backward pass that is
// itself differentiated, which runs the composite of PyTorch's math path).
#include "tapegrad/nn/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attention_kernels.hpp"
#include "autocast_policy.hpp"
#include "autograd/node.hpp"
#include "bfloat16_compute.hpp"
#include "dispatch.hpp"
#include "out_of_memory.hpp"
#include "random_draws.hpp"
#include "tensor_impl.hpp"

namespace tg::nn::functional {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

// The mask as an additive tensor of the query's dtype T, in its own (unbroadcast) shape: a bool
// mask's false is −∞, true 0; a floating one is itself.
Tensor additive_mask(const Tensor& mask, DType dtype) {
  if (mask.dtype() != kBool) return mask;
  Tensor additive = make_tensor(mask.shape(), dtype, kOp);
  tg::detail::dispatch_floating(kOp, dtype, [&]<typename T>() {
    const bool* keep = mask.data<bool>();
    T* out = additive.mutable_data<T>();
    for (int64_t n = 0; n < mask.numel(); ++n) out[n] = keep[n] ? T(0) : -std::numeric_limits<T>::infinity();
  });
  return additive;
}

// Where each head's mask starts, and its row and column strides, for a mask broadcast to
// scores_shape = [..., L, S] (strides 0 along the dims the mask broadcasts).
struct MaskLayout {
  std::vector<int64_t> offsets;  // [batch]
  int64_t row_stride = 0, col_stride = 0;
};

MaskLayout mask_layout(const Shape& mask_shape, const Shape& scores_shape, int64_t batch) {
  const size_t rank = scores_shape.size(), lead = rank - mask_shape.size();
  // The mask's strides aligned to scores_shape's dims, 0 where it broadcasts or is absent.
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (size_t d = mask_shape.size(); d-- > 0;) {
    if (mask_shape[d] != 1) strides[lead + d] = stride;
    stride *= mask_shape[d];
  }
  MaskLayout layout;
  layout.row_stride = strides[rank - 2];
  layout.col_stride = strides[rank - 1];
  layout.offsets.assign(static_cast<size_t>(batch), 0);
  // Head b's index in the leading dims, last dim fastest, as the heads are laid out.
  for (int64_t b = 0; b < batch; ++b) {
    int64_t rest = b, offset = 0;
    for (size_t d = rank - 2; d-- > 0;) {
      offset += (rest % scores_shape[d]) * strides[d];
      rest /= scores_shape[d];
    }
    layout.offsets[static_cast<size_t>(b)] = offset;
  }
  return layout;
}

// The same counter-based draw as the kernels' dropout (attention_kernels.cpp's `kept`): weight
// `index` = (b·L + i)·S + j is kept when the splitmix64 element `index` of the stream seeded with
// `seed` is below keep_probability as a 53-bit uniform.
bool kept_weight(uint64_t seed, uint64_t index, double keep_probability) {
  uint64_t z = seed + (index + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1p-53 < keep_probability;
}

// The constants of one attention problem as dense tensors of T, for the composite below:
// bias: [batch, L, S], the additive mask with −∞ where causal masks, 0 on a query with no unmasked
// key; alive: [batch, L, 1], 0 on such a query and 1 elsewhere (undefined when every query has a
// key); noise: [batch, L, S], the dropout's z/(1 − p) (undefined without dropout).
struct AttentionConstants {
  Tensor bias, alive, noise;
};

template <typename T>
AttentionConstants attention_constants(const tg::detail::AttentionProblem<T>& p, DType dtype) {
  const int64_t batch = p.batch, L = p.L, S = p.S;
  AttentionConstants constants;
  constants.bias = zeros({batch, L, S}, dtype);
  T* bias = constants.bias.mutable_data<T>();
  std::vector<T> alive(static_cast<size_t>(batch * L), T(1));
  bool every_query_alive = true;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < L; ++i) {
      T* row = bias + (b * L + i) * S;
      bool has_key = false;
      for (int64_t j = 0; j < S; ++j) {
        T value = p.mask ? p.mask[p.mask_offsets[b] + i * p.mask_row_stride + j * p.mask_col_stride] : T(0);
        if (p.causal && j > i) value = -std::numeric_limits<T>::infinity();
        row[j] = value;
        has_key = has_key || value != -std::numeric_limits<T>::infinity();
      }
      if (has_key) continue;
      // No key to attend to: the fused kernels' output row is 0. A finite row keeps the softmax
      // free of NaN; `alive` then zeroes its weights.
      std::fill(row, row + S, T(0));
      alive[static_cast<size_t>(b * L + i)] = T(0);
      every_query_alive = false;
    }
  if (!every_query_alive) constants.alive = tensor(alive, {batch, L, 1}, dtype);
  if (p.dropout_p > 0.0) {
    const double keep_probability = 1.0 - p.dropout_p;
    const T kept_scale = T(1) / static_cast<T>(keep_probability);  // as the kernels round it
    constants.noise = make_tensor({batch, L, S}, dtype, kOp);
    T* noise = constants.noise.mutable_data<T>();
    for (int64_t n = 0; n < batch * L * S; ++n)
      noise[n] = kept_weight(p.dropout_seed, static_cast<uint64_t>(n), keep_probability) ? kept_scale : T(0);
  }
  return constants;
}

// The fused backward's gradients computed by a recorded composite, for a backward pass that is
// itself differentiated (create_graph), as PyTorch's math path: per head, from the connected q, k,
// v and dO,
//   S = scale·Q·Kᵀ + bias,  P = softmax(S) ∘ alive,  P̃ = P ∘ noise,
//   dV = P̃ᵀ·dO,  dP = (dO·Vᵀ) ∘ noise,  dS = P ∘ (dP − Σ_j P∘dP),
//   dQ = scale·dS·K,  dK = scale·dSᵀ·Q.
// Memory O(batch·L·S), which the fused kernels avoid; only differentiated passes take it.
// q: [..., L, E], k: [..., S, E], v: [..., S, Ev], grad_out: [..., L, Ev].
void attention_backward_differentiable(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const AttentionConstants& constants, double scale, int64_t batch, int64_t L,
                                       int64_t S, int64_t E, int64_t Ev, autograd::GradInputs& grads) {
  const Tensor q3 = q.reshape({batch, L, E}), k3 = k.reshape({batch, S, E}), v3 = v.reshape({batch, S, Ev});
  const Tensor dout = grad_out.reshape({batch, L, Ev});
  Tensor probs = (tg::matmul(q3, k3.transpose(1, 2)) * scale + constants.bias).softmax(-1);
  if (constants.alive.defined()) probs = probs * constants.alive;
  const Tensor& noise = constants.noise;
  if (grads.needed(2)) {
    const Tensor kept_probs = noise.defined() ? probs * noise : probs;
    grads.set(2, tg::matmul(kept_probs.transpose(1, 2), dout).reshape(v.shape()));
  }
  if (!grads.needed(0) && !grads.needed(1)) return;
  Tensor dprobs = tg::matmul(dout, v3.transpose(1, 2));
  if (noise.defined()) dprobs = dprobs * noise;
  const Tensor dscores = probs * (dprobs - (probs * dprobs).sum({-1}, true)) * scale;
  if (grads.needed(0)) grads.set(0, tg::matmul(dscores, k3).reshape(q.shape()));
  if (grads.needed(1)) grads.set(1, tg::matmul(dscores.transpose(1, 2), q3).reshape(k.shape()));
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const ScaledDotProductAttentionOptions& options) try {
  check(query.defined() && key.defined() && value.defined(), kOp, "undefined query, key or value");
  if (tg::detail::autocast_enabled())  // autocast's lower-precision list (PyTorch 2's; 1.13 has no SDPA)
    return tg::detail::autocast_to_lower([&](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
      ScaledDotProductAttentionOptions cast = options;
      cast.attn_mask = mask;
      return scaled_dot_product_attention(q, k, v, cast);
    }, query, key, value, options.attn_mask);
  const Shape &qs = query.shape(), &ks = key.shape(), &vs = value.shape();
  check(qs.size() >= 2 && ks.size() == qs.size() && vs.size() == qs.size(), kOp,
        "expected query [..., L, E], key [..., S, E] and value [..., S, Ev] of one rank >= 2, got query ", qs,
        ", key ", ks, ", value ", vs);
  const size_t rank = qs.size();
  check(Shape(qs.begin(), qs.end() - 2) == Shape(ks.begin(), ks.end() - 2) &&
            Shape(qs.begin(), qs.end() - 2) == Shape(vs.begin(), vs.end() - 2),
        kOp, "expected equal leading dims of query [..., L, E], key [..., S, E] and value [..., S, Ev], got query ",
        qs, ", key ", ks, ", value ", vs);
  check(ks[rank - 1] == qs[rank - 1], kOp, "expected key [..., S, E] with query's E = ", qs[rank - 1],
        ", got query ", qs, ", key ", ks);
  check(vs[rank - 2] == ks[rank - 2], kOp, "expected value [..., S, Ev] with key's S = ", ks[rank - 2],
        ", got key ", ks, ", value ", vs);
  check(key.dtype() == query.dtype() && value.dtype() == query.dtype(), kOp, "dtypes differ: query ",
        query.dtype(), ", key ", key.dtype(), ", value ", value.dtype());
  if (tg::detail::is_bfloat16(query)) {
    // In float32 on the bf16 products, rounded once. A float32 mask is added to the float32 scores as it is (PyTorch
    // 2.x's CPU kernel adds it in its float32 accumulator), a bfloat16 one widened (exact).
    const DType mask_dtype = options.attn_mask.defined() ? options.attn_mask.dtype() : kBool;
    check(mask_dtype == kBool || mask_dtype == kBFloat16 || mask_dtype == kFloat32, kOp,
          "expected an attn_mask of dtype bool, bfloat16 or float32 for a bfloat16 query, got ", mask_dtype);
    return tg::detail::in_float32_on_bf16_products(tg::detail::Bf16Products::round_factors, [&](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
      ScaledDotProductAttentionOptions wide = options;
      wide.attn_mask = mask;
      return scaled_dot_product_attention(q, k, v, wide);
    }, query, key, value, options.attn_mask);
  }
  tg::detail::check_dtype<tg::detail::FloatingDTypes>(kOp, query.dtype());
  check(options.dropout_p >= 0.0 && options.dropout_p <= 1.0, kOp,
        "dropout probability has to be between 0 and 1, but got ", options.dropout_p);
  const int64_t L = qs[rank - 2], E = qs[rank - 1], S = ks[rank - 2], Ev = vs[rank - 1];
  int64_t batch = 1;
  for (size_t d = 0; d + 2 < rank; ++d) batch *= qs[d];
  Shape scores_shape(qs.begin(), qs.end() - 1);
  scores_shape.push_back(S);  // [..., L, S]

  const Tensor& mask = options.attn_mask;
  Tensor additive;
  MaskLayout layout;
  if (mask.defined()) {
    check(!options.is_causal, kOp, "is_causal together with an attn_mask (of shape ", mask.shape(),
          ") is not allowed: pass one of them, as PyTorch");
    check(mask.dtype() == kBool || mask.dtype() == query.dtype(), kOp,
          "expected an attn_mask of dtype bool or the query's dtype ", query.dtype(), ", got ", mask.dtype());
    check(!mask.requires_grad(), kOp, "an attn_mask that requires grad is not supported (its gradient is not "
                                      "computed): pass attn_mask.detach()");
    bool broadcasts = mask.shape().size() <= rank;
    for (size_t d = 0; broadcasts && d < mask.shape().size(); ++d) {
      const int64_t size = mask.shape()[d], target = scores_shape[rank - mask.shape().size() + d];
      broadcasts = size == target || size == 1;
    }
    check(broadcasts, kOp, "expected an attn_mask broadcastable to [..., L, S] = ", scores_shape, ", got ",
          mask.shape(), " (query ", qs, ", key ", ks, ")");
    additive = additive_mask(mask, query.dtype());
    layout = mask_layout(additive.shape(), scores_shape, batch);
  }
  const double scale = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(E));
  uint64_t seed = 0;
  if (options.dropout_p > 0.0) {
    tg::detail::LockedGenerator draws(options.generator);
    seed = draws.random64();
  }

  Shape out_shape(qs.begin(), qs.end() - 1);
  out_shape.push_back(Ev);
  Tensor out = make_tensor(out_shape, query.dtype(), kOp);
  Tensor lse = make_tensor({batch, L}, query.dtype(), kOp);
  // The problem in T's pointers; the mask and its offsets outlive every kernel call (captured
  // by the backward closure).
  auto problem_of = [=, offsets = std::make_shared<std::vector<int64_t>>(layout.offsets)]<typename T>(
                        const Tensor& q, const Tensor& k, const Tensor& v) {
    tg::detail::AttentionProblem<T> p;
    p.batch = batch, p.L = L, p.S = S, p.E = E, p.Ev = Ev;
    p.q = q.data<T>(), p.k = k.data<T>(), p.v = v.data<T>();
    if (additive.defined()) {
      p.mask = additive.data<T>();
      p.mask_offsets = offsets->data();
      p.mask_row_stride = layout.row_stride, p.mask_col_stride = layout.col_stride;
    }
    p.causal = options.is_causal;
    p.scale = scale;
    p.dropout_p = options.dropout_p;
    p.dropout_seed = seed;
    return p;
  };
  // Scratch as a tensor: the allocator keeps large buffers for the next step's call.
  Tensor workspace =
      make_tensor({tg::detail::attention_forward_workspace(batch, S, E)}, query.dtype(), kOp);
  tg::detail::dispatch_floating(kOp, query.dtype(), [&]<typename T>() {
    tg::detail::attention_kernels_for_cpu().of<T>().forward(problem_of.template operator()<T>(query, key, value),
                                                            out.mutable_data<T>(), lse.mutable_data<T>(),
                                                            workspace.mutable_data<T>());
  });

  if (autograd::needs_grad(query, key, value))
    autograd::record(
        out, "ScaledDotProductAttentionBackward", {query, key, value},
        [saved_q = autograd::SavedTensor(query), saved_k = autograd::SavedTensor(key),
         saved_v = autograd::SavedTensor(value), saved_out = autograd::SavedTensor(out, autograd::SavedTensor::kOutput),
         lse, problem_of, scale, batch, L, S, E, Ev](const Tensor& grad_out, autograd::GradInputs& grads) {
          const Tensor &q = grads.unpack(saved_q), &k = grads.unpack(saved_k), &v = grads.unpack(saved_v);
          if (grads.create_graph()) {
            const AttentionConstants constants =
                tg::detail::dispatch_floating("ScaledDotProductAttentionBackward", q.dtype(), [&]<typename T>() {
                  return attention_constants<T>(problem_of.template operator()<T>(q, k, v), q.dtype());
                });
            return attention_backward_differentiable(grad_out, q, k, v, constants, scale, batch, L, S, E, Ev, grads);
          }
          const Tensor& o = grads.unpack(saved_out);
          Tensor dq = make_tensor(q.shape(), q.dtype(), "ScaledDotProductAttentionBackward");
          Tensor dk = make_tensor(k.shape(), k.dtype(), "ScaledDotProductAttentionBackward");
          Tensor dv = make_tensor(v.shape(), v.dtype(), "ScaledDotProductAttentionBackward");
          Tensor workspace = make_tensor({tg::detail::attention_backward_workspace(batch, L, S, E, Ev)},
                                               q.dtype(), "ScaledDotProductAttentionBackward");
          tg::detail::dispatch_floating("ScaledDotProductAttentionBackward", q.dtype(), [&]<typename T>() {
            tg::detail::attention_kernels_for_cpu().of<T>().backward(
                problem_of.template operator()<T>(q, k, v), o.data<T>(), lse.data<T>(), grad_out.data<T>(),
                dq.mutable_data<T>(), dk.mutable_data<T>(), dv.mutable_data<T>(), workspace.mutable_data<T>());
          });
          if (grads.needed(0)) grads.set(0, dq);
          if (grads.needed(1)) grads.set(1, dk);
          if (grads.needed(2)) grads.set(2, dv);
        });
  return out;
} catch (...) {
  tg::detail::rethrow_out_of_memory_as(kOp);
}

}  // namespace tg::nn::functional
