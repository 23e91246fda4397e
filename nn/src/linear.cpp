// Linear: y = x·Wᵀ + b, forward and backward as GEMMs (core's detail::gemm, core/src/ops/gemm.cpp:
// the kernel chosen for the CPU on a few large tiles fixed by the sizes, run in parallel by
// oneTBB), one tape node.
#include "tapegrad/nn/linear.hpp"

#include <algorithm>
#include <cmath>

#include "autograd/node.hpp"
#include "autocast_policy.hpp"
#include "bfloat16_compute.hpp"
#include "dispatch.hpp"
#include "ops/gemm.hpp"
#include "ops/reduction.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"
#include "tapegrad/nn/functional.hpp"
#include "tapegrad/nn/init.hpp"

namespace tg::nn {

namespace {

// x: [M, in], weight: [out, in], bias: [out] or null -> y: [M, out]
template <typename T>
void linear_forward(const T* x, const T* weight, const T* bias, T* y, int64_t M, int64_t in, int64_t out) {
  if (bias) {
    // y[m, :] = b, then y += x·Wᵀ: the bias rides along in the GEMM's accumulate instead of a
    // second pass over y.
    tg::detail::parallel_for(M, std::max<int64_t>(1, tg::detail::kElementwiseGrain / std::max<int64_t>(out, 1)),
                             [&](int64_t m0, int64_t m1) {
                               for (int64_t m = m0; m < m1; ++m) std::copy(bias, bias + out, y + m * out);
                             });
  }
  tg::detail::gemm<T>(false, true, M, out, in, x, weight, y, /*accumulate=*/bias != nullptr);
}

// dy: [M, out], x: [M, in], weight: [out, in] -> dx: [M, in], dweight: [out, in], dbias: [out];
// a null output pointer is a gradient nobody needs.
template <typename T>
void linear_backward(const T* dy, const T* x, const T* weight, T* dx, T* dweight, T* dbias, int64_t M, int64_t in,
                     int64_t out) {
  if (dx) tg::detail::gemm<T>(false, false, M, in, out, dy, weight, dx, false);       // dx = dy·W
  if (dweight) tg::detail::gemm<T>(true, false, out, in, M, dy, x, dweight, false);   // dW = dyᵀ·x
  if (dbias) tg::detail::reduce_sum<T>(dy, dbias, 1, M, out, 1.0);                    // db = Σ_rows dy
}

// linear_backward's three products in recorded tg ops, for a backward pass that is itself
// differentiated (create_graph): each gradient is then on the tape as a function of dy, x and W.
// dy: [..., out], x: [..., in], weight: [out, in]; slot 2 (the bias) exists only with has_bias.
void linear_backward_differentiable(const Tensor& dy, const Tensor& x, const Tensor& weight, bool has_bias,
                                    int64_t M, int64_t in, int64_t out, autograd::GradInputs& grads) {
  if (grads.needed(0)) grads.set(0, tg::matmul(dy, weight));  // dx = dy·W
  const Tensor dy_rows = dy.reshape({M, out});                // every leading dim folded into rows
  if (grads.needed(1)) grads.set(1, tg::matmul(dy_rows.t(), x.reshape({M, in})));  // dW = dyᵀ·x
  if (has_bias && grads.needed(2)) grads.set(2, dy_rows.sum({0}));                 // db = Σ_rows dy
}

}  // namespace

namespace functional {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) try {
  check(x.defined() && weight.defined(), "linear", "undefined input or weight");
  if (tg::detail::autocast_enabled())  // autocast's lower-precision list
    return tg::detail::autocast_to_lower([](const Tensor& xs, const Tensor& w, const Tensor& b) { return linear(xs, w, b); },
                                         x, weight, bias);
  // bfloat16: the float32 kernel (bias + x·Wᵀ accumulated in float32), rounded once.
  if (tg::detail::all_bfloat16(x, weight, bias))
    return tg::detail::in_float32_on_bf16_products(tg::detail::Bf16Products::factors_exact,
                                                   [](const Tensor& xs, const Tensor& w, const Tensor& b) { return linear(xs, w, b); },
                                  x, weight, bias);
  check(weight.dim() == 2, "linear", "expected a weight of shape [out, in], got ", weight.shape());
  const int64_t out = weight.size(0), in = weight.size(1);
  check(x.dim() >= 1 && x.size(-1) == in, "linear", "expected an input of shape [..., ", in, "] for a weight of shape ",
        weight.shape(), ", got ", x.dim() >= 1 ? x.shape() : Shape{});
  check(x.dtype() == weight.dtype(), "linear", "dtypes differ: input ", x.dtype(), ", weight ", weight.dtype());
  if (bias.defined()) {
    check(bias.shape() == Shape{out}, "linear", "expected a bias of shape [", out, "] for a weight of shape ",
          weight.shape(), ", got ", bias.shape());
    check(bias.dtype() == x.dtype(), "linear", "dtypes differ: input ", x.dtype(), ", bias ", bias.dtype());
  }
  int64_t M = 1;  // every leading dim folded into rows
  for (int64_t d = 0; d + 1 < x.dim(); ++d) M *= x.size(d);
  Shape out_shape = x.shape();
  out_shape.back() = out;
  Tensor y = make_tensor(out_shape, x.dtype(), "linear");
  tg::detail::dispatch_floating("linear", x.dtype(), [&]<typename T>() {
    linear_forward<T>(x.data<T>(), weight.data<T>(), bias.defined() ? bias.data<T>() : nullptr, y.mutable_data<T>(),
                      M, in, out);
  });

