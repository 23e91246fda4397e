// tg::nn::Softmax and tg::nn::LogSoftmax — the softmax family as modules (torch.nn.Softmax(dim),
// torch.nn.LogSoftmax(dim)); the dim is required, as PyTorch's implicit choice is deprecated.
//
//   tg::nn::LogSoftmax log_probs(-1);
//   tg::Tensor y = log_probs(logits);  // logits.log_softmax(-1)
#pragma once

#include <cstdint>

#include "tapegrad/nn/module.hpp"

namespace tg::nn {

// exp(x) / Σ exp(x) along `dim`; no parameters.
class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) override;
  int64_t dim;
};

// x − log Σ exp(x) along `dim`; no parameters.
class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) override;
  int64_t dim;
};

}  // namespace tg::nn
