// BatchNorm's and GroupNorm's channel kernels: the maths of batch_norm.cpp (GroupNorm's below), compiled once per vector level by
// tg_add_isa_kernels (TG_ISA = v2, v3 or avx512) into tg::detail::<level>.
//
// The input is [N, C, S] (batch_norm_kernels.hpp); channel c is the n = N·S elements of the N rows
// x[n, c, :]. Training mode, per channel:
//   μ = Σx / n,  σ² = Σ(x − μ)² / n (biased),  rstd = 1/√(σ² + ε),  x̂ = (x − μ)·rstd,  y = x̂·γ + β
// and, with Σ over the channel's n elements:
//   dγ = Σ dy·x̂ = rstd·Σ dy·(x − μ),   dβ = Σ dy,
//   dx = γ·rstd · (dy − Σdy/n − x̂ · Σdy·x̂/n)        (batch statistics depend on x)
//   dx = γ·rstd · dy                                   (eval: running statistics are constants)
//
// Memory traffic is what bounds these kernels (a channel's statistics need all of it before the
// first y), so the channels are taken in groups of about kGroupBytes: the statistics pass reads
// the group from memory, the normalising pass finds it again in the cache. A channel is cut into
// chunks of whole rows (by the sizes only); each chunk's partial sums get their own slot, and the
// slots of a channel are added in chunk order: bitwise identical results at any thread count.
#include "batch_norm_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "deterministic_sum.hpp"
#include "kernel_buffer.hpp"
#include "simd_lanes.hpp"

// The kernels' lambdas return SIMD vectors (see simd_lanes.hpp on -Wpsabi).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tg::detail::TG_ISA {

namespace {

// A chunk of a channel holds at least this many elements (so its partial sums are a small cost).
inline constexpr int64_t kChunkElements = 16384;
// Tasks hold at least this many elements, so that tiny inputs run inline without oneTBB.
inline constexpr int64_t kTaskElements = 32768;
// The bytes of input the channels of one group span: read twice, once from memory and once from
// the cache (each core's L2 holds its share of the group; the shared L3 the rest).
inline constexpr int64_t kGroupBytes = int64_t{2} << 20;

struct ChannelPlan {
  BatchNormShape shape;
  int64_t rows_per_chunk = 1;      // rows of S elements per chunk
  int64_t chunks = 1;              // chunks per channel
  int64_t channels_per_group = 1;  // channels whose two passes run together
  int64_t task_grain = 1;          // (channel, chunk) tasks per oneTBB task
};

// bytes_per_element: the input bytes a pass reads per element (x alone, or dy and x).
ChannelPlan plan_for(BatchNormShape shape, int64_t bytes_per_element) {
  ChannelPlan plan;
  plan.shape = shape;
  const int64_t S = std::max<int64_t>(shape.S, 1);
  plan.rows_per_chunk = std::max<int64_t>(1, ceil_div(kChunkElements, S));
  plan.chunks = std::max<int64_t>(1, ceil_div(shape.N, plan.rows_per_chunk));
  const int64_t channel_bytes = std::max<int64_t>(1, shape.N * S * bytes_per_element);
  plan.channels_per_group = std::clamp<int64_t>(kGroupBytes / channel_bytes, 1, std::max<int64_t>(shape.C, 1));
  const int64_t chunk_elements = std::min(plan.rows_per_chunk, std::max<int64_t>(shape.N, 1)) * S;
  plan.task_grain = std::max<int64_t>(1, ceil_div(kTaskElements, chunk_elements));
  return plan;
}

// group(c0, c1) for consecutive groups of channels, in order.
template <typename Group>
void for_each_group(const ChannelPlan& plan, const Group& group) {
  for (int64_t c0 = 0; c0 < plan.shape.C; c0 += plan.channels_per_group)
    group(c0, std::min(plan.shape.C, c0 + plan.channels_per_group));
}

// body(c, chunk, n0, n1) for every chunk of the channels [c0, c1), in parallel.
template <typename Body>
void for_each_channel_chunk(const ChannelPlan& plan, int64_t c0, int64_t c1, const Body& body) {
  parallel_for((c1 - c0) * plan.chunks, plan.task_grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t c = c0 + t / plan.chunks, chunk = t % plan.chunks;
      const int64_t n0 = chunk * plan.rows_per_chunk;
      body(c, chunk, n0, std::min(plan.shape.N, n0 + plan.rows_per_chunk));
    }
  });
}

