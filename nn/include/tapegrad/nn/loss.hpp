/// @file
/// Losses, with PyTorch's arguments, defaults and numbers. Each loss is one fused forward kernel
/// and one closed-form backward, recorded as a single tape node.
///
/// @code
///   namespace nn = tg::nn;
///   tg::Tensor loss = nn::cross_entropy(logits, classes, {.ignore_index = 0, .label_smoothing = 0.1});
///   tg::Tensor per_element = nn::huber_loss(prediction, target, nn::Reduction::None, 0.5);
/// @endcode
///
/// Shapes: N is the batch, C the classes, d1, ... optional spatial dims (cross_entropy, nll_loss).
/// Every loss takes a `Reduction`: None keeps one loss per element (per sample for the class
/// losses), Sum adds them, Mean (the default) averages them; the mean of nothing is NaN, as in
/// PyTorch. Class and element weights are constants: no gradient flows to them.
///
/// One deliberate difference from PyTorch: where PyTorch warns and broadcasts a target whose shape
/// differs from the input's (mse_loss, l1_loss, smooth_l1_loss, huber_loss), these refuse it with a
/// tg::Error naming both shapes; such a call is almost always a bug ([N, 1] against [N]).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tg::nn {

/// How a loss reduces its per-element losses: None keeps them, Mean (the default) averages, Sum adds.
enum class Reduction { None, Mean, Sum };

/// nll_loss's optional arguments, by PyTorch's names.
struct NllLossOptions {
  Tensor weight = {};           ///< [C], a weight per class, or absent
  int64_t ignore_index = -100;  ///< targets of this class contribute nothing (not even to the mean)
  Reduction reduction = Reduction::Mean;  ///< None, Mean or Sum
};

/// cross_entropy's optional arguments, by PyTorch's names.
struct CrossEntropyOptions {
  Tensor weight = {};           ///< [C], a weight per class, or absent
  int64_t ignore_index = -100;  ///< class-index targets only
  Reduction reduction = Reduction::Mean;  ///< None, Mean or Sum
  double label_smoothing = 0.0;  ///< in [0, 1]: the target becomes (1 − ε)·target + ε/C
};

/// −Σ_c target_c · log softmax(input)_c over the class dim (dim 1; dim 0 for an unbatched [C]).
/// @code
///   input: [N, C], [C] or [N, C, d1, ...]
///   target: int64 classes [N], [] or [N, d1, ...] in [0, C) or ignore_index   (node CrossEntropyBackward)
///        or probabilities of input's shape and dtype, differentiable  (node CrossEntropyProbBackward)
/// @endcode
/// Mean divides by the summed weights of the non-ignored targets (their count when unweighted); with
/// probability targets it divides by the number of samples N·d1·... . Label smoothing's term,
/// −Σ_c w_c·log p_c, is weighted and averaged as the main term is, as in PyTorch 1.13.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options = {});
/// The same with the classes in a vector, or a braced list ({3, 0}; {} for N = 0).
///@{
Tensor cross_entropy(const Tensor& input, const std::vector<int64_t>& target, const CrossEntropyOptions& options = {});
Tensor cross_entropy(const Tensor& input, std::initializer_list<int64_t> target, const CrossEntropyOptions& options = {});
///@}

/// −weight[target] · input[target] over the class dim; input holds log-probabilities; shapes as
/// cross_entropy's class-index form   (node NllLossBackward)
Tensor nll_loss(const Tensor& input, const Tensor& target, const NllLossOptions& options = {});

/// Elementwise losses of d = input − target; same shape and dtype; both differentiable.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);  ///< d²
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);   ///< |d|
/// |d| < beta ? d²/(2·beta) : |d| − beta/2; beta ≥ 0 (0 is l1_loss)
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                      double beta = 1.0);
/// |d| < delta ? d²/2 : delta·(|d| − delta/2); delta > 0
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                  double delta = 1.0);

/// −weight · (target·log(input) + (1 − target)·log(1 − input)), each log clamped at −100 as PyTorch
/// does; input and target in [0, 1], same shape; weight broadcasts to input's shape or is absent.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            Reduction reduction = Reduction::Mean);
/// −weight · (pos_weight·target·log σ(input) + (1 − target)·log(1 − σ(input))), computed in
/// PyTorch's overflow-free form; pos_weight (e.g. [C]) and weight broadcast to input's shape.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                                        const Tensor& pos_weight = {}, Reduction reduction = Reduction::Mean);

}  // namespace tg::nn
