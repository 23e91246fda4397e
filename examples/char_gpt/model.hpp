// examples/char_gpt's model: a GPT built from tapegrad's PyTorch modules, its GPT-2
// initialisation, nanoGPT's optimiser set-up and learning-rate schedule, one training step, and
// generation with a key/value cache.
//
//   B batch, T positions (T <= block_size), E = n_embd, H = n_head, D = E / H, V = vocabulary.
//
//   idx [B, T] ─ wte ─┐
//                     + ─ drop ─ h: n_layer × TransformerEncoderLayer (norm_first, gelu, causal)
//   0..T−1 ─── wpe ───┘           ─ ln_f ─ lm_head (its weight IS wte.weight) ─ logits [B, T, V]
//
// Each layer (norm_first): x = x + out_proj(attention(norm1(x))); x = x + linear2(gelu(linear1(norm2(x)))).
// The module names are PyTorch's (h.layers.0.self_attn.in_proj_weight...), so that a state dict
// of bench/char_gpt_torch.py's twin loads here and back.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <numbers>
#include <string>
#include <utility>
#include <vector>
#include <tapegrad/nn/transformer.hpp>  // TransformerEncoder(Layer), MultiheadAttention
#include <tapegrad/tapegrad.hpp>

#include "../text/sample.hpp"

namespace char_gpt {

// nanoGPT's CPU configuration of the model.
struct GPTConfig {
  int64_t vocab_size = 0;
  int64_t block_size = 64;  // positions: the longest context the model sees
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  double dropout = 0.0;
};

// Each layer's keys and values of the positions seen so far, [B, H, length, D], for generation.
struct KVCache {
  std::vector<tg::Tensor> keys;    // per layer
  std::vector<tg::Tensor> values;  // per layer
  int64_t length = 0;              // positions cached
  void clear() {
    keys.clear();
    values.clear();
    length = 0;
  }
};

class GPT : public tg::nn::Module {
  GPTConfig config_;  // first: checked before any member is built (members are built in declaration order)

 public:
  explicit GPT(const GPTConfig& config)
      : config_(check_config(config)),
        wte(config.vocab_size, config.n_embd),
        wpe(config.block_size, config.n_embd),
        drop(config.dropout),
        h(tg::nn::TransformerEncoderLayer({.d_model = config.n_embd,
                                           .nhead = config.n_head,
                                           .dim_feedforward = 4 * config.n_embd,
                                           .dropout = config.dropout,
                                           .activation = tg::nn::Activation::gelu,
                                           .layer_norm_eps = 1e-5,
                                           .batch_first = true,
                                           .norm_first = true,
                                           .bias = true}),
          config.n_layer),
        ln_f(std::vector<int64_t>{config.n_embd}),
        lm_head(config.n_embd, config.vocab_size, {.bias = false}) {
    // Weight tying (Press & Wolf, 2017): the head scores a position against every character's
    // embedding; one tensor, listed once (as wte.weight), stepped once, saved once.
    lm_head.weight.tie(wte.weight);
  }

  tg::nn::Embedding wte;   // token embeddings [V, E]
  tg::nn::Embedding wpe;   // position embeddings [block_size, E]
  tg::nn::Dropout drop;
  tg::nn::TransformerEncoder h;
  tg::nn::LayerNorm ln_f;
  tg::nn::Linear lm_head;  // [V, E], tied to wte.weight

  const GPTConfig& config() const { return config_; }

  void members(tg::nn::Members& m) override {
    m.module("wte", wte);
    m.module("wpe", wpe);
    m.module("drop", drop);
    m.module("h", h);
    m.module("ln_f", ln_f);
    m.module("lm_head", lm_head);
  }

  // idx int64 [B, T], T <= block_size -> logits [B, T, V]; position t attends to positions <= t.
  tg::Tensor forward(const tg::Tensor& idx) override {
    tg::check(idx.dim() == 2 && idx.dtype() == tg::kInt64, "GPT", "expected int64 token ids [B, T], got ",
              idx.dtype(), " ", idx.shape());
    const int64_t T = idx.size(1);
    tg::check(T >= 1 && T <= config_.block_size, "GPT", "a sequence of ", T, " positions does not fit block_size ",
              config_.block_size);
    tg::Tensor x = drop(wte(idx) + wpe(positions(0, T)));  // [B, T, E] + [T, E]
    x = h.forward(x, {.is_causal = true});
    return lm_head(ln_f(x));
  }