// Σ over the chunks of channel c of slots[c, chunk], in chunk order.
SumPair channel_total(const KernelBuffer<SumPair>& slots, const ChannelPlan& plan, int64_t c) {
  SumPair total = {0.0, 0.0};
  for (int64_t chunk = 0; chunk < plan.chunks; ++chunk) total += slots[static_cast<size_t>(c * plan.chunks + chunk)];
  return total;
}

// Enough channels to keep every core busy with whole channels.
inline constexpr int64_t kWholeChannelTasksMinC = 8;

// The three steps of a channel kernel: sums(c, chunk, n0, n1) for each chunk of channel c, then
// finish(c) (adds the chunk sums in order), then apply(c, n0, n1) for each chunk. With enough
// channels each task takes whole channels: the channel's second pass finds its rows in the core's
// own cache, and there is one parallel loop, not two per group. With few channels the chunks of a
// group of channels run in parallel, sums then apply. The sums of a chunk, and the order they are
// added in, are the same either way, so the results are too.
template <typename Sums, typename Finish, typename Apply>
void run_channels(const ChannelPlan& plan, bool with_sums, bool with_apply, const Sums& sums, const Finish& finish,
                  const Apply& apply) {
  const int64_t N = plan.shape.N, C = plan.shape.C;
  const auto chunk_rows = [&](int64_t chunk) {
    const int64_t n0 = chunk * plan.rows_per_chunk;
    return std::pair{n0, std::min(N, n0 + plan.rows_per_chunk)};
  };
  if (C >= kWholeChannelTasksMinC) {
    const int64_t channel_elements = std::max<int64_t>(1, N * plan.shape.S);
    parallel_for(C, std::max<int64_t>(1, ceil_div(kTaskElements, channel_elements)), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        if (with_sums)
          for (int64_t chunk = 0; chunk < plan.chunks; ++chunk) {
            const auto [n0, n1] = chunk_rows(chunk);
            sums(c, chunk, n0, n1);
          }
        finish(c);
        if (with_apply)
          for (int64_t chunk = 0; chunk < plan.chunks; ++chunk) {
            const auto [n0, n1] = chunk_rows(chunk);
            apply(c, n0, n1);
          }
      }
    });
    return;
  }
  for_each_group(plan, [&](int64_t c0, int64_t c1) {
    if (with_sums) for_each_channel_chunk(plan, c0, c1, sums);
    for (int64_t c = c0; c < c1; ++c) finish(c);
    if (with_apply)
      for_each_channel_chunk(plan, c0, c1, [&](int64_t c, int64_t, int64_t n0, int64_t n1) { apply(c, n0, n1); });
  });
}

// Whether y ([N·C, S]) is written with streaming stores: it is large and its rows are aligned.
template <typename T>
bool streams(const T* y, BatchNormShape shape) {
  return tg::detail::use_streaming_stores(y, shape.N * shape.C, shape.S);
}

