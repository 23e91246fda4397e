/// @file
/// tg::nn::Dropout — zeroes elements at random while training, as nn.Dropout.
///
/// @code
///   tg::nn::Dropout drop(0.1);
///   tg::Tensor y = drop(x);  // training: each element zero with probability 0.1, others × 1/0.9
///   drop.eval();
///   tg::Tensor z = drop(x);  // evaluation: z is x
/// @endcode
///
/// The masks are PyTorch's for the same seed: tg::manual_seed(s) then drop(x) zeroes the elements
/// that torch.manual_seed(s) then nn.Dropout(p)(x) zeroes (CPU, same shape).
#pragma once

#include "tapegrad/nn/module.hpp"

namespace tg::nn {

/// Zeroes each element with probability p while training and scales the others by 1/(1 − p).
class Dropout : public Module {
 public:
  /// p in [0, 1], else tg::Error. Draws from `generator` when given (it must outlive the module),
  /// else from the default generator.
  explicit Dropout(double p = 0.5, Generator* generator = nullptr);
  Tensor forward(const Tensor& x) override;  ///< follows is_training() (train()/eval())
  double p;              ///< the probability of zeroing an element
  Generator* generator;  ///< where the masks come from; the default generator when null
};

}  // namespace tg::nn
