// 2-D pooling: max_pool2d, avg_pool2d, the adaptive pools and their modules. Each op validates at the edge, reduces the pooling to
// per-axis window tables, and runs one fused pass over the output rows.
//
// Shapes: x: [P, H, W] planes (P = N·C, or C unbatched) -> y: [P, H_out, W_out]. Output element
// (oh, ow) of a plane reads rows rows[oh].first + t·step_h (t < rows[oh].count) and likewise
// columns: the window clipped to the input, so padding is never read. For max pooling
//   y = max over the window,  idx = its flat position h·W + w (the first largest; NaN wins),
//   dx[idx] += dy          (the backward: the adjoint of the gather x ↦ x[idx]).
// For average pooling, with a divisor per output element,
//   y = Σ_window x / divisor,   dx[window] += dy / divisor,
// two linear maps, each the other's adjoint: each is the other's backward, to any order.
// Adaptive pooling has the windows ⌊o·in/out⌋ … ⌈(o+1)·in/out⌉ − 1 along each axis.
#include "tapegrad/nn/pooling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "autograd/node.hpp"
#include "bfloat16_compute.hpp"
#include "checked_arithmetic.hpp"
#include "dispatch.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"
#include "tensor_impl.hpp"

namespace tg::nn {

namespace {

// One axis of the windows: output o reads first + t·step for t < count.
struct Window {
  int64_t first = 0, count = 0;
  int64_t extent = 0;  // the window's size within the padded input (avg_pool2d's count_include_pad divisor)
};

// x: [planes, H, W] -> [planes, H_out, W_out] through the windows rows (H_out) and cols (W_out).
struct PoolGeometry {
  int64_t planes = 0, H = 0, W = 0, H_out = 0, W_out = 0;
  int64_t step_h = 1, step_w = 1;
  std::vector<Window> rows, cols;
  // Every window is the full 2×2 block at (2·oh, 2·ow): the CNN's hot case, run without tables.
  bool full_2x2 = false;
};

// torch's pooling_output_shape: ⌊(in + 2p − d(k − 1) − 1 + (ceil ? s − 1 : 0)) / s⌋ + 1, and one less
// when ceil mode would start the last window at or past the end of the input and its left padding.
// Every step that can overflow is checked (2p ≤ k, and in is a tensor's size): tg::Error naming `op`.
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode,
                    const char* op) {
  using tg::detail::checked_add, tg::detail::checked_mul;
  const char* what = "kernel_size, padding, stride or dilation too large for an input dim of size ";
  const int64_t reach = checked_mul(dilation, k - 1, op, what, in);  // the window spans reach + 1
  int64_t numerator = checked_add(in, 2 * pad, op, what, in) - reach - 1;  // ≥ −2^63: both terms ≥ 0
  if (ceil_mode) numerator = checked_add(numerator, stride - 1, op, what, in);
  // ⌊numerator / stride⌋ without negating numerator (it may be −2^63)
  const int64_t floor = numerator / stride - (numerator % stride < 0 ? 1 : 0);
  int64_t out = checked_add(floor, 1, op, what, in);
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;  // (out − 1)·stride ≤ numerator: it fits
  return out;
}

// The windows of a strided, padded, dilated pooling along one axis, clipped to [0, in). The sums
// are arranged so that none overflows for any sizes pooled_size accepted (start + k may not fit).
std::vector<Window> strided_windows(int64_t in, int64_t out, int64_t k, int64_t pad, int64_t stride, int64_t dilation) {
  std::vector<Window> windows(static_cast<size_t>(out));
  const int64_t reach = dilation * (k - 1);
  for (int64_t o = 0; o < out; ++o) {
    int64_t start = o * stride - pad;
    const int64_t end = reach >= in - start ? in : start + reach + 1;
    const int64_t extent = std::min(k, in + pad - start);  // avg pooling only (dilation 1)
    if (start < 0) start += tg::detail::ceil_div_nonnegative(-start, dilation) * dilation;  // the first tap inside
    windows[static_cast<size_t>(o)] = {start, end > start ? tg::detail::ceil_div_nonnegative(end - start, dilation) : 0,
                                       extent};
  }
  return windows;
}

// The input as planes: [N, C, H, W] -> N·C planes, [C, H, W] -> C planes; tg::Error (naming `op`)
// unless x is a 3-D or 4-D float tensor with non-empty C, H, W.
void check_pool_input(const Tensor& x, const char* op) {
  check(x.defined(), op, "undefined input");
  check(x.dim() == 3 || x.dim() == 4, op, "expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got ", x.shape());
  check(x.size(-1) > 0 && x.size(-2) > 0 && x.size(-3) > 0, op,
        "expected non-empty C, H and W (only N may be 0), got an input of shape ", x.shape());
  tg::detail::check_dtype<tg::detail::FloatingDTypes>(op, x.dtype());
}

Shape pooled_shape(const Tensor& x, int64_t H_out, int64_t W_out) {
  Shape shape = x.shape();
  shape[shape.size() - 2] = H_out;
  shape.back() = W_out;
  return shape;
}

// Whether the output of g has elements, after checking that its shape can be allocated (tg::Error
// naming `op` otherwise). Only then are the windows tabled: they take memory in proportion to the
// output's size (and the kernels, which read them, do not run on an empty output).
bool has_elements(const Tensor& x, const PoolGeometry& g, const char* op) {
  const Shape shape = pooled_shape(x, g.H_out, g.W_out);
  if (checked_numel(shape, op) == 0) return false;
  // More windows than a vector can hold (std::length_error): the output, 4 bytes or more per
  // window, could not be allocated either.
  if (static_cast<uint64_t>(std::max(g.H_out, g.W_out)) > std::vector<Window>().max_size())
    throw tg::detail::OutOfMemoryError(op, tg::detail::concat("cannot allocate an output of shape ", shape));
  return true;
}

// The max pooling geometry, or tg::Error naming `op` and the offending sizes.
PoolGeometry max_pool_geometry(const Tensor& x, ExpandingArray<2> kernel, const functional::MaxPool2dFuncOptions& o,
                               const char* op) {
  check_pool_input(x, op);
  const ExpandingArray<2> stride = o.stride.value_or(kernel);
  for (size_t d = 0; d < 2; ++d) {
    check(kernel[d] > 0, op, "kernel_size must be positive, got ", kernel.vec());
    check(stride[d] > 0, op, "stride must be positive, got ", stride.vec());
    check(o.dilation[d] > 0, op, "dilation must be positive, got ", o.dilation.vec());
    check(o.padding[d] >= 0 && o.padding[d] <= kernel[d] / 2, op,
          "padding must be between 0 and half the kernel size, got padding ", o.padding.vec(), " for kernel_size ",
          kernel.vec());
  }
  PoolGeometry g;
  g.H = x.size(-2), g.W = x.size(-1);
  g.planes = x.numel() / (g.H * g.W);
  g.H_out = pooled_size(g.H, kernel[0], o.padding[0], stride[0], o.dilation[0], o.ceil_mode, op);
  g.W_out = pooled_size(g.W, kernel[1], o.padding[1], stride[1], o.dilation[1], o.ceil_mode, op);
  check(g.H_out > 0 && g.W_out > 0, op, "the input of shape ", x.shape(), " is too small for kernel_size ",
        kernel.vec(), " with padding ", o.padding.vec(), " and dilation ", o.dilation.vec(), ": output size ",
        std::vector<int64_t>{g.H_out, g.W_out});
  g.step_h = o.dilation[0], g.step_w = o.dilation[1];
  if (has_elements(x, g, op)) {
    g.rows = strided_windows(g.H, g.H_out, kernel[0], o.padding[0], stride[0], o.dilation[0]);
    g.cols = strided_windows(g.W, g.W_out, kernel[1], o.padding[1], stride[1], o.dilation[1]);
  }
  g.full_2x2 = kernel[0] == 2 && kernel[1] == 2 && stride[0] == 2 && stride[1] == 2 && g.step_h == 1 &&
               g.step_w == 1 && o.padding[0] == 0 && o.padding[1] == 0 && 2 * g.H_out <= g.H && 2 * g.W_out <= g.W;
  return g;
}

// One candidate of a running maximum: torch's `val > max || isnan(val)`, so the first largest
// element wins and a NaN, once seen, is kept unless another NaN comes later.
template <typename T, typename Index = int64_t>
inline void take_if_larger(T value, Index index, T& max, Index& max_index) {
  const bool take = (value > max) | (value != value);  // no short-circuit: no branch to mispredict
  max = take ? value : max;
  max_index = take ? index : max_index;
}

// One output row of the 2×2, stride-2 pooling: max(a, b, c, d) of the block at rows 2·oh, 2·oh + 1
// and columns 2·ow, 2·ow + 1, taken in that order. The winner's place in the block (0..3) is kept
// in a lane of T's width so that the loop vectorises (values and positions side by side); a second
// loop turns it into the flat index (2·oh + pos/2)·W + 2·ow + pos%2.
template <typename T, bool kIndices>
void max_pool_2x2_row(const T* plane, int64_t W, int64_t oh, int64_t W_out, T* y_row, int64_t* idx_row) {
  using Pos = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  constexpr int64_t kBlock = 256;
  Pos pos[kBlock];
  const T* x0 = plane + 2 * oh * W;
  const T* x1 = x0 + W;
  for (int64_t ow0 = 0; ow0 < W_out; ow0 += kBlock) {
    const int64_t n = std::min(kBlock, W_out - ow0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t w = 2 * (ow0 + i);
      T max = x0[w];
      Pos at = 0;
      take_if_larger<T, Pos>(x0[w + 1], 1, max, at);
      take_if_larger<T, Pos>(x1[w], 2, max, at);
      take_if_larger<T, Pos>(x1[w + 1], 3, max, at);
      y_row[ow0 + i] = max;
      pos[i] = at;
    }
    if constexpr (kIndices)
      for (int64_t i = 0; i < n; ++i)
        idx_row[ow0 + i] = (2 * oh + (pos[i] >> 1)) * W + 2 * (ow0 + i) + (pos[i] & 1);
  }
}

// x: [planes, H, W] -> y: [planes, H_out, W_out] and, when kIndices, idx: the flat position of each
// maximum in its plane. Parallel over output rows.
template <typename T, bool kIndices>
void max_pool_forward(const PoolGeometry& g, const T* x, T* y, int64_t* idx) {
  const int64_t rows = g.planes * g.H_out;
  tg::detail::parallel_for(rows, std::max<int64_t>(1, tg::detail::kElementwiseGrain / (4 * g.W_out)),
                           [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t oh = r % g.H_out;
      const T* plane = x + (r / g.H_out) * g.H * g.W;
      T* y_row = y + r * g.W_out;
      int64_t* idx_row = kIndices ? idx + r * g.W_out : nullptr;
      if (g.full_2x2) {
        max_pool_2x2_row<T, kIndices>(plane, g.W, oh, g.W_out, y_row, idx_row);
        continue;
      }
      const Window wh = g.rows[static_cast<size_t>(oh)];
      for (int64_t ow = 0; ow < g.W_out; ++ow) {
        const Window ww = g.cols[static_cast<size_t>(ow)];
        T max = -std::numeric_limits<T>::infinity();
        int64_t at = wh.first * g.W + ww.first;
        for (int64_t th = 0; th < wh.count; ++th) {
          const int64_t h = wh.first + th * g.step_h;
          for (int64_t tw = 0; tw < ww.count; ++tw) {
            const int64_t w = ww.first + tw * g.step_w;
            take_if_larger(plane[h * g.W + w], h * g.W + w, max, at);
          }
        }
        y_row[ow] = max;
        if constexpr (kIndices) idx_row[ow] = at;
      }
    }
  });
}