// x: [N, C, S]; gamma, beta: [C] or null -> mean, var: [C]; y: [N, C, S].
//
// The statistics are LayerNorm's (layer_norm_kernels.cpp, row_moments): one pass of sums of
// d = x − x₀ and d² in double lanes, x₀ the channel's first element, so an offset common to the
// channel cancels exactly; σ² = E[d²] − E[d]². The chunks of a channel share x₀, so their sums
// add. y is computed as (x − c)·a + b with c = μ rounded to T, a = rstd·γ and b = β − (μ − c)·a.
template <typename T>
void train_forward(const T* x, const T* gamma, const T* beta, T* y, double* mean, double* var, BatchNormShape shape,
                   double eps) {
  const int64_t N = shape.N, C = shape.C, S = shape.S;
  if (N * C * S == 0) return;
  const ChannelPlan plan = plan_for(shape, sizeof(T));
  KernelBuffer<SumPair> slots(C * plan.chunks, /*zeroed=*/true);  // [C, chunks]: {Σd, Σd²}
  KernelBuffer<T> center(C, true), scale(C, true), shift(C, true);
  const double inv_n = 1.0 / static_cast<double>(N * S);
  tg::detail::with_streaming(streams(y, shape), [&](auto streaming) {
    constexpr bool kStream = decltype(streaming)::value;
    const auto sums_of_chunk = [&](int64_t c, int64_t chunk, int64_t n0, int64_t n1) {
      const double x0 = static_cast<double>(x[c * S]);
      SumPair sums = {0.0, 0.0};
      for (int64_t n = n0; n < n1; ++n) {
        const T* row = x + (n * C + c) * S;
        sums += tg::detail::wide_lane_sums<T>(S, [=](auto at) {
          const auto d = at.wide(row) - x0;  // d = x − x₀
          return std::pair{d, d * d};
        });
      }
      slots[static_cast<size_t>(c * plan.chunks + chunk)] = sums;
    };
    const auto finish = [&](int64_t c) {
      const SumPair total = channel_total(slots, plan, c);
      const double mean_d = total[0] * inv_n;                                      // μ − x₀
      const double variance = std::max(total[1] * inv_n - mean_d * mean_d, 0.0);  // σ² = E[d²] − E[d]²
      const double mu = static_cast<double>(x[c * S]) + mean_d;
      const double rstd = 1.0 / std::sqrt(variance + eps);
      mean[c] = mu;
      var[c] = variance;
      const double a = rstd * (gamma ? static_cast<double>(gamma[c]) : 1.0);
      center[static_cast<size_t>(c)] = static_cast<T>(mu);
      scale[static_cast<size_t>(c)] = static_cast<T>(a);
      shift[static_cast<size_t>(c)] = static_cast<T>((beta ? static_cast<double>(beta[c]) : 0.0) -
                                                    (mu - static_cast<double>(static_cast<T>(mu))) * a);
    };
    const auto normalize = [&](int64_t c, int64_t n0, int64_t n1) {
      const T cc = center[static_cast<size_t>(c)], a = scale[static_cast<size_t>(c)], b = shift[static_cast<size_t>(c)];
      for (int64_t n = n0; n < n1; ++n) {
        const T* x_row = x + (n * C + c) * S;
        T* y_row = y + (n * C + c) * S;
        for_each_lane<T>(S, [=](auto at) { tg::detail::put<kStream>(at, y_row, (at(x_row) - cc) * a + b); });
      }
      if constexpr (kStream) tg::detail::streaming_fence();
    };
    run_channels(plan, true, true, sums_of_chunk, finish, normalize);
  });
}

// x: [N, C, S]; scale, shift: [C] -> y: [N, C, S] = x·scale + shift, rows in parallel.
template <typename T>
void affine_forward(const T* x, const T* scale, const T* shift, T* y, BatchNormShape shape) {
  const int64_t C = shape.C, S = shape.S, rows = shape.N * shape.C;
  tg::detail::with_streaming(streams(y, shape), [&](auto streaming) {
    constexpr bool kStream = decltype(streaming)::value;
    parallel_for(rows, std::max<int64_t>(1, ceil_div(kTaskElements, std::max<int64_t>(S, 1))),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     const T a = scale[r % C], b = shift[r % C];
                     const T* x_row = x + r * S;
                     T* y_row = y + r * S;
                     for_each_lane<T>(S, [=](auto at) { tg::detail::put<kStream>(at, y_row, at(x_row) * a + b); });
                   }
                   if constexpr (kStream) tg::detail::streaming_fence();
                 });
  });
}

