// examples/char_lstm's model: a character LSTM built from tapegrad's PyTorch modules, with
// PyTorch's default initialisation, Adam, one training step and generation that carries the
// recurrent state from character to character.
//
//   B batch, T positions, E = n_embd, H = hidden_size, V = vocabulary.
//
//   idx [B, T] ─ embedding ─ [B, T, E] ─ lstm: num_layers × LSTM(H), batch_first ─ [B, T, H] ─ head ─ logits [B, T, V]
//
// Every batch starts from zero states (h_0 = c_0 = 0: LSTM's default when none is given). The
// module names (embedding.weight, lstm.weight_ih_l0, ..., head.bias) are the PyTorch twin's
// (bench/char_lstm_torch.py), so that a state dict loads from one into the other; modules built in
// this order from the same seed draw the twin's initial weights.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>
#include <tapegrad/tapegrad.hpp>

#include "../text/sample.hpp"

namespace char_lstm {

struct LSTMConfig {
  int64_t vocab_size = 0;
  int64_t n_embd = 128;       // the embedding's width: the LSTM's input size
  int64_t hidden_size = 256;
  int64_t num_layers = 2;
  double dropout = 0.0;       // between the LSTM's layers (PyTorch's LSTM dropout)
};

// (h, c) of every layer: [num_layers, B, H] each.
using State = std::tuple<tg::Tensor, tg::Tensor>;

class CharLSTM : public tg::nn::Module {
  LSTMConfig config_;  // first: members are built in declaration order

 public:
  explicit CharLSTM(const LSTMConfig& config)
      : config_(config),
        embedding(config.vocab_size, config.n_embd),
        lstm(config.n_embd, config.hidden_size,
             {.num_layers = config.num_layers, .batch_first = true, .dropout = config.dropout}),
        head(config.hidden_size, config.vocab_size) {}

  tg::nn::Embedding embedding;  // [V, E]
  tg::nn::LSTM lstm;
  tg::nn::Linear head;          // [V, H] and [V]

  const LSTMConfig& config() const { return config_; }

  void members(tg::nn::Members& m) override {
    m.module("embedding", embedding);
    m.module("lstm", lstm);
    m.module("head", head);
  }

  // idx int64 [B, T] -> logits [B, T, V], from zero states.
  tg::Tensor forward(const tg::Tensor& idx) override { return forward(idx, std::nullopt).first; }

  // idx int64 [B, T] from `state` (nullopt: zeros) -> logits [B, T, V] and the state after the
  // last position, from which the next characters continue.
  std::pair<tg::Tensor, State> forward(const tg::Tensor& idx, const std::optional<State>& state) {
    tg::check(idx.dim() == 2 && idx.dtype() == tg::kInt64, "CharLSTM", "expected int64 token ids [B, T], got ",
              idx.dtype(), " ", idx.shape());
    auto [output, next] = lstm.forward(embedding(idx), state);  // [B, T, H]
    return {head(output), std::move(next)};
  }
};

// The mean cross-entropy of the logits of x [B, T] against the next characters y [B, T]; with
// `autocast`, computed under tg::autocast (the head's product in bf16; the LSTM runs in its input's
// float32, as PyTorch 1.13's autocast leaves nn.LSTM).
inline tg::Tensor loss_of(CharLSTM& model, const tg::Tensor& x, const tg::Tensor& y, bool autocast = false) {
  const tg::autocast region({.enabled = autocast});
  const tg::Tensor logits = model(x);  // [B, T, V]
  return tg::nn::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
}

// Adam's hyper-parameters (no weight decay) and the clipping.
struct OptimizerConfig {
  double lr = 2e-3;
  double beta1 = 0.9, beta2 = 0.99;
  double grad_clip = 1.0;  // the gradients' global 2-norm is clipped to this; 0: no clipping
};

inline std::unique_ptr<tg::optim::Adam> make_optimizer(CharLSTM& model, const OptimizerConfig& c) {
  return std::make_unique<tg::optim::Adam>(model.parameters(),
                                           tg::optim::AdamOptions{.lr = c.lr, .betas = {c.beta1, c.beta2}});
}

// One training step: loss, zero_grad, backward (through `backward`: data-parallel training
// averages the gradients there), clip, Adam's update. Returns the loss before the update.
template <typename Backward>
double train_step(CharLSTM& model, tg::optim::Optimizer& optimizer, const OptimizerConfig& c, const tg::Tensor& x,
                  const tg::Tensor& y, Backward backward, bool autocast = false) {
  const tg::Tensor loss = loss_of(model, x, y, autocast);
  optimizer.zero_grad();
  backward(loss);
  if (c.grad_clip > 0) tg::nn::utils::clip_grad_norm_(optimizer.parameters(), c.grad_clip);
  optimizer.step();
  return loss.item();
}

// `prompt` (at least one character) followed by `count` generated ones, each drawn by
// examples::text::sample_next(temperature, top_k). The prompt runs through the LSTM once; every
// new character then costs one position, fed with the state the previous ones left: the context
// is the whole text so far, at any length. In eval mode, without a tape.
inline std::vector<int64_t> generate(CharLSTM& model, const std::vector<int64_t>& prompt, int64_t count,
                                     double temperature, int64_t top_k, tg::Generator& generator) {
  tg::check(!prompt.empty(), "generate", "expected a prompt of at least one character");
  tg::check(count >= 0, "generate", "expected count >= 0, got ", count);
  const bool was_training = model.is_training();
  model.eval();
  tg::NoGradGuard no_grad;
  std::vector<int64_t> tokens = prompt;
  std::vector<double> input(prompt.begin(), prompt.end());
  std::optional<State> state;
  for (int64_t n = 0; n < count; ++n) {
    auto [logits, next] = model.forward(tg::tensor(input, {1, static_cast<int64_t>(input.size())}, tg::kInt64), state);
    state = std::move(next);
    const int64_t V = logits.size(-1);
    const tg::Tensor last = logits.reshape({-1, V}).select(0, logits.size(1) - 1);  // [V]
    tokens.push_back(examples::text::sample_next(last, temperature, top_k, generator));
    input = {static_cast<double>(tokens.back())};
  }
  model.train(was_training);
  return tokens;
}

}  // namespace char_lstm
