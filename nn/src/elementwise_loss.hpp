// The one forward and backward behind the elementwise losses with weights (the two binary
// cross-entropies; the losses of a difference have their own kernels, difference_loss_kernels.hpp): a loss is a Rule giving, for element i, its loss term and the term's
// slopes with respect to input[i] and target[i]. Private to nn.
#pragma once

#include <optional>

#include "autograd/node.hpp"
#include "loss_reduction.hpp"

namespace tg::nn::detail {

// The operands of element i: input, target: [n]; weight, pos_weight: [n] (already broadcast to
// input's shape) or null.
template <typename T>
struct ElementOperands {
  const T* input;
  const T* target;
  const T* weight;
  const T* pos_weight;
};

// The tensors of an ElementOperands, as the forward sees them and as backward unpacks them.
struct ElementTensors {
  Tensor input, target, weight, pos_weight;
  template <typename T>
  ElementOperands<T> operands() const {
    const auto data = [](const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
    return {data(input), data(target), data(weight), data(pos_weight)};
  }
};

// The slopes of every term with respect to input and target as recorded tensors of input's shape.
struct ElementSlopes {
  Tensor dinput, dtarget;
};

// Rule<T>{operands, params} has value(i), dinput(i) and dtarget(i), all in double, and
// Rule<T>::recorded_slopes(tensors, params), the same slopes computed from the connected tensors
// with recorded tg ops, for a backward pass that is itself differentiated (create_graph); it does
// not depend on T. The caller
// has validated the tensors; the result is reduced as `reduction` asks and recorded as `node`,
// differentiable with respect to input and target.
template <template <typename> class Rule, typename Params>
Tensor elementwise_loss(const char* op, const char* node, const ElementTensors& tensors, Reduction reduction,
                        const Params& params) {
  const Tensor& input = tensors.input;
  Tensor out = tg::detail::dispatch_floating(op, input.dtype(), [&]<typename T>() {
    const Rule<T> rule{tensors.operands<T>(), params};
    return reduce_terms<T>(input.shape(), input.dtype(), reduction, [&](int64_t i) { return rule.value(i); });
  });
  if (autograd::needs_grad(input, tensors.target))
    autograd::record(out, node, {input, tensors.target},
                     [node, saved_input = autograd::SavedTensor(input),
                      saved_target = autograd::SavedTensor(tensors.target),
                      saved_weight = save_if_defined(tensors.weight),
                      saved_pos_weight = save_if_defined(tensors.pos_weight), reduction,
                      params](const Tensor& grad_output, autograd::GradInputs& grads) {
                       const ElementTensors saved{grads.unpack(saved_input), grads.unpack(saved_target),
                                                  unpack_if_saved(grads, saved_weight),
                                                  unpack_if_saved(grads, saved_pos_weight)};
                       const int64_t n = saved.input.numel();
                       if (grads.create_graph()) {
                         // d loss / d input = upstream · slope, as recorded products
                         const Tensor up = upstream_tensor(grad_output, reduction, 1.0 / static_cast<double>(n));
                         const ElementSlopes slopes = Rule<double>::recorded_slopes(saved, params);
                         if (grads.needed(0)) grads.set(0, up * slopes.dinput);
                         if (grads.needed(1)) grads.set(1, up * slopes.dtarget);
                         return;
                       }
                       Tensor dinput, dtarget;
                       tg::detail::dispatch_floating(node, saved.input.dtype(), [&]<typename T>() {
                         const Rule<T> rule{saved.operands<T>(), params};
                         const Upstream<T> up = upstream<T>(grad_output, reduction, 1.0 / static_cast<double>(n));
                         // d loss / d input[i] = upstream(i) · slope(i), and the same for target
                         if (grads.needed(0)) {
                           dinput = make_tensor(saved.input.shape(), saved.input.dtype());
                           fill_elements(dinput.mutable_data<T>(), n, [&](int64_t i) { return up(i) * rule.dinput(i); });
                         }
                         if (grads.needed(1)) {
                           dtarget = make_tensor(saved.input.shape(), saved.input.dtype());
                           fill_elements(dtarget.mutable_data<T>(), n, [&](int64_t i) { return up(i) * rule.dtarget(i); });
                         }
                       });
                       if (dinput.defined()) grads.set(0, dinput);
                       if (dtarget.defined()) grads.set(1, dtarget);
                     });
  return out;
}

}  // namespace tg::nn::detail