// dy, x: [N, C, S]; gamma: [C] or null; mean, rstd: [C] -> dx: [N, C, S] or null; dgamma, dbeta: [C]
// or null.
//
// The sums Σdy and Σdy·(x − c), c = μ rounded to T, in T lanes whose blocks add in double
// (lane_sums), per chunk; then Σdy·(x − μ) = Σdy·(x − c) − (μ − c)·Σdy. With k = γ·rstd the
// training dx is an affine map of (dy, x − c) per channel:
//   dx = dy·k + (x − c)·p + q,   p = −k·rstd²·Σdy(x − μ)/n,   q = k·(rstd²·Σdy(x − μ)/n·(μ − c) − Σdy/n).
template <typename T>
void backward(const T* dy, const T* x, const T* gamma, const double* mean, const double* rstd, T* dx, T* dgamma,
              T* dbeta, BatchNormShape shape, bool batch_stats) {
  const int64_t N = shape.N, C = shape.C, S = shape.S;
  if (C == 0) return;
  const bool need_sums = batch_stats || dgamma || dbeta;
  const ChannelPlan plan = plan_for(shape, 2 * sizeof(T));
  KernelBuffer<SumPair> slots(C * plan.chunks, /*zeroed=*/true);  // [C, chunks]: {Σdy, Σdy·(x − c)}
  KernelBuffer<T> center(C, true), k_dy(C, true), p_x(C, true),
      q_const(C, true);
  const double inv_n = N * S > 0 ? 1.0 / static_cast<double>(N * S) : 0.0;
  tg::detail::with_streaming(dx != nullptr && streams(dx, shape), [&](auto streaming) {
    constexpr bool kStream = decltype(streaming)::value;
    const auto sums_of_chunk = [&](int64_t c, int64_t chunk, int64_t n0, int64_t n1) {
      const T cc = static_cast<T>(mean[c]);
      SumPair sums = {0.0, 0.0};
      for (int64_t n = n0; n < n1; ++n) {
        const T* dy_row = dy + (n * C + c) * S;
        const T* x_row = x + (n * C + c) * S;
        sums += tg::detail::lane_sums<T>(S, [=](auto at) {
          const auto d = at(dy_row);
          return std::pair{d, d * (at(x_row) - cc)};  // dy, dy·(x − c)
        });
      }
      slots[static_cast<size_t>(c * plan.chunks + chunk)] = sums;
    };
    const auto finish = [&](int64_t c) {
      const T cc = static_cast<T>(mean[c]);
      const double delta = mean[c] - static_cast<double>(cc);  // μ − c
      const SumPair total = need_sums ? channel_total(slots, plan, c) : SumPair{0.0, 0.0};
      const double sum_dy = total[0], sum_dy_xmu = total[1] - delta * total[0];  // Σdy, Σdy·(x − μ)
      if (dgamma) dgamma[c] = static_cast<T>(rstd[c] * sum_dy_xmu);
      if (dbeta) dbeta[c] = static_cast<T>(sum_dy);
      const double k = rstd[c] * (gamma ? static_cast<double>(gamma[c]) : 1.0);
      const double proj = batch_stats ? rstd[c] * rstd[c] * sum_dy_xmu * inv_n : 0.0;
      center[static_cast<size_t>(c)] = cc;
      k_dy[static_cast<size_t>(c)] = static_cast<T>(k);
      p_x[static_cast<size_t>(c)] = static_cast<T>(-k * proj);
      q_const[static_cast<size_t>(c)] = static_cast<T>(batch_stats ? k * (proj * delta - sum_dy * inv_n) : 0.0);
    };
    const auto input_gradient = [&](int64_t c, int64_t n0, int64_t n1) {
      const T cc = center[static_cast<size_t>(c)], k = k_dy[static_cast<size_t>(c)];
      const T p = p_x[static_cast<size_t>(c)], q = q_const[static_cast<size_t>(c)];
      for (int64_t n = n0; n < n1; ++n) {
        const T* dy_row = dy + (n * C + c) * S;
        const T* x_row = x + (n * C + c) * S;
        T* dx_row = dx + (n * C + c) * S;
        if (batch_stats)
          for_each_lane<T>(S, [=](auto at) {
            tg::detail::put<kStream>(at, dx_row, at(dy_row) * k + ((at(x_row) - cc) * p + q));
          });
        else
          for_each_lane<T>(S, [=](auto at) { tg::detail::put<kStream>(at, dx_row, at(dy_row) * k); });
      }
      if constexpr (kStream) tg::detail::streaming_fence();
    };
    run_channels(plan, need_sums, dx != nullptr, sums_of_chunk, finish, input_gradient);
  });
}

