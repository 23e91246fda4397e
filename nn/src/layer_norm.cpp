// LayerNorm: one fused forward kernel, one closed-form backward kernel, one tape node.
//
// The input is viewed as M rows of N normalised elements (N = Π normalized_shape, M = the
// product of the leading dims). Per row:
//   μ = Σx / N,  σ² = Σ(x − μ)² / N (biased),  rstd = 1/√(σ² + ε),  x̂ = (x − μ)·rstd
//   y = x̂·γ + β
// and, with g = dy·γ:
//   dx = rstd · (g − mean(g) − x̂ · mean(g·x̂)),   dγ = Σ_rows dy·x̂,   dβ = Σ_rows dy.
#include "tapegrad/nn/layer_norm.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include "autograd/node.hpp"
#include "dispatch.hpp"
#include "row_chunks.hpp"
#include "tapegrad/nn/functional.hpp"

namespace tg::nn {

namespace {

using detail::for_each_chunk;
using detail::lane_sum;
using detail::row_chunks;
using detail::RowChunks;

// x: [M, N] rows of N normalised elements; gamma, beta: [N] -> y: [M, N]; mean, rstd: [M].
//
// Mean and variance are accumulated in double, in two passes over the row (Σx, then Σ(x − μ)²),
// even for float32 input. Why two passes and not Welford or E[x²] − E[x]²: subtracting μ before
// squaring avoids the catastrophic cancellation of E[x²] − E[x]² on rows with a large offset
// (x = 1e4 + N(0,1) would lose every digit of σ² in float32); double accumulators keep long rows
// (65,536 elements) exact to ~1e-12 relative, with no compensated summation; and unlike Welford
// (a division and a serial dependency per element) both passes are plain sums that vectorise.
// The second read of the row is cheap: it is still in L1/L2. y is computed in double from the
// double μ too, since rounding μ to float32 would shift x − μ by up to half an ulp of the offset.
// mean and rstd are saved in double for the same reason: backward rebuilds x̂ from them.
template <typename T>
void layer_norm_forward(const T* x, const T* gamma, const T* beta, T* y, double* mean, double* rstd, int64_t M,
                        int64_t N, double eps) {
  const double inv_n = 1.0 / static_cast<double>(N);
  for_each_chunk(row_chunks(M, N), M, [&](int64_t, int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const T* x_row = x + m * N;
      T* y_row = y + m * N;
      const double mu = lane_sum(N, [&](int64_t i) { return static_cast<double>(x_row[i]); }) * inv_n;
      const double var = lane_sum(N, [&](int64_t i) {
                           const double centred = static_cast<double>(x_row[i]) - mu;
                           return centred * centred;
                         }) * inv_n;
      const double r = 1.0 / std::sqrt(var + eps);
      // y = (x − μ)·rstd·γ + β
      for (int64_t i = 0; i < N; ++i)
        y_row[i] = static_cast<T>((static_cast<double>(x_row[i]) - mu) * r * static_cast<double>(gamma[i]) +
                                  static_cast<double>(beta[i]));
      mean[m] = mu;
      rstd[m] = r;
    }
  });
}

// dy, x: [M, N]; gamma: [N]; mean, rstd: [M] -> dx: [M, N]; dgamma, dbeta: [N].
//
// Each row is read in two passes while it is in cache: the two row means, then dx together with
// this row's dγ/dβ terms. Those are added into the partial slot of the row's chunk (chunks depend
// only on M and N), and the slots are summed in chunk order at the end: dγ and dβ are bitwise
// identical for any number of threads.
template <typename T>
void layer_norm_backward(const T* dy, const T* x, const T* gamma, const double* mean, const double* rstd, T* dx,
                         T* dgamma, T* dbeta, int64_t M, int64_t N) {
  const double inv_n = 1.0 / static_cast<double>(N);
  const RowChunks chunks = row_chunks(M, N);
  // partial[chunk]: N sums of dy·x̂ then N sums of dy, written only by that chunk's task.
  const auto partial = std::make_unique_for_overwrite<double[]>(static_cast<size_t>(chunks.count * 2 * N));
  for_each_chunk(chunks, M, [&](int64_t chunk, int64_t m0, int64_t m1) {
    double* dgamma_sum = partial.get() + chunk * 2 * N;
    double* dbeta_sum = dgamma_sum + N;
    std::fill(dgamma_sum, dgamma_sum + 2 * N, 0.0);
    for (int64_t m = m0; m < m1; ++m) {
      const T* dy_row = dy + m * N;
      const T* x_row = x + m * N;
      T* dx_row = dx + m * N;
      const double mu = mean[m], r = rstd[m];
      // mean(g) and mean(g·x̂), g = dy·γ
      const double mean_g = lane_sum(N, [&](int64_t i) {
                              return static_cast<double>(dy_row[i]) * static_cast<double>(gamma[i]);
                            }) * inv_n;
      const double mean_gx = lane_sum(N, [&](int64_t i) {
                               return static_cast<double>(dy_row[i]) * static_cast<double>(gamma[i]) *
                                      ((static_cast<double>(x_row[i]) - mu) * r);
                             }) * inv_n;
      for (int64_t i = 0; i < N; ++i) {
        const double d = static_cast<double>(dy_row[i]);
        const double x_hat = (static_cast<double>(x_row[i]) - mu) * r;
        dx_row[i] = static_cast<T>(r * (d * static_cast<double>(gamma[i]) - mean_g - x_hat * mean_gx));
        dgamma_sum[i] += d * x_hat;  // dγ = Σ_rows dy·x̂
        dbeta_sum[i] += d;           // dβ = Σ_rows dy
      }
    }
  });
  // Chunk order, per column; columns are independent, so they may run in parallel.
  tg::detail::parallel_for(N, tg::detail::kElementwiseGrain / std::max<int64_t>(chunks.count, 1),
                           [&](int64_t i0, int64_t i1) {
                             for (int64_t i = i0; i < i1; ++i) {
                               double dgamma_total = 0.0, dbeta_total = 0.0;
                               for (int64_t chunk = 0; chunk < chunks.count; ++chunk) {
                                 dgamma_total += partial[chunk * 2 * N + i];
                                 dbeta_total += partial[chunk * 2 * N + N + i];
                               }
                               dgamma[i] = static_cast<T>(dgamma_total);
                               dbeta[i] = static_cast<T>(dbeta_total);
                             }
                           });
}

}  // namespace

