#include "tapegrad/optim/adam.hpp"

#include <cmath>
#include <utility>

#include "adam_kernels.hpp"
#include "dispatch.hpp"
#include "option_values.hpp"
#include "param_state.hpp"
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
Options inherit_adam_options(const AdamGroupOptions& given, const Options& inherited) {
  return {.lr = given.lr.value_or(inherited.lr),
          .betas = given.betas.value_or(inherited.betas),
          .eps = given.eps.value_or(inherited.eps),
          .weight_decay = given.weight_decay.value_or(inherited.weight_decay),
          .amsgrad = given.amsgrad.value_or(inherited.amsgrad),
          .maximize = given.maximize.value_or(inherited.maximize)};
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
    const detail::AdamCoefficients<T> coefficients{
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
    detail::adam_kernels_for_cpu().of<T>().update(param.numel(), param.mutable_data<T>(), grad.data<T>(),
                                               exp_avg.mutable_data<T>(), exp_avg_sq.mutable_data<T>(), max_data,
                                               coefficients, !decoupled && options.weight_decay != 0,
                                               options.amsgrad);
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
AdamOptions Adam::inherit(const AdamGroupOptions& given, const AdamOptions& inherited) const {
  return inherit_adam_options(given, inherited);
}
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
AdamWOptions AdamW::inherit(const AdamGroupOptions& given, const AdamWOptions& inherited) const {
  return inherit_adam_options(given, inherited);
}
AdamWOptions AdamW::parse_options(const OptionValues& values) const {
  return parse_adam_options<AdamWOptions>("AdamW", values);
}
OptionValues AdamW::option_values(const AdamWOptions& options) const { return adam_option_values(options); }
std::vector<std::string> AdamW::state_names() const { return {kStepState, kExpAvg, kExpAvgSq, kMaxExpAvgSq}; }

}  // namespace tg::optim
