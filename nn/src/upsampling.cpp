// F::interpolate (nearest, bilinear) and nn::Upsample, with torch's coordinate rules.
//
// Along each spatial axis, with in, out the sizes and s the optional scale_factor:
//   nearest:  src(o) = min(⌊o · r⌋, in − 1), r = 1/s if given else in/out (in float, as torch),
//             with torch's exact shortcuts out = in (src = o) and out = 2·in (src = o/2).
//             A separable gather (axis_gather.hpp), whose backward is its adjoint.
//   bilinear: x(o) = r·o (align_corners, r = (in − 1)/(out − 1)) or max(r·(o + ½) − ½, 0)
//             (r as nearest); i₀ = ⌊x⌋, i₁ = min(i₀ + 1, in − 1), λ₁ = x − i₀, λ₀ = 1 − λ₁, and
//               y[h, w] = (x[h₀, w₀]·λw₀ + x[h₀, w₁]·λw₁)·λh₀ + (x[h₁, w₀]·λw₀ + x[h₁, w₁]·λw₁)·λh₁,
//             a linear map whose adjoint adds g·λh·λw into the four inputs; each is the other's
//             backward, to any order.
#include "tapegrad/nn/upsampling.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/node.hpp"
#include "axis_gather.hpp"
#include "dispatch.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"
#include "tensor_impl.hpp"

namespace tg::nn {

namespace {

// One spatial axis of an interpolation.
struct Axis {
  int64_t in = 0, out = 0;
  std::optional<double> scale;  // the scale_factor the coordinates use, if any
};

// torch's compute_scales_value: 1/scale when a positive scale is given, else in/out, in T.
template <typename T>
T scale_of(const Axis& a) {
  return a.scale && *a.scale > 0 ? static_cast<T>(1.0 / *a.scale) : static_cast<T>(a.in) / static_cast<T>(a.out);
}

std::vector<int64_t> nearest_map(const Axis& a) {
  std::vector<int64_t> src(static_cast<size_t>(a.out));
  const float scale = scale_of<float>(a);
  for (int64_t o = 0; o < a.out; ++o)
    src[static_cast<size_t>(o)] = a.out == a.in       ? o
                                  : a.out == 2 * a.in ? o >> 1
                                                      : std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * scale)), a.in - 1);
  return src;
}

// One output position's two neighbours and weights along an axis.
template <typename T>
struct Taps {
  int64_t i0, i1;
  T l0, l1;
};

template <typename T>
std::vector<Taps<T>> linear_taps(const Axis& a, bool align_corners) {
  std::vector<Taps<T>> taps(static_cast<size_t>(a.out));
  const T ratio = align_corners ? (a.out > 1 ? static_cast<T>(a.in - 1) / static_cast<T>(a.out - 1) : T(0))
                                : scale_of<T>(a);
  for (int64_t o = 0; o < a.out; ++o) {
    if (a.out == a.in) {
      taps[static_cast<size_t>(o)] = {o, o, T(1), T(0)};
      continue;
    }
    T x = align_corners ? ratio * static_cast<T>(o) : ratio * (static_cast<T>(o) + T(0.5)) - T(0.5);
    if (!align_corners && x < 0) x = 0;
    const int64_t i0 = static_cast<int64_t>(x);
    const int64_t i1 = i0 + (i0 < a.in - 1 ? 1 : 0);
    const T l1 = std::min(std::max(x - static_cast<T>(i0), T(0)), T(1));
    taps[static_cast<size_t>(o)] = {i0, i1, T(1) - l1, l1};
  }
  return taps;
}

struct BilinearPlan {
  Axis h, w;
  bool align_corners = false;
};

// x: [planes, H, W] -> y: [planes, H_out, W_out]. Parallel over output rows.
template <typename T>
void bilinear_forward(const BilinearPlan& p, int64_t planes, const T* x, T* y) {
  const auto th = linear_taps<T>(p.h, p.align_corners), tw = linear_taps<T>(p.w, p.align_corners);
  const int64_t H = p.h.in, W = p.w.in, H_out = p.h.out, W_out = p.w.out;
  tg::detail::parallel_for(planes * H_out, std::max<int64_t>(1, tg::detail::kElementwiseGrain / (4 * W_out)),
                           [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const Taps<T> h = th[static_cast<size_t>(r % H_out)];
      const T* row0 = x + (r / H_out) * H * W + h.i0 * W;
      const T* row1 = x + (r / H_out) * H * W + h.i1 * W;
      for (int64_t ow = 0; ow < W_out; ++ow) {
        const Taps<T> w = tw[static_cast<size_t>(ow)];
        y[r * W_out + ow] = (row0[w.i0] * w.l0 + row0[w.i1] * w.l1) * h.l0 + (row1[w.i0] * w.l0 + row1[w.i1] * w.l1) * h.l1;
      }
    }
  });
}

