// BatchNorm: the argument checks, the running statistics, one tape node with the fused kernels of
// batch_norm_kernels.cpp (where the maths is), and the modules BatchNorm1d and BatchNorm2d.
#include "tapegrad/nn/batch_norm.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/node.hpp"
#include "bfloat16_parameters.hpp"
#include "batch_norm_kernels.hpp"
#include "dispatch.hpp"
#include "out_of_memory.hpp"
#include "tensor_impl.hpp"

namespace tg::nn {

namespace {

// [N, C, *] as the kernels' [N, C, S].
tg::detail::BatchNormShape channel_shape(const Shape& shape) {
  tg::detail::BatchNormShape s{shape[0], shape[1], 1};
  for (size_t d = 2; d < shape.size(); ++d) s.S *= shape[d];
  return s;
}

// The gradients of batch_norm in recorded tg ops, for a backward pass that is itself differentiated
// (create_graph); the formulas are batch_norm_kernels.cpp's. With batch statistics μ and rstd are
// recomputed from the connected x; in eval mode they are the saved constants. Slots: 0 x, 1 γ, 2 β.
// dy, x: [N, C, *]; gamma: [C] (ones when absent); stats: [2, C] float64 (μ, rstd) from forward.
void batch_norm_backward_differentiable(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& stats,
                                        bool batch_stats, double eps, autograd::GradInputs& grads) {
  const tg::detail::BatchNormShape s = channel_shape(x.shape());
  const Shape per_channel = {1, s.C, 1};
  const Tensor x3 = x.reshape({s.N, s.C, s.S}), dy3 = dy.reshape({s.N, s.C, s.S});
  Tensor centered, rstd;
  if (batch_stats) {
    centered = x3 - x3.mean({0, 2}, true);                          // x − μ
    rstd = ((centered * centered).mean({0, 2}, true) + eps).rsqrt();  // 1/√(σ² + ε)
  } else {
    const Tensor constants = stats.to(x.dtype());
    centered = x3 - constants.select(0, 0).reshape(per_channel);
    rstd = constants.select(0, 1).reshape(per_channel);
  }
  const Tensor x_hat = centered * rstd;
  if (grads.needed(0)) {
    const Tensor g = dy3 * gamma.reshape(per_channel);
    Tensor inner = g;
    if (batch_stats) inner = g - g.mean({0, 2}, true) - x_hat * (g * x_hat).mean({0, 2}, true);
    grads.set(0, (rstd * inner).reshape(x.shape()));
  }
  if (grads.needed(1)) grads.set(1, (dy3 * x_hat).sum({0, 2}));
  if (grads.needed(2)) grads.set(2, dy3.sum({0, 2}));
}

// Checks a [C] argument of batch_norm: defined ones have C elements and the input's dtype.
void check_per_channel(const Tensor& t, const char* what, const Tensor& input) {
  if (!t.defined()) return;
  const int64_t C = input.shape()[1];
  check(t.shape() == Shape{C}, "batch_norm", what, " should be of shape [", C, "] (the input's channels, dim 1 of ",
        input.shape(), "), got ", t.shape());
  check(t.dtype() == input.dtype(), "batch_norm", "dtypes differ: input ", input.dtype(), ", ", what, " ",
        t.dtype());
}

}  // namespace

namespace functional {

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const BatchNormFuncOptions& options) try {
  const char* op = "batch_norm";
  check(input.defined(), op, "undefined input");
  if (detail::bfloat16_input_with_parameters(input, running_mean, running_var, options.weight, options.bias)) {
    // In float32, rounded once (as torch 1.13's CPU kernels, mixed-type included). Running
    // statistics are updated in place: float32 ones directly, from the float32 batch statistics;
    // bfloat16 ones through float32 copies, rounded back once.
    const Tensor wide_mean = tg::detail::widened(running_mean), wide_var = tg::detail::widened(running_var);
    const Tensor y = tg::detail::in_float32([&](const Tensor& x, const Tensor& weight, const Tensor& bias) {
      BatchNormFuncOptions wide = options;
      wide.weight = weight, wide.bias = bias;
      return batch_norm(x, wide_mean, wide_var, wide);
    }, input, options.weight, options.bias);
    if (options.training) {
      NoGradGuard no_grad;
      if (tg::detail::is_bfloat16(running_mean)) Tensor(running_mean).copy_(wide_mean.to(kBFloat16));
      if (tg::detail::is_bfloat16(running_var)) Tensor(running_var).copy_(wide_var.to(kBFloat16));
    }
    return y;
  }
  check(input.dim() >= 2, op, "expected an input of at least 2 dims [N, C, *], got ", input.shape());
  check(is_floating_point(input.dtype()), op, "expected a float32 or float64 input, got ", input.dtype(),
        tg::detail::cast_advice<tg::detail::FloatingDTypes>(input.dtype()));
  check_per_channel(running_mean, "running_mean", input);
  check_per_channel(running_var, "running_var", input);
  check_per_channel(options.weight, "weight", input);
  check_per_channel(options.bias, "bias", input);
  const bool training = options.training;
  const tg::detail::BatchNormShape shape = channel_shape(input.shape());
  const int64_t count = shape.N * shape.S;  // values per channel
  // One value has no variance (PyTorch's _verify_batch_size); none at all is an empty batch, below.
  check(!training || count != 1, op, "expected more than 1 value per channel when training, got input size ",
        input.shape());
  check(training || (running_mean.defined() && running_var.defined()), op,
        "running_mean and running_var must be defined in evaluation mode (training = false)");
  // PyTorch takes a negative ε (a NaN wherever the variance is below −ε); refused as a caller's bug,
  // as by every norm here (docs/differences-from-pytorch.md).
  check(std::isfinite(options.eps) && options.eps >= 0, op, "eps must be finite and ≥ 0, got ", options.eps);

  const int64_t C = shape.C;
  const Tensor& weight = options.weight;
  const Tensor& bias = options.bias;
  // An absent γ or β is a constant the node sends nothing (the kernels take null for them).
  const Tensor weight_input = weight.defined() ? weight : ones({C}, input.dtype());
  const Tensor bias_input = bias.defined() ? bias : zeros({C}, input.dtype());
  const bool record = autograd::needs_grad(input, weight_input, bias_input);

  Tensor y = make_tensor(input.shape(), input.dtype(), op);
  // stats: [2, C] float64, the mean and rstd the input was normalised with (batch or running).
  Tensor stats = make_tensor({2, C}, kFloat64, op);
  double* mean = stats.mutable_data<double>();
  double* rstd = mean + C;
  tg::detail::dispatch_floating(op, input.dtype(), [&]<typename T>() {
    const auto& kernels = tg::detail::batch_norm_kernels_for_cpu().of<T>();
    const T* gamma = weight.defined() ? weight.data<T>() : nullptr;
    const T* beta = bias.defined() ? bias.data<T>() : nullptr;
    if (training && count == 0) {
      // An empty batch (N = 0, or a spatial dim 0) has no statistics: the output is empty and the
      // running ones stay, as PyTorch's empty-input path. μ = 0 and rstd = 1 make backward's
      // dγ = rstd·Σ∅ exactly 0.
      std::fill(mean, mean + C, 0.0);
      std::fill(rstd, rstd + C, 1.0);
    } else if (training) {
      std::vector<double> var(static_cast<size_t>(C));
      kernels.train_forward(input.data<T>(), gamma, beta, y.mutable_data<T>(), mean, var.data(), shape, options.eps);
      for (int64_t c = 0; c < C; ++c) rstd[c] = 1.0 / std::sqrt(var[static_cast<size_t>(c)] + options.eps);
      // running ← (1 − momentum)·running + momentum·batch, with the unbiased variance σ²·n/(n − 1).
      const double m = options.momentum, unbiased = static_cast<double>(count) / static_cast<double>(count - 1);
      if (running_mean.defined()) {
        Tensor handle = running_mean;  // shares the storage: the update is in place
        T* running = handle.mutable_data<T>();
        for (int64_t c = 0; c < C; ++c) running[c] = static_cast<T>((1 - m) * static_cast<double>(running[c]) + m * mean[c]);
        tg::detail::bump_version(running_mean);
      }
      if (running_var.defined()) {
        Tensor handle = running_var;
        T* running = handle.mutable_data<T>();
        for (int64_t c = 0; c < C; ++c)
          running[c] = static_cast<T>((1 - m) * static_cast<double>(running[c]) + m * var[static_cast<size_t>(c)] * unbiased);
        tg::detail::bump_version(running_var);
      }
    } else {
      // y = x·scale + shift, scale = γ·rstd, shift = β − μ·scale, from the running statistics.
      const T* running_m = running_mean.data<T>();
      const T* running_v = running_var.data<T>();
      std::vector<T> scale(static_cast<size_t>(C)), shift(static_cast<size_t>(C));
      for (int64_t c = 0; c < C; ++c) {
        mean[c] = static_cast<double>(running_m[c]);
        rstd[c] = 1.0 / std::sqrt(static_cast<double>(running_v[c]) + options.eps);
        const double a = rstd[c] * (gamma ? static_cast<double>(gamma[c]) : 1.0);
        scale[static_cast<size_t>(c)] = static_cast<T>(a);
        shift[static_cast<size_t>(c)] = static_cast<T>((beta ? static_cast<double>(beta[c]) : 0.0) - mean[c] * a);
      }
      kernels.affine_forward(input.data<T>(), scale.data(), shift.data(), y.mutable_data<T>(), shape);
    }
  });

  if (record)
    autograd::record(y, "BatchNormBackward", {input, weight_input, bias_input},
                     [saved_x = autograd::SavedTensor(input), saved_gamma = autograd::SavedTensor(weight_input),
                      stats, has_gamma = weight.defined(), training,
                      eps = options.eps](const Tensor& dy, autograd::GradInputs& grads) {
                       const Tensor &x = grads.unpack(saved_x), &gamma = grads.unpack(saved_gamma);
                       if (grads.create_graph())
                         return batch_norm_backward_differentiable(dy, x, gamma, stats, training, eps, grads);
                       const tg::detail::BatchNormShape shape = channel_shape(x.shape());
                       Tensor dx = grads.needed(0) ? make_tensor(x.shape(), x.dtype()) : Tensor();
                       Tensor dgamma = grads.needed(1) ? make_tensor({shape.C}, x.dtype()) : Tensor();
                       Tensor dbeta = grads.needed(2) ? make_tensor({shape.C}, x.dtype()) : Tensor();
                       tg::detail::dispatch_floating("BatchNormBackward", x.dtype(), [&]<typename T>() {
                         const auto backward = tg::detail::batch_norm_kernels_for_cpu().of<T>().backward;
                         const double* mean = stats.data<double>();
                         backward(dy.data<T>(), x.data<T>(), has_gamma ? gamma.data<T>() : nullptr, mean,
                                  mean + shape.C, dx.defined() ? dx.mutable_data<T>() : nullptr,
                                  dgamma.defined() ? dgamma.mutable_data<T>() : nullptr,
                                  dbeta.defined() ? dbeta.mutable_data<T>() : nullptr, shape, training);
                       });
                       if (dx.defined()) grads.set(0, dx);
                       if (dgamma.defined()) grads.set(1, dgamma);
                       if (dbeta.defined()) grads.set(2, dbeta);
                     });
  return y;
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("batch_norm");
}

}  // namespace functional