// --- GroupNorm ----------------------------------------------------------------------------------
//
// LayerNorm's maths on the rows [n, g] of L = D·S elements (D = C/groups channels of S elements),
// with γ and β per channel instead of per element: per row
//   μ, σ² over the row,  rstd = 1/√(σ² + ε),  x̂ = (x − μ)·rstd,  y = x̂·γ_c + β_c
//   dx = rstd · (g − mean(g) − x̂ · mean(g·x̂)),  g = dy·γ_c,   dγ_c = Σ_n Σ_S dy·x̂,  dβ_c = Σ_n Σ_S dy.
// Rows are independent in forward (chunks of whole rows, row_chunks); in backward each chunk of rows
// adds its dγ/dβ terms into its own slot, and the slots are added in chunk order.

// x: [N, C, S]; gamma, beta: [C] or null -> y: [N, C, S]; stats: [N·groups, 2] (μ, rstd) or null.
// The row statistics are LayerNorm's shifted one-pass sums in double lanes (train_forward above);
// y = (x − c)·a + b per channel, c = μ rounded to T, a = rstd·γ_c, b = β_c − (μ − c)·a.
template <typename T>
void group_forward(const T* x, const T* gamma, const T* beta, T* y, double* stats, BatchNormShape shape,
                   int64_t groups, double eps) {
  const int64_t D = shape.C / groups, S = shape.S, M = shape.N * groups, L = D * S;
  if (M == 0 || L == 0) return;
  tg::detail::with_streaming(tg::detail::use_streaming_stores(y, M * D, S), [&](auto streaming) {
    constexpr bool kStream = decltype(streaming)::value;
    for_each_chunk(row_chunks(M, L), M, [&](int64_t, int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        const T* x_row = x + m * L;
        T* y_row = y + m * L;
        const double x0 = static_cast<double>(x_row[0]);
        const SumPair sums = tg::detail::wide_lane_sums<T>(L, [=](auto at) {
          const auto d = at.wide(x_row) - x0;  // d = x − x₀
          return std::pair{d, d * d};
        });
        const double inv_l = 1.0 / static_cast<double>(L);
        const double mean_d = sums[0] * inv_l;
        const double mu = x0 + mean_d, rstd = 1.0 / std::sqrt(std::max(sums[1] * inv_l - mean_d * mean_d, 0.0) + eps);
        if (stats) {
          stats[2 * m] = mu;
          stats[2 * m + 1] = rstd;
        }
        const T cc = static_cast<T>(mu);
        const int64_t c0 = (m % groups) * D;
        for (int64_t j = 0; j < D; ++j) {
          const int64_t c = c0 + j;
          const double a = rstd * (gamma ? static_cast<double>(gamma[c]) : 1.0);
          const T scale = static_cast<T>(a);
          const T shift = static_cast<T>((beta ? static_cast<double>(beta[c]) : 0.0) - (mu - static_cast<double>(cc)) * a);
          const T* xs = x_row + j * S;
          T* ys = y_row + j * S;
          for_each_lane<T>(S, [=](auto at) { tg::detail::put<kStream>(at, ys, (at(xs) - cc) * scale + shift); });
        }
      }
      if constexpr (kStream) tg::detail::streaming_fence();
    });
  });
}

