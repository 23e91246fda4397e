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
#include <array>
#include <cmath>
#include <memory>
#include <tuple>

#include "autograd/node.hpp"
#include "dispatch.hpp"
#include "layer_norm_kernels.hpp"
#include "row_chunks.hpp"
#include "tapegrad/nn/functional.hpp"

// The kernels' lambdas return SIMD vectors (see layer_norm_kernels.hpp on -Wpsabi).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tg::nn {

namespace {

using detail::for_each_chunk;
using detail::for_each_lane;
using detail::lane_sums;
using detail::row_chunks;
using detail::RowChunks;

// x_row: [N], N ≥ 1 -> {μ − x₀, σ²} of the row, x₀ = x_row[0].
//
// One pass, shifted by the row's first element: with d = x − x₀ (exact when x and x₀ are within
// a factor 2, as in rows with a large offset), μ − x₀ = Σd/N and σ² = Σd²/N − (Σd/N)². The
// cancellation of the textbook E[x²] − E[x]² comes from the offset, which the shift removes: it
// is left with x₀'s distance from μ, a few σ, so σ² keeps all but a few bits (x = 1e4 + N(0,1)
// keeps ≲1e-6 relative, where the unshifted formula in float32 would keep none). Unlike Welford
// (a division and a serial dependency per element) Σd and Σd² are plain sums that vectorise, and
// unlike two passes (Σx, then Σ(x − μ)²) the row is read once. The sums run in T lanes (16 for
// float) for blocks of at most a few hundred elements and add up in double (lane_sums), so rows
// of 65,536 elements stay within ~1e-6 too.
template <typename T>
std::pair<double, double> row_moments(const T* x_row, int64_t N) {
  const T x0 = x_row[0];
  const detail::SumPair sums = lane_sums<T>(N, [=](auto at) {
    const auto d = at(x_row) - x0;  // d = x − x₀
    return std::pair{d, d * d};
  });
  const double sum_d = sums[0], sum_d2 = sums[1];
  const double inv_n = 1.0 / static_cast<double>(N);
  const double mean_d = sum_d * inv_n;                                                // μ − x₀
  return {mean_d, std::max(sum_d2 * inv_n - mean_d * mean_d, 0.0)};  // σ² = E[d²] − E[d]²
}

// Rows normalised together: their statistics first, then their rstd in one loop (so the latency
// of √ and ÷ overlaps across rows instead of stalling each short row), then y. Up to
// kStatsBlockElements elements (16 KiB of float32), so the block is still in L1 for y.
inline constexpr int64_t kStatsBlockRows = 16;
inline constexpr int64_t kStatsBlockElements = 4096;

// x: [M, N] rows of N normalised elements; gamma, beta: [N] -> y: [M, N];
// stats: [M, 2] (rstd, shift) per row, saved for backward, or null when there is no backward.
//
// x̂ is computed as (x − x₀)·rstd + shift, shift = −(μ − x₀)·rstd, not as (x − μ)·rstd: rounding
// μ to float32 would move x − μ by up to half an ulp of the offset (5e-4 at 1e4), while x − x₀ is
// exact and the shift is small. rstd and shift are saved in T; backward rebuilds x̂ from them and
// x₀ = x_row[0], bitwise as forward did.
template <typename T>
void layer_norm_forward(const T* x, const T* gamma, const T* beta, T* y, T* stats, int64_t M, int64_t N,
                        double eps) {
  if (N == 0) return;
  const int64_t block_rows = std::clamp<int64_t>(kStatsBlockElements / N, 1, kStatsBlockRows);
  detail::with_streaming(detail::use_streaming_stores(y, M, N), [&](auto streaming) {
    constexpr bool kStream = decltype(streaming)::value;
    for_each_chunk(row_chunks(M, N), M, [&](int64_t, int64_t m0, int64_t m1) {
      for (int64_t b0 = m0; b0 < m1; b0 += block_rows) {
        const int64_t rows = std::min(block_rows, m1 - b0);
        double mean_d[kStatsBlockRows], var[kStatsBlockRows];
        for (int64_t r = 0; r < rows; ++r) std::tie(mean_d[r], var[r]) = row_moments(x + (b0 + r) * N, N);
        T rstd[kStatsBlockRows], shift[kStatsBlockRows];
        for (int64_t r = 0; r < rows; ++r) {
          const double row_rstd = 1.0 / std::sqrt(var[r] + eps);  // rstd = 1/√(σ² + ε)
          rstd[r] = static_cast<T>(row_rstd);
          shift[r] = static_cast<T>(-mean_d[r] * row_rstd);
        }
        for (int64_t r = 0; r < rows; ++r) {
          const T* x_row = x + (b0 + r) * N;
          T* y_row = y + (b0 + r) * N;
          const T x0 = x_row[0], a = rstd[r], c = shift[r];
          for_each_lane<T>(N, [=](auto at) {
            const auto x_hat = (at(x_row) - x0) * a + c;                   // x̂ = (x − μ)·rstd
            detail::put<kStream>(at, y_row, x_hat * at(gamma) + at(beta));  // y = x̂·γ + β
          });
          if (stats) {
            stats[2 * (b0 + r)] = a;
            stats[2 * (b0 + r) + 1] = c;
          }
        }
      }
      if constexpr (kStream) detail::streaming_fence();
    });
  });
}

// A buffer of n U that lives on the stack when n ≤ Inline: tiny shapes allocate nothing.
template <typename U, int64_t Inline>
class Scratch {
 public:
  explicit Scratch(int64_t n) {
    if (n > Inline) heap_ = std::make_unique_for_overwrite<U[]>(static_cast<size_t>(n));
  }
  U* data() { return heap_ ? heap_.get() : inline_; }

