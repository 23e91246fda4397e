#include "tapegrad/optim/adam.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "dispatch.hpp"
#include "option_values.hpp"
#include "param_state.hpp"
#include "parallel_for.hpp"
#include "tensor_impl.hpp"

namespace tg::optim {

namespace {

constexpr const char* kExpAvg = "exp_avg";
constexpr const char* kExpAvgSq = "exp_avg_sq";
constexpr const char* kMaxExpAvgSq = "max_exp_avg_sq";

// Adam's and AdamW's options have the same fields; these serve both.
template <typename Options>
void check_adam_options(const char* op, const Options& options) {
  options::check_non_negative(op, "lr", options.lr);
  options::check_unit_interval(op, "betas[0]", options.betas[0]);
  options::check_unit_interval(op, "betas[1]", options.betas[1]);
  options::check_non_negative(op, "eps", options.eps);
  options::check_non_negative(op, "weight_decay", options.weight_decay);
}

template <typename Options>
Options checked(const char* op, const Options& options) {
  check_adam_options(op, options);
  return options;
}

template <typename Options>
Options parse_adam_options(const char* op, const OptionValues& values) {
  options::check_keys(op, values, {"lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"});
  return checked(op, Options{.lr = options::option_of<double>(op, values, "lr"),
                             .betas = options::betas_of(op, values),
                             .eps = options::option_of<double>(op, values, "eps"),
                             .weight_decay = options::option_of<double>(op, values, "weight_decay"),
                             .amsgrad = options::option_of<bool>(op, values, "amsgrad"),
                             .maximize = options::option_of<bool>(op, values, "maximize")});
}

template <typename Options>
OptionValues adam_option_values(const Options& options) {
  return {{"lr", options.lr},
          {"betas", std::vector<double>{options.betas[0], options.betas[1]}},
          {"eps", options.eps},
          {"weight_decay", options.weight_decay},
          {"amsgrad", options.amsgrad},
          {"maximize", options.maximize}};
}

// The scalars of one step as T. Each is computed in double, then rounded once, as PyTorch computes
// them in Python and its kernels round a Scalar to the tensor's dtype.
template <typename T>
struct AdamCoefficients {
  T beta1, one_minus_beta1;
  T beta2, one_minus_beta2;
  T weight_decay;          // Adam's L2 penalty; 0 skips it (0 * p is NaN for an infinite p)
  T decay_factor;          // AdamW's 1 - lr * weight_decay; 1 skips it
  T bias_correction2_sqrt; // sqrt(1 - beta2^t)
  T eps;
  T neg_step_size;         // -lr / (1 - beta1^t)
  bool maximize;
};

// One fused pass over a parameter, in PyTorch's order of operations (so float64 agrees to the last
// few bits: PyTorch's vectorised add_ with alpha fuses a multiply-add, the only difference).
// param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq: [numel]; max_exp_avg_sq is null without amsgrad.
// Elements are independent, so the result does not depend on how chunks are scheduled.
template <typename T>
void adam_update(int64_t numel, T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq,
                 const AdamCoefficients<T>& c) {
  detail::parallel_for(numel, detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      T g = c.maximize ? -grad[i] : grad[i];
      T p = param[i];
      if (c.weight_decay != T(0)) g = g + c.weight_decay * p;  // Adam: grad.add(param, alpha=weight_decay)
      if (c.decay_factor != T(1)) p = p * c.decay_factor;       // AdamW: param.mul_(1 - lr * weight_decay)
      // m = m * beta1 + (1 - beta1) * g: exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
      const T m = exp_avg[i] * c.beta1 + c.one_minus_beta1 * g;
      // v = v * beta2 + ((1 - beta2) * g) * g: exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
      T v = exp_avg_sq[i] * c.beta2 + c.one_minus_beta2 * g * g;
      exp_avg[i] = m;
      exp_avg_sq[i] = v;
      if (max_exp_avg_sq != nullptr) {
        v = std::max(max_exp_avg_sq[i], v);
        max_exp_avg_sq[i] = v;
      }
      // p += ((-step_size) * m) / denom: param.addcdiv_(exp_avg, denom, value=-step_size)
      const T denom = std::sqrt(v) / c.bias_correction2_sqrt + c.eps;
      param[i] = p + c.neg_step_size * m / denom;
    }
  });
}