namespace functional {

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  check(x.defined(), "layer_norm", "undefined input");
  check(!normalized_shape.empty(), "layer_norm", "expected a non-empty normalized_shape, got ", normalized_shape);
  const size_t lead = x.shape().size() - std::min(x.shape().size(), normalized_shape.size());
  check(x.shape().size() >= normalized_shape.size() &&
            Shape(x.shape().begin() + static_cast<std::ptrdiff_t>(lead), x.shape().end()) == normalized_shape,
        "layer_norm", "expected an input whose trailing dims are normalized_shape ", normalized_shape,
        ", got an input of shape ", x.shape());
  for (const auto& [parameter, what] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
    if (!parameter->defined()) continue;
    check(parameter->shape() == normalized_shape, "layer_norm", "expected ", what,
          " of shape normalized_shape ", normalized_shape, ", got ", parameter->shape());
    check(parameter->dtype() == x.dtype(), "layer_norm", "dtypes differ: input ", x.dtype(), ", ", what, " ",
          parameter->dtype());
  }
  int64_t M = 1, N = 1;
  for (size_t d = 0; d < x.shape().size(); ++d) (d < lead ? M : N) *= x.shape()[d];

  // An absent γ is ones and an absent β zeros (N elements each), so one kernel serves both
  // cases; such constants do not require grad, so the node sends them nothing.
  const Tensor gamma = weight.defined() ? weight.detach() : ones(normalized_shape, x.dtype());
  const Tensor beta = bias.defined() ? bias.detach() : zeros(normalized_shape, x.dtype());
  Tensor y = make_tensor(x.shape(), x.dtype(), "layer_norm");
  Tensor mean = make_tensor({M}, kFloat64), rstd = make_tensor({M}, kFloat64);  // per row, saved for backward
  tg::detail::dispatch(x.dtype(), [&]<typename T>() {
    layer_norm_forward<T>(x.data<T>(), gamma.data<T>(), beta.data<T>(), y.mutable_data<T>(),
                          mean.mutable_data<double>(), rstd.mutable_data<double>(), M, N, eps);
  });

  const Tensor& weight_input = weight.defined() ? weight : gamma;
  const Tensor& bias_input = bias.defined() ? bias : beta;
  if (autograd::needs_grad(x, weight_input, bias_input))
    autograd::record(y, "LayerNormBackward", {x, weight_input, bias_input},
                     [x = x.detach(), gamma, mean, rstd, M, N](const Tensor& dy, autograd::GradInputs& grads) {
                       Tensor dx = make_tensor(x.shape(), x.dtype());
                       Tensor dgamma = make_tensor(gamma.shape(), x.dtype());
                       Tensor dbeta = make_tensor(gamma.shape(), x.dtype());
                       tg::detail::dispatch(x.dtype(), [&]<typename T>() {
                         layer_norm_backward<T>(dy.data<T>(), x.data<T>(), gamma.data<T>(), mean.data<double>(),
                                                rstd.data<double>(), dx.mutable_data<T>(), dgamma.mutable_data<T>(),
                                                dbeta.mutable_data<T>(), M, N);
                       });
                       if (grads.needed(0)) grads.set(0, dx);
                       if (grads.needed(1)) grads.set(1, dgamma);
                       if (grads.needed(2)) grads.set(2, dbeta);
                     });
  return y;
}

}  // namespace functional

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine)
    : weight("LayerNorm.weight", elementwise_affine ? ones(normalized_shape) : Tensor()),
      bias("LayerNorm.bias", elementwise_affine ? zeros(normalized_shape) : Tensor()),
      normalized_shape(std::move(normalized_shape)),
      eps(eps) {
  check(!this->normalized_shape.empty(), "LayerNorm", "expected a non-empty normalized_shape, got ",
        this->normalized_shape);
}

Tensor LayerNorm::forward(const Tensor& x) { return functional::layer_norm(x, normalized_shape, weight, bias, eps); }

void LayerNorm::members(Members& m) {
  m.parameter("weight", weight);
  m.parameter("bias", bias);
}

}  // namespace tg::nn
