#include "tapegrad/optim/adam.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "dispatch.hpp"
#include "kernel_flags.hpp"
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
  T grad_sign;  // -1 to maximize: -g is exactly -1 * g
  T beta1, one_minus_beta1;
  T beta2, one_minus_beta2;
  T weight_decay;           // Adam's L2 penalty (used only when non-zero: 0 * p is NaN for an infinite p)
  T decay_factor;           // AdamW's 1 - lr * weight_decay; 1 for Adam (p * 1 is p, even inf or NaN)
  T bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  T eps;
  T neg_step_size;          // -lr / (1 - beta1^t)
};

// One fused pass over a parameter, in PyTorch's order of operations (so float64 agrees to the last
// few bits: PyTorch's vectorised add_ with alpha fuses a multiply-add, the only difference).
// param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq: [numel], distinct buffers; max_exp_avg_sq is
// read only with kAmsgrad. The options that change which operations run are template flags, so
// that the loop has no branches and vectorises. Elements are independent: the result does not
// depend on how chunks are scheduled.
template <typename T, bool kL2, bool kAmsgrad>
void adam_update(int64_t numel, T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq,
                 const AdamCoefficients<T>& c) {
  detail::parallel_for(numel, detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
    T* __restrict p = param + begin;
    const T* __restrict gradient = grad + begin;
    T* __restrict m = exp_avg + begin;
    T* __restrict v = exp_avg_sq + begin;
    T* __restrict v_max = kAmsgrad ? max_exp_avg_sq + begin : nullptr;
    for (int64_t i = 0; i < end - begin; ++i) {
      T g = c.grad_sign * gradient[i];
      if constexpr (kL2) g = g + c.weight_decay * p[i];  // Adam: grad.add(param, alpha=weight_decay)
      const T decayed = p[i] * c.decay_factor;            // AdamW: param.mul_(1 - lr * weight_decay)
      // m = m * beta1 + (1 - beta1) * g: exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
      const T m_new = m[i] * c.beta1 + c.one_minus_beta1 * g;
      // v = v * beta2 + ((1 - beta2) * g) * g: exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
      const T v_new = v[i] * c.beta2 + c.one_minus_beta2 * g * g;
      m[i] = m_new;
      v[i] = v_new;
      T second_moment = v_new;
      if constexpr (kAmsgrad) {
        second_moment = std::max(v_max[i], v_new);  // torch.maximum(max_exp_avg_sq, exp_avg_sq)
        v_max[i] = second_moment;
      }
      // p += ((-step_size) * m) / denom: param.addcdiv_(exp_avg, denom, value=-step_size)
      const T denom = std::sqrt(second_moment) / c.bias_correction2_sqrt + c.eps;
      p[i] = decayed + c.neg_step_size * m_new / denom;
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
  // Named copies, not a structured binding: clang 14 (the fuzz build) cannot capture one in the lambda.
  const double beta1 = options.betas[0], beta2 = options.betas[1];
  const double bias_correction1 = 1 - std::pow(beta1, step);
  const double bias_correction2 = 1 - std::pow(beta2, step);
  detail::dispatch_floating(op, param.dtype(), [&]<typename T>() {
    const AdamCoefficients<T> coefficients{
        .grad_sign = static_cast<T>(options.maximize ? -1.0 : 1.0),
        .beta1 = static_cast<T>(beta1),
        .one_minus_beta1 = static_cast<T>(1 - beta1),
        .beta2 = static_cast<T>(beta2),
        .one_minus_beta2 = static_cast<T>(1 - beta2),
        .weight_decay = static_cast<T>(options.weight_decay),
        .decay_factor = static_cast<T>(decoupled ? 1 - options.lr * options.weight_decay : 1.0),
        .bias_correction2_sqrt = static_cast<T>(std::sqrt(bias_correction2)),
        .eps = static_cast<T>(options.eps),
        .neg_step_size = static_cast<T>(-(options.lr / bias_correction1)),
    };
    T* max_data = max_exp_avg_sq != nullptr ? max_exp_avg_sq->mutable_data<T>() : nullptr;
    kernel_flags::with_flags(
        [&]<bool kL2, bool kAmsgrad>() {
          adam_update<T, kL2, kAmsgrad>(param.numel(), param.mutable_data<T>(), grad.data<T>(),
                                        exp_avg.mutable_data<T>(), exp_avg_sq.mutable_data<T>(), max_data,
                                        coefficients);
        },
        !decoupled && options.weight_decay != 0, options.amsgrad);
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