// dy: [planes, out_plane], idx: [planes, out_plane] -> dx: [planes, in_plane] (overwritten),
// dx[idx] += dy per plane. One plane's additions run in order (overlapping windows share inputs),
// so each sum has a fixed order; planes run in parallel.
template <typename T>
void index_scatter_planes(int64_t planes, int64_t in_plane, int64_t out_plane, const T* dy, const int64_t* idx, T* dx) {
  tg::detail::parallel_for(planes, std::max<int64_t>(1, tg::detail::kElementwiseGrain / std::max(in_plane, out_plane)),
                           [&](int64_t p0, int64_t p1) {
    std::fill(dx + p0 * in_plane, dx + p1 * in_plane, T(0));
    for (int64_t p = p0; p < p1; ++p) {
      T* dx_plane = dx + p * in_plane;
      const T* dy_plane = dy + p * out_plane;
      const int64_t* idx_plane = idx + p * out_plane;
      for (int64_t o = 0; o < out_plane; ++o) dx_plane[idx_plane[o]] += dy_plane[o];
    }
  });
}

// The backward of every max pooling: dy [..., H_out, W_out] sent to the argmax of each window in an
// input of x_shape. Recorded in differentiable ops (scatter_add, whose backward is a gather) when
// the backward is itself recorded.
Tensor max_pool_backward(const Tensor& dy, const Tensor& indices, const Shape& x_shape, bool create_graph) {
  const int64_t in_plane = x_shape[x_shape.size() - 2] * x_shape.back();
  const int64_t out_plane = dy.size(-2) * dy.size(-1);
  int64_t planes = 1;
  for (size_t d = 0; d + 2 < x_shape.size(); ++d) planes *= x_shape[d];
  if (create_graph)
    return zeros({planes, in_plane}, dy.dtype())
        .scatter_add(1, indices.reshape({planes, out_plane}), dy.reshape({planes, out_plane}))
        .reshape(x_shape);
  Tensor dx = tg::make_tensor(x_shape, dy.dtype(), "MaxPool2DWithIndicesBackward");
  tg::detail::dispatch_floating("MaxPool2DWithIndicesBackward", dy.dtype(), [&]<typename T>() {
    if (dx.numel() > 0) index_scatter_planes<T>(planes, in_plane, out_plane, dy.data<T>(), indices.data<int64_t>(), dx.mutable_data<T>());
  });
  return dx;
}