// Adam's update (decoupled = false) or AdamW's (decoupled = true) of one parameter.
template <typename Options>
void adam_step(const char* op, const Options& options, bool decoupled, Tensor& param, const Tensor& grad,
               ParamState& state) {
  Tensor& exp_avg = param_state::buffer(state, kExpAvg, param);
  Tensor& exp_avg_sq = param_state::buffer(state, kExpAvgSq, param);
  Tensor* max_exp_avg_sq = options.amsgrad ? &param_state::buffer(state, kMaxExpAvgSq, param) : nullptr;
  const double step = param_state::advance_step(state);
  const auto [beta1, beta2] = options.betas;
  const double bias_correction1 = 1 - std::pow(beta1, step);
  const double bias_correction2 = 1 - std::pow(beta2, step);
  detail::dispatch_floating(op, param.dtype(), [&]<typename T>() {
    const AdamCoefficients<T> coefficients{
        .beta1 = static_cast<T>(beta1),
        .one_minus_beta1 = static_cast<T>(1 - beta1),
        .beta2 = static_cast<T>(beta2),
        .one_minus_beta2 = static_cast<T>(1 - beta2),
        .weight_decay = static_cast<T>(decoupled ? 0.0 : options.weight_decay),
        .decay_factor = static_cast<T>(decoupled ? 1 - options.lr * options.weight_decay : 1.0),
        .bias_correction2_sqrt = static_cast<T>(std::sqrt(bias_correction2)),
        .eps = static_cast<T>(options.eps),
        .neg_step_size = static_cast<T>(-(options.lr / bias_correction1)),
        .maximize = options.maximize,
    };
    adam_update<T>(param.numel(), param.mutable_data<T>(), grad.data<T>(), exp_avg.mutable_data<T>(),
                   exp_avg_sq.mutable_data<T>(),
                   max_exp_avg_sq != nullptr ? max_exp_avg_sq->mutable_data<T>() : nullptr, coefficients);
  });
  tg::detail::bump_version(param);  // a backward that saved param before this step must refuse it
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : OptimizerWithOptions("Adam", std::move(params), checked("Adam", options)) {}

void Adam::update(size_t group, Tensor& param, const Tensor& grad, ParamState& state) {
  adam_step("Adam.step", options(group), false, param, grad, state);
}
void Adam::check_options(const AdamOptions& options) const { check_adam_options("Adam", options); }
AdamOptions Adam::parse_options(const OptionValues& values) const {
  return parse_adam_options<AdamOptions>("Adam", values);
}
OptionValues Adam::option_values(const AdamOptions& options) const { return adam_option_values(options); }
std::vector<std::string> Adam::state_names() const { return {kStepState, kExpAvg, kExpAvgSq, kMaxExpAvgSq}; }

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : OptimizerWithOptions("AdamW", std::move(params), checked("AdamW", options)) {}

void AdamW::update(size_t group, Tensor& param, const Tensor& grad, ParamState& state) {
  adam_step("AdamW.step", options(group), true, param, grad, state);
}
void AdamW::check_options(const AdamWOptions& options) const { check_adam_options("AdamW", options); }
AdamWOptions AdamW::parse_options(const OptionValues& values) const {
  return parse_adam_options<AdamWOptions>("AdamW", values);
}
OptionValues AdamW::option_values(const AdamWOptions& options) const { return adam_option_values(options); }
std::vector<std::string> AdamW::state_names() const { return {kStepState, kExpAvg, kExpAvgSq, kMaxExpAvgSq}; }

}  // namespace tg::optim
