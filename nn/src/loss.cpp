// Losses, reduction "mean": mse_loss and cross_entropy, each one fused forward kernel and one
// analytic backward, recorded as a single tape node.
#include "tapegrad/nn/loss.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/node.hpp"
#include "deterministic_sum.hpp"
#include "dispatch.hpp"
#include "ops/elementwise.hpp"
#include "tapegrad/nn/functional.hpp"

namespace tg::nn {

namespace {

using tg::detail::for_each_chunk;
using tg::detail::lane_sum;
using tg::detail::row_chunks;
using tg::detail::RowChunks;

// Σ of per-chunk partial sums in chunk order: the deterministic end of every loss reduction.
double sum_in_order(const std::vector<double>& partial) {
  double total = 0.0;
  tg::detail::sum_slots_in_order(partial.data(), static_cast<int64_t>(partial.size()), 1,
                                 [&](int64_t, double sum) { total = sum; });
  return total;
}

// input, target: [n] -> Σ (input − target)², in double.
template <typename T>
double squared_error_sum(const T* input, const T* target, int64_t n) {
  const RowChunks chunks = row_chunks(n, 1);
  std::vector<double> partial(static_cast<size_t>(chunks.count), 0.0);
  for_each_chunk(chunks, n, [&](int64_t chunk, int64_t i0, int64_t i1) {
    partial[static_cast<size_t>(chunk)] = lane_sum(i1 - i0, [&](int64_t i) {
      const double diff = static_cast<double>(input[i0 + i]) - static_cast<double>(target[i0 + i]);
      return diff * diff;
    });
  });
  return sum_in_order(partial);
}

// logits: [N, C]; targets: [N] in [0, C) -> Σ_rows (lse − logit[target]); lse: [N].
// The log-sum-exp subtracts the row max before exponentiating: exp never overflows and the
// largest term is exactly 1, so large logits (1e3) stay exact.
template <typename T>
double cross_entropy_forward(const T* logits, const int64_t* targets, double* lse, int64_t N, int64_t C) {
  const RowChunks chunks = row_chunks(N, C);
  std::vector<double> partial(static_cast<size_t>(chunks.count), 0.0);
  for_each_chunk(chunks, N, [&](int64_t chunk, int64_t n0, int64_t n1) {
    double loss = 0.0;
    for (int64_t n = n0; n < n1; ++n) {
      const T* row = logits + n * C;
      const double row_max = static_cast<double>(*std::max_element(row, row + C));
      // lse = max + log Σ exp(x − max)
      lse[n] = row_max + std::log(lane_sum(C, [&](int64_t c) { return std::exp(static_cast<double>(row[c]) - row_max); }));
      loss += lse[n] - static_cast<double>(row[targets[n]]);
    }
    partial[static_cast<size_t>(chunk)] = loss;
  });
  return sum_in_order(partial);
}

// logits: [N, C]; targets: [N]; lse: [N] -> dlogits: [N, C] = scale · (softmax − one_hot(target))
template <typename T>
void cross_entropy_backward(const T* logits, const int64_t* targets, const double* lse, T* dlogits, int64_t N,
                            int64_t C, double scale) {
  for_each_chunk(row_chunks(N, C), N, [&](int64_t, int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const T* row = logits + n * C;
      T* drow = dlogits + n * C;
      for (int64_t c = 0; c < C; ++c) drow[c] = static_cast<T>(scale * std::exp(static_cast<double>(row[c]) - lse[n]));
      drow[targets[n]] = static_cast<T>(scale * (std::exp(static_cast<double>(row[targets[n]]) - lse[n]) - 1.0));
    }
  });
}

}  // namespace

