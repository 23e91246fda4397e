/// @file
/// tg::nn::functional — the fused kernels behind the modules, one tape node each.
///
/// @code
///   namespace F = tg::nn::functional;
///   tg::Tensor h = F::relu(F::linear(x, w, b));
///   tg::Tensor y = F::layer_norm(h, {6}, gamma, beta, 1e-5);
/// @endcode
///
/// Modules call exactly these functions. Every argument is validated here and a tg::Error names
/// the function and the offending shapes; an undefined tensor means "absent" where a default is {}.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tapegrad/nn/attention.hpp"
#include "tapegrad/nn/loss.hpp"
#include "tapegrad/tensor.hpp"

/// The fused kernels behind the modules as functions, one tape node each (torch.nn.functional).
namespace tg::nn::functional {

/// x: [..., in], weight: [out, in], bias: [out] or absent -> [..., out]   (node LinearBackward)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

/// max(x, 0); the backward masks by the saved output   (node ReluBackward)
Tensor relu(const Tensor& x);
/// x Φ(x): approximate "none" (erf) or "tanh"; one fused pass forward and backward   (node GeluBackward)
Tensor gelu(const Tensor& x, std::string_view approximate = "none");
Tensor tanh(const Tensor& x);     ///< backward from the saved output: g (1 − y²)   (node TanhBackward)
Tensor sigmoid(const Tensor& x);  ///< backward from the saved output: g (1 − y) y   (node SigmoidBackward)
/// The pointwise activations of CNNs, each one fused pass forward and one backward from the saved
/// input, with PyTorch's formulas, defaults and derivatives at the kinks:
///@{
/// x σ(x) = x / (1 + e^−x)   (node SiluBackward)
Tensor silu(const Tensor& x);
/// x > 0 ? x : negative_slope · x; the gradient at 0 is negative_slope   (node LeakyReluBackward)
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
/// x > 0 ? x : α (eˣ − 1); the gradient at 0 is α   (node EluBackward)
Tensor elu(const Tensor& x, double alpha = 1.0);
/// βx > threshold ? x : log(1 + e^(βx)) / β   (node SoftplusBackward)
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
/// x · min(max(x + 3, 0), 6) / 6; the gradient is x/3 + ½ on [−3, 3), 0 below, 1 from 3 on (−½ at
/// −3 and 1 at 3, as PyTorch's vectorised kernel)   (node HardswishBackward)
Tensor hardswish(const Tensor& x);
/// x · tanh(softplus(x))   (node MishBackward)
Tensor mish(const Tensor& x);
///@}
/// In training, zeroes each element with probability p and scales the others by 1/(1 − p), with
/// PyTorch's mask for the same seed (`generator`, or the default one when null); identity when not
/// training or p = 0, zeros when p = 1. The backward multiplies by the saved mask   (DropoutBackward)
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, Generator* generator = nullptr);

/// x: [..., *normalized_shape]; weight/bias: normalized_shape or absent   (node LayerNormBackward)
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

/// x: [..., *normalized_shape]; weight: normalized_shape or absent; eps unset: the dtype's machine
/// epsilon, as torch.nn.functional.rms_norm   (node RmsNormBackward)
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);

/// The softmax family along dim, as x.softmax(dim) and x.log_softmax(dim)   (SoftmaxBackward, LogSoftmaxBackward)
///@{
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
///@}
/// indices: int64 [...], weight: [num_embeddings, embedding_dim] -> [..., embedding_dim]; the
/// weight's gradient gets no contribution at padding_idx (negative counts from the end)   (EmbeddingBackward)
Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx = std::nullopt);

/// The optional arguments of torch.nn.functional.embedding, with its defaults:
/// `F::embedding(tokens, weight, {.max_norm = 1.0, .scale_grad_by_freq = true})`.
struct EmbeddingFuncOptions {
  /// A row that receives no gradient; negative counts from the end.
  std::optional<int64_t> padding_idx = std::nullopt;
  /// Before the lookup, each row that the indices name and whose norm_type-norm exceeds max_norm
  /// is scaled in place (not recorded on the tape) to max_norm / (norm + 1e-7) times itself, as
  /// PyTorch's embedding_renorm_. Must be >= 0.
  std::optional<double> max_norm = std::nullopt;
  /// The p of the p-norm that max_norm bounds: > 0, or infinity (the largest |value|).
  double norm_type = 2.0;
  /// Divides the gradient each occurrence of an index sends to its row by how many times that
  /// index occurs in `indices`.
  bool scale_grad_by_freq = false;
};

/// embedding() with PyTorch's max_norm, norm_type and scale_grad_by_freq (EmbeddingBackward).
/// With max_norm set this writes into `weight` (under no tape), as PyTorch does.
Tensor embedding(const Tensor& indices, const Tensor& weight, const EmbeddingFuncOptions& options);

/// The losses of loss.hpp (tg::nn::cross_entropy, ...), under their F:: names as well.
using tg::nn::binary_cross_entropy;
using tg::nn::binary_cross_entropy_with_logits;
using tg::nn::cross_entropy;
using tg::nn::huber_loss;
using tg::nn::l1_loss;
using tg::nn::mse_loss;
using tg::nn::nll_loss;
using tg::nn::smooth_l1_loss;

}  // namespace tg::nn::functional