// --- the modules -------------------------------------------------------------------------------------

BatchNormBase::BatchNormBase(const char* name, int64_t num_features, const BatchNormOptions& options)
    : weight(std::string(name) + ".weight", options.affine ? ones({std::max<int64_t>(num_features, 0)}) : Tensor()),
      bias(std::string(name) + ".bias", options.affine ? zeros({std::max<int64_t>(num_features, 0)}) : Tensor()),
      num_features(num_features),
      options(options),
      name_(name) {
  check(num_features >= 1, name, "num_features must be ≥ 1, got ", num_features);
  check(!options.momentum || std::isfinite(*options.momentum), name, "momentum must be finite or nullopt, got ",
        options.momentum.value_or(0.0));
  if (options.track_running_stats) {
    running_mean = zeros({num_features});
    running_var = ones({num_features});
    num_batches_tracked = zeros({}, kInt64);
  }
}

BatchNormBase& BatchNormBase::operator=(const BatchNormBase& other) {
  if (this == &other) return *this;
  Module::operator=(other);  // checks that both declare the same parameters and buffers
  if (weight.defined()) weight = other.weight;
  if (bias.defined()) bias = other.bias;
  NoGradGuard no_grad;
  if (running_mean.defined()) running_mean.copy_(other.running_mean);
  if (running_var.defined()) running_var.copy_(other.running_var);
  if (num_batches_tracked.defined()) num_batches_tracked.copy_(other.num_batches_tracked);
  num_features = other.num_features;
  options = other.options;
  return *this;
}