  // The logits [B, T, V] of `idx` int64 [B, T] at positions cache.length ... cache.length + T − 1,
  // given the keys and values of the positions before (which it appends to the cache): generation
  // then pays one position per new token instead of the whole context. Equals forward() on the
  // whole sequence, in eval mode, under a NoGradGuard; written with the layers' public members,
  // as one would in PyTorch. tg::Error when the cache would exceed block_size.
  tg::Tensor forward_cached(const tg::Tensor& idx, KVCache& cache) {
    tg::check(!is_training(), "GPT::forward_cached", "generation runs in eval mode: call model.eval() first");
    tg::check(!tg::is_grad_enabled(), "GPT::forward_cached", "generation runs under a tg::NoGradGuard");
    tg::check(idx.dim() == 2 && idx.dtype() == tg::kInt64 && idx.size(1) >= 1, "GPT::forward_cached",
              "expected int64 token ids [B, T] with T >= 1, got ", idx.dtype(), " ", idx.shape());
    const int64_t B = idx.size(0), T = idx.size(1), start = cache.length;
    const int64_t E = config_.n_embd, H = config_.n_head, D = E / H;
    tg::check(start + T <= config_.block_size, "GPT::forward_cached", start, " cached positions and ", T,
              " new ones exceed block_size ", config_.block_size);
    if (start == 0) {
      cache.keys.assign(static_cast<size_t>(config_.n_layer), tg::Tensor());
      cache.values.assign(static_cast<size_t>(config_.n_layer), tg::Tensor());
    }
    // A new position start + i may attend to every cached one and to new ones up to itself:
    // mask [T, start + T], true where allowed (none needed for one new position).
    tg::Tensor mask;
    if (T > 1) {
      std::vector<double> allowed(static_cast<size_t>(T * (start + T)));
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < start + T; ++j) allowed[static_cast<size_t>(i * (start + T) + j)] = j <= start + i;
      mask = tg::tensor(allowed, {T, start + T}, tg::kBool);
    }
    // [B, T, E] -> [B, H, T, D]
    const auto heads = [&](const tg::Tensor& t) { return t.reshape({B, T, H, D}).transpose(1, 2); };
    tg::Tensor x = wte(idx) + wpe(positions(start, T));
    for (int64_t l = 0; l < config_.n_layer; ++l) {
      auto& layer = h.layers.at<tg::nn::TransformerEncoderLayer>(static_cast<size_t>(l));
      const std::vector<tg::Tensor> qkv =
          tg::nn::functional::linear(layer.norm1(x), layer.self_attn.in_proj_weight, layer.self_attn.in_proj_bias)
              .chunk(3, -1);
      tg::Tensor& keys = cache.keys[static_cast<size_t>(l)];
      tg::Tensor& values = cache.values[static_cast<size_t>(l)];
      keys = start == 0 ? heads(qkv[1]) : tg::cat({keys, heads(qkv[1])}, 2);  // [B, H, start + T, D]
      values = start == 0 ? heads(qkv[2]) : tg::cat({values, heads(qkv[2])}, 2);
      const tg::Tensor attended =
          tg::nn::functional::scaled_dot_product_attention(heads(qkv[0]), keys, values, {.attn_mask = mask});
      x = x + layer.self_attn.out_proj(attended.transpose(1, 2).reshape({B, T, E}));
      x = x + layer.linear2(tg::nn::functional::gelu(layer.linear1(layer.norm2(x))));
    }
    cache.length = start + T;
    return lm_head(ln_f(x));
  }

 private:
  static const GPTConfig& check_config(const GPTConfig& config) {
    tg::check(config.vocab_size >= 1 && config.block_size >= 1 && config.n_layer >= 1 && config.n_head >= 1,
              "GPT", "expected vocab_size, block_size, n_layer and n_head >= 1, got ", config.vocab_size, ", ",
              config.block_size, ", ", config.n_layer, ", ", config.n_head);
    tg::check(config.n_embd % config.n_head == 0, "GPT", "n_head ", config.n_head, " does not divide n_embd ",
              config.n_embd);
    return config;
  }
  // start, start + 1, ..., start + count − 1 as int64 [count]
  static tg::Tensor positions(int64_t start, int64_t count) {
    std::vector<double> values(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) values[static_cast<size_t>(i)] = static_cast<double>(start + i);
    return tg::tensor(values, {count}, tg::kInt64);
  }
};

