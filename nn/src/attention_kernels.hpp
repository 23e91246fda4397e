// The fused attention kernels (FlashAttention's scheme), compiled once per vector level
// (attention_kernels.cpp, cpu/vector_isa.hpp); attention.cpp calls the chosen level's table.
// Private to nn/.
#pragma once

#include <cstdint>

#include "cpu/vector_isa.hpp"

namespace tg::detail {

// One attention problem, flattened to `batch` independent heads (the product of the leading dims):
//   q: [batch, L, E], k: [batch, S, E], v: [batch, S, Ev], all contiguous.
// mask: additive, element (b, i, j) at mask[mask_offsets[b] + i·mask_row_stride + j·mask_col_stride]
// (strides 0 where the mask broadcasts), or null. causal: key j > query i is masked.
// Dropout keeps weight (b, i, j) when a hash of (dropout_seed, (b·L + i)·S + j) is below 1 − p.
template <typename T>
struct AttentionProblem {
  int64_t batch = 0, L = 0, S = 0, E = 0, Ev = 0;
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  const T* mask = nullptr;
  const int64_t* mask_offsets = nullptr;  // [batch]
  int64_t mask_row_stride = 0, mask_col_stride = 0;
  bool causal = false;
  double scale = 1.0;
  double dropout_p = 0.0;
  uint64_t dropout_seed = 0;
};

template <typename T>
struct AttentionKernels {
  // -> out: [batch, L, Ev]; lse: [batch, L], each query's log Σ_j e^(s_ij) over its unmasked keys,
  // +∞ for a query with none (its output row is 0, and backward's e^(s − lse) is 0 there).
  void (*forward)(const AttentionProblem<T>& problem, T* out, T* lse);
  // out, grad_out: [batch, L, Ev]; lse: [batch, L] from forward -> dq: [batch, L, E],
  // dk: [batch, S, E], dv: [batch, S, Ev] (written, not accumulated).
  void (*backward)(const AttentionProblem<T>& problem, const T* out, const T* lse, const T* grad_out, T* dq, T* dk,
                   T* dv);
};

TG_DECLARE_ISA_KERNELS(DtypeKernels<AttentionKernels>, attention_kernels)

}  // namespace tg::detail
