// LayerNorm's and RMSNorm's row kernels, compiled once per vector level (layer_norm_kernels.cpp,
// cpu/vector_isa.hpp); layer_norm.cpp and rms_norm.cpp call the chosen level's table. Private to nn/.
#pragma once

#include <cstdint>

#include "cpu/vector_isa.hpp"

namespace tg::detail {

// What forward saves per row for backward: rstd, center, shift (layer_norm_kernels.cpp).
inline constexpr int64_t kStatsPerRow = 3;

template <typename T>
struct LayerNormKernels {
  // x: [M, N] rows of N normalised elements; gamma, beta: [N] -> y: [M, N];
  // stats: [M, kStatsPerRow] per row, saved for backward, or null when there is no backward.
  void (*forward)(const T* x, const T* gamma, const T* beta, T* y, T* stats, int64_t M, int64_t N, double eps);
  // dy, x: [M, N]; gamma: [N]; stats: [M, kStatsPerRow] from forward -> dx: [M, N]; dgamma, dbeta: [N].
  void (*backward)(const T* dy, const T* x, const T* gamma, const T* stats, T* dx, T* dgamma, T* dbeta, int64_t M,
                   int64_t N);
  // RMSNorm, the same without centering and β: y = x·rstd·γ, rstd = 1/√(mean(x²) + ε).
  void (*rms_forward)(const T* x, const T* gamma, T* y, T* stats, int64_t M, int64_t N, double eps);
  void (*rms_backward)(const T* dy, const T* x, const T* gamma, const T* stats, T* dx, T* dgamma, int64_t M,
                       int64_t N);
};

TG_DECLARE_ISA_KERNELS(DtypeKernels<LayerNormKernels>, layer_norm_kernels)

}  // namespace tg::detail
