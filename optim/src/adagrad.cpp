#include "tapegrad/optim/adagrad.hpp"

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

constexpr const char* kSum = "sum";

void check_adagrad_options(const AdagradOptions& options) {
  options::check_non_negative("Adagrad", "lr", options.lr);
  options::check_non_negative("Adagrad", "lr_decay", options.lr_decay);
  options::check_non_negative("Adagrad", "weight_decay", options.weight_decay);
  options::check_non_negative("Adagrad", "initial_accumulator_value", options.initial_accumulator_value);
  options::check_non_negative("Adagrad", "eps", options.eps);
}

AdagradOptions checked(const AdagradOptions& options) {
  check_adagrad_options(options);
  return options;
}

// The scalars of one step, rounded once to T as PyTorch's kernels round a Scalar.
template <typename T>
struct AdagradCoefficients {
  T grad_sign;     // -1 to maximize: -g is exactly -1 * g
  T weight_decay;  // used only when non-zero (0 * p is NaN for an infinite p)
  T eps;
  T neg_clr;  // -lr / (1 + (t - 1) * lr_decay)
};

// One fused pass over a parameter, in PyTorch's order of operations. param, grad, sum: [numel],
// distinct buffers. kL2: weight_decay != 0, a template flag so that the loop vectorises.
template <typename T, bool kL2>
void adagrad_update(int64_t numel, T* param, const T* grad, T* sum, const AdagradCoefficients<T>& c) {
  detail::parallel_for(numel, detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
    T* __restrict p = param + begin;
    const T* __restrict gradient = grad + begin;
    T* __restrict accumulated = sum + begin;
    for (int64_t i = 0; i < end - begin; ++i) {
      T g = c.grad_sign * gradient[i];
      if constexpr (kL2) g = g + c.weight_decay * p[i];  // grad.add(param, alpha=weight_decay)
      const T s = accumulated[i] + g * g;                 // state_sum.addcmul_(grad, grad, value=1)
      accumulated[i] = s;
      // p += (-clr * g) / (sqrt(sum) + eps): param.addcdiv_(grad, std, value=-clr)
      p[i] = p[i] + c.neg_clr * g / (std::sqrt(s) + c.eps);
    }
  });
}

}  // namespace

Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions options)
    : OptimizerWithOptions("Adagrad", std::move(params), checked(options)) {}

void Adagrad::update(size_t group, Tensor& param, const Tensor& grad, ParamState& state) {
  const AdagradOptions& options = this->options(group);
  Tensor& sum = param_state::buffer(state, kSum, param, options.initial_accumulator_value);
  const double step = param_state::advance_step(state);
  const double clr = options.lr / (1 + (step - 1) * options.lr_decay);
  detail::dispatch_floating("Adagrad.step", param.dtype(), [&]<typename T>() {
    const AdagradCoefficients<T> coefficients{
        .grad_sign = static_cast<T>(options.maximize ? -1.0 : 1.0),
        .weight_decay = static_cast<T>(options.weight_decay),
        .eps = static_cast<T>(options.eps),
        .neg_clr = static_cast<T>(-clr),
    };
    kernel_flags::with_flags(
        [&]<bool kL2>() {
          adagrad_update<T, kL2>(param.numel(), param.mutable_data<T>(), grad.data<T>(), sum.mutable_data<T>(),
                                 coefficients);
        },
        options.weight_decay != 0);
  });
  tg::detail::bump_version(param);  // a backward that saved param before this step must refuse it
}

void Adagrad::check_options(const AdagradOptions& options) const { check_adagrad_options(options); }

AdagradOptions Adagrad::inherit(const AdagradGroupOptions& given, const AdagradOptions& inherited) const {
  return {.lr = given.lr.value_or(inherited.lr),
          .lr_decay = given.lr_decay.value_or(inherited.lr_decay),
          .weight_decay = given.weight_decay.value_or(inherited.weight_decay),
          .initial_accumulator_value = given.initial_accumulator_value.value_or(inherited.initial_accumulator_value),
          .eps = given.eps.value_or(inherited.eps),
          .maximize = given.maximize.value_or(inherited.maximize)};
}

AdagradOptions Adagrad::parse_options(const OptionValues& values) const {
  options::check_keys("Adagrad", values,
                      {"lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps", "maximize"});
  return checked({.lr = options::option_of<double>("Adagrad", values, "lr"),
                  .lr_decay = options::option_of<double>("Adagrad", values, "lr_decay"),
                  .weight_decay = options::option_of<double>("Adagrad", values, "weight_decay"),
                  .initial_accumulator_value = options::option_of<double>("Adagrad", values, "initial_accumulator_value"),
                  .eps = options::option_of<double>("Adagrad", values, "eps"),
                  .maximize = options::option_of<bool>("Adagrad", values, "maximize")});
}

OptionValues Adagrad::option_values(const AdagradOptions& options) const {
  return {{"lr", options.lr},
          {"lr_decay", options.lr_decay},
          {"weight_decay", options.weight_decay},
          {"initial_accumulator_value", options.initial_accumulator_value},
          {"eps", options.eps},
          {"maximize", options.maximize}};
}

std::vector<std::string> Adagrad::state_names() const { return {kStepState, kSum}; }

}  // namespace tg::optim
