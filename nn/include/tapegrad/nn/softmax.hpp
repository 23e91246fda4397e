/// @file
/// tg::nn::Softmax and tg::nn::LogSoftmax — the softmax family as modules (torch.nn.Softmax(dim),
/// torch.nn.LogSoftmax(dim)); the dim is required, as PyTorch's implicit choice is deprecated.
///
/// @code
///   tg::nn::LogSoftmax log_probs(-1);
///   tg::Tensor y = log_probs(logits);  // logits.log_softmax(-1)
/// @endcode
#pragma once

#include <cstdint>

#include "tapegrad/nn/module.hpp"

namespace tg::nn {

/// exp(x) / Σ exp(x) along `dim`; no parameters.
class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : dim(dim) {}  ///< along `dim`
  Tensor forward(const Tensor& x) override;    ///< x.softmax(dim)
  int64_t dim;                                 ///< the dim normalised over
};

/// x − log Σ exp(x) along `dim`; no parameters.
class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim) : dim(dim) {}  ///< along `dim`
  Tensor forward(const Tensor& x) override;       ///< x.log_softmax(dim)
  int64_t dim;                                    ///< the dim normalised over
};

}  // namespace tg::nn