// g: [planes, H_out, W_out] -> dx: [planes, H, W] (overwritten): each g added into its four
// inputs with weights λh·λw. One plane's additions run in order; planes in parallel.
template <typename T>
void bilinear_adjoint(const BilinearPlan& p, int64_t planes, const T* g, T* dx) {
  const auto th = linear_taps<T>(p.h, p.align_corners), tw = linear_taps<T>(p.w, p.align_corners);
  const int64_t H = p.h.in, W = p.w.in, H_out = p.h.out, W_out = p.w.out;
  tg::detail::parallel_for(planes, std::max<int64_t>(1, tg::detail::kElementwiseGrain / std::max(H * W, H_out * W_out)),
                           [&](int64_t p0, int64_t p1) {
    std::fill(dx + p0 * H * W, dx + p1 * H * W, T(0));
    for (int64_t plane = p0; plane < p1; ++plane) {
      T* d = dx + plane * H * W;
      for (int64_t oh = 0; oh < H_out; ++oh) {
        const Taps<T> h = th[static_cast<size_t>(oh)];
        for (int64_t ow = 0; ow < W_out; ++ow) {
          const Taps<T> w = tw[static_cast<size_t>(ow)];
          const T v = g[(plane * H_out + oh) * W_out + ow];
          d[h.i0 * W + w.i0] += h.l0 * w.l0 * v;
          d[h.i0 * W + w.i1] += h.l0 * w.l1 * v;
          d[h.i1 * W + w.i0] += h.l1 * w.l0 * v;
          d[h.i1 * W + w.i1] += h.l1 * w.l1 * v;
        }
      }
    }
  });
}

Shape with_spatial(const Shape& shape, int64_t H, int64_t W) {
  Shape out = shape;
  out[out.size() - 2] = H;
  out.back() = W;
  return out;
}

Tensor bilinear_adjoint_op(const Tensor& g, const std::shared_ptr<const BilinearPlan>& plan);

Tensor bilinear_op(const Tensor& x, const std::shared_ptr<const BilinearPlan>& plan) {
  const char* node = "UpsampleBilinear2DBackward";
  Tensor y = tg::make_tensor(with_spatial(x.shape(), plan->h.out, plan->w.out), x.dtype(), node);
  tg::detail::dispatch_floating(node, x.dtype(), [&]<typename T>() {
    if (y.numel() > 0) bilinear_forward<T>(*plan, x.numel() / (plan->h.in * plan->w.in), x.data<T>(), y.mutable_data<T>());
  });
  if (autograd::needs_grad(x))
    autograd::record(y, node, {x}, [plan](const Tensor& g, autograd::GradInputs& grads) {
      grads.set(0, bilinear_adjoint_op(g, plan));
    });
  return y;
}

Tensor bilinear_adjoint_op(const Tensor& g, const std::shared_ptr<const BilinearPlan>& plan) {
  const char* node = "UpsampleBilinear2DBackwardBackward";
  Tensor dx = tg::make_tensor(with_spatial(g.shape(), plan->h.in, plan->w.in), g.dtype(), node);
  tg::detail::dispatch_floating(node, g.dtype(), [&]<typename T>() {
    if (dx.numel() > 0) bilinear_adjoint<T>(*plan, dx.numel() / (plan->h.in * plan->w.in), g.data<T>(), dx.mutable_data<T>());
  });
  if (autograd::needs_grad(g))
    autograd::record(dx, node, {g}, [plan](const Tensor& gg, autograd::GradInputs& grads) {
      grads.set(0, bilinear_op(gg, plan));
    });
  return dx;
}

// One value for every spatial dim, or one per spatial dim.
template <typename V>
std::vector<V> per_spatial_dim(const std::vector<V>& values, int64_t spatial, const char* what, const Tensor& x) {
  check(values.size() == 1 || static_cast<int64_t>(values.size()) == spatial, "interpolate", "expected 1 or ",
        spatial, " values of ", what, " for an input of shape ", x.shape(), ", got ", values.size());
  return values.size() == 1 ? std::vector<V>(static_cast<size_t>(spatial), values[0]) : values;
}

}  // namespace

