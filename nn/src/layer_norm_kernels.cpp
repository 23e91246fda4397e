// LayerNorm's and RMSNorm's row kernels: the maths of layer_norm.cpp and rms_norm.cpp, compiled
// once per vector level by tg_add_isa_kernels (TG_ISA = v2, v3 or avx512) into
// tg::detail::<level>.
//
// LayerNorm, per row of N elements:
//   μ = Σx / N,  σ² = Σ(x − μ)² / N (biased),  rstd = 1/√(σ² + ε),  x̂ = (x − μ)·rstd
//   y = x̂·γ + β
// and, with g = dy·γ:
//   dx = rstd · (g − mean(g) − x̂ · mean(g·x̂)),   dγ = Σ_rows dy·x̂,   dβ = Σ_rows dy.
// RMSNorm is the same without centering (kCentered = false): μ = 0 in place of the mean,
// σ² = Σx² / N, no β, and dx = rstd · (g − x̂ · mean(g·x̂)). One kernel serves both, so RMSNorm
// has LayerNorm's double-lane statistics, its blocking and its deterministic dγ.
#include "layer_norm_kernels.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <tuple>

#include "deterministic_sum.hpp"
#include "simd_lanes.hpp"

// The kernels' lambdas return SIMD vectors (see simd_lanes.hpp on -Wpsabi).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tg::detail::TG_ISA {

