// How every op computes bfloat16, as PyTorch's CPU kernels do: the bfloat16 inputs widened to
// float32 (exact), the op's float32 kernel, the result rounded once to bfloat16. The widening and
// the rounding are Tensor::to, recorded on the tape, so the backward pass runs the op's float32
// backward too and its gradient is rounded once to bfloat16 on the way back to a bfloat16 input:
//
//   Tensor exp(const Tensor& x) {
//     if (detail::any_bfloat16(x)) return detail::in_float32([](const Tensor& x) { return exp(x); }, x);
//     ...float32 and float64 kernels...
//   }
//
// So no kernel is ever instantiated for bfloat16, and an op that does not route here refuses it in
// detail::dispatch (dispatch.hpp) with a message naming the cast to float32. Private to the library.
#pragma once

#include <optional>
#include <utility>

#include "ops/matmul_precision.hpp"
#include "tapegrad/tensor.hpp"

namespace tg::detail {

// Whether any of the tensors (undefined ones and std::nullopt skipped) is bfloat16.
inline bool is_bfloat16(const Tensor& t) { return t.defined() && t.dtype() == kBFloat16; }
inline bool is_bfloat16(const std::optional<Tensor>& t) { return t.has_value() && is_bfloat16(*t); }
template <typename... Tensors>
bool any_bfloat16(const Tensors&... tensors) {
  return (is_bfloat16(tensors) || ...);
}
// Whether all of them are (undefined ones and std::nullopt count as bfloat16): an op that takes
// operands of one dtype routes them to float32 only then, and refuses a mix with its own check.
inline bool all_bfloat16_or_absent(const Tensor& t) { return !t.defined() || t.dtype() == kBFloat16; }
inline bool all_bfloat16_or_absent(const std::optional<Tensor>& t) { return !t || all_bfloat16_or_absent(*t); }
template <typename... Tensors>
bool all_bfloat16(const Tensor& first, const Tensors&... rest) {
  return is_bfloat16(first) && (all_bfloat16_or_absent(rest) && ...);
}

// The operand an op computes with: a bfloat16 tensor as float32 (exact; recorded, so its gradient
// is rounded back to bfloat16 once), anything else (other tensors, numbers, options) as it is.
inline Tensor widened(const Tensor& t) { return is_bfloat16(t) ? t.to(kFloat32) : t; }
inline std::optional<Tensor> widened(const std::optional<Tensor>& t) {
  return t.has_value() ? std::optional<Tensor>(widened(*t)) : std::nullopt;
}
template <typename T>
const T& widened(const T& value) {
  return value;
}

// op(widened(args)...) rounded once to bfloat16: the route of an op whose result is bfloat16 when
// an input is. `op` is the op itself, called again with no bfloat16 left in its arguments.
template <typename Op, typename... Args>
Tensor in_float32(const Op& op, const Args&... args) {
  return op(widened(args)...).to(kBFloat16);
}

// in_float32 for an op built on products (matmul, linear, convolution, attention): its float32
// products, forward and backward, run on the bf16 kernels (ops/matmul_precision.hpp), whose
// rounding leaves the widened bf16 factors as they are. So a product of bfloat16 tensors is a bf16
// GEMM — exact products summed in float32 — at the bf16 kernels' speed, with the same bits on
// every CPU as "medium". `factors`: factors_exact when the op multiplies only its operands and
// gradients (no float32 intermediate), else round_factors.
template <typename Op, typename... Args>
Tensor in_float32_on_bf16_products(Bf16Products factors, const Op& op, const Args&... args) {
  const ForceBf16Products products(factors);
  return in_float32(op, args...);
}

}  // namespace tg::detail
