// Gradient clipping: a deterministic norm over every gradient, then one pass that writes the
// rescaled (or clamped) gradient as a new tensor.
#include "tapegrad/nn/clip_grad.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "deterministic_sum.hpp"
#include "dispatch.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"
#include "tensor_impl.hpp"

namespace tg::nn::utils {

namespace {

using tg::detail::for_each_chunk;
using tg::detail::lane_sum;
using tg::detail::row_chunks;
using tg::detail::RowChunks;

// The defined gradients of `parameters`, after checking that every parameter is defined.
std::vector<Tensor> defined_grads(const std::vector<Tensor>& parameters, const char* op) {
  std::vector<Tensor> grads;
  for (size_t i = 0; i < parameters.size(); ++i) {
    check(parameters[i].defined(), op, "parameter ", i, " is an undefined tensor");
    Tensor grad = parameters[i].grad();
    if (grad.defined()) grads.push_back(std::move(grad));
  }
  return grads;
}

// The p-norm of values: [n] given as term(i) -> double. p = ±inf: the largest / smallest |x|
// (NaN propagates, as torch.norm's does); otherwise (Σ term)^(1/p) with term = |x|^p (x != 0 for
// p = 0, which is the count itself). Chunks of row_chunks(n, 1) add their lane sums in chunk order.
template <typename T>
double p_norm(const T* values, int64_t n, double p) {
  if (std::isinf(p)) {
    const bool largest = p > 0;
    double extreme = n == 0 ? (largest ? 0.0 : std::numeric_limits<double>::infinity()) : std::fabs(double(values[0]));
    for (int64_t i = 0; i < n; ++i) {
      const double magnitude = std::fabs(static_cast<double>(values[i]));
      if (std::isnan(magnitude) || std::isnan(extreme)) {
        extreme = std::numeric_limits<double>::quiet_NaN();
      } else {
        extreme = largest ? std::max(extreme, magnitude) : std::min(extreme, magnitude);
      }
    }
    return extreme;
  }
  const auto term = [p](double x) {
    if (p == 2) return x * x;
    if (p == 1) return std::fabs(x);
    if (p == 0) return x != 0 ? 1.0 : 0.0;
    return std::pow(std::fabs(x), p);
  };
  const RowChunks chunks = row_chunks(n, 1);
  std::vector<double> partial(static_cast<size_t>(chunks.count), 0.0);
  for_each_chunk(chunks, n, [&](int64_t chunk, int64_t i0, int64_t i1) {
    partial[static_cast<size_t>(chunk)] =
        lane_sum(i1 - i0, [&](int64_t i) { return term(static_cast<double>(values[i0 + i])); });
  });
  double sum = 0.0;
  tg::detail::sum_slots_in_order(partial.data(), chunks.count, 1, [&](int64_t, double total) { sum = total; });
  if (p == 2) return std::sqrt(sum);
  if (p == 1 || p == 0) return sum;
  return std::pow(sum, 1.0 / p);
}

// values: [n] -> a new tensor of values[i] transformed by `map`, set as `param`'s grad.
template <typename T, typename Map>
void replace_grad(Tensor& param, const Tensor& grad, const Map& map) {
  Tensor clipped = empty(grad.shape(), grad.dtype());
  const T* in = grad.data<T>();
  T* out = clipped.mutable_data<T>();
  tg::detail::parallel_for(grad.numel(), tg::detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = map(in[i]);
  });
  param.set_grad(clipped);
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) try {
  check(max_norm >= 0, "clip_grad_norm_", "expected max_norm >= 0, got ", max_norm);
  check(!std::isnan(norm_type), "clip_grad_norm_", "expected a norm_type, got NaN");
  std::vector<Tensor> grads = defined_grads(parameters, "clip_grad_norm_");
  if (grads.empty()) return scalar_tensor(0.0);  // PyTorch: torch.tensor(0.)
  // Each gradient's norm in its dtype (torch.norm of it), then the norm of those norms in the
  // dtype they promote to (torch.norm(torch.stack(norms))).
  DType total_dtype = kFloat32;
  std::vector<double> norms;
  for (const Tensor& grad : grads) {
    if (grad.dtype() == kFloat64) total_dtype = kFloat64;
    tg::detail::dispatch_floating("clip_grad_norm_", grad.dtype(), [&]<typename T>() {
      norms.push_back(static_cast<T>(p_norm(grad.data<T>(), grad.numel(), norm_type)));
    });
  }
  const Tensor total_norm = scalar_tensor(p_norm(norms.data(), static_cast<int64_t>(norms.size()), norm_type),
                                          total_dtype);
  const double total = total_norm.item();
  check(!error_if_nonfinite || std::isfinite(total), "clip_grad_norm_", "the total norm of order ", norm_type,
        " of the gradients of ", grads.size(), " parameters is ", total,
        ", so they cannot be clipped; pass error_if_nonfinite = false to clip them anyway");
  // clip_coef = max_norm / (total_norm + 1e-6), clamped to at most 1, in total_norm's dtype; a NaN
  // total gives a NaN coefficient, as PyTorch's clamp does.
  double coefficient = 0.0;
  tg::detail::dispatch_floating("clip_grad_norm_", total_dtype, [&]<typename T>() {
    const T coef = static_cast<T>(max_norm) / (static_cast<T>(total) + static_cast<T>(1e-6));
    coefficient = std::isnan(coef) ? coef : std::min(coef, T(1));
  });
  if (coefficient >= 1) return total_norm;  // g * 1 is g: nothing to write
  for (const Tensor& param : parameters) {
    const Tensor grad = param.grad();
    if (!grad.defined()) continue;
    Tensor target = param;
    tg::detail::dispatch_floating("clip_grad_norm_", grad.dtype(), [&]<typename T>() {
      const T scale = static_cast<T>(coefficient);
      replace_grad<T>(target, grad, [scale](T g) { return g * scale; });
    });
  }
  return total_norm;
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("clip_grad_norm_");
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) try {
  check(clip_value >= 0, "clip_grad_value_", "expected clip_value >= 0, got ", clip_value);
  defined_grads(parameters, "clip_grad_value_");  // checks every parameter first
  for (const Tensor& param : parameters) {
    const Tensor grad = param.grad();
    if (!grad.defined()) continue;
    Tensor target = param;
    tg::detail::dispatch_floating("clip_grad_value_", grad.dtype(), [&]<typename T>() {
      const T high = static_cast<T>(clip_value), low = -high;
      // clamp(min=-c, max=c): comparisons are false for NaN, which passes through
      replace_grad<T>(target, grad, [low, high](T g) { return g < low ? low : (g > high ? high : g); });
    });
  }
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("clip_grad_value_");
}

}  // namespace tg::nn::utils