namespace functional {

Tensor interpolate(const Tensor& x, const InterpolateFuncOptions& o) try {
  const char* op = "interpolate";
  check(x.defined(), op, "undefined input");
  const bool bilinear = o.mode == "bilinear";
  check(o.mode == "nearest" || bilinear, op, "mode \"", o.mode, "\" is not supported (nearest or bilinear)");
  if (bilinear)
    check(x.dim() == 4, op, "mode bilinear expects a 4-D input [N, C, H, W], got ", x.shape());
  else
    check(x.dim() == 3 || x.dim() == 4, op, "mode nearest expects a 3-D [N, C, W] or 4-D [N, C, H, W] input, got ",
          x.shape());
  tg::detail::check_dtype<tg::detail::FloatingDTypes>(op, x.dtype());
  check(!o.align_corners || bilinear, op, "align_corners can only be set with mode bilinear, got mode ", o.mode);
  check(o.size.has_value() != o.scale_factor.has_value(), op,
        o.size ? "give size or scale_factor, not both" : "give either size or scale_factor");
  check(!(o.size && o.recompute_scale_factor.value_or(false)), op,
        "recompute_scale_factor is not meaningful with an explicit size");

  const int64_t spatial = x.dim() - 2;
  std::vector<Axis> axes(static_cast<size_t>(spatial));
  const std::vector<int64_t> sizes = o.size ? per_spatial_dim(*o.size, spatial, "size", x) : std::vector<int64_t>{};
  const std::vector<double> scales =
      o.scale_factor ? per_spatial_dim(*o.scale_factor, spatial, "scale_factor", x) : std::vector<double>{};
  for (int64_t d = 0; d < spatial; ++d) {
    Axis& a = axes[static_cast<size_t>(d)];
    a.in = x.size(2 + d);
    if (o.size) {
      a.out = sizes[static_cast<size_t>(d)];
    } else {
      const double s = scales[static_cast<size_t>(d)];
      check(std::isfinite(s) && s > 0, op, "scale_factor must be positive, got ", s);
      const double out = std::floor(static_cast<double>(a.in) * s);
      check(out < 0x1p63, op, "scale_factor ", s, " makes the output size of dim ", 2 + d, " of an input of shape ",
            x.shape(), " too large (", out, ")");
      a.out = static_cast<int64_t>(out);
      if (!o.recompute_scale_factor.value_or(false)) a.scale = s;
    }
    check(a.in > 0 && a.out > 0, op, "input and output sizes must be positive, got input of shape ", x.shape(),
          " and output size ", a.out, " at dim ", 2 + d);
  }

  // An output shape that can be allocated at all, checked here to name interpolate. The nearest
  // index tables take memory in proportion to the output's sizes: filled only for an output with
  // elements.
  Shape out_shape = x.shape();
  for (int64_t d = 0; d < spatial; ++d) out_shape[static_cast<size_t>(2 + d)] = axes[static_cast<size_t>(d)].out;
  const bool has_elements = checked_numel(out_shape, op) > 0;
  if (bilinear) {
    auto plan = std::make_shared<BilinearPlan>();
    plan->h = axes[0], plan->w = axes[1];
    plan->align_corners = o.align_corners.value_or(false);
    return bilinear_op(x, plan);
  }
  auto maps = std::make_shared<tg::detail::AxisMaps>();
  for (const Axis& a : axes) {
    maps->src.push_back(has_elements ? nearest_map(a) : std::vector<int64_t>{});
    maps->in_sizes.push_back(a.in);
    maps->out_sizes.push_back(a.out);
  }
  maps->injective = std::all_of(axes.begin(), axes.end(), [](const Axis& a) { return a.out <= a.in; }) &&
                    std::all_of(maps->src.begin(), maps->src.end(), [](const std::vector<int64_t>& src) {
                      return std::adjacent_find(src.begin(), src.end()) == src.end();
                    });
  maps->gather_node = spatial == 1 ? "UpsampleNearest1DBackward" : "UpsampleNearest2DBackward";
  maps->adjoint_node = spatial == 1 ? "UpsampleNearest1DBackwardBackward" : "UpsampleNearest2DBackwardBackward";
  return tg::detail::axis_gather(x, maps, 0.0);
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("interpolate");
}

}  // namespace functional

Upsample::Upsample(const UpsampleOptions& options) : options(options) {}

Tensor Upsample::forward(const Tensor& x) {
  return functional::interpolate(
      x, {.size = options.size, .scale_factor = options.scale_factor, .mode = options.mode,
          .align_corners = options.align_corners});
}

}  // namespace tg::nn
