/// @file
/// torch.autograd.grad and torch.autograd.backward: gradients of several outputs, gradients
/// returned rather than accumulated, and gradients that can be differentiated again.
///
/// @code
///   tg::Tensor x = tg::randn({8, 2}, tg::kFloat64).requires_grad_();
///   tg::Tensor y = model(x).sum();
///   // dy/dx, itself recorded: its own gradient gives second derivatives.
///   tg::Tensor dx = tg::autograd::grad({y}, {x}, {}, {.create_graph = true})[0];
///   tg::Tensor penalty = (dx.pow(2.0).sum({1}).sqrt() - 1.0).pow(2.0).mean();
///   penalty.backward();  // reaches the parameters through dx's graph
/// @endcode
#pragma once

#include <optional>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tg::autograd {

/// torch.autograd.grad's keyword arguments.
struct GradOptions {
  /// Keep what the graph saved so that it can be differentiated through again; defaults to
  /// create_graph.
  std::optional<bool> retain_graph{};
  /// Record the backward pass, so that the returned gradients can be differentiated again.
  bool create_graph = false;
  /// An input no gradient reaches gets an undefined tensor instead of a tg::Error.
  bool allow_unused = false;
  /// An input no gradient reaches gets zeros of its shape (implies allow_unused).
  bool materialize_grads = false;
};

/// The gradients of sum_i ⟨outputs[i], grad_outputs[i]⟩ with respect to each of `inputs`
/// (torch.autograd.grad). Nothing's grad() changes. `grad_outputs` may be empty, or hold undefined
/// tensors, for one-element outputs (seeded with 1). Every input must require grad (leaves or
/// results of recorded ops); one that the outputs do not depend on is a tg::Error unless
/// allow_unused or materialize_grads.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, const GradOptions& options = {});

/// Accumulates into the leaves' grad() the gradient of sum_i ⟨tensors[i], grad_tensors[i]⟩
/// (torch.autograd.backward): one pass for several outputs, e.g. two losses.
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              const BackwardOptions& options = {});

}  // namespace tg::autograd
