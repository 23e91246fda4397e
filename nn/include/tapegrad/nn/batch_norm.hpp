/// @file
/// tg::nn::BatchNorm1d, tg::nn::BatchNorm2d and F::batch_norm — normalise each channel (dim 1) over
/// the batch and the spatial dims:
/// @code
///   y = (x − μ_c) / √(σ²_c + ε) · γ_c + β_c,   μ_c, σ²_c (biased) over N and the spatial dims
/// @endcode
/// in training mode, and with the running estimates in place of μ_c and σ²_c in eval mode. Training
/// updates the running estimates in place, as PyTorch does, with the unbiased variance:
/// @code
///   running_mean = (1 − momentum)·running_mean + momentum·μ
///   running_var  = (1 − momentum)·running_var  + momentum·σ²·n/(n − 1),   n = N·spatial
/// @endcode
/// With momentum = nullopt the module uses momentum = 1/num_batches_tracked: a cumulative average.
///
/// @code
///   tg::nn::BatchNorm2d bn(32);                              // nn.BatchNorm2d(32)
///   tg::nn::BatchNorm2d cma(32, {.momentum = std::nullopt}); // cumulative moving average
///   tg::Tensor y = bn(x);                                    // x: [N, 32, H, W]; updates the running stats
///   bn.eval();                                               // now normalises with them
/// @endcode
#pragma once

#include <cstdint>
#include <optional>

#include "tapegrad/nn/module.hpp"

namespace tg::nn {

/// The optional arguments of BatchNorm1d/2d, by PyTorch's names and defaults.
struct BatchNormOptions {
  double eps = 1e-5;                    ///< ε, added to the variance: finite and ≥ 0, else forward throws
  std::optional<double> momentum = 0.1;  ///< weight of the new batch in the running stats; nullopt: cumulative average
  bool affine = true;                    ///< false: no γ and β
  /// false: no running stats (the buffers are absent) and batch statistics in eval mode too.
  bool track_running_stats = true;
};

/// What BatchNorm1d and BatchNorm2d share (libtorch's BatchNormImplBase): parameters, buffers and
/// forward; they differ only in the input ranks they accept.
class BatchNormBase : public Module {
 public:
  /// weight (γ) ones and bias (β) zeros of [num_features] (absent without affine); running_mean
  /// zeros, running_var ones (float32) and num_batches_tracked 0 (int64, 0-d), all absent without
  /// track_running_stats. tg::Error unless num_features ≥ 1.
  BatchNormBase(const char* name, int64_t num_features, const BatchNormOptions& options);
  BatchNormBase(const BatchNormBase&) = default;  ///< shares parameters and buffers (see Module)
  BatchNormBase(BatchNormBase&&) = default;       ///< takes over parameters and buffers
  /// Copies the other module's parameter and buffer values into this one's (Module's assignment);
  /// both must have the same options' shapes.
  BatchNormBase& operator=(const BatchNormBase& other);
  BatchNormBase& operator=(BatchNormBase&& other) { return *this = static_cast<const BatchNormBase&>(other); }  ///< as the copy assignment

  /// Training mode (or no running stats): normalises with the batch's statistics and, when tracking,
  /// increments num_batches_tracked and updates running_mean and running_var in place; eval mode:
  /// normalises with the running stats. One tape node (BatchNormBackward). An empty batch gives an
  /// empty output and still counts in num_batches_tracked, the running stats unchanged (PyTorch's
  /// behaviour); a batch of one value per channel is refused in training mode (F::batch_norm).
  Tensor forward(const Tensor& x) override;
  void members(Members& m) override;

  /// running_mean ← 0, running_var ← 1, num_batches_tracked ← 0 (in place).
  void reset_running_stats();
  /// reset_running_stats(), then γ ← 1 and β ← 0.
  void reset_parameters();

  Parameter weight;            ///< γ: [num_features], or absent
  Parameter bias;              ///< β: [num_features], or absent
  Tensor running_mean;         ///< buffer: [num_features], or absent (undefined)
  Tensor running_var;          ///< buffer: [num_features], or absent (undefined)
  Tensor num_batches_tracked;  ///< buffer: int64 0-d, the training batches seen, or absent
  int64_t num_features;        ///< C, the size of dim 1 of the input
  BatchNormOptions options;    ///< as constructed

 protected:
  /// tg::Error naming the module unless x has a rank it accepts.
  virtual void check_input_dim(const Tensor& x) const = 0;

 private:
  const char* name_;
};

/// nn.BatchNorm1d: input [N, C] or [N, C, L] (batch_norm.hpp).
class BatchNorm1d : public BatchNormBase {
 public:
  /// See BatchNormBase's constructor.
  explicit BatchNorm1d(int64_t num_features, const BatchNormOptions& options = {})
      : BatchNormBase("BatchNorm1d", num_features, options) {}

 protected:
  void check_input_dim(const Tensor& x) const override;  ///< 2-D or 3-D
};

/// nn.BatchNorm2d: input [N, C, H, W] (batch_norm.hpp).
class BatchNorm2d : public BatchNormBase {
 public:
  /// See BatchNormBase's constructor.
  explicit BatchNorm2d(int64_t num_features, const BatchNormOptions& options = {})
      : BatchNormBase("BatchNorm2d", num_features, options) {}

 protected:
  void check_input_dim(const Tensor& x) const override;  ///< 4-D
};

namespace functional {

/// The optional arguments of F::batch_norm, by PyTorch's names and defaults.
struct BatchNormFuncOptions {
  Tensor weight;          ///< γ: [C], or undefined for ones
  Tensor bias;            ///< β: [C], or undefined for zeros
  bool training = false;  ///< batch statistics (and running stats updated) rather than the running stats
  double momentum = 0.1;  ///< weight of the batch in the running-stat update
  double eps = 1e-5;      ///< ε, added to the variance: finite and ≥ 0 (PyTorch also takes a negative one)
};

/// torch.nn.functional.batch_norm: input [N, C, *] normalised per channel (batch_norm.hpp). In
/// training mode the batch's statistics are used and defined running_mean/running_var ([C], the
/// input's dtype) are updated in place; otherwise the running stats are used and must be defined.
/// tg::Error naming the shapes for a rank below 2, a [C] argument of another size or dtype, or
/// training with exactly one value per channel (N·spatial = 1: its variance is undefined). An
/// empty input (N = 0, or a spatial dim 0) gives an empty output and leaves the running stats
/// alone, as PyTorch; its weight and bias get zero gradients. One tape node, twice differentiable.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const BatchNormFuncOptions& options = {});

}  // namespace functional

}  // namespace tg::nn