namespace {

// x_row: [N], N ≥ 1 -> {μ − x₀, σ²} of the row, x₀ = x_row[0] (kCentered), or {0, Σx²/N}.
//
// One pass, shifted by the row's first element, in double lanes: with d = x − x₀,
// μ − x₀ = Σd/N and σ² = Σd²/N − (Σd/N)². The shift removes the cancellation that an offset
// common to the row causes in the textbook E[x²] − E[x]²; what is left comes from x₀'s distance
// from μ, and since x₀ is in the row, (x₀ − μ)² ≤ N·σ²: at most log2(N) bits cancel, whatever x₀
// is. Double lanes keep the other 53 − log2(N) bits (float lanes kept 24 − log2(N): a 4096-row of
// N(0, 1) whose first element is 1e4 lost four digits), and d² cannot overflow for float32 input
// (float lanes overflowed from |d| ≈ 1.8e19, silently giving y = β). Unlike Welford (a division and
// a serial dependency per element) Σd and Σd² are plain sums that vectorise, and unlike two passes
// the row is read once.
template <bool kCentered, typename T>
std::pair<double, double> row_moments(const T* x_row, int64_t N) {
  const double x0 = kCentered ? static_cast<double>(x_row[0]) : 0.0;
  const SumPair sums = tg::detail::wide_lane_sums<T>(N, [=](auto at) {
    const auto d = at.wide(x_row) - x0;  // d = x − x₀, exact in double for float32 input
    return std::pair{d, d * d};
  });
  const double sum_d = sums[0], sum_d2 = sums[1];
  const double inv_n = 1.0 / static_cast<double>(N);
  if (!kCentered) return {0.0, sum_d2 * inv_n};                      // RMSNorm: {0, E[x²]}
  const double mean_d = sum_d * inv_n;                                // μ − x₀
  return {mean_d, std::max(sum_d2 * inv_n - mean_d * mean_d, 0.0)};  // σ² = E[d²] − E[d]²
}

// Rows normalised together: their statistics first, then their rstd in one loop (so the latency
// of √ and ÷ overlaps across rows instead of stalling each short row), then y. Up to
// kStatsBlockElements elements (16 KiB of float32), so the block is still in L1 for y.
inline constexpr int64_t kStatsBlockRows = 16;
inline constexpr int64_t kStatsBlockElements = 4096;

// x: [M, N] rows of N normalised elements; gamma, beta: [N] (beta null unless kCentered) ->
// y: [M, N]; stats: [M, kStatsPerRow] (rstd, center, shift) per row, saved for backward, or null.
//
// x̂ is computed as (x − c)·rstd + shift, with the center c = μ rounded to T and
// shift = −(μ − c)·rstd, not as (x − μ)·rstd: x − c is exact where x is within a factor 2 of c
// (rows with a large common offset) and otherwise rounds relative to x − μ itself, while the
// part of μ that T cannot hold goes into the small shift. The three are saved in T; backward
// rebuilds x̂ from them bitwise as forward did. Without centering, c = shift = 0.
template <bool kCentered, typename T>
void normalize_rows_forward(const T* x, const T* gamma, const T* beta, T* y, T* stats, int64_t M, int64_t N,
                        double eps) {
  if (N == 0) return;
  const int64_t block_rows = std::clamp<int64_t>(kStatsBlockElements / N, 1, kStatsBlockRows);
  tg::detail::with_streaming(tg::detail::use_streaming_stores(y, M, N), [&](auto streaming) {
    constexpr bool kStream = decltype(streaming)::value;
    for_each_chunk(row_chunks(M, N), M, [&](int64_t, int64_t m0, int64_t m1) {
      for (int64_t b0 = m0; b0 < m1; b0 += block_rows) {
        const int64_t rows = std::min(block_rows, m1 - b0);
        double mean_d[kStatsBlockRows], var[kStatsBlockRows];
        for (int64_t r = 0; r < rows; ++r) std::tie(mean_d[r], var[r]) = row_moments<kCentered>(x + (b0 + r) * N, N);
        T rstd[kStatsBlockRows], center[kStatsBlockRows], shift[kStatsBlockRows];
        for (int64_t r = 0; r < rows; ++r) {
          const double row_rstd = 1.0 / std::sqrt(var[r] + eps);  // rstd = 1/√(σ² + ε)
          const double mean = kCentered ? static_cast<double>(x[(b0 + r) * N]) + mean_d[r] : 0.0;  // μ = x₀ + (μ − x₀)
          rstd[r] = static_cast<T>(row_rstd);
          center[r] = static_cast<T>(mean);
          shift[r] = static_cast<T>(-(mean - static_cast<double>(center[r])) * row_rstd);
        }
        for (int64_t r = 0; r < rows; ++r) {
          const T* x_row = x + (b0 + r) * N;
          T* y_row = y + (b0 + r) * N;
          const T c = center[r], a = rstd[r], b = shift[r];
          for_each_lane<T>(N, [=](auto at) {
            const auto x_hat = (at(x_row) - c) * a + b;                           // x̂ = (x − μ)·rstd
            if constexpr (kCentered)
              tg::detail::put<kStream>(at, y_row, x_hat * at(gamma) + at(beta));  // y = x̂·γ + β
            else
              tg::detail::put<kStream>(at, y_row, x_hat * at(gamma));  // y = x̂·γ
          });
          if (stats) {
            T* row_stats = stats + (b0 + r) * kStatsPerRow;
            row_stats[0] = a;
            row_stats[1] = c;
            row_stats[2] = b;
          }
        }
      }
      if constexpr (kStream) tg::detail::streaming_fence();
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
// Rows whose dx pass runs together, sharing each load and store of the block's dγ/dβ sums: four
// where AVX-512's 32 vector registers hold their constants and lanes, two with 16 registers.
// Measured, not derived (bench/README.md): four rows gain where the block sums (2N floats) fill L1,
// as at N = 4096; more rows than the registers hold run slower.
inline constexpr int64_t kBackwardRows = tg::detail::kRegisterBytes == 64 ? 4 : 2;
// Backward chunks hold at least this many elements (16+ rows of 4096), so that for wide rows the
// per-chunk partial sums (2N doubles each) stay a small fraction of the traffic.
inline constexpr int64_t kBackwardMinChunkElements = 65536;

// Rows m .. m + R − 1 of the backward (R = 1 or kBackwardRows): dx, and their dγ/dβ terms added
// into block_sums: [2N] (dγ then dβ; [N], dγ only, without centering), row after row, so the sums'
// bits do not depend on R. The rows share one read-modify-write of block_sums.
template <bool kCentered, int64_t R, bool kStream, typename T>
void backward_rows(const T* dy, const T* x, const T* gamma, const T* stats, T* dx, T* block_sums, int64_t m,
                   int64_t N) {
  struct Row {
    const T* dy;
    const T* x;
    T* dx;
    T rstd, center, shift, c0, c1;
  };
  const double inv_n = 1.0 / static_cast<double>(N);
  std::array<Row, R> rows;
  for (int64_t k = 0; k < R; ++k) {
    Row& row = rows[k];
    row.dy = dy + (m + k) * N;
    row.x = x + (m + k) * N;
    row.dx = dx + (m + k) * N;
    row.rstd = stats[(m + k) * kStatsPerRow];
    row.center = stats[(m + k) * kStatsPerRow + 1];
    row.shift = stats[(m + k) * kStatsPerRow + 2];
    // Σg and Σg·x̂, g = dy·γ
    const SumPair sums = lane_sums<T>(N, [=](auto at) {
      const auto g = at(row.dy) * at(gamma);
      const auto x_hat = (at(row.x) - row.center) * row.rstd + row.shift;
      return std::pair{g, g * x_hat};
    });
    const double sum_g = sums[0], sum_gx = sums[1];
    // dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) = g·rstd + x̂·c1 + c0; without centering no mean(g)
    row.c0 = kCentered ? static_cast<T>(-static_cast<double>(row.rstd) * sum_g * inv_n) : T(0);
    row.c1 = static_cast<T>(-static_cast<double>(row.rstd) * sum_gx * inv_n);
  }
  T* dgamma_sums = block_sums;
  T* dbeta_sums = block_sums + N;
  for_each_lane<T>(N, [=](auto at) {
    auto dgamma_sum = at(dgamma_sums);
    auto dbeta_sum = kCentered ? at(dbeta_sums) : dgamma_sum;
    for (const Row& row : rows) {
      const auto d = at(row.dy);
      const auto x_hat = (at(row.x) - row.center) * row.rstd + row.shift;
      tg::detail::put<kStream>(at, row.dx, d * at(gamma) * row.rstd + (x_hat * row.c1 + row.c0));
      dgamma_sum += d * x_hat;             // dγ += dy·x̂
      if constexpr (kCentered) dbeta_sum += d;  // dβ += dy
    }
    at.store(dgamma_sums, dgamma_sum);
    if constexpr (kCentered) at.store(dbeta_sums, dbeta_sum);
  });
}

// dy, x: [M, N]; gamma: [N]; stats: [M, kStatsPerRow] from forward -> dx: [M, N]; dgamma, dbeta: [N]
// (dbeta null unless kCentered).
//
// Per row, two passes while the row is in cache: Σg and Σg·x̂ (g = dy·γ, x̂ rebuilt from the saved
// stats), then dx together with the row's dγ/dβ terms, kBackwardRows rows at a time, which go into a T
// buffer for the current block of rows. Each block is added into the double partial slot of the
// row's chunk (chunks depend only on M and N), and the slots are summed in chunk order at the
// end: dγ and dβ are bitwise identical for any number of threads.
template <bool kCentered, typename T>
void normalize_rows_backward(const T* dy, const T* x, const T* gamma, const T* stats, T* dx, T* dgamma, T* dbeta,
                             int64_t M, int64_t N) {
  if (N == 0) return;  // dγ and dβ are empty
  const RowChunks chunks = row_chunks(M, N, kBackwardMinChunkElements);
  const int64_t width = kCentered ? 2 * N : N;  // the sums per chunk: dγ's, then dβ's
  // partial: [chunks, width], per chunk N sums of dy·x̂ then N sums of dy, written only by that chunk.
  Scratch<double, 64> partial(chunks.count * width);
  tg::detail::with_streaming(tg::detail::use_streaming_stores(dx, M, N), [&](auto streaming) {
    constexpr bool kStream = decltype(streaming)::value;
    for_each_chunk(chunks, M, [&](int64_t chunk, int64_t m0, int64_t m1) {
      double* chunk_sums = partial.data() + chunk * width;
      Scratch<T, 64> block(width);  // [width]: dγ then dβ terms of the current row block
      T* block_sums = block.data();
      for (int64_t b0 = m0; b0 < m1; b0 += kRowBlock) {
        const int64_t b1 = std::min(m1, b0 + kRowBlock);
        std::fill(block_sums, block_sums + width, T(0));
        int64_t m = b0;
        for (; m + kBackwardRows <= b1; m += kBackwardRows)
          backward_rows<kCentered, kBackwardRows, kStream>(dy, x, gamma, stats, dx, block_sums, m, N);
        for (; m < b1; ++m) backward_rows<kCentered, 1, kStream>(dy, x, gamma, stats, dx, block_sums, m, N);
        // The chunk's first block initialises its slot, later ones add to it.
        for (int64_t j = 0; j < width; ++j)
          chunk_sums[j] = (b0 == m0 ? 0.0 : chunk_sums[j]) + static_cast<double>(block_sums[j]);
      }
      if constexpr (kStream) tg::detail::streaming_fence();
    });
  });
  // dγ, dβ = Σ_chunk partial[chunk], chunks in order.
  tg::detail::sum_slots_in_order(partial.data(), chunks.count, width, [&](int64_t j, double total) {
    (j < N ? dgamma[j] : dbeta[j - N]) = static_cast<T>(total);
  });
}

template <typename T>
void rms_norm_forward(const T* x, const T* gamma, T* y, T* stats, int64_t M, int64_t N, double eps) {
  normalize_rows_forward<false>(x, gamma, static_cast<const T*>(nullptr), y, stats, M, N, eps);
}

template <typename T>
void rms_norm_backward(const T* dy, const T* x, const T* gamma, const T* stats, T* dx, T* dgamma, int64_t M,
                       int64_t N) {
  normalize_rows_backward<false>(dy, x, gamma, stats, dx, dgamma, static_cast<T*>(nullptr), M, N);
}

}  // namespace

const DtypeKernels<LayerNormKernels> layer_norm_kernels = {
    .f32 = {.forward = normalize_rows_forward<true, float>,
            .backward = normalize_rows_backward<true, float>,
            .rms_forward = rms_norm_forward<float>,
            .rms_backward = rms_norm_backward<float>},
    .f64 = {.forward = normalize_rows_forward<true, double>,
            .backward = normalize_rows_backward<true, double>,
            .rms_forward = rms_norm_forward<double>,
            .rms_backward = rms_norm_backward<double>},
};

}  // namespace tg::detail::TG_ISA

#pragma GCC diagnostic pop
