// Activation modules.
#pragma once

#include "tapegrad/nn/module.hpp"

namespace tg::nn {

// max(x, 0) elementwise; no parameters.
class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};

}  // namespace tg::nn