// The values, and the indices when asked for or when the backward needs them; one tape node.
std::pair<Tensor, Tensor> max_pool(const Tensor& x, const PoolGeometry& g, bool want_indices, const char* node) {
  const bool record = autograd::needs_grad(x);
  const Shape shape = pooled_shape(x, g.H_out, g.W_out);
  Tensor y = tg::make_tensor(shape, x.dtype(), node);
  Tensor indices = want_indices || record ? tg::make_tensor(shape, kInt64, node) : Tensor();
  tg::detail::dispatch_floating(node, x.dtype(), [&]<typename T>() {
    if (y.numel() == 0) return;
    if (indices.defined()) max_pool_forward<T, true>(g, x.data<T>(), y.mutable_data<T>(), indices.mutable_data<int64_t>());
    else max_pool_forward<T, false>(g, x.data<T>(), y.mutable_data<T>(), nullptr);
  });
  if (record)
    autograd::record(y, node, {x}, [saved_indices = autograd::SavedTensor(indices), x_shape = x.shape()](
                                        const Tensor& dy, autograd::GradInputs& grads) {
      grads.set(0, max_pool_backward(dy, grads.unpack(saved_indices), x_shape, grads.create_graph()));
    });
  return {y, indices};
}

// The windows of adaptive pooling along one axis: ⌊o·in/out⌋ … ⌈(o + 1)·in/out⌉ − 1.
std::vector<Window> adaptive_windows(int64_t in, int64_t out) {
  std::vector<Window> windows(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * in / out, end = ((o + 1) * in + out - 1) / out;
    windows[static_cast<size_t>(o)] = {start, end - start, end - start};
  }
  return windows;
}

