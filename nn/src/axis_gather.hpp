// A separable gather over the last k dims of a tensor and its adjoint, the two tape primitives
// behind F::pad (every mode) and nearest interpolation (padding.cpp). Private to nn/.
//
// x: [lead..., in_1, ..., in_k] -> y: [lead..., out_1, ..., out_k] with
//   y[b, o_1, ..., o_k] = x[b, src_1[o_1], ..., src_k[o_k]],  or `fill` where some src_d[o_d] < 0.
// The adjoint (the gradient of the gather with respect to x) adds every y element back into the
// x element it read:
//   g_x[b, i_1, ..., i_k] = Σ_{o : src_d[o_d] = i_d for all d} g_y[b, o_1, ..., o_k].
// Each is linear in its tensor, and each one's backward is the other, so both are differentiable
// to any order. Both kernels are parallel over rows of the last dim; the adjoint runs the rows of
// one leading index b in a fixed order (two outputs may read the same input), so its sums are
// bitwise identical at any thread count.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tg::detail {

// The per-axis source indices of one gather, shared by its tape nodes.
struct AxisMaps {
  // Per gathered axis (outermost first): [out_d], −1 = the fill. All empty when the output has no
  // elements (its sizes may be huge: the tables would be all memory for nothing).
  std::vector<std::vector<int64_t>> src;
  std::vector<int64_t> in_sizes;   // per gathered axis: in_d
  std::vector<int64_t> out_sizes;  // per gathered axis: out_d
  bool injective = false;                 // no input element is read twice: the adjoint may run rows in parallel
  const char* gather_node = "";           // the gather's node name ("ReflectionPadBackward")
  const char* adjoint_node = "";          // the adjoint's node name
};

// x: [lead..., in_1..in_k], maps with k axes -> [lead..., out_1..out_k]; one tape node.
Tensor axis_gather(const Tensor& x, const std::shared_ptr<const AxisMaps>& maps, double fill);
// grad: [lead..., out_1..out_k] -> [lead..., in_1..in_k]; one tape node.
Tensor axis_scatter(const Tensor& grad, const std::shared_ptr<const AxisMaps>& maps);

}  // namespace tg::detail
