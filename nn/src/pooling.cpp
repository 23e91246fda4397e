// 2-D pooling: max_pool2d and its modules. Each op validates at the edge, reduces the pooling to
// per-axis window tables, and runs one fused pass over the output rows.
//
// Shapes: x: [P, H, W] planes (P = N·C, or C unbatched) -> y: [P, H_out, W_out]. Output element
// (oh, ow) of a plane reads rows rows[oh].first + t·step_h (t < rows[oh].count) and likewise
// columns: the window clipped to the input, so padding is never read. For max pooling
//   y = max over the window,  idx = its flat position h·W + w (the first largest; NaN wins),
//   dx[idx] += dy          (the backward: the adjoint of the gather x ↦ x[idx]).
#include "tapegrad/nn/pooling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "autograd/node.hpp"
#include "dispatch.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"
#include "tensor_impl.hpp"

namespace tg::nn {

namespace {

// One axis of the windows: output o reads first + t·step for t < count.
struct Window {
  int64_t first = 0, count = 0;
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
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  const int64_t numerator = in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (numerator >= 0 ? numerator / stride : -((-numerator + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// The windows of a strided, padded, dilated pooling along one axis, clipped to [0, in).
std::vector<Window> strided_windows(int64_t in, int64_t out, int64_t k, int64_t pad, int64_t stride, int64_t dilation) {
  std::vector<Window> windows(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    int64_t start = o * stride - pad;
    const int64_t end = std::min(start + (k - 1) * dilation + 1, in);
    while (start < 0) start += dilation;
    windows[static_cast<size_t>(o)] = {start, std::max<int64_t>(0, tg::detail::ceil_div(end - start, dilation))};
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
  g.H_out = pooled_size(g.H, kernel[0], o.padding[0], stride[0], o.dilation[0], o.ceil_mode);
  g.W_out = pooled_size(g.W, kernel[1], o.padding[1], stride[1], o.dilation[1], o.ceil_mode);
  check(g.H_out > 0 && g.W_out > 0, op, "the input of shape ", x.shape(), " is too small for kernel_size ",
        kernel.vec(), " with padding ", o.padding.vec(), " and dilation ", o.dilation.vec(), ": output size ",
        std::vector<int64_t>{g.H_out, g.W_out});
  g.step_h = o.dilation[0], g.step_w = o.dilation[1];
  g.rows = strided_windows(g.H, g.H_out, kernel[0], o.padding[0], stride[0], o.dilation[0]);
  g.cols = strided_windows(g.W, g.W_out, kernel[1], o.padding[1], stride[1], o.dilation[1]);
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
  const int64_t planes = dy.numel() / std::max<int64_t>(out_plane, 1);
  if (create_graph)
    return zeros({planes, in_plane}, dy.dtype())
        .scatter_add(1, indices.reshape({planes, out_plane}), dy.reshape({planes, out_plane}))
        .reshape(x_shape);
  Tensor dx = tg::make_tensor(x_shape, dy.dtype(), "MaxPool2DWithIndicesBackward");
  tg::detail::dispatch_floating("MaxPool2DWithIndicesBackward", dy.dtype(), [&]<typename T>() {
    index_scatter_planes<T>(planes, in_plane, out_plane, dy.data<T>(), indices.data<int64_t>(), dx.mutable_data<T>());
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

}  // namespace

namespace functional {

Tensor max_pool2d(const Tensor& x, ExpandingArray<2> kernel_size, const MaxPool2dFuncOptions& options) try {
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

}  // namespace tg::nn