PoolGeometry adaptive_geometry(const Tensor& x, ExpandingArray<2> output_size, const char* op) {
  check_pool_input(x, op);
  check(output_size[0] >= 0 && output_size[1] >= 0, op, "output_size must be non-negative, got ",
        output_size.vec());
  PoolGeometry g;
  g.H = x.size(-2), g.W = x.size(-1);
  g.planes = x.numel() / (g.H * g.W);
  g.H_out = output_size[0], g.W_out = output_size[1];
  if (has_elements(x, g, op)) {
    g.rows = adaptive_windows(g.H, g.H_out);
    g.cols = adaptive_windows(g.W, g.W_out);
  }
  return g;
}

// What an average pooling divides each window's sum by.
struct AvgPlan {
  PoolGeometry g;
  enum class Divisor { kPadded, kClipped, kOverride, kAdaptive } divisor = Divisor::kPadded;
  int64_t divisor_override = 1;
  const char* node = "";          // the forward's node name
  const char* adjoint_node = "";  // the backward's (recorded when differentiated again)
};

// y = sum · (1 / divisor) as torch rounds it: sum / divisor, or sum / kh / kw for adaptive pooling.
template <typename T>
inline T divide(T sum, const AvgPlan& plan, const Window& wh, const Window& ww) {
  switch (plan.divisor) {
    case AvgPlan::Divisor::kPadded: return sum / static_cast<T>(wh.extent * ww.extent);
    case AvgPlan::Divisor::kClipped: return sum / static_cast<T>(wh.count * ww.count);
    case AvgPlan::Divisor::kOverride: return sum / static_cast<T>(plan.divisor_override);
    case AvgPlan::Divisor::kAdaptive: return sum / static_cast<T>(wh.count) / static_cast<T>(ww.count);
  }
  return sum;
}

