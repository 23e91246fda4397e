// Scans along one dim: cumsum and cumprod, each also from the end, and the first-order linear
// recurrence h[k] = a[k]·h[k−1] + b[k] that their gradients need.
//
// Every line is one sequential walk (ops/line_walk.hpp), in double for float tensors — PyTorch's
// CPU kernel and its order — and in wrapping uint64 for bool and int64 ones, which give int64.
// The lines run in parallel, so any thread count gives the same bits.
//
// Each gradient is written in these same scans and in recorded ops (narrow, cat, *), so a recorded
// backward (create_graph) differentiates again, to any order, with one formula for both paths:
//   cumsum:  dx = the running sum of g from the other end.
//   cumprod: y[k] = Π_{j≤k} x[j], so dx[k] = Σ_{i≥k} g[i] Π_{j≤i, j≠k} x[j] = E[k]·S[k], with
//            E[k] = Π_{j<k} x[j] (an exclusive cumprod) and S[k] = g[k] + x[k+1]·S[k+1] (a linear
//            recurrence from the end). No division: exact with zeros in x, where PyTorch's
//            cumsum(g·y)/x needs a special case for each.
//   linear recurrence: with λ[k] = u[k] + a[k+1]·λ[k+1] (the same recurrence from the end, u the
//            gradient of h), db = λ and da[k] = λ[k]·h[k−1].
// ("From the end" swaps k − 1 and k + 1 throughout.)
#include "ops/scan.hpp"

#include "autograd/node.hpp"
#include "bfloat16_compute.hpp"
#include "ops/line_walk.hpp"
#include "out_of_memory.hpp"

namespace tg {
namespace detail {
namespace {

// x moved one step along the scan: element k holds x[k − 1] (from the end: x[k + 1]), and the
// scan's first element holds `fill`. Recorded (narrow and cat).
Tensor previous(const Tensor& x, int64_t d, bool reverse, double fill) {
  if (x.dim() == 0) return full({}, fill, x.dtype());
  const int64_t n = x.size(d);
  if (n == 0) return x;
  Shape edge_shape = x.shape();
  edge_shape[d] = 1;
  const Tensor edge = full(edge_shape, fill, x.dtype());
  if (n == 1) return edge;
  return reverse ? cat({x.narrow(d, 1, n - 1), edge}, d) : cat({edge, x.narrow(d, 0, n - 1)}, d);
}

// Running sums (Product: products) of x along d, of fold_result_dtype(x.dtype()).
template <bool Product>
Tensor run_scan(const Tensor& x, int64_t d, bool reverse, const char* op) {
  Tensor out = make_tensor(x.shape(), fold_result_dtype(x.dtype()), op);
  sum_or_multiply_lines</*Scan=*/true, Product>(x, out, along_dim(x.shape(), d), reverse, op);
  return out;
}

// h[k] = a[k]·h[k−1] + b[k] along d from h[−1] = 0 (from the end: a[k]·h[k+1] + b[k]); a and b of
// one shape and one float dtype. Recorded.
Tensor linear_recurrence(const Tensor& a, const Tensor& b, int64_t d, bool reverse) {
  Tensor out = make_tensor(b.shape(), b.dtype(), "cumprod");
  dispatch_floating("cumprod", b.dtype(), [&]<typename T>() {
    const T* coefficient = a.data<T>();
    const T* term = b.data<T>();
    T* h = out.mutable_data<T>();
    walk_lines</*Scan=*/true>(
        along_dim(b.shape(), d), reverse, 0.0,
        [=](double previous_h, int64_t at) {
          return static_cast<double>(coefficient[at]) * previous_h + static_cast<double>(term[at]);
        },
        [h](int64_t at, double value) { h[at] = static_cast<T>(value); });
  });
  if (autograd::needs_grad(a, b))
    autograd::record(out, "LinearRecurrenceBackward", {a, b},
                     [saved_a = autograd::SavedTensor(a), saved_h = autograd::SavedTensor(out, autograd::SavedTensor::kOutput),
                      d, reverse](const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor lambda = linear_recurrence(previous(grads.unpack(saved_a), d, !reverse, 0.0), g, d, !reverse);
                       if (grads.needed(0)) grads.set(0, lambda * previous(grads.unpack(saved_h), d, reverse, 0.0));
                       grads.set(1, lambda);
                     });
  return out;
}

Tensor scan_sum(const Tensor& x, int64_t d, bool reverse) {
  Tensor out = run_scan</*Product=*/false>(x, d, reverse, "cumsum");
  if (autograd::needs_grad(x))
    autograd::record(out, "CumsumBackward", {x}, [d, reverse](const Tensor& g, autograd::GradInputs& grads) {
      grads.set(0, scan_sum(g, d, !reverse));
    });
  return out;
}

}  // namespace

Tensor scan_prod(const Tensor& x, int64_t d, bool reverse) {
  Tensor out = run_scan</*Product=*/true>(x, d, reverse, "cumprod");
  if (autograd::needs_grad(x))
    autograd::record(out, "CumprodBackward", {x},
                     [saved_x = autograd::SavedTensor(x), d, reverse](const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor& x = grads.unpack(saved_x);
                       // dx = E · S: S[k] = g[k] + x[k+1]·S[k+1], a recurrence from the other end
                       const Tensor suffix = linear_recurrence(previous(x, d, !reverse, 0.0), g, d, !reverse);
                       grads.set(0, exclusive_scan_prod(x, d, reverse) * suffix);
                     });
  return out;
}

Tensor exclusive_scan_prod(const Tensor& x, int64_t d, bool reverse) {
  return scan_prod(previous(x, d, reverse, 1.0), d, reverse);
}

namespace {

// cumsum and cumprod: checked here, scanned forward.
Tensor cumulative(const Tensor& x, int64_t dim, bool product) {
  const char* op = product ? "cumprod" : "cumsum";
  try {
    check(x.defined(), op, "undefined tensor");
    if (is_bfloat16(x)) return in_float32([&](const Tensor& wide) { return cumulative(wide, dim, product); }, x);
    const int64_t d = normalize_dim_0d(dim, x, op);  // a 0-d tensor takes dim 0 or -1, as in PyTorch
    return product ? scan_prod(x, d, false) : scan_sum(x, d, false);
  } catch (...) {
    rethrow_out_of_memory_as(op);
  }
}

}  // namespace

}  // namespace detail

Tensor Tensor::cumsum(int64_t dim) const { return detail::cumulative(*this, dim, /*product=*/false); }
Tensor Tensor::cumprod(int64_t dim) const { return detail::cumulative(*this, dim, /*product=*/true); }

}  // namespace tg
