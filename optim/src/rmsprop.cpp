#include "tapegrad/optim/rmsprop.hpp"

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

constexpr const char* kSquareAvg = "square_avg";
constexpr const char* kGradAvg = "grad_avg";
constexpr const char* kMomentumBuffer = "momentum_buffer";

void check_rmsprop_options(const RMSpropOptions& options) {
  options::check_non_negative("RMSprop", "lr", options.lr);
  options::check_non_negative("RMSprop", "alpha", options.alpha);
  options::check_non_negative("RMSprop", "eps", options.eps);
  options::check_non_negative("RMSprop", "weight_decay", options.weight_decay);
  options::check_non_negative("RMSprop", "momentum", options.momentum);
}

RMSpropOptions checked(const RMSpropOptions& options) {
  check_rmsprop_options(options);
  return options;
}

// The scalars of one step, rounded once to T as PyTorch's kernels round a Scalar.
template <typename T>
struct RMSpropCoefficients {
  T grad_sign;  // -1 to maximize: -g is exactly -1 * g
  T alpha, one_minus_alpha;
  T weight_decay;  // used only when non-zero (0 * p is NaN for an infinite p)
  T eps;
  T momentum;
  T neg_lr;
};

// One fused pass over a parameter, in PyTorch's order of operations. param, grad, square_avg,
// grad_avg, buffer: [numel], distinct buffers; grad_avg is read only when kCentered, buffer only
// with kMomentum. The flags are template arguments so that the loop has no branches and vectorises.
template <typename T, bool kL2, bool kCentered, bool kMomentum>
void rmsprop_update(int64_t numel, T* param, const T* grad, T* square_avg, T* grad_avg, T* buffer,
                    const RMSpropCoefficients<T>& c) {
  detail::parallel_for(numel, detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
    T* __restrict p = param + begin;
    const T* __restrict gradient = grad + begin;
    T* __restrict squares = square_avg + begin;
    T* __restrict means = kCentered ? grad_avg + begin : nullptr;
    T* __restrict velocity = kMomentum ? buffer + begin : nullptr;
    for (int64_t i = 0; i < end - begin; ++i) {
      T g = c.grad_sign * gradient[i];
      if constexpr (kL2) g = g + c.weight_decay * p[i];
      // s = s * alpha + ((1 - alpha) * g) * g: square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
      const T s = squares[i] * c.alpha + c.one_minus_alpha * g * g;
      squares[i] = s;
      T avg;
      if constexpr (kCentered) {
        // a = a * alpha + (1 - alpha) * g; avg = sqrt(s - a * a): the variance estimate
        const T a = means[i] * c.alpha + c.one_minus_alpha * g;
        means[i] = a;
        avg = std::sqrt(s + -a * a);
      } else {
        avg = std::sqrt(s);
      }
      avg = avg + c.eps;
      if constexpr (kMomentum) {
        // b = b * momentum + g / avg; p += -lr * b: buf.mul_(momentum).addcdiv_(grad, avg)
        const T b = velocity[i] * c.momentum + g / avg;
        velocity[i] = b;
        p[i] = p[i] + c.neg_lr * b;
      } else {
        p[i] = p[i] + c.neg_lr * g / avg;  // param.addcdiv_(grad, avg, value=-lr)
      }
    }
  });
}

}  // namespace

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions options)
    : OptimizerWithOptions("RMSprop", std::move(params), checked(options)) {}

void RMSprop::update(size_t group, Tensor& param, const Tensor& grad, ParamState& state) {
  const RMSpropOptions& options = this->options(group);
  param_state::advance_step(state);  // kept for PyTorch's layout; the update does not use it
  Tensor& square_avg = param_state::buffer(state, kSquareAvg, param);
  Tensor* grad_avg = options.centered ? &param_state::buffer(state, kGradAvg, param) : nullptr;
  Tensor* buffer = options.momentum > 0 ? &param_state::buffer(state, kMomentumBuffer, param) : nullptr;
  detail::dispatch_floating("RMSprop.step", param.dtype(), [&]<typename T>() {
    const RMSpropCoefficients<T> coefficients{
        .grad_sign = static_cast<T>(options.maximize ? -1.0 : 1.0),
        .alpha = static_cast<T>(options.alpha),
        .one_minus_alpha = static_cast<T>(1 - options.alpha),
        .weight_decay = static_cast<T>(options.weight_decay),
        .eps = static_cast<T>(options.eps),
        .momentum = static_cast<T>(options.momentum),
        .neg_lr = static_cast<T>(-options.lr),
    };
    kernel_flags::with_flags(
        [&]<bool kL2, bool kCentered, bool kMomentum>() {
          rmsprop_update<T, kL2, kCentered, kMomentum>(
              param.numel(), param.mutable_data<T>(), grad.data<T>(), square_avg.mutable_data<T>(),
              kCentered ? grad_avg->mutable_data<T>() : nullptr, kMomentum ? buffer->mutable_data<T>() : nullptr,
              coefficients);
        },
        options.weight_decay != 0, grad_avg != nullptr, buffer != nullptr);
  });
  tg::detail::bump_version(param);  // a backward that saved param before this step must refuse it
}

void RMSprop::check_options(const RMSpropOptions& options) const { check_rmsprop_options(options); }

RMSpropOptions RMSprop::inherit(const RMSpropGroupOptions& given, const RMSpropOptions& inherited) const {
  return {.lr = given.lr.value_or(inherited.lr),
          .alpha = given.alpha.value_or(inherited.alpha),
          .eps = given.eps.value_or(inherited.eps),
          .weight_decay = given.weight_decay.value_or(inherited.weight_decay),
          .momentum = given.momentum.value_or(inherited.momentum),
          .centered = given.centered.value_or(inherited.centered),
          .maximize = given.maximize.value_or(inherited.maximize)};
}

RMSpropOptions RMSprop::parse_options(const OptionValues& values) const {
  options::check_keys("RMSprop", values, {"lr", "alpha", "eps", "weight_decay", "momentum", "centered", "maximize"});
  return checked({.lr = options::option_of<double>("RMSprop", values, "lr"),
                  .alpha = options::option_of<double>("RMSprop", values, "alpha"),
                  .eps = options::option_of<double>("RMSprop", values, "eps"),
                  .weight_decay = options::option_of<double>("RMSprop", values, "weight_decay"),
                  .momentum = options::option_of<double>("RMSprop", values, "momentum"),
                  .centered = options::option_of<bool>("RMSprop", values, "centered"),
                  .maximize = options::option_of<bool>("RMSprop", values, "maximize")});
}

OptionValues RMSprop::option_values(const RMSpropOptions& options) const {
  return {{"lr", options.lr},
          {"alpha", options.alpha},
          {"eps", options.eps},
          {"weight_decay", options.weight_decay},
          {"momentum", options.momentum},
          {"centered", options.centered},
          {"maximize", options.maximize}};
}

std::vector<std::string> RMSprop::state_names() const {
  return {kStepState, kSquareAvg, kGradAvg, kMomentumBuffer};
}

}  // namespace tg::optim