namespace functional {

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  check(input.defined() && target.defined(), "mse_loss", "undefined input or target");
  check(input.shape() == target.shape(), "mse_loss", "expected input and target of the same shape, got ",
        input.shape(), " and ", target.shape());
  check(input.dtype() == target.dtype(), "mse_loss", "dtypes differ: input ", input.dtype(), ", target ",
        target.dtype());
  const int64_t n = input.numel();
  // An empty input gives 0/0 = NaN, as in PyTorch.
  const double loss = tg::detail::dispatch_floating("mse_loss", input.dtype(), [&]<typename T>() {
                        return squared_error_sum<T>(input.data<T>(), target.data<T>(), n);
                      }) / static_cast<double>(n);
  Tensor out = scalar_tensor(loss, input.dtype());
  if (autograd::needs_grad(input, target))
    autograd::record(out, "MseLossBackward", {input, target},
                     [saved_input = autograd::SavedTensor(input), saved_target = autograd::SavedTensor(target), n](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor &input = grads.unpack(saved_input), &target = grads.unpack(saved_target);
                       // d/dinput = 2 (input − target) / n · g;  d/dtarget = −d/dinput
                       const double scale = 2.0 * g.item() / static_cast<double>(n);
                       const Tensor dinput = tg::detail::map2(input, target, [scale](auto a, auto b) {
                         return static_cast<decltype(a)>(scale * (static_cast<double>(a) - static_cast<double>(b)));
                       });
                       if (grads.needed(1)) grads.set(1, tg::detail::map(dinput, [](auto v) { return -v; }));
                       grads.set(0, dinput);
                     });
  return out;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  check(logits.defined() && targets.defined(), "cross_entropy", "undefined logits or targets");
  check(logits.dim() == 2, "cross_entropy", "expected logits of shape [N, C], got ", logits.shape());
  const int64_t N = logits.size(0), C = logits.size(1);
  check(targets.dtype() == kInt64, "cross_entropy", "expected int64 targets, got ", targets.dtype(),
        " (convert class indices with .to(tg::kInt64))");
  check(targets.shape() == Shape{N}, "cross_entropy", "expected targets of shape [", N, "] for logits of shape ",
        logits.shape(), ", got ", targets.shape());
  // A copy, so that the classes checked here are the ones backward indexes with.
  const Tensor classes = targets.clone();
  const int64_t* target = classes.data<int64_t>();
  for (int64_t n = 0; n < N; ++n)
    check(target[n] >= 0 && target[n] < C, "cross_entropy", "target ", target[n], " at index ", n,
          " is out of range for ", C, " classes (expected a class in [0, ", C, "))");
  Tensor lse = make_tensor({N}, kFloat64);  // per row, saved for backward
  // Mean over N; N = 0 gives 0/0 = NaN, as in PyTorch.
  const double loss = tg::detail::dispatch_floating("cross_entropy", logits.dtype(), [&]<typename T>() {
                        return cross_entropy_forward<T>(logits.data<T>(), target, lse.mutable_data<double>(), N, C);
                      }) / static_cast<double>(N);
  Tensor out = scalar_tensor(loss, logits.dtype());
  if (autograd::needs_grad(logits))
    autograd::record(out, "CrossEntropyBackward", {logits},
                     [saved_logits = autograd::SavedTensor(logits), classes, lse, N, C](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor& logits = grads.unpack(saved_logits);
                       Tensor dlogits = make_tensor(logits.shape(), logits.dtype());
                       tg::detail::dispatch_floating("CrossEntropyBackward", logits.dtype(), [&]<typename T>() {
                         cross_entropy_backward<T>(logits.data<T>(), classes.data<int64_t>(), lse.data<double>(),
                                                   dlogits.mutable_data<T>(), N, C, g.item() / static_cast<double>(N));
                       });
                       grads.set(0, dlogits);
                     });
  return out;
}

Tensor cross_entropy(const Tensor& logits, const std::vector<int64_t>& targets) {
  Tensor classes = make_tensor({static_cast<int64_t>(targets.size())}, kInt64, "cross_entropy");
  std::copy(targets.begin(), targets.end(), classes.mutable_data<int64_t>());
  return cross_entropy(logits, classes);
}

Tensor cross_entropy(const Tensor& logits, std::initializer_list<int64_t> targets) {
  return cross_entropy(logits, std::vector<int64_t>(targets));
}

}  // namespace functional

Tensor mse_loss(const Tensor& input, const Tensor& target) { return functional::mse_loss(input, target); }
Tensor cross_entropy(const Tensor& logits, const Tensor& targets) { return functional::cross_entropy(logits, targets); }
Tensor cross_entropy(const Tensor& logits, const std::vector<int64_t>& targets) {
  return functional::cross_entropy(logits, targets);
}
Tensor cross_entropy(const Tensor& logits, std::initializer_list<int64_t> targets) {
  return functional::cross_entropy(logits, targets);
}

}  // namespace tg::nn
