// The difference losses' kernels, compiled once per vector level by tg_add_isa_kernels (TG_ISA =
// v2, v3 or avx512) into tg::detail::<level>. Each formula is the shape's, in double, element by
// element; the compiler vectorises the loops for the level, and with no FMA contraction every
// level rounds alike: the results are bitwise those of the scalar formulas.
#include "difference_loss_kernels.hpp"

#include <tuple>

#include "deterministic_sum.hpp"

namespace tg::detail::TG_ISA {

namespace {

// f(shape) with the shape object of `shape`'s kind: one instantiation of each kernel per shape.
template <typename F>
auto with_shape(DifferenceShape shape, const F& f) {
  switch (shape.kind) {
    case DifferenceShape::absolute: return f(AbsoluteError{});
    case DifferenceShape::smooth_l1: return f(SmoothL1{shape.parameter});
    case DifferenceShape::huber: return f(Huber{shape.parameter});
    case DifferenceShape::squared: break;
  }
  return f(SquaredError{});
}

template <typename T>
double difference(const T* input, const T* target, int64_t i) {
  return static_cast<double>(input[i]) - static_cast<double>(target[i]);
}

template <typename T>
double sum(DifferenceShape shape, const T* input, const T* target, int64_t n) {
  return with_shape(shape, [&](const auto& loss) {
    return tg::detail::lane_sum(n, [&](int64_t i) { return loss.value(difference(input, target, i)); });
  });
}

template <typename T>
void values(DifferenceShape shape, const T* input, const T* target, T* out, int64_t n) {
  with_shape(shape, [&](const auto& loss) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(loss.value(difference(input, target, i)));
  });
}

// out[i] = grad(i) · slope(first[i] − second[i]), for a grad that is per term or one scalar.
template <typename T, typename Loss, typename Grad>
void slopes(const Loss& loss, const T* first, const T* second, const Grad& grad, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(grad(i) * loss.slope(difference(first, second, i)));
}

template <typename T>
void backward(DifferenceShape shape, const T* input, const T* target, const T* grad, double grad_scalar, T* dinput,
              T* dtarget, int64_t n) {
  with_shape(shape, [&](const auto& loss) {
    const auto per_term = [&](int64_t i) { return static_cast<double>(grad[i]); };
    const auto scalar = [&](int64_t) { return grad_scalar; };
    for (auto [out, first, second] : {std::tuple{dinput, input, target}, std::tuple{dtarget, target, input}}) {
      if (out == nullptr) continue;
      if (grad) slopes(loss, first, second, per_term, out, n);
      else slopes(loss, first, second, scalar, out, n);
    }
  });
}

}  // namespace

const DtypeKernels<DifferenceLossKernels> difference_loss_kernels = {
    .f32 = {.sum = sum<float>, .values = values<float>, .backward = backward<float>},
    .f64 = {.sum = sum<double>, .values = values<double>, .backward = backward<double>},
};

}  // namespace tg::detail::TG_ISA
