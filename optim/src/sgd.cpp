#include "tapegrad/optim/sgd.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <type_traits>
#include <utility>

#include "dispatch.hpp"
#include "option_values.hpp"
#include "parallel_for.hpp"
#include "tensor_impl.hpp"

namespace tg::optim {

namespace {

constexpr const char* kMomentumBuffer = "momentum_buffer";

void check_sgd_options(const SGDOptions& options) {
  options::check_non_negative("SGD", "lr", options.lr);
  options::check_non_negative("SGD", "momentum", options.momentum);
  options::check_finite("SGD", "dampening", options.dampening);
  options::check_non_negative("SGD", "weight_decay", options.weight_decay);
  check(!options.nesterov || (options.momentum > 0 && options.dampening == 0), "SGD",
        "nesterov momentum requires momentum > 0 and dampening = 0, got momentum = ", options.momentum,
        ", dampening = ", options.dampening);
}

SGDOptions checked(const SGDOptions& options) {
  check_sgd_options(options);
  return options;
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
  bool maximize;
};

// One fused pass over a parameter: reads param, grad and buffer once, writes param and buffer.
// param, grad, buffer: [numel]; buffer is null without momentum. first_step: buffer holds garbage
// and is set to g, as PyTorch does with buf = clone(g). Elements are independent, so the result
// does not depend on how the chunks are scheduled.
template <typename T>
void sgd_update(int64_t numel, T* param, const T* grad, T* buffer, bool first_step,
                const SGDCoefficients<T>& coefficients) {
  if (buffer == nullptr && !coefficients.use_weight_decay && !coefficients.maximize) {
    // Plain SGD, the common case: p -= lr * g (p += lr * g to maximize). A loop without branches, which GCC vectorises
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
      // g = ±grad + weight_decay * p, a local: the stored gradient is never edited
      T g = coefficients.maximize ? -grad[i] : grad[i];
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
    : OptimizerWithOptions("SGD", std::move(params), checked(options)) {}

std::vector<Tensor> SGD::momentum_buffers() const {
  std::vector<Tensor> buffers;
  for (size_t i = 0; i < parameters().size(); ++i) {
    auto it = state(i).find(kMomentumBuffer);
    buffers.push_back(it != state(i).end() ? it->second : Tensor());
  }
  return buffers;
}

void SGD::update(size_t group, Tensor& param, const Tensor& grad, ParamState& state) {
  const SGDOptions& options = this->options(group);
  const bool use_momentum = options.momentum != 0;
  Tensor* buffer = nullptr;
  bool first_step = false;
  if (use_momentum) {
    auto [it, inserted] = state.try_emplace(kMomentumBuffer);
    if (inserted) it->second = empty(param.shape(), param.dtype());
    buffer = &it->second;
    first_step = inserted;
  }
  detail::dispatch_floating("SGD.step", param.dtype(), [&]<typename T>() {
    const SGDCoefficients<T> coefficients{
        .lr = static_cast<T>(options.lr),
        .momentum = static_cast<T>(options.momentum),
        .one_minus_dampening = static_cast<T>(1 - options.dampening),
        .weight_decay = static_cast<T>(options.weight_decay),
        .use_weight_decay = options.weight_decay != 0,
        .nesterov = options.nesterov,
        .maximize = options.maximize,
    };
    sgd_update<T>(param.numel(), param.mutable_data<T>(), grad.data<T>(),
                  buffer != nullptr ? buffer->mutable_data<T>() : nullptr, first_step, coefficients);
  });
  tg::detail::bump_version(param);  // a backward that saved param before this step must refuse it
}

void SGD::check_options(const SGDOptions& options) const { check_sgd_options(options); }

SGDOptions SGD::inherit(const SGDGroupOptions& given, const SGDOptions& inherited) const {
  return {.lr = given.lr.value_or(inherited.lr),
          .momentum = given.momentum.value_or(inherited.momentum),
          .dampening = given.dampening.value_or(inherited.dampening),
          .weight_decay = given.weight_decay.value_or(inherited.weight_decay),
          .nesterov = given.nesterov.value_or(inherited.nesterov),
          .maximize = given.maximize.value_or(inherited.maximize)};
}

// Exactly SGD's options, each of its type, then validated. "maximize" may be absent: checkpoints
// written before it existed did not maximize.
SGDOptions SGD::parse_options(const OptionValues& values) const {
  options::check_keys("SGD", values, {"lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize"});
  return checked({.lr = options::option_of<double>("SGD", values, "lr"),
                  .momentum = options::option_of<double>("SGD", values, "momentum"),
                  .dampening = options::option_of<double>("SGD", values, "dampening"),
                  .weight_decay = options::option_of<double>("SGD", values, "weight_decay"),
                  .nesterov = options::option_of<bool>("SGD", values, "nesterov"),
                  .maximize = options::option_of<bool>("SGD", values, "maximize", false)});
}

OptionValues SGD::option_values(const SGDOptions& options) const {
  return {{"lr", options.lr},
          {"momentum", options.momentum},
          {"dampening", options.dampening},
          {"weight_decay", options.weight_decay},
          {"nesterov", options.nesterov},
          {"maximize", options.maximize}};
}

std::vector<std::string> SGD::state_names() const { return {kMomentumBuffer}; }

}  // namespace tg::optim