// GPT-2's initialisation, from the default generator: every Linear weight, in_proj_weight and
// embedding N(0, 0.02), biases 0, LayerNorm 1 and 0; then each layer's residual projections
// (self_attn.out_proj.weight, linear2.weight) N(0, 0.02/√(2·n_layer)), so that the sum of the
// 2·n_layer residual branches keeps the embeddings' variance. apply visits children before
// parents, in declaration order, as PyTorch's does: the draws are PyTorch's for the same seed,
// the tied wte/lm_head weight drawn twice (as wte, then as lm_head: the second draw stays).
inline void init_gpt2(GPT& model) {
  namespace init = tg::nn::init;
  model.apply([](tg::nn::Module& module) {
    if (auto* linear = dynamic_cast<tg::nn::Linear*>(&module)) {
      init::normal_(linear->weight, 0.0, 0.02);
      if (linear->bias.defined()) init::zeros_(linear->bias);
    } else if (auto* embedding = dynamic_cast<tg::nn::Embedding*>(&module)) {
      init::normal_(embedding->weight, 0.0, 0.02);
    } else if (auto* attention = dynamic_cast<tg::nn::MultiheadAttention*>(&module)) {
      init::normal_(attention->in_proj_weight, 0.0, 0.02);
      if (attention->in_proj_bias.defined()) init::zeros_(attention->in_proj_bias);
    } else if (auto* norm = dynamic_cast<tg::nn::LayerNorm*>(&module)) {
      init::ones_(norm->weight);
      init::zeros_(norm->bias);
    }
  });
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(model.config().n_layer));
  for (auto& [name, parameter] : model.named_parameters()) {
    const auto ends_with = [&name](const std::string& suffix) {
      return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends_with("self_attn.out_proj.weight") || ends_with("linear2.weight")) init::normal_(parameter, 0.0, residual_std);
  }
}

// AdamW's hyper-parameters: nanoGPT's shakespeare_char on a CPU.
struct OptimizerConfig {
  double lr = 1e-3;         // the peak, after the warm-up
  double min_lr = 1e-4;     // the end of the cosine
  int64_t warmup_iters = 100;
  int64_t lr_decay_iters = 2000;  // the cosine ends here (nanoGPT: max_iters)
  double weight_decay = 0.1;
  double beta1 = 0.9, beta2 = 0.99;
  double grad_clip = 1.0;  // the gradients' global 2-norm is clipped to this; 0: no clipping
};

// nanoGPT's get_lr: a linear warm-up (it + 1)/(warmup + 1) of lr, then a cosine from lr down to
// min_lr at lr_decay_iters, min_lr after.
inline double get_lr(int64_t it, const OptimizerConfig& c) {
  if (it < c.warmup_iters) return c.lr * static_cast<double>(it + 1) / static_cast<double>(c.warmup_iters + 1);
  if (it > c.lr_decay_iters) return c.min_lr;
  const double decay_ratio =
      static_cast<double>(it - c.warmup_iters) / static_cast<double>(std::max<int64_t>(c.lr_decay_iters - c.warmup_iters, 1));
  return c.min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * decay_ratio)) * (c.lr - c.min_lr);
}

// AdamW with two groups: weight decay on the matrices that multiply activations (Linear weights,
// in_proj_weight), none on biases, LayerNorm and the embeddings, and so none on the tied head.
// Group 0 decays, group 1 does not.
inline std::unique_ptr<tg::optim::AdamW> make_optimizer(GPT& model, const OptimizerConfig& c) {
  std::vector<tg::Tensor> decay, no_decay;
  for (auto& [name, parameter] : model.named_parameters()) {  // the tied weight once, as wte.weight
    const bool embedding = name.rfind("wte.", 0) == 0 || name.rfind("wpe.", 0) == 0;
    (parameter.dim() >= 2 && !embedding ? decay : no_decay).push_back(parameter);
  }
  const tg::optim::AdamWOptions options{.lr = c.lr, .betas = {c.beta1, c.beta2}, .eps = 1e-8,
                                        .weight_decay = c.weight_decay};
  auto optimizer = std::make_unique<tg::optim::AdamW>(decay, options);
  tg::optim::AdamWOptions without = options;
  without.weight_decay = 0.0;
  optimizer->add_param_group(no_decay, without);
  return optimizer;
}

// The mean cross-entropy of the logits of x [B, T] against the next characters y [B, T]; with
// `autocast`, computed under tg::autocast (bf16 products, the loss in float32).
inline tg::Tensor loss_of(GPT& model, const tg::Tensor& x, const tg::Tensor& y, bool autocast = false) {
  const tg::autocast region({.enabled = autocast});
  const tg::Tensor logits = model(x);  // [B, T, V]
  return tg::nn::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
}