void BatchNormBase::members(Members& m) {
  m.parameter("weight", weight);
  m.parameter("bias", bias);
  m.buffer("running_mean", running_mean);
  m.buffer("running_var", running_var);
  m.buffer("num_batches_tracked", num_batches_tracked);
}

void BatchNormBase::reset_running_stats() {
  NoGradGuard no_grad;
  if (running_mean.defined()) running_mean.zero_();
  if (running_var.defined()) running_var.fill_(1.0);
  if (num_batches_tracked.defined()) num_batches_tracked.zero_();
}

void BatchNormBase::reset_parameters() {
  reset_running_stats();
  NoGradGuard no_grad;
  if (weight.defined()) weight.fill_(1.0);
  if (bias.defined()) bias.zero_();
}

Tensor BatchNormBase::forward(const Tensor& x) {
  check(x.defined(), name_, "undefined input");
  check_input_dim(x);
  double factor = options.momentum.value_or(0.0);
  if (is_training() && options.track_running_stats && num_batches_tracked.defined()) {
    num_batches_tracked.mutable_data<int64_t>()[0] += 1;
    tg::detail::bump_version(num_batches_tracked);
    // momentum = nullopt: the n-th batch gets weight 1/n, a cumulative moving average.
    factor = options.momentum ? *options.momentum
                              : 1.0 / static_cast<double>(num_batches_tracked.data<int64_t>()[0]);
  }
  // Without running statistics, eval mode normalises with the batch's too (PyTorch's bn_training).
  const bool batch_stats = is_training() || (!running_mean.defined() && !running_var.defined());
  const bool pass_running = !is_training() || options.track_running_stats;
  return functional::batch_norm(x, pass_running ? running_mean : Tensor(), pass_running ? running_var : Tensor(),
                                {.weight = weight, .bias = bias, .training = batch_stats, .momentum = factor,
                                 .eps = options.eps});
}

void BatchNorm1d::check_input_dim(const Tensor& x) const {
  check(x.dim() == 2 || x.dim() == 3, "BatchNorm1d", "expected 2D or 3D input (got ", x.dim(), "D input of shape ",
        x.shape(), ")");
}

void BatchNorm2d::check_input_dim(const Tensor& x) const {
  check(x.dim() == 4, "BatchNorm2d", "expected 4D input (got ", x.dim(), "D input of shape ", x.shape(), ")");
}

}  // namespace tg::nn
