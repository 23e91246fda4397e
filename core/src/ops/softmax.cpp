// The softmax family over a dim: softmax, log_softmax, and logsumexp over a list of dims.
//
// Each works on lines along the dim ([outer, size, inner], ops/along_dim.hpp), independently and
// in parallel, one line per task step. Every line is shifted by its max before exp, so exp never
// overflows and the largest term is exactly 1; the sums run in double in an order fixed by the
// line length (lane_sum), so results do not depend on the thread count. A recorded backward
// (create_graph) computes the same gradients with recorded ops from the connected output (or input),
// so that they can be differentiated again.
#include <cmath>
#include <limits>
#include <type_traits>

#include "autograd/node.hpp"
#include "bfloat16_compute.hpp"
#include "deterministic_sum.hpp"
#include "dispatch.hpp"
#include "ops/along_dim.hpp"
#include "ops/elementwise.hpp"
#include "ops/exp_row_kernels.hpp"
#include "ops/softmax_rows.hpp"
#include "ops/shape.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"

namespace tg {
namespace {

using detail::AlongDim;

// Calls line_fn(line, start, stride) for every line of `layout` (start: the offset of its first
// element), lines in parallel chunks. Contiguous lines (inner = 1: a softmax over the last dim) get
// the stride as the constant 1, so that their loops vectorise; strided lines get it at run time.
// The lines of `layout` in parallel chunks of consecutive lines, of about kElementwiseGrain elements.
template <typename RangeFn>
void for_each_line_range(const AlongDim& layout, const RangeFn& range_fn) {
  detail::parallel_for(layout.lines(), detail::ceil_div(detail::kElementwiseGrain, std::max<int64_t>(layout.size, 1)),
                       range_fn);
}

// Calls line_fn(line, start, stride) for every line of `layout` (start: the offset of its first
// element), lines in parallel chunks. Contiguous lines (inner = 1: a softmax over the last dim) get
// the stride as the constant 1, so that their loops vectorise; strided lines get it at run time.
template <typename LineFn>
void for_each_line(const AlongDim& layout, const LineFn& line_fn) {
  const auto run = [&](auto stride) {
    for_each_line_range(layout, [&](int64_t begin, int64_t end) {
      for (int64_t line = begin; line < end; ++line) line_fn(line, layout.line_start(line), stride);
    });
  };
  if (layout.inner == 1) run(std::integral_constant<int64_t, 1>{});
  else run(layout.inner);
}

// The max of a line of n elements at `stride`; -inf for an empty line (NaN stays out of the max,
// but it reaches every output through the sum of exp).
template <typename T, typename Stride>
T line_max(const T* x, int64_t n, Stride stride) {
  T best = -std::numeric_limits<T>::infinity();
  for (int64_t k = 0; k < n; ++k) best = std::max(best, x[k * stride]);
  return best;
}

// Whether a line is float32 and contiguous: such lines run on the per-level row kernels
// (ops/exp_row_kernels.hpp), whose exp vectorises; the others on std::exp.
template <typename T, typename Stride>
constexpr bool kFloatRow = std::is_same_v<T, float> && std::is_same_v<Stride, std::integral_constant<int64_t, 1>>;

// A kFloatRow line's pointer, as the float pointer it is. The call depends on the line's stride
// type on purpose: clang type-checks the non-dependent expressions of a generic lambda's
// `if constexpr` branch when the enclosing template is instantiated, even where the branch is
// discarded (T = double), and would reject a double pointer passed to a float kernel.
template <typename Stride, typename T>
T* float_row(T* p) {
  static_assert(std::is_same_v<std::remove_const_t<T>, float>);
  return p;
}

// x, y: [outer, size, inner]. Per line, with m = max_k x_k and s = Σ_k exp(x_k − m):
//   softmax:      y_k = exp(x_k − m) / s   (the exps are stored on the way to s, then scaled)
//   log_softmax:  y_k = x_k − m − log s
template <bool Log, typename T>
void softmax_forward(const T* x, T* y, const AlongDim& layout) {
  const int64_t n = layout.size;
  if constexpr (std::is_same_v<T, float>) {
    if (layout.inner == 1) {
      // contiguous float32 rows: the same steps on a range of rows per call, with e_k = exp(x_k − m)
      // in float lanes (within 0.78 ulp)
      for_each_line_range(layout, [&](int64_t begin, int64_t end) {
        detail::exp_row_kernels_for_cpu().softmax_forward(x + begin * n, y + begin * n, end - begin, n, Log);
      });
      return;
    }
  }
  for_each_line(layout, [&](int64_t, int64_t start, auto stride) {
    const T* in = x + start;
    T* out = y + start;
    const T shift = line_max(in, n, stride);
    if constexpr (Log) {
      const double sum =
          detail::lane_sum(n, [&](int64_t k) { return static_cast<double>(std::exp(in[k * stride] - shift)); });
      const T log_sum = static_cast<T>(std::log(sum));
      for (int64_t k = 0; k < n; ++k) out[k * stride] = in[k * stride] - shift - log_sum;
    } else {
      const double sum = detail::lane_sum(n, [&](int64_t k) {
        const T e = std::exp(in[k * stride] - shift);
        out[k * stride] = e;
        return static_cast<double>(e);
      });
      const T inverse = static_cast<T>(1.0 / sum);
      for (int64_t k = 0; k < n; ++k) out[k * stride] *= inverse;
    }
  });
}

// dy, y, dx: [outer, size, inner]; per line, ops/softmax_rows.hpp. Contiguous float32 lines run
// the same formulas compiled for the vector level (exp_row_kernels.cpp), a range of rows per call.
template <bool Log, typename T>
void softmax_backward(const T* dy, const T* y, T* dx, const AlongDim& layout) {
  const int64_t n = layout.size;
  if constexpr (std::is_same_v<T, float>) {
    if (layout.inner == 1) {
      for_each_line_range(layout, [&](int64_t begin, int64_t end) {
        detail::exp_row_kernels_for_cpu().softmax_backward(dy + begin * n, y + begin * n, dx + begin * n, end - begin,
                                                           n, Log);
      });
      return;
    }
  }
  for_each_line(layout, [&](int64_t, int64_t start, auto stride) {
    detail::softmax_backward_line<Log>(dy + start, y + start, dx + start,
                                       detail::StridedLine<T, decltype(stride)>{n, stride});
  });
}

template <bool Log>
Tensor softmax_op(const Tensor& x, int64_t dim, const char* op, const char* backward_name) try {
  check(x.defined(), op, "undefined input");
  if (detail::is_bfloat16(x))
    return detail::in_float32([&](const Tensor& wide) { return softmax_op<Log>(wide, dim, op, backward_name); }, x);
  detail::check_dtype<detail::FloatingDTypes>(op, x.dtype());
  const int64_t d = detail::normalize_dim_0d(dim, x, op);
  const AlongDim layout = detail::along_dim(x.shape(), d);
  Tensor y = make_tensor(x.shape(), x.dtype(), op);
  detail::dispatch_floating(op, x.dtype(),
                            [&]<typename T>() { softmax_forward<Log, T>(x.data<T>(), y.mutable_data<T>(), layout); });
  if (autograd::needs_grad(x))
    autograd::record(
        y, backward_name, {x},
        [saved_y = autograd::SavedTensor(y, autograd::SavedTensor::kOutput), layout, backward_name, d](
            const Tensor& dy, autograd::GradInputs& grads) {
          const Tensor& y = grads.unpack(saved_y);
          if (grads.create_graph()) {
            // recorded, from the connected output:
            //   softmax:      dx = y · (dy − Σ dy·y)
            //   log_softmax:  dx = dy − e^y · Σ dy
            if constexpr (Log)
              grads.set(0, dy - y.exp() * dy.sum({d}, /*keepdim=*/true));
            else
              grads.set(0, y * (dy - (dy * y).sum({d}, /*keepdim=*/true)));
            return;
          }
          Tensor dx = make_tensor(y.shape(), y.dtype());
          detail::dispatch_floating(backward_name, y.dtype(), [&]<typename T>() {
            softmax_backward<Log, T>(dy.data<T>(), y.data<T>(), dx.mutable_data<T>(), layout);
          });
          grads.set(0, dx);
        });
  return y;
} catch (...) {
  detail::rethrow_out_of_memory_as(op);
}

// x: [outer, size, inner] -> out: [outer, inner], out = m + log Σ_k exp(x_k − m). As in PyTorch,
// an infinite max shifts by 0 instead: a line holding +inf gives +inf, a line of -inf gives -inf
// (and an empty line -inf), where x − m would have made NaN.
template <typename T>
void logsumexp_forward(const T* x, T* out, const AlongDim& layout) {
  const int64_t n = layout.size;
  for_each_line(layout, [&](int64_t line, int64_t start, auto stride) {
    const T* in = x + start;
    if constexpr (kFloatRow<T, decltype(stride)>) {
      const float* in_row = float_row<decltype(stride)>(in);
      const detail::ExpRowKernels& kernels = detail::exp_row_kernels_for_cpu();
      float shift = kernels.max(in_row, n);
      if (std::isinf(shift)) shift = 0;
      out[line] = shift + static_cast<float>(std::log(kernels.sum_exp(in_row, shift, nullptr, n)));
      return;
    }
    T shift = line_max(in, n, stride);
    if (std::isinf(shift)) shift = 0;
    const double sum =
        detail::lane_sum(n, [&](int64_t k) { return static_cast<double>(std::exp(in[k * stride] - shift)); });
    out[line] = shift + static_cast<T>(std::log(sum));
  });
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op<false>(x, dim, "softmax", "SoftmaxBackward"); }
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_op<true>(x, dim, "log_softmax", "LogSoftmaxBackward");
}
Tensor Tensor::softmax(int64_t dim) const { return tg::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return tg::log_softmax(*this, dim); }

// Over one dim the lines are read in place; over several, the reduced dims are first moved last by
// a permuting copy, so that the lines are [kept..., reduced...] rows. No dims: every element.
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) try {
  const char* op = "logsumexp";
  check(x.defined(), op, "undefined input");
  if (detail::is_bfloat16(x)) return detail::in_float32([&](const Tensor& wide) { return logsumexp(wide, dims, keepdim); }, x);
  detail::check_dtype<detail::FloatingDTypes>(op, x.dtype());
  const int64_t ndim = x.dim();
  std::vector<bool> reduced(static_cast<size_t>(ndim), dims.empty());
  for (int64_t dim : dims) {
    const int64_t d = detail::normalize_dim_0d(dim, x, op);
    if (ndim == 0) continue;
    check(!reduced[d], op, "dim ", dim, " appears more than once in the list of dims for a tensor of shape ",
          x.shape());
    reduced[d] = true;
  }
  Shape keepdim_shape, out_shape;
  std::vector<int64_t> permutation;
  for (int64_t d = 0; d < ndim; ++d) {
    keepdim_shape.push_back(reduced[d] ? 1 : x.size(d));
    if (!reduced[d] || keepdim) out_shape.push_back(reduced[d] ? 1 : x.size(d));
    if (!reduced[d]) permutation.push_back(d);
  }
  int64_t reduced_count = 0, reduced_dim = 0, reduced_numel = 1;
  for (int64_t d = 0; d < ndim; ++d)
    if (reduced[d]) permutation.push_back(d), ++reduced_count, reduced_dim = d, reduced_numel *= x.size(d);
  Tensor out = make_tensor(out_shape, x.dtype(), op);
  if (reduced_count <= 1) {
    const AlongDim layout = detail::along_dim(x.shape(), reduced_count == 1 ? reduced_dim : ndim);
    detail::dispatch_floating(op, x.dtype(),
                              [&]<typename T>() { logsumexp_forward<T>(x.data<T>(), out.mutable_data<T>(), layout); });
  } else {
    const Tensor rows = detail::permute_copy(x, permutation);
    const AlongDim layout{.outer = out.numel(), .size = reduced_numel, .inner = 1};
    detail::dispatch_floating(
        op, x.dtype(), [&]<typename T>() { logsumexp_forward<T>(rows.data<T>(), out.mutable_data<T>(), layout); });
  }
  if (autograd::needs_grad(x))
    autograd::record(out, "LogsumexpBackward", {x},
                     [saved_x = autograd::SavedTensor(x),
                      saved_out = autograd::SavedTensor(out, autograd::SavedTensor::kOutput),
                      keepdim_shape](const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor &x = grads.unpack(saved_x), &out = grads.unpack(saved_out);
                       if (grads.create_graph()) {  // recorded: g · e^(x − logsumexp), broadcasting
                         grads.set(0, g.reshape(keepdim_shape) * (x - out.reshape(keepdim_shape)).exp());
                         return;
                       }
                       // dx = g · exp(x − logsumexp): the softmax of x over the reduced dims, times g
                       const Tensor spread_out = detail::broadcast_to(make_view(out, keepdim_shape), x.shape());
                       const Tensor spread_g = detail::broadcast_to(make_view(g, keepdim_shape), x.shape());
                       const Tensor weights =
                           detail::map2(x, spread_out, [](auto xv, auto lse) { return std::exp(xv - lse); });
                       grads.set(0, detail::map2(spread_g, weights, [](auto gv, auto w) { return gv * w; }));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("logsumexp");
}

Tensor Tensor::logsumexp(const std::vector<int64_t>& dims, bool keepdim) const {
  return tg::logsumexp(*this, dims, keepdim);
}

}  // namespace tg