// x: [planes, H, W] -> y: [planes, H_out, W_out], each window's sum divided; an empty window
// (wholly in the padding) gives 0. Parallel over output rows.
template <typename T>
void avg_pool_forward(const AvgPlan& plan, const T* x, T* y) {
  const PoolGeometry& g = plan.g;
  tg::detail::parallel_for(g.planes * g.H_out, std::max<int64_t>(1, tg::detail::kElementwiseGrain / (4 * g.W_out)),
                           [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* plane = x + (r / g.H_out) * g.H * g.W;
      const Window wh = g.rows[static_cast<size_t>(r % g.H_out)];
      for (int64_t ow = 0; ow < g.W_out; ++ow) {
        const Window ww = g.cols[static_cast<size_t>(ow)];
        if (wh.count <= 0 || ww.count <= 0) {
          y[r * g.W_out + ow] = T(0);
          continue;
        }
        T sum = 0;
        for (int64_t h = wh.first; h < wh.first + wh.count; ++h)
          for (int64_t w = ww.first; w < ww.first + ww.count; ++w) sum += plane[h * g.W + w];
        y[r * g.W_out + ow] = divide(sum, plan, wh, ww);
      }
    }
  });
}

// dy: [planes, H_out, W_out] -> dx: [planes, H, W] (overwritten), dx[window] += dy / divisor.
// One plane's windows run in order (they may overlap); planes in parallel.
template <typename T>
void avg_pool_adjoint(const AvgPlan& plan, const T* dy, T* dx) {
  const PoolGeometry& g = plan.g;
  const int64_t in_plane = g.H * g.W, out_plane = g.H_out * g.W_out;
  tg::detail::parallel_for(g.planes, std::max<int64_t>(1, tg::detail::kElementwiseGrain / std::max(in_plane, out_plane)),
                           [&](int64_t p0, int64_t p1) {
    std::fill(dx + p0 * in_plane, dx + p1 * in_plane, T(0));
    for (int64_t p = p0; p < p1; ++p) {
      T* dx_plane = dx + p * in_plane;
      for (int64_t oh = 0; oh < g.H_out; ++oh) {
        const Window wh = g.rows[static_cast<size_t>(oh)];
        for (int64_t ow = 0; ow < g.W_out; ++ow) {
          const Window ww = g.cols[static_cast<size_t>(ow)];
          if (wh.count <= 0 || ww.count <= 0) continue;
          const T delta = divide(dy[p * out_plane + oh * g.W_out + ow], plan, wh, ww);
          for (int64_t h = wh.first; h < wh.first + wh.count; ++h)
            for (int64_t w = ww.first; w < ww.first + ww.count; ++w) dx_plane[h * g.W + w] += delta;
        }
      }
    }
  });
}