 private:
  U inline_[Inline];
  std::unique_ptr<U[]> heap_;
};

// dγ/dβ of kRowBlock rows are summed in T, then added into the chunk's double partial sums: no
// T sum spans more than kRowBlock terms, however many rows a chunk has.
inline constexpr int64_t kRowBlock = 64;
// Backward chunks hold at least this many elements (16+ rows of 4096), so that for wide rows the
// per-chunk partial sums (2N doubles each) stay a small fraction of the traffic.
inline constexpr int64_t kBackwardMinChunkElements = 65536;
// The final chunk-order reduction walks columns in blocks of this many, contiguously.
inline constexpr int64_t kColumnBlock = 512;

// Rows m .. m + R − 1 of the backward (R = 1 or 2): dx, and their dγ/dβ terms added into
// block_sums: [2N] (dγ then dβ). Two rows share one read-modify-write of block_sums.
template <int64_t R, bool kStream, typename T>
void backward_rows(const T* dy, const T* x, const T* gamma, const T* stats, T* dx, T* block_sums, int64_t m,
                   int64_t N) {
  struct Row {
    const T* dy;
    const T* x;
    T* dx;
    T x0, rstd, shift, c0, c1;
  };
  const double inv_n = 1.0 / static_cast<double>(N);
  std::array<Row, R> rows;
  for (int64_t k = 0; k < R; ++k) {
    Row& row = rows[k];
    row.dy = dy + (m + k) * N;
    row.x = x + (m + k) * N;
    row.dx = dx + (m + k) * N;
    row.x0 = row.x[0];
    row.rstd = stats[2 * (m + k)];
    row.shift = stats[2 * (m + k) + 1];
    // Σg and Σg·x̂, g = dy·γ
    const detail::SumPair sums = lane_sums<T>(N, [=](auto at) {
      const auto g = at(row.dy) * at(gamma);
      const auto x_hat = (at(row.x) - row.x0) * row.rstd + row.shift;
      return std::pair{g, g * x_hat};
    });
    const double sum_g = sums[0], sum_gx = sums[1];
    // dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) = g·rstd + x̂·c1 + c0
    row.c0 = static_cast<T>(-static_cast<double>(row.rstd) * sum_g * inv_n);
    row.c1 = static_cast<T>(-static_cast<double>(row.rstd) * sum_gx * inv_n);
  }
  T* dgamma_sums = block_sums;
  T* dbeta_sums = block_sums + N;
  for_each_lane<T>(N, [=](auto at) {
    auto dgamma_sum = at(dgamma_sums), dbeta_sum = at(dbeta_sums);
    for (const Row& row : rows) {
      const auto d = at(row.dy);
      const auto x_hat = (at(row.x) - row.x0) * row.rstd + row.shift;
      detail::put<kStream>(at, row.dx, d * at(gamma) * row.rstd + (x_hat * row.c1 + row.c0));
      dgamma_sum += d * x_hat;  // dγ += dy·x̂
      dbeta_sum += d;           // dβ += dy
    }
    at.store(dgamma_sums, dgamma_sum);
    at.store(dbeta_sums, dbeta_sum);
  });
}

// dy, x: [M, N]; gamma: [N]; stats: [M, 2] from forward -> dx: [M, N]; dgamma, dbeta: [N].
//
// Per row, two passes while the row is in L1: Σg and Σg·x̂ (g = dy·γ, x̂ rebuilt from the saved
// stats), then dx together with the row's dγ/dβ terms, two rows at a time, which go into a T
// buffer for the current block of rows. Each block is added into the double partial slot of the
// row's chunk (chunks depend only on M and N), and the slots are summed in chunk order at the
// end: dγ and dβ are bitwise identical for any number of threads.
template <typename T>
void layer_norm_backward(const T* dy, const T* x, const T* gamma, const T* stats, T* dx, T* dgamma, T* dbeta,
                         int64_t M, int64_t N) {
  if (N == 0) return;  // dγ and dβ are empty
  const RowChunks chunks = row_chunks(M, N, kBackwardMinChunkElements);
  // partial: [chunks, 2N], per chunk N sums of dy·x̂ then N sums of dy, written only by that chunk.
  Scratch<double, 64> partial(chunks.count * 2 * N);
  detail::with_streaming(detail::use_streaming_stores(dx, M, N), [&](auto streaming) {
    constexpr bool kStream = decltype(streaming)::value;
    for_each_chunk(chunks, M, [&](int64_t chunk, int64_t m0, int64_t m1) {
      double* chunk_sums = partial.data() + chunk * 2 * N;
      Scratch<T, 64> block(2 * N);  // [2N]: dγ then dβ terms of the current row block
      T* block_sums = block.data();
      for (int64_t b0 = m0; b0 < m1; b0 += kRowBlock) {
        const int64_t b1 = std::min(m1, b0 + kRowBlock);
        std::fill(block_sums, block_sums + 2 * N, T(0));
        int64_t m = b0;
        for (; m + 2 <= b1; m += 2) backward_rows<2, kStream>(dy, x, gamma, stats, dx, block_sums, m, N);
        if (m < b1) backward_rows<1, kStream>(dy, x, gamma, stats, dx, block_sums, m, N);
        // The chunk's first block initialises its slot, later ones add to it.
        for (int64_t j = 0; j < 2 * N; ++j)
          chunk_sums[j] = (b0 == m0 ? 0.0 : chunk_sums[j]) + static_cast<double>(block_sums[j]);
      }
      if constexpr (kStream) detail::streaming_fence();
    });
  });
  // dγ, dβ = Σ_chunk partial[chunk], chunks in order. Column blocks are independent (and may run
  // in parallel); within one, each chunk's slice is read contiguously.
  tg::detail::parallel_for(2 * N, kColumnBlock, [&](int64_t j0, int64_t j1) {
    double totals[kColumnBlock] = {};
    for (int64_t chunk = 0; chunk < chunks.count; ++chunk) {
      const double* chunk_sums = partial.data() + chunk * 2 * N;
      for (int64_t j = j0; j < j1; ++j) totals[j - j0] += chunk_sums[j];
    }
    for (int64_t j = j0; j < j1; ++j) (j < N ? dgamma[j] : dbeta[j - N]) = static_cast<T>(totals[j - j0]);
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
  const Tensor gamma = weight.defined() ? weight : ones(normalized_shape, x.dtype());
  const Tensor beta = bias.defined() ? bias.detach() : zeros(normalized_shape, x.dtype());
  const Tensor& weight_input = weight.defined() ? weight : gamma;
  const Tensor& bias_input = bias.defined() ? bias : beta;
  const bool record = autograd::needs_grad(x, weight_input, bias_input);
  Tensor y = make_tensor(x.shape(), x.dtype(), "layer_norm");
  // stats: [M, 2], (rstd, shift) per row in x's dtype, saved for backward (none without one).
  Tensor stats = record ? make_tensor({M, 2}, x.dtype()) : Tensor();
  tg::detail::dispatch(x.dtype(), [&]<typename T>() {
    layer_norm_forward<T>(x.data<T>(), gamma.data<T>(), beta.data<T>(), y.mutable_data<T>(),
                          record ? stats.mutable_data<T>() : nullptr, M, N, eps);
  });

  if (record)
    autograd::record(y, "LayerNormBackward", {x, weight_input, bias_input},
                     [saved_x = autograd::SavedTensor(x), saved_gamma = autograd::SavedTensor(gamma), stats, M, N](
                         const Tensor& dy, autograd::GradInputs& grads) {
                       const Tensor &x = grads.unpack(saved_x), &gamma = grads.unpack(saved_gamma);
                       Tensor dx = make_tensor(x.shape(), x.dtype());
                       Tensor dgamma = make_tensor(gamma.shape(), x.dtype());
                       Tensor dbeta = make_tensor(gamma.shape(), x.dtype());
                       tg::detail::dispatch(x.dtype(), [&]<typename T>() {
                         layer_norm_backward<T>(dy.data<T>(), x.data<T>(), gamma.data<T>(), stats.data<T>(),
                                                dx.mutable_data<T>(), dgamma.mutable_data<T>(),
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

#pragma GCC diagnostic pop
