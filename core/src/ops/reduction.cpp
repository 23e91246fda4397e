// Reductions: sum, mean, var and std over a list of dims, prod, and sum_to for broadcast
// gradients.
//
// Every reduction is brought to one shape, a contiguous [A, R, B] (keep A, reduce R, keep B).
// Float sums go to one deterministic kernel (reduction_kernels.cpp); integer sums and every
// product fold each of the A·B lines in order (ops/line_walk.hpp). Reduced dims that are not
// adjacent are first made adjacent by a permuting copy.
#include "ops/reduction.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "autocast_policy.hpp"
#include "autograd/node.hpp"
#include "bfloat16_compute.hpp"
#include "ops/elementwise.hpp"
#include "ops/line_walk.hpp"
#include "ops/reduction_kernels.hpp"
#include "ops/scan.hpp"
#include "ops/shape.hpp"
#include "out_of_memory.hpp"

namespace tg {
namespace detail {

template <typename T>
void reduce_sum(const T* in, T* out, int64_t A, int64_t R, int64_t B, double scale) {
  reduction_kernels_for_cpu().of<T>().sum(in, out, A, R, B, scale);
}

template void reduce_sum<float>(const float*, float*, int64_t, int64_t, int64_t, double);
template void reduce_sum<double>(const double*, double*, int64_t, int64_t, int64_t, double);

namespace {

// A reduction over a set of dims, prepared once: the output shapes and the [A, R, B] problem.
struct ReductionPlan {
  Shape keepdim_shape;  // input shape with reduced dims set to 1
  Shape out_shape;      // keepdim_shape, or with reduced dims removed
  std::vector<int64_t> permutation;  // empty when the reduced dims are already adjacent
  int64_t A = 1, R = 1, B = 1;
};

ReductionPlan plan_reduction(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim, const char* op) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(shape.size(), dims.empty());  // no dims: reduce everything (PyTorch)
  for (int64_t dim : dims) {
    if (ndim == 0) {  // a 0-d tensor reduces over "dim 0" or "-1" to itself, as in PyTorch
      normalize_dim(dim, 1, op);
      continue;
    }
    const int64_t d = normalize_dim(dim, ndim, op);
    check(!reduced[d], op, "dim ", dim, " appears more than once in the list of dims for a tensor of shape ", shape);
    reduced[d] = true;
  }
  ReductionPlan plan;
  for (int64_t d = 0; d < ndim; ++d) {
    plan.keepdim_shape.push_back(reduced[d] ? 1 : shape[d]);
    if (!reduced[d] || keepdim) plan.out_shape.push_back(reduced[d] ? 1 : shape[d]);
  }
  // Are the reduced dims (ignoring dims of size 1, which cost nothing) one adjacent block?
  int64_t first = -1, last = -1;
  for (int64_t d = 0; d < ndim; ++d)
    if (reduced[d] && shape[d] != 1) {
      if (first < 0) first = d;
      last = d;
    }
  bool adjacent = true;
  for (int64_t d = first + 1; first >= 0 && d < last; ++d) adjacent &= reduced[d] || shape[d] == 1;
  if (adjacent) {
    for (int64_t d = 0; d < ndim; ++d) {
      if (first >= 0 && d >= first && d <= last) plan.R *= shape[d];
      else if (first >= 0 && d > last) plan.B *= shape[d];
      else plan.A *= shape[d];
    }
    return plan;
  }
  // Move the kept dims first and the reduced ones last: [A, R, 1].
  for (int64_t d = 0; d < ndim; ++d)
    if (!reduced[d]) plan.permutation.push_back(d), plan.A *= shape[d];
  for (int64_t d = 0; d < ndim; ++d)
    if (reduced[d]) plan.permutation.push_back(d), plan.R *= shape[d];
  return plan;
}

Tensor run_reduction(const Tensor& x, const ReductionPlan& plan, double scale) {
  const Tensor input = plan.permutation.empty() ? x : permute_copy(x, plan.permutation);
  Tensor out = make_tensor(plan.out_shape, x.dtype());
  dispatch_floating("sum", x.dtype(), [&]<typename T>() {
    reduce_sum<T>(input.data<T>(), out.mutable_data<T>(), plan.A, plan.R, plan.B, scale);
  });
  return out;
}

// The sums (Product: products) of the plan's lines, each folded in order, of
// fold_result_dtype(x.dtype()): bool and int64 give int64. Not recorded.
template <bool Product>
Tensor fold_reduction(const Tensor& x, const ReductionPlan& plan, const char* op) {
  const Tensor input = plan.permutation.empty() ? x : permute_copy(x, plan.permutation);
  Tensor out = make_tensor(plan.out_shape, fold_result_dtype(x.dtype()), op);
  sum_or_multiply_lines</*Scan=*/false, Product>(input, out, AlongDim{plan.A, plan.R, plan.B}, /*reverse=*/false, op);
  return out;
}

// sum and mean: the same reduction, mean scaled by 1/R; the gradient is spread back evenly.
// bool and int64 tensors sum to int64 (no gradient: they cannot require grad) and have no mean.
Tensor scaled_sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, bool average, const char* op,
                  const char* backward_name) try {
  check(x.defined(), op, "undefined tensor");
  if (is_bfloat16(x))  // accumulated in float32 and rounded once, as PyTorch's bfloat16 sum
    return in_float32([&](const Tensor& wide) { return scaled_sum(wide, dims, keepdim, average, op, backward_name); }, x);
  check(!average || is_floating_point(x.dtype()), op, x.dtype(),
        " tensors have no mean; cast first: x.to(tg::kFloat32).mean()");
  const ReductionPlan plan = plan_reduction(x.shape(), dims, keepdim, op);
  if (!is_floating_point(x.dtype())) return fold_reduction</*Product=*/false>(x, plan, op);
  const double scale = average ? 1.0 / static_cast<double>(plan.R) : 1.0;
  Tensor out = run_reduction(x, plan, scale);
  if (autograd::needs_grad(x))
    autograd::record(out, backward_name, {x},
                     [keepdim_shape = plan.keepdim_shape, in_shape = x.shape(), scale](
                         const Tensor& g, autograd::GradInputs& grads) {
                       if (grads.create_graph()) {
                         const Tensor spread = g.reshape(keepdim_shape).expand(in_shape);
                         grads.set(0, scale == 1.0 ? spread : spread * scale);
                         return;
                       }
                       grads.set(0, broadcast_to(make_view(g, keepdim_shape), in_shape, scale));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as(op);
}

// prod over one dim, or over all elements (no dim). The gradient is the product of the line's
// other elements, (Π_{j<k} x[j]) · (Π_{j>k} x[j]): two exclusive scans (ops/scan.cpp), exact when
// the line holds one zero (whose gradient is the product of the rest) or several (all 0), with
// no division; written in recorded ops, so it differentiates again.
Tensor product(const Tensor& x, std::optional<int64_t> dim, bool keepdim) try {
  const char* op = "prod";
  check(x.defined(), op, "undefined tensor");
  if (autocast_enabled())  // on autocast's float32 list, as in PyTorch
    return autocast_to_float32([&](const Tensor& wide) { return product(wide, dim, keepdim); }, x);
  if (is_bfloat16(x)) return in_float32([&](const Tensor& wide) { return product(wide, dim, keepdim); }, x);
  const ReductionPlan plan =
      plan_reduction(x.shape(), dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{}, keepdim, op);
  Tensor out = fold_reduction</*Product=*/true>(x, plan, op);
  if (autograd::needs_grad(x)) {
    // The lines: along dim, or the flattened tensor (a 0-d tensor is one line of one element).
    const bool along = dim && x.dim() > 0;
    const int64_t d = along ? normalize_dim(*dim, x.dim(), op) : 0;
    autograd::record(out, "ProdBackward", {x},
                     [saved_x = autograd::SavedTensor(x), keepdim_shape = plan.keepdim_shape, along, d](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor& x = grads.unpack(saved_x);
                       const Tensor lines = along ? x : x.reshape({x.numel()});
                       const Tensor others = exclusive_scan_prod(lines, d, false) * exclusive_scan_prod(lines, d, true);
                       grads.set(0, g.reshape(keepdim_shape) * others.reshape(x.shape()));
                     });
  }
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("prod");
}

}  // namespace

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  // The gradient of a bfloat16 expand or broadcast (ops that only move values).
  if (is_bfloat16(grad)) return in_float32([&](const Tensor& wide) { return sum_to(wide, shape); }, grad);
  // Reduce the leading dims that broadcasting added and the dims where the input had size 1.
  const size_t lead = grad.shape().size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t d = 0; d < grad.shape().size(); ++d)
    if (d < lead || (shape[d - lead] == 1 && grad.shape()[d] != 1)) dims.push_back(static_cast<int64_t>(d));
  // A gradient that is itself recorded (a backward with create_graph) is summed by recorded ops, so
  // that it can be differentiated again; a plain backward runs without grad mode and never is.
  if (autograd::needs_grad(grad)) return (dims.empty() ? grad : grad.sum(dims, /*keepdim=*/true)).reshape(shape);
  if (dims.empty()) return make_view(grad, shape);
  const ReductionPlan plan = plan_reduction(grad.shape(), dims, /*keepdim=*/true, "sum_to");
  return make_view(run_reduction(grad, plan, 1.0), shape);
}

}  // namespace detail