Tensor avg_pool_adjoint_op(const Tensor& dy, const std::shared_ptr<const AvgPlan>& plan);

// The average pooling of x as one tape node; its backward is the adjoint, recorded in turn.
Tensor avg_pool_op(const Tensor& x, const std::shared_ptr<const AvgPlan>& plan) {
  Tensor y = tg::make_tensor(pooled_shape(x, plan->g.H_out, plan->g.W_out), x.dtype(), plan->node);
  tg::detail::dispatch_floating(plan->node, x.dtype(), [&]<typename T>() {
    if (y.numel() > 0) avg_pool_forward<T>(*plan, x.data<T>(), y.mutable_data<T>());
  });
  if (autograd::needs_grad(x))
    autograd::record(y, plan->node, {x}, [plan](const Tensor& dy, autograd::GradInputs& grads) {
      grads.set(0, avg_pool_adjoint_op(dy, plan));
    });
  return y;
}

Tensor avg_pool_adjoint_op(const Tensor& dy, const std::shared_ptr<const AvgPlan>& plan) {
  Tensor dx = tg::make_tensor(pooled_shape(dy, plan->g.H, plan->g.W), dy.dtype(), plan->adjoint_node);
  tg::detail::dispatch_floating(plan->adjoint_node, dy.dtype(), [&]<typename T>() {
    if (dx.numel() > 0) avg_pool_adjoint<T>(*plan, dy.data<T>(), dx.mutable_data<T>());
  });
  if (autograd::needs_grad(dy))
    autograd::record(dx, plan->adjoint_node, {dy}, [plan](const Tensor& ddx, autograd::GradInputs& grads) {
      grads.set(0, avg_pool_op(ddx, plan));
    });
  return dx;
}

}  // namespace

namespace functional {

Tensor max_pool2d(const Tensor& x, ExpandingArray<2> kernel_size, const MaxPool2dFuncOptions& options) try {
  if (tg::detail::is_bfloat16(x))  // in float32, rounded back (exact: a selection)
    return tg::detail::in_float32([&](const Tensor& wide) { return max_pool2d(wide, kernel_size, options); }, x);
  return max_pool(x, max_pool_geometry(x, kernel_size, options, "max_pool2d"), false, "MaxPool2DWithIndicesBackward")
      .first;
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("max_pool2d");
}

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, ExpandingArray<2> kernel_size,
                                                  const MaxPool2dFuncOptions& options) try {
  return max_pool(x, max_pool_geometry(x, kernel_size, options, "max_pool2d_with_indices"), true,
                  "MaxPool2DWithIndicesBackward");
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("max_pool2d_with_indices");
}

Tensor avg_pool2d(const Tensor& x, ExpandingArray<2> kernel_size, const AvgPool2dFuncOptions& options) try {
  if (tg::detail::is_bfloat16(x))  // in float32, rounded once
    return tg::detail::in_float32([&](const Tensor& wide) { return avg_pool2d(wide, kernel_size, options); }, x);
  const char* op = "avg_pool2d";
  check(!options.divisor_override || *options.divisor_override != 0, op, "divisor_override must not be 0");
  auto plan = std::make_shared<AvgPlan>();
  plan->g = max_pool_geometry(
      x, kernel_size, {.stride = options.stride, .padding = options.padding, .ceil_mode = options.ceil_mode}, op);
  plan->divisor = options.divisor_override ? AvgPlan::Divisor::kOverride
                  : options.count_include_pad ? AvgPlan::Divisor::kPadded
                                              : AvgPlan::Divisor::kClipped;
  plan->divisor_override = options.divisor_override.value_or(1);
  plan->node = "AvgPool2DBackward";
  plan->adjoint_node = "AvgPool2DBackwardBackward";
  return avg_pool_op(x, plan);
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("avg_pool2d");
}