// What one step did: the loss before the update and the gradients' norm before clipping.
struct StepResult {
  double loss = 0.0;
  double grad_norm = 0.0;
};

// One training step at iteration `it`: lr = get_lr(it), loss (under tg::autocast with
// `autocast`), zero_grad, backward (through `backward`: data-parallel training averages the
// gradients there), clip, AdamW's update.
inline StepResult train_step(GPT& model, tg::optim::Optimizer& optimizer, const OptimizerConfig& c, int64_t it,
                             const tg::Tensor& x, const tg::Tensor& y,
                             const std::function<void(const tg::Tensor&)>& backward = {}, bool autocast = false) {
  optimizer.set_lr(get_lr(it, c));
  const tg::Tensor loss = loss_of(model, x, y, autocast);
  optimizer.zero_grad();
  if (backward) backward(loss);
  else loss.backward();
  double norm = 0.0;
  if (c.grad_clip > 0) norm = tg::nn::utils::clip_grad_norm_(optimizer.parameters(), c.grad_clip).item();
  optimizer.step();
  return {loss.item(), norm};
}

// How generate draws each character.
struct SampleOptions {
  int64_t max_new_tokens = 500;
  double temperature = 1.0;  // logits are divided by it: below 1 sharper, above 1 flatter
  int64_t top_k = 0;         // draw among the k likeliest characters only; 0: among all
  bool kv_cache = true;      // false: recompute the whole context for every character (the reference)
};

// `prompt` (1 <= its length <= block_size) followed by options.max_new_tokens generated
// characters. The context is a window of at most block_size positions; when it is full, it drops
// to its last block_size/2 characters, whose keys and values are computed afresh in one pass (a
// cache holds absolute positions, so it cannot slide by one): each character then costs about two
// positions, and nanoGPT's crop, which recomputes block_size positions for every character, is
// avoided. With kv_cache false the same windows are recomputed whole for each character (the
// reference the cache must equal). Runs in eval mode under a NoGradGuard; restores train mode.
inline std::vector<int64_t> generate(GPT& model, const std::vector<int64_t>& prompt, const SampleOptions& options,
                                     tg::Generator& generator) {
  const int64_t block = model.config().block_size;
  tg::check(!prompt.empty(), "generate", "the prompt is empty: give at least one character");
  tg::check(static_cast<int64_t>(prompt.size()) <= block, "generate", "a prompt of ", prompt.size(),
            " characters is longer than block_size ", block);
  tg::check(options.temperature > 0 && std::isfinite(options.temperature), "generate",
            "expected a temperature > 0, got ", options.temperature);
  tg::check(options.top_k >= 0, "generate", "expected top_k >= 0, got ", options.top_k);
  tg::check(options.max_new_tokens >= 0, "generate", "expected max_new_tokens >= 0, got ", options.max_new_tokens);
  const bool was_training = model.is_training();
  model.eval();
  tg::NoGradGuard no_grad;
  const auto ids = [](std::vector<int64_t>::const_iterator first, std::vector<int64_t>::const_iterator last) {
    std::vector<double> values(first, last);
    return tg::tensor(values, {1, static_cast<int64_t>(values.size())}, tg::kInt64);
  };
  std::vector<int64_t> tokens = prompt;
  KVCache cache;
  size_t window = 0;    // the context is tokens[window:]
  size_t fed = 0;       // tokens[:fed] are in the cache
  const int64_t keep = std::max<int64_t>(block / 2, 1);
  for (int64_t n = 0; n < options.max_new_tokens; ++n) {
    if (static_cast<int64_t>(tokens.size() - window) == block) {
      window = tokens.size() - static_cast<size_t>(keep);
      cache.clear();
      fed = window;
    }
    tg::Tensor logits;  // [1, t, V]
    if (options.kv_cache) {
      logits = model.forward_cached(ids(tokens.begin() + static_cast<std::ptrdiff_t>(fed), tokens.end()), cache);
      fed = tokens.size();
    } else {
      logits = model(ids(tokens.begin() + static_cast<std::ptrdiff_t>(window), tokens.end()));
    }
    const tg::Tensor last = logits.reshape({-1, logits.size(-1)}).index_select(
        0, tg::tensor({static_cast<double>(logits.size(1) - 1)}, {1}, tg::kInt64));
    tokens.push_back(examples::text::sample_next(last.reshape({-1}), options.temperature, options.top_k, generator));
  }
  model.train(was_training);
  return tokens;
}

}  // namespace char_gpt