// dy, x: [N, C, S]; gamma: [C] or null; stats: [N·groups, 2] -> dx: [N, C, S] or null; dgamma, dbeta:
// [C] or null. Per row: Σdy and Σdy·(x − c) per channel (lane_sums), from which
//   mean(g) = Σ_c γ_c·Σdy / L,   mean(g·x̂) = rstd·Σ_c γ_c·Σdy·(x − μ) / L,
// and dx = dy·γ_c·rstd + (x − c)·p + q with p = −rstd²·mean(g·x̂), q = rstd·(rstd·mean(g·x̂)·(μ − c) − mean(g)).
template <typename T>
void group_backward(const T* dy, const T* x, const T* gamma, const double* stats, T* dx, T* dgamma, T* dbeta,
                    BatchNormShape shape, int64_t groups) {
  const int64_t C = shape.C, D = C / groups, S = shape.S, M = shape.N * groups, L = D * S;
  const bool affine_grads = dgamma || dbeta;
  const RowChunks chunks = row_chunks(M, std::max<int64_t>(L, 1));
  const int64_t width = 2 * C;  // per chunk: dγ's C sums, then dβ's
  KernelBuffer<double> partial(affine_grads ? chunks.count * width : 0, /*zeroed=*/true);
  const double inv_l = L > 0 ? 1.0 / static_cast<double>(L) : 0.0;
  tg::detail::with_streaming(dx != nullptr && tg::detail::use_streaming_stores(dx, M * D, S), [&](auto streaming) {
    constexpr bool kStream = decltype(streaming)::value;
    for_each_chunk(chunks, M, [&](int64_t chunk, int64_t m0, int64_t m1) {
      double* slot = affine_grads ? partial.data() + chunk * width : nullptr;
      if (slot) std::fill(slot, slot + width, 0.0);
      for (int64_t m = m0; m < m1; ++m) {
        const double mu = stats[2 * m], rstd = stats[2 * m + 1];
        const T cc = static_cast<T>(mu);
        const double delta = mu - static_cast<double>(cc);  // μ − c
        const int64_t c0 = (m % groups) * D;
        double sum_g = 0.0, sum_g_xmu = 0.0;  // Σ γ_c·Σdy, Σ γ_c·Σdy·(x − μ)
        for (int64_t j = 0; j < D; ++j) {
          const int64_t c = c0 + j;
          const T* dys = dy + m * L + j * S;
          const T* xs = x + m * L + j * S;
          const SumPair sums = tg::detail::lane_sums<T>(S, [=](auto at) {
            const auto d = at(dys);
            return std::pair{d, d * (at(xs) - cc)};  // dy, dy·(x − c)
          });
          const double sum_dy = sums[0], sum_dy_xmu = sums[1] - delta * sums[0];
          const double gam = gamma ? static_cast<double>(gamma[c]) : 1.0;
          sum_g += gam * sum_dy;
          sum_g_xmu += gam * sum_dy_xmu;
          if (slot) {
            slot[c] += rstd * sum_dy_xmu;  // dγ_c += Σ dy·x̂
            slot[C + c] += sum_dy;         // dβ_c += Σ dy
          }
        }
        if (dx == nullptr) continue;
        const double mean_g = sum_g * inv_l, mean_g_xhat = rstd * sum_g_xmu * inv_l;
        const T p = static_cast<T>(-rstd * rstd * mean_g_xhat);
        const T q = static_cast<T>(rstd * (rstd * mean_g_xhat * delta - mean_g));
        for (int64_t j = 0; j < D; ++j) {
          const T k = static_cast<T>(rstd * (gamma ? static_cast<double>(gamma[c0 + j]) : 1.0));
          const T* dys = dy + m * L + j * S;
          const T* xs = x + m * L + j * S;
          T* dxs = dx + m * L + j * S;
          for_each_lane<T>(S, [=](auto at) { tg::detail::put<kStream>(at, dxs, at(dys) * k + ((at(xs) - cc) * p + q)); });
        }
      }
      if constexpr (kStream) tg::detail::streaming_fence();
    });
  });
  if (!affine_grads) return;
  // dγ, dβ = Σ_chunk partial[chunk], chunks in order (zeros when there are no rows).
  if (chunks.count == 0) {
    for (int64_t c = 0; c < C; ++c) {
      if (dgamma) dgamma[c] = T(0);
      if (dbeta) dbeta[c] = T(0);
    }
    return;
  }
  tg::detail::sum_slots_in_order(partial.data(), chunks.count, width, [&](int64_t j, double total) {
    if (j < C) {
      if (dgamma) dgamma[j] = static_cast<T>(total);
    } else if (dbeta) {
      dbeta[j - C] = static_cast<T>(total);
    }
  });
}

}  // namespace

const DtypeKernels<BatchNormKernels> batch_norm_kernels = {
    .f32 = {.train_forward = train_forward<float>,
            .affine_forward = affine_forward<float>,
            .backward = backward<float>,
            .group_forward = group_forward<float>,
            .group_backward = group_backward<float>},
    .f64 = {.train_forward = train_forward<double>,
            .affine_forward = affine_forward<double>,
            .backward = backward<double>,
            .group_forward = group_forward<double>,
            .group_backward = group_backward<double>},
};

}  // namespace tg::detail::TG_ISA

#pragma GCC diagnostic pop