Tensor adaptive_avg_pool2d(const Tensor& x, ExpandingArray<2> output_size) try {
  if (tg::detail::is_bfloat16(x))  // in float32, rounded once
    return tg::detail::in_float32([&](const Tensor& wide) { return adaptive_avg_pool2d(wide, output_size); }, x);
  auto plan = std::make_shared<AvgPlan>();
  plan->g = adaptive_geometry(x, output_size, "adaptive_avg_pool2d");
  plan->divisor = AvgPlan::Divisor::kAdaptive;
  plan->node = "AdaptiveAvgPool2DBackward";
  plan->adjoint_node = "AdaptiveAvgPool2DBackwardBackward";
  return avg_pool_op(x, plan);
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("adaptive_avg_pool2d");
}

Tensor adaptive_max_pool2d(const Tensor& x, ExpandingArray<2> output_size) try {
  if (tg::detail::is_bfloat16(x))  // in float32, rounded back (exact)
    return tg::detail::in_float32([&](const Tensor& wide) { return adaptive_max_pool2d(wide, output_size); }, x);
  return max_pool(x, adaptive_geometry(x, output_size, "adaptive_max_pool2d"), false, "AdaptiveMaxPool2DBackward")
      .first;
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("adaptive_max_pool2d");
}

std::pair<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x, ExpandingArray<2> output_size) try {
  return max_pool(x, adaptive_geometry(x, output_size, "adaptive_max_pool2d_with_indices"), true,
                  "AdaptiveMaxPool2DBackward");
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("adaptive_max_pool2d_with_indices");
}

}  // namespace functional

namespace {
functional::MaxPool2dFuncOptions func_options(const MaxPool2dOptions& o) {
  return {.stride = o.stride, .padding = o.padding, .dilation = o.dilation, .ceil_mode = o.ceil_mode};
}
}  // namespace

MaxPool2d::MaxPool2d(ExpandingArray<2> kernel_size, const MaxPool2dOptions& options)
    : kernel_size(kernel_size), options(options) {}
Tensor MaxPool2d::forward(const Tensor& x) { return functional::max_pool2d(x, kernel_size, func_options(options)); }
std::pair<Tensor, Tensor> MaxPool2d::forward_with_indices(const Tensor& x) {
  return functional::max_pool2d_with_indices(x, kernel_size, func_options(options));
}

AvgPool2d::AvgPool2d(ExpandingArray<2> kernel_size, const AvgPool2dOptions& options)
    : kernel_size(kernel_size), options(options) {}
Tensor AvgPool2d::forward(const Tensor& x) {
  return functional::avg_pool2d(x, kernel_size,
                                {.stride = options.stride, .padding = options.padding, .ceil_mode = options.ceil_mode,
                                 .count_include_pad = options.count_include_pad,
                                 .divisor_override = options.divisor_override});
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(ExpandingArray<2> output_size) : output_size(output_size) {}
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return functional::adaptive_avg_pool2d(x, output_size); }

AdaptiveMaxPool2d::AdaptiveMaxPool2d(ExpandingArray<2> output_size) : output_size(output_size) {}
Tensor AdaptiveMaxPool2d::forward(const Tensor& x) { return functional::adaptive_max_pool2d(x, output_size); }
std::pair<Tensor, Tensor> AdaptiveMaxPool2d::forward_with_indices(const Tensor& x) {
  return functional::adaptive_max_pool2d_with_indices(x, output_size);
}

}  // namespace tg::nn
