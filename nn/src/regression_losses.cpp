// mse_loss, l1_loss, smooth_l1_loss, huber_loss: losses of the elementwise difference
// d = input − target, each a shape of the loss (its value at d and its slope,
// difference_loss_kernels.hpp) run through one forward and one backward here, on the per-level
// kernels of difference_loss_kernels.cpp.
#include "autocast_policy.hpp"
#include "bfloat16_compute.hpp"
#include "difference_loss_kernels.hpp"
#include "loss_reduction.hpp"
#include "out_of_memory.hpp"

namespace tg::nn {

namespace {

using tg::detail::DifferenceShape;

// The terms shape(input − target), reduced as `reduction` asks (loss_reduction.hpp's reduce_terms,
// a chunk at a time on the kernels).
template <typename T>
Tensor reduce_differences(const Tensor& input, const Tensor& target, Reduction reduction, DifferenceShape shape) {
  const auto& kernels = tg::detail::difference_loss_kernels_for_cpu().of<T>();
  const T* input_data = input.data<T>();
  const T* target_data = target.data<T>();
  const int64_t n = input.numel();
  if (reduction == Reduction::None) {
    Tensor out = make_tensor(input.shape(), input.dtype());
    T* values = out.mutable_data<T>();
    tg::detail::parallel_for(n, tg::detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
      kernels.values(shape, input_data + begin, target_data + begin, values + begin, end - begin);
    });
    return out;
  }
  const double sum = detail::ordered_chunk_sum(
      n, [&](int64_t i0, int64_t i1) { return kernels.sum(shape, input_data + i0, target_data + i0, i1 - i0); });
  return scalar_tensor(reduction == Reduction::Sum ? sum : sum / static_cast<double>(n), input.dtype());
}

// shape.slope(d) elementwise as a recorded tensor, for a backward pass that is itself
// differentiated (create_graph): its derivative in d is the shape's curvature (2, 0, 1/beta or 1
// inside the quadratic piece, 0 outside).
Tensor recorded_slope(DifferenceShape shape, const Tensor& d) {
  const auto indicator = [&](const Tensor& condition) { return condition.to(d.dtype()); };  // a constant
  switch (shape.kind) {
    case DifferenceShape::squared: return d * 2.0;
    case DifferenceShape::absolute: return indicator(d > 0.0) - indicator(d < 0.0);  // sign, 0 at 0
    case DifferenceShape::smooth_l1:
      // beta = 0 is ±1, −1 from d ≤ 0 on (the kernel's d <= −beta comes first)
      return shape.parameter > 0.0 ? (d / shape.parameter).clamp(-1.0, 1.0) : 1.0 - 2.0 * indicator(d <= 0.0);
    case DifferenceShape::huber: return d.clamp(-shape.parameter, shape.parameter);
  }
  return d * 2.0;
}

Tensor difference_loss(const char* op, const char* node, const Tensor& input, const Tensor& target,
                       Reduction reduction, DifferenceShape shape) {
  if (tg::detail::autocast_enabled())  // autocast's float32 list: mse, l1, smooth_l1 and huber
    return tg::detail::autocast_to_float32([&](const Tensor& x, const Tensor& t) {
      return difference_loss(op, node, x, t, reduction, shape);
    }, input, target);
  if (tg::detail::all_bfloat16(input, target))  // in float32, rounded once
    return tg::detail::in_float32([&](const Tensor& x, const Tensor& t) {
      return difference_loss(op, node, x, t, reduction, shape);
    }, input, target);
  detail::check_floating(op, "input", input);
  check(target.defined(), op, "undefined target");
  detail::check_same_dtype(op, "target", input, target);
  detail::check_same_shape(op, input, target);
  Tensor out = tg::detail::dispatch_floating(
      op, input.dtype(), [&]<typename T>() { return reduce_differences<T>(input, target, reduction, shape); });
  if (autograd::needs_grad(input, target))
    autograd::record(out, node, {input, target},
                     [node, saved_input = autograd::SavedTensor(input), saved_target = autograd::SavedTensor(target),
                      reduction, shape](const Tensor& grad_output, autograd::GradInputs& grads) {
                       const Tensor input = grads.unpack(saved_input), target = grads.unpack(saved_target);
                       const int64_t n = input.numel();
                       if (grads.create_graph()) {
                         // upstream · slope(input − target), and slope(target − input) for the
                         // target (PyTorch's form), as recorded products
                         const Tensor up = detail::upstream_tensor(grad_output, reduction, 1.0 / static_cast<double>(n));
                         if (grads.needed(0)) grads.set(0, up * recorded_slope(shape, input - target));
                         if (grads.needed(1)) grads.set(1, up * recorded_slope(shape, target - input));
                         return;
                       }
                       Tensor dinput = grads.needed(0) ? make_tensor(input.shape(), input.dtype()) : Tensor();
                       Tensor dtarget = grads.needed(1) ? make_tensor(input.shape(), input.dtype()) : Tensor();
                       tg::detail::dispatch_floating(node, input.dtype(), [&]<typename T>() {
                         // d loss / d input[i] = upstream(i) · slope(d_i), and the same for target
                         const detail::Upstream<T> up =
                             detail::upstream<T>(grad_output, reduction, 1.0 / static_cast<double>(n));
                         const auto output = [](Tensor& t) { return t.defined() ? t.mutable_data<T>() : nullptr; };
                         T* di = output(dinput);
                         T* dt = output(dtarget);
                         const T *input_data = input.data<T>(), *target_data = target.data<T>();
                         const auto& kernels = tg::detail::difference_loss_kernels_for_cpu().of<T>();
                         tg::detail::parallel_for(n, tg::detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
                           const auto at = [&](T* p) { return p ? p + begin : nullptr; };
                           kernels.backward(shape, input_data + begin, target_data + begin, up.per_term ? up.per_term + begin : nullptr,
                                            up.scalar, at(di), at(dt), end - begin);
                         });
                       });
                       if (dinput.defined()) grads.set(0, dinput);
                       if (dtarget.defined()) grads.set(1, dtarget);
                     });
  return out;
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) try {
  return difference_loss("mse_loss", "MseLossBackward", input, target, reduction, {DifferenceShape::squared});
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("mse_loss");
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) try {
  return difference_loss("l1_loss", "L1LossBackward", input, target, reduction, {DifferenceShape::absolute});
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("l1_loss");
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) try {
  check(beta >= 0.0, "smooth_l1_loss", "beta must be non-negative, got ", beta);
  return difference_loss("smooth_l1_loss", "SmoothL1LossBackward", input, target, reduction, {DifferenceShape::smooth_l1, beta});
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("smooth_l1_loss");
}

Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta) try {
  check(delta > 0.0, "huber_loss", "delta must be positive, got ", delta);
  return difference_loss("huber_loss", "HuberLossBackward", input, target, reduction, {DifferenceShape::huber, delta});
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("huber_loss");
}

}  // namespace tg::nn
