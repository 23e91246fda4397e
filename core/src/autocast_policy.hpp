// How an op takes part in tg::autocast (tapegrad/autocast.hpp): the op on PyTorch's CPU lists
// begins with one line,
//
//   Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
//     if (tg::detail::autocast_enabled())
//       return tg::detail::autocast_to_lower([](const Tensor& x, const Tensor& w, const Tensor& b) {
//         return linear(x, w, b); }, x, weight, bias);
//     ...
//
// and calls itself again with its floating-point operands cast and autocast suspended, as
// PyTorch's autocast wrapper redispatches below its own key: the op's inner ops are not cast a
// second time. Ops on neither list do nothing here and run in their inputs' dtypes. Private to the
// library.
#pragma once

#include "bfloat16_compute.hpp"
#include "tapegrad/tensor.hpp"

namespace tg::detail {

// Whether autocast is on for this thread (and not suspended by an op or a backward pass).
bool autocast_enabled();

// While alive, autocast is off on this thread: inside an op that autocast already cast, and
// during a backward pass (which runs the forward's dtypes).
class AutocastSuspended {
 public:
  AutocastSuspended();
  ~AutocastSuspended();
  AutocastSuspended(const AutocastSuspended&) = delete;
  AutocastSuspended& operator=(const AutocastSuspended&) = delete;

 private:
  bool before_;
};

// A float32 tensor as bfloat16 (a parameter's cast from the region's cache); any other tensor, and
// an absent one, unchanged.
Tensor cast_to_lower(const Tensor& t);

// op(tensors cast to bfloat16...) with autocast suspended: the lower-precision list.
template <typename Op, typename... Tensors>
Tensor autocast_to_lower(const Op& op, const Tensors&... tensors) {
  const AutocastSuspended suspended;
  return op(cast_to_lower(tensors)...);
}

// op(args, bfloat16 tensors widened to float32...) with autocast suspended: the float32 list.
template <typename Op, typename... Args>
Tensor autocast_to_float32(const Op& op, const Args&... args) {
  const AutocastSuspended suspended;
  return op(widened(args)...);
}

}  // namespace tg::detail
