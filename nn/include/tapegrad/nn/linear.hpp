// tg::nn::Linear — y = x·Wᵀ + b over the last dim of x.
#pragma once

#include <cstdint>

#include "tapegrad/nn/module.hpp"

namespace tg::nn {

class Linear : public Module {
 public:
  // weight [out, in] and bias [out] drawn from U(−1/√in, 1/√in), PyTorch's default, with the
  // global generator (tg::manual_seed). bias = false: no bias parameter at all.
  Linear(int64_t in_features, int64_t out_features, bool bias = true);

  Tensor forward(const Tensor& x) override;  // x: [..., in] -> [..., out]
  void members(Members& m) override;

  Parameter weight;  // [out, in]
  Parameter bias;    // [out], or absent
  int64_t in_features;
  int64_t out_features;
};

}  // namespace tg::nn