  auto backward = [saved_x = autograd::SavedTensor(x), saved_weight = autograd::SavedTensor(weight),
                   has_bias = bias.defined(), M, in, out](const Tensor& dy, autograd::GradInputs& grads) {
    const Tensor &x = grads.unpack(saved_x), &weight = grads.unpack(saved_weight);
    if (grads.create_graph()) return linear_backward_differentiable(dy, x, weight, has_bias, M, in, out, grads);
    Tensor dx = grads.needed(0) ? make_tensor(x.shape(), x.dtype()) : Tensor();
    Tensor dweight = grads.needed(1) ? make_tensor(weight.shape(), weight.dtype()) : Tensor();
    Tensor dbias = has_bias && grads.needed(2) ? make_tensor({out}, x.dtype()) : Tensor();
    tg::detail::dispatch_floating("LinearBackward", x.dtype(), [&]<typename T>() {
      linear_backward<T>(dy.data<T>(), x.data<T>(), weight.data<T>(), dx.defined() ? dx.mutable_data<T>() : nullptr,
                         dweight.defined() ? dweight.mutable_data<T>() : nullptr,
                         dbias.defined() ? dbias.mutable_data<T>() : nullptr, M, in, out);
    });
    grads.set(0, dx);
    grads.set(1, dweight);
    if (has_bias) grads.set(2, dbias);
  };
  // An absent bias is not an input of the node at all.
  if (bias.defined() && autograd::needs_grad(x, weight, bias))
    autograd::record(y, "LinearBackward", {x, weight, bias}, std::move(backward));
  else if (!bias.defined() && autograd::needs_grad(x, weight))
    autograd::record(y, "LinearBackward", {x, weight}, std::move(backward));
  return y;
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("linear");
}

}  // namespace functional

namespace {

// PyTorch's Linear.reset_parameters: the weight [out, in] by kaiming_uniform_(a = √5), whose gain
// √(2 / (1 + 5)) makes the bound √3·gain/√in = 1/√in up to rounding; then the bias [out] by
// U(−1/√in, 1/√in). Both through nn::init with PyTorch's own arithmetic, so that the float32
// bounds, and therefore the values drawn, are PyTorch's bits.
Tensor default_init(const Shape& shape, int64_t in_features) {
  check(in_features >= 0 && shape[0] >= 0, "Linear", "expected non-negative feature counts, got in_features = ",
        in_features, ", out_features = ", shape[0]);
  Tensor values = empty(shape);
  if (shape.size() == 2) return init::kaiming_uniform_(values, std::sqrt(5.0));
  const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
  return init::uniform_(values, -bound, bound);
}

}  // namespace

// Member order draws the weight before the bias from the generator, as PyTorch does.
Linear::Linear(int64_t in_features, int64_t out_features, LinearOptions options)
    : weight("Linear.weight", default_init({out_features, in_features}, in_features)),
      bias("Linear.bias", options.bias ? default_init({out_features}, in_features) : Tensor()),
      in_features(in_features),
      out_features(out_features) {}

Tensor Linear::forward(const Tensor& x) { return functional::linear(x, weight, bias); }

void Linear::members(Members& m) {
  m.parameter("weight", weight);
  m.parameter("bias", bias);
}

}  // namespace tg::nn
