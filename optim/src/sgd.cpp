#include "tapegrad/optim/sgd.hpp"

#include <cmath>
#include <utility>

#include "dispatch.hpp"
#include "parallel_for.hpp"
#include "tensor_impl.hpp"

namespace tg::optim {

namespace {

void check_options(const SGDOptions& options) {
  // x >= 0 is false for NaN, so these comparisons reject NaN too.
  check(options.lr >= 0, "SGD", "expected lr >= 0, got ", options.lr);
  check(options.momentum >= 0, "SGD", "expected momentum >= 0, got ", options.momentum);
  check(!std::isnan(options.dampening), "SGD", "expected dampening to be a number, got ", options.dampening);
  check(options.weight_decay >= 0, "SGD", "expected weight_decay >= 0, got ", options.weight_decay);
  check(!options.nesterov || (options.momentum > 0 && options.dampening == 0), "SGD",
        "nesterov momentum requires momentum > 0 and dampening = 0, got momentum = ", options.momentum,
        ", dampening = ", options.dampening);
}

// The options as T, rounded once, as PyTorch rounds a Scalar alpha to the tensor's dtype.
template <typename T>
struct SGDCoefficients {
  T lr;
  T momentum;
  T one_minus_dampening;
  T weight_decay;
  bool use_weight_decay;  // skipped when 0, as PyTorch does: 0 * p is NaN for an infinite p
  bool nesterov;
};

// One fused pass over a parameter: reads param, grad and buffer once, writes param and buffer.
// param, grad, buffer: [numel]; buffer is null without momentum. first_step: buffer holds garbage
// and is set to g, as PyTorch does with buf = clone(g). Elements are independent, so the result
// does not depend on how the chunks are scheduled.
template <typename T>
void sgd_update(int64_t numel, T* param, const T* grad, T* buffer, bool first_step,
                const SGDCoefficients<T>& coefficients) {
  if (buffer == nullptr && !coefficients.use_weight_decay) {
    // Plain SGD, the common case: p -= lr * g. A loop without branches, which GCC vectorises
    // with full vectors and a scalar tail (the general loop below got a masked AVX-512 body).
    const T lr = coefficients.lr;
    detail::parallel_for(numel, detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
      T* __restrict p = param + begin;
      const T* __restrict g = grad + begin;
      const int64_t n = end - begin;
      for (int64_t i = 0; i < n; ++i) p[i] -= lr * g[i];
    });
    return;
  }
  detail::parallel_for(numel, detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      // g = grad + weight_decay * p, a local: the stored gradient is never edited
      T g = grad[i];
      if (coefficients.use_weight_decay) g += coefficients.weight_decay * param[i];
      if (buffer != nullptr) {
        // buf = g on the first step, else momentum * buf + (1 - dampening) * g
        const T velocity =
            first_step ? g : coefficients.momentum * buffer[i] + coefficients.one_minus_dampening * g;
        buffer[i] = velocity;
        // Nesterov looks ahead along the updated velocity
        g = coefficients.nesterov ? g + coefficients.momentum * velocity : velocity;
      }
      param[i] -= coefficients.lr * g;
    }
  });
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params), "SGD"), options_(options), momentum_buffers_(params_.size()) {
  check_options(options_);
}

void SGD::set_options(const SGDOptions& options) {
  check_options(options);
  options_ = options;
}

void SGD::set_lr(double lr) {
  check(lr >= 0, "SGD", "expected lr >= 0, got ", lr);
  options_.lr = lr;
}

void SGD::step() {
  // Check every gradient before touching any parameter, so that a bad one leaves the model as it was.
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor grad = params_[i].grad();
    if (!grad.defined()) continue;
    check(grad.dtype() == params_[i].dtype() && grad.shape() == params_[i].shape(), "SGD", "expected parameter ", i,
          "'s grad to be ", params_[i].dtype(), " of shape ", params_[i].shape(), ", got ", grad.dtype(), " of shape ",
          grad.shape());
  }

  const bool use_momentum = options_.momentum != 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& param = params_[i];
    const Tensor grad = param.grad();
    if (!grad.defined()) continue;  // this parameter took no part in the loss
    Tensor& buffer = momentum_buffers_[i];
    const bool first_step = use_momentum && !buffer.defined();
    if (first_step) buffer = empty(param.shape(), param.dtype());
    detail::dispatch(param.dtype(), [&]<typename T>() {
      const SGDCoefficients<T> coefficients{
          .lr = static_cast<T>(options_.lr),
          .momentum = static_cast<T>(options_.momentum),
          .one_minus_dampening = static_cast<T>(1 - options_.dampening),
          .weight_decay = static_cast<T>(options_.weight_decay),
          .use_weight_decay = options_.weight_decay != 0,
          .nesterov = options_.nesterov,
      };
      sgd_update<T>(param.numel(), param.mutable_data<T>(), grad.data<T>(),
                    use_momentum ? buffer.mutable_data<T>() : nullptr, first_step, coefficients);
    });
    tg::detail::bump_version(param);  // a backward that saved param before this step must refuse it
  }
  ++step_count_;
}

void SGD::load_state(int64_t step_count, std::vector<Tensor> momentum_buffers) {
  check(step_count >= 0, "SGD", "load_state: expected step_count >= 0, got ", step_count);
  check(momentum_buffers.size() == params_.size(), "SGD", "load_state: expected ", params_.size(),
        " momentum buffers (one per parameter), got ", momentum_buffers.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& buffer = momentum_buffers[i];
    if (!buffer.defined()) continue;
    check(buffer.dtype() == params_[i].dtype() && buffer.shape() == params_[i].shape(), "SGD",
          "load_state: expected momentum buffer ", i, " to be ", params_[i].dtype(), " of shape ", params_[i].shape(),
          ", got ", buffer.dtype(), " of shape ", buffer.shape());
  }
  // Copies, cut from the tape: later steps must not write into the checkpoint's tensors.
  for (Tensor& buffer : momentum_buffers)
    if (buffer.defined()) buffer = buffer.detach().clone();
  step_count_ = step_count;
  momentum_buffers_ = std::move(momentum_buffers);
}

}  // namespace tg::optim
