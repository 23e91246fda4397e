#include "tapegrad/optim/sgd.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <type_traits>
#include <utility>

#include "dispatch.hpp"
#include "parallel_for.hpp"
#include "tensor_impl.hpp"

namespace tg::optim {

namespace {

// A hyper-parameter must be finite, and >= 0 where PyTorch requires it (x >= 0 is false for NaN).
void check_option(double value, const char* key, bool non_negative) {
  if (non_negative) check(value >= 0, "SGD", "expected ", key, " >= 0, got ", value);
  check(std::isfinite(value), "SGD", "expected a finite ", key, ", got ", value);
}

void check_options(const SGDOptions& options) {
  check_option(options.lr, "lr", true);
  check_option(options.momentum, "momentum", true);
  check_option(options.dampening, "dampening", false);
  check_option(options.weight_decay, "weight_decay", true);
  check(!options.nesterov || (options.momentum > 0 && options.dampening == 0), "SGD",
        "nesterov momentum requires momentum > 0 and dampening = 0, got momentum = ", options.momentum,
        ", dampening = ", options.dampening);
}

constexpr const char* kMomentumBuffer = "momentum_buffer";
constexpr const char* kOptionNames[] = {"lr", "momentum", "dampening", "weight_decay", "nesterov"};

// One option of a state dict's param group, which must be there and of type T.
template <typename T>
T option_of(const OptionValues& values, const char* key) {
  auto it = values.find(key);
  check(it != values.end(), "SGD", "load_state_dict: a parameter group has no '", key, "'");
  const T* value = std::get_if<T>(&it->second);
  check(value != nullptr, "SGD", "load_state_dict: expected '", key, "' to be ",
        std::is_same_v<T, bool> ? "a flag (true or false)" : "a number");
  return *value;
}

// The options of a state dict's param group: exactly SGD's five, each of its type, then validated.
SGDOptions parse_options(const OptionValues& values) {
  for (const auto& [key, value] : values)
    check(std::find(std::begin(kOptionNames), std::end(kOptionNames), key) != std::end(kOptionNames), "SGD",
          "load_state_dict: unknown option '", key, "'");
  const SGDOptions options{.lr = option_of<double>(values, "lr"),
                           .momentum = option_of<double>(values, "momentum"),
                           .dampening = option_of<double>(values, "dampening"),
                           .weight_decay = option_of<double>(values, "weight_decay"),
                           .nesterov = option_of<bool>(values, "nesterov")};
  check_options(options);
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

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : Optimizer("SGD", std::move(params)), defaults_(options) {
  check_options(options);
  group_options_.push_back(options);
}

void SGD::add_param_group(std::vector<Tensor> params, SGDOptions options) {
  check_options(options);
  add_group(std::move(params));
  group_options_.push_back(options);
}

void SGD::add_param_group(std::vector<Tensor> params) { add_param_group(std::move(params), defaults_); }

const SGDOptions& SGD::options(size_t group) const {
  check(group < group_options_.size(), "SGD", "expected a parameter group index below ", group_options_.size(),
        ", got ", group);
  return group_options_[group];
}

void SGD::set_options(size_t group, SGDOptions options) {
  check(group < group_options_.size(), "SGD", "expected a parameter group index below ", group_options_.size(),
        ", got ", group);
  check_options(options);
  group_options_[group] = options;
}

std::vector<Tensor> SGD::momentum_buffers() const {
  std::vector<Tensor> buffers;
  for (size_t i = 0; i < parameters().size(); ++i) {
    auto it = state(i).find(kMomentumBuffer);
    buffers.push_back(it != state(i).end() ? it->second : Tensor());
  }
  return buffers;
}

void SGD::update(size_t group, Tensor& param, const Tensor& grad, ParamState& state) {
  const SGDOptions& options = group_options_[group];
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
    };
    sgd_update<T>(param.numel(), param.mutable_data<T>(), grad.data<T>(),
                  buffer != nullptr ? buffer->mutable_data<T>() : nullptr, first_step, coefficients);
  });
  tg::detail::bump_version(param);  // a backward that saved param before this step must refuse it
}

OptionValues SGD::group_options(size_t group) const {
  const SGDOptions& options = group_options_[group];
  return {{"lr", options.lr},
          {"momentum", options.momentum},
          {"dampening", options.dampening},
          {"weight_decay", options.weight_decay},
          {"nesterov", options.nesterov}};
}

void SGD::check_group_options(const OptionValues& options) const { parse_options(options); }

void SGD::set_group_options(size_t group, const OptionValues& options) { group_options_[group] = parse_options(options); }

std::vector<std::string> SGD::state_names() const { return {kMomentumBuffer}; }

}  // namespace tg::optim