Tensor Tensor::sum() const { return sum({}, false); }
Tensor Tensor::mean() const { return mean({}, false); }
Tensor Tensor::var() const { return var(std::vector<int64_t>{}, true, false); }

Tensor Tensor::prod() const { return detail::product(*this, std::nullopt, false); }
Tensor Tensor::prod(int64_t dim, bool keepdim) const { return detail::product(*this, dim, keepdim); }

Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const {
  return detail::scaled_sum(*this, dims, keepdim, /*average=*/false, "sum", "SumBackward");
}

Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const {
  return detail::scaled_sum(*this, dims, keepdim, /*average=*/true, "mean", "MeanBackward");
}

// var = Σ (x - mean)² / max(n - correction, 0), two passes over x: subtracting the mean before
// squaring avoids the cancellation of E[x²] - E[x]² when |mean| >> std. std is its square root, one
// node of its own so that its gradient at std = 0 is 0 (PyTorch's std_backward), not 0 · ∞.
Tensor Tensor::variance(const std::vector<int64_t>& dims, double correction, bool keepdim,
                        bool standard_deviation) const try {
  const Tensor& x = *this;
  const char* op = standard_deviation ? "std" : "var";
  check(x.defined(), op, "undefined tensor");
  if (detail::is_bfloat16(x))
    return detail::in_float32(
        [&](const Tensor& wide) { return wide.variance(dims, correction, keepdim, standard_deviation); }, x);
  detail::check_dtype<detail::FloatingDTypes>(op, x.dtype());
  check(!std::isnan(correction), op, "correction must be a number, got NaN");
  const detail::ReductionPlan plan = detail::plan_reduction(x.shape(), dims, keepdim, op);
  const detail::ReductionPlan keep_plan = detail::plan_reduction(x.shape(), dims, /*keepdim=*/true, op);
  // PyTorch's max(n - correction, 0): n - 1 = 0 gives 0/0 = nan, and so does n = 0 (where n - 1
  // would turn 0/0 into -0).
  const double divisor = std::max(0.0, static_cast<double>(plan.R) - correction);
  Tensor diff;
  {
    NoGradGuard no_grad;
    const Tensor mean = detail::run_reduction(x, keep_plan, 1.0 / static_cast<double>(plan.R));
    diff = x - mean;
  }
  const Tensor squared = detail::map(diff, [](auto v) { return v * v; });
  Tensor out = detail::run_reduction(squared, plan, 1.0 / divisor);
  if (standard_deviation) out = detail::map(out, [](auto v) { return std::sqrt(v); });
  if (!autograd::needs_grad(x)) return out;
  // d var / d x_i = 2 (x_i - mean) / divisor  (the mean's own gradient sums to 0)
  const auto spread_over_diff = [diff, keepdim_shape = plan.keepdim_shape](const Tensor& g_var, double divisor) {
    const Tensor spread = detail::broadcast_to(make_view(g_var, keepdim_shape), diff.shape(), 2.0 / divisor);
    return detail::map2(spread, diff, [](auto s, auto d) { return s * d; });
  };
  // The same in recorded ops, for a recorded backward: x − mean(x) recomputed from the connected x
  // (the saved diff is a constant), whose own derivative brings the mean's term of var''.
  const auto spread_over_diff_graph = [saved_x = autograd::SavedTensor(x), dims, keepdim_shape = plan.keepdim_shape](
                                          const autograd::GradInputs& grads, const Tensor& g_var, double divisor) {
    const Tensor& x = grads.unpack(saved_x);
    return g_var.reshape(keepdim_shape) * (x - x.mean(dims, /*keepdim=*/true)) * (2.0 / divisor);
  };
  if (standard_deviation)
    autograd::record(out, "StdBackward", {x},
                     [spread_over_diff, spread_over_diff_graph,
                      saved_std = autograd::SavedTensor(out, autograd::SavedTensor::kOutput),
                      divisor](const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor& deviation = grads.unpack(saved_std);
                       if (grads.create_graph()) {
                         // derivatives.yaml's std_backward: (g / (2 std)).masked_fill(std == 0, 0)
                         const Tensor g_var = (g / (deviation + deviation)).masked_fill(deviation.eq(0.0), 0.0);
                         grads.set(0, spread_over_diff_graph(grads, g_var, divisor));
                         return;
                       }
                       // d std = d var / (2 std), and 0 where std = 0
                       const Tensor g_var = detail::map2(g, deviation, [](auto gv, auto sv) {
                         return sv == 0 ? decltype(gv)(0) : gv / (sv + sv);
                       });
                       grads.set(0, spread_over_diff(g_var, divisor));
                     });
  else
    autograd::record(out, "VarBackward", {x},
                     [spread_over_diff, spread_over_diff_graph, divisor](const Tensor& g, autograd::GradInputs& grads) {
                       grads.set(0, grads.create_graph() ? spread_over_diff_graph(grads, g, divisor)
                                                         : spread_over_diff(g, divisor));
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as(standard_deviation ? "std" : "var");
}

Tensor Tensor::var(const std::vector<int64_t>& dims, bool unbiased, bool keepdim) const {
  return variance(dims, unbiased ? 1.0 : 0.0, keepdim, /*standard_deviation=*/false);
}

Tensor Tensor::std() const { return std(std::vector<int64_t>{}, true, false); }

Tensor Tensor::std(const std::vector<int64_t>& dims, bool unbiased, bool keepdim) const {
  return variance(dims, unbiased ? 1.0 : 0.0, keepdim, /*standard_deviation=*/true);
}

}  // namespace tg
