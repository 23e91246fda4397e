// Losses (reduction "mean", PyTorch's default). Both are single fused tape nodes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tg::nn {

// mean((input − target)²) over all elements; a 0-d tensor. Same shape and dtype required.
Tensor mse_loss(const Tensor& input, const Tensor& target);

// mean over rows i of −log softmax(logits[i])[targets[i]]; logits: [N, C], targets: an int64
// tensor [N] of classes in [0, C).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);
// The same with the classes in a vector, or a braced list ({3, 0}; {} for N = 0).
Tensor cross_entropy(const Tensor& logits, const std::vector<int64_t>& targets);
Tensor cross_entropy(const Tensor& logits, std::initializer_list<int64_t> targets);

}  // namespace tg::nn
