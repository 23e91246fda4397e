// Dropout: the module and its functional form, one fused pass forward and one backward.
//
// PyTorch 1.13 on the CPU computes
//   noise = empty_like(x).bernoulli_(1 − p);  noise /= (1 − p);  return x * noise
// The forward here draws the same keep/drop decision per element, in the same order from the same
// generator (one 53-bit double uniform each, kept when below 1 − p, as Tensor::bernoulli_), and
// multiplies x by the same noise value (1/(1 − p) rounded to x's dtype, or 0) in the same pass; it
// saves only the 1-byte keep mask, and the backward multiplies by the same noise again. A bfloat16
// x takes the same draws; its noise is 1/(1 − p) computed in bfloat16 (1 − p rounded to bfloat16,
// the quotient rounded again), and the product x·noise, exact in float32, is rounded once: torch
// 1.13's bits (bfloat16_nn_test.cpp).
#include "tapegrad/nn/dropout.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "autograd/node.hpp"
#include "bfloat16_compute.hpp"
#include "dispatch.hpp"
#include "dropout_kernels.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"
#include "random_draws.hpp"
#include "tapegrad/nn/functional.hpp"

namespace tg::nn {

namespace {

// Elements whose draws are taken in one bulk call: 16 KiB of words, in L1.
constexpr int64_t kDrawBlock = 2048;

void check_probability(double p, const char* op) {
  check(p >= 0.0 && p <= 1.0, op, "dropout probability has to be between 0 and 1, but got ", p);
}

// The noise of a kept element, 1 / (1 − p) in the noise's dtype N (x's), as `noise /= (1 − p)`
// computes it on a one: for bfloat16 the quotient of float32s, rounded to bfloat16.
template <typename N>
double kept_noise(double keep_probability) {
  return static_cast<double>(static_cast<N>(N(1) / static_cast<N>(keep_probability)));
}

// g times the noise of `keep`: keep ? kept : 0, elementwise; same shapes (tensors are contiguous).
// Not recorded.
Tensor times_noise(const Tensor& values, const Tensor& keep, double kept_value) {
  return tg::detail::dispatch_floating("dropout", values.dtype(), [&]<typename T>() {
    const auto kept = static_cast<T>(kept_value);
    Tensor out = make_tensor(values.shape(), values.dtype(), "dropout");
    const T* in = values.data<T>();
    const bool* keep_mask = keep.data<bool>();
    T* result = out.mutable_data<T>();
    const auto& kernels = tg::detail::dropout_kernels_for_cpu().noise.of<T>();
    tg::detail::parallel_for(values.numel(), tg::detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
      kernels.times_noise(in + begin, keep_mask + begin, kept, result + begin, end - begin);
    });
    return out;
  });
}

// x times the noise: each element kept (times `kept`) with probability keep_probability, else 0.
// x: float32 or float64, p in (0, 1).
Tensor dropout_with_noise(const Tensor& x, double keep_probability, double kept_value, Generator* generator) {
  Tensor keep = make_tensor(x.shape(), kBool, "dropout");
  Tensor out = make_tensor(x.shape(), x.dtype(), "dropout");
  // A draw u = m · 2^-53 (m: the low 53 bits of a 64-bit word pair, as uniform_of<double>) is
  // exact, so u < 1 − p exactly when the integer m < (1 − p) · 2^53, i.e. m < ⌈(1 − p) · 2^53⌉
  // (the product is exact: a power-of-two scaling). The same decisions as the double compare, in
  // integers, which vectorise (dropout_kernels.cpp).
  const auto keep_below = static_cast<uint64_t>(std::ceil(std::ldexp(keep_probability, 53)));
  const tg::detail::DropoutKernels& kernels = tg::detail::dropout_kernels_for_cpu();
  tg::detail::dispatch_floating("dropout", x.dtype(), [&]<typename T>() {
    const auto kept = static_cast<T>(kept_value);
    const T* in = x.data<T>();
    bool* keep_mask = keep.mutable_data<bool>();
    T* result = out.mutable_data<T>();
    const int64_t n = x.numel();
    // Sequential: each element's draw is the next word pair of one generator stream, taken a
    // block of words at a time (one call per block, not per word, keeps the call's overhead out
    // of the per-element loop). Each block's products follow while its mask is in L1: one pass.
    tg::detail::LockedGenerator draws(generator);
    std::array<uint32_t, 2 * kDrawBlock> words;
    for (int64_t i0 = 0; i0 < n; i0 += kDrawBlock) {
      const int64_t count = std::min(kDrawBlock, n - i0);
      draws.random_words(words.data(), 2 * count);
      kernels.mask.keep_mask(words.data(), count, keep_below, keep_mask + i0);
      kernels.noise.of<T>().times_noise(in + i0, keep_mask + i0, kept, result + i0, count);
    }
  });
  if (autograd::needs_grad(x))
    autograd::record(out, "DropoutBackward", {x},
                     [keep, kept_value](const Tensor& g, autograd::GradInputs& grads) {
                       // A differentiated pass (create_graph) multiplies by the same noise as a
                       // recorded product: the mask is a constant, the gradient linear in g.
                       if (grads.create_graph()) return grads.set(0, g * times_noise(ones_like(g), keep, kept_value));
                       grads.set(0, times_noise(g, keep, kept_value));
                     });
  return out;
}

}  // namespace

Tensor functional::dropout(const Tensor& x, double p, bool training, Generator* generator) try {
  check(x.defined(), "dropout", "undefined input");
  check_probability(p, "dropout");
  if (!tg::detail::is_bfloat16(x)) tg::detail::check_dtype<tg::detail::FloatingDTypes>("dropout", x.dtype());
  if (p == 0.0 || !training || x.numel() == 0) return x;
  if (p == 1.0) return x * 0.0;  // PyTorch: x times a zero scalar (NaN stays NaN), no draws
  const double keep_probability = 1.0 - p;
  if (tg::detail::is_bfloat16(x))  // bfloat16's noise, the product in float32 (exact) rounded once
    return tg::detail::in_float32([&](const Tensor& wide) {
      return dropout_with_noise(wide, keep_probability, kept_noise<BFloat16>(keep_probability), generator);
    }, x);
  const double kept_value =
      tg::detail::dispatch_floating("dropout", x.dtype(), [&]<typename T>() { return kept_noise<T>(keep_probability); });
  return dropout_with_noise(x, keep_probability, kept_value, generator);
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("dropout");
}

Dropout::Dropout(double p, Generator* generator) : p(p), generator(generator) { check_probability(p, "Dropout"); }

Tensor Dropout::forward(const Tensor& x) { return functional::dropout(x, p, is_training(), generator); }

}  // namespace tg::nn
