// Adam's and AdamW's update (adam_kernels.hpp), compiled once per vector level by
// tg_add_isa_kernels (TG_ISA = v2, v3 or avx512) into tg::detail::<level>.
//
// One pass over memory per parameter, in PyTorch 1.13's single-tensor order of operations (so
// float64 agrees to the last few bits: PyTorch's vectorised add_ with alpha fuses a multiply-add,
// the only difference). Each operation is an IEEE multiply, add, divide or square root, and there
// is no FMA contraction (tg_add_isa_kernels): every level, and the scalar tail, round alike, so
// the results are bitwise identical across levels and thread counts (elements are independent).
// Written as a plain loop that the compiler vectorises at each level's width: the flags that
// change which operations run are template arguments, so the loop has no branch.
#include "adam_kernels.hpp"

#include "parallel_for.hpp"

namespace tg::detail::TG_ISA {

namespace {

// The square root as an instruction (-fno-math-errno): no call into libm, no std template.
inline float square_root(float x) { return __builtin_sqrtf(x); }
inline double square_root(double x) { return __builtin_sqrt(x); }

template <typename T, bool kL2, bool kAmsgrad>
void adam_update(int64_t numel, T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq,
                 const AdamCoefficients<T>& coefficients) {
  const AdamCoefficients<T> c = coefficients;  // a local copy: the loop reads no memory it writes
  ::tg::detail::parallel_for(numel, ::tg::detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
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
        // torch.maximum(max_exp_avg_sq, exp_avg_sq), written as std::max(v_max, v_new) chooses
        second_moment = v_max[i] < v_new ? v_new : v_max[i];
        v_max[i] = second_moment;
      }
      // p += ((-step_size) * m) / denom: param.addcdiv_(exp_avg, denom, value=-step_size)
      const T denom = square_root(second_moment) / c.bias_correction2_sqrt + c.eps;
      p[i] = decayed + c.neg_step_size * m_new / denom;
    }
  });
}

template <typename T>
void update(int64_t numel, T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq,
            const AdamCoefficients<T>& coefficients, bool l2, bool amsgrad) {
  if (l2) {
    if (amsgrad) adam_update<T, true, true>(numel, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, coefficients);
    else adam_update<T, true, false>(numel, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, coefficients);
  } else {
    if (amsgrad) adam_update<T, false, true>(numel, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, coefficients);
    else adam_update<T, false, false>(numel, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, coefficients);
  }
}

}  // namespace

const DtypeKernels<AdamKernels> adam_kernels = {.f32 = {.update = update<float>},
                                                .f64 = {.update = update<double>}};

}  // namespace tg::detail::TG_ISA
