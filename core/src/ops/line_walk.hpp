// One walk along the lines of a tensor, behind the folds (integer sums, products) and the scans
// (cumsum, cumprod, their gradients): each line of [outer, size, inner] (ops/along_dim.hpp) is
// read in order — from k = size − 1 down when reversed — carrying one accumulator. Each line's
// result depends on that line alone, added in one fixed order, so any thread count gives the same
// bits. Private to the library.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "dispatch.hpp"
#include "ops/along_dim.hpp"
#include "parallel_for.hpp"

namespace tg::detail {

// PyTorch's dtypes for sums and products (sum, prod, cumsum, cumprod): bool and int64 give int64,
// accumulated in uint64, where wrapping around is defined (and is int64's two's-complement wrap,
// what PyTorch shows); float32 and float64 keep their dtype and accumulate in double (PyTorch's
// CPU acc_type for cumsum and cumprod).
template <typename T>
using FoldAccumulator = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
template <typename T>
using FoldResult = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
inline DType fold_result_dtype(DType dtype) { return is_floating_point(dtype) ? dtype : kInt64; }

// Lines one task carries side by side: consecutive i of one o, so every step reads a contiguous
// run of `inner` and keeps its accumulators in registers or L1.
inline constexpr int64_t kLineBlock = 256;

// For every line (o, i): acc = init, then for each k in order acc = step(acc, element), where
// element = (o·size + k)·inner + i is the offset of x[o, k, i], and
//   Scan:  store(element, acc) after every step (out has x's shape);
//   !Scan: store(o·inner + i, acc) once at the end (out has the shape [outer, inner]).
template <bool Scan, typename Acc, typename Step, typename Store>
void walk_lines(const AlongDim& layout, bool reverse, Acc init, const Step& step, const Store& store) {
  const int64_t size = layout.size, inner = layout.inner;
  const int64_t blocks_per_o = ceil_div(inner, kLineBlock);
  const int64_t grain = ceil_div(kElementwiseGrain, std::max<int64_t>(1, size * std::min(inner, kLineBlock)));
  parallel_for(layout.outer * blocks_per_o, grain, [&](int64_t begin, int64_t end) {
    std::array<Acc, kLineBlock> acc;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t o = task / blocks_per_o, i0 = (task % blocks_per_o) * kLineBlock;
      const int64_t width = std::min(inner, i0 + kLineBlock) - i0;
      std::fill(acc.begin(), acc.begin() + width, init);
      for (int64_t step_number = 0; step_number < size; ++step_number) {
        const int64_t k = reverse ? size - 1 - step_number : step_number;
        const int64_t row = (o * size + k) * inner + i0;
        for (int64_t i = 0; i < width; ++i) {
          acc[i] = step(acc[i], row + i);
          if constexpr (Scan) store(row + i, acc[i]);
        }
      }
      if constexpr (!Scan)
        for (int64_t i = 0; i < width; ++i) store(o * inner + i0 + i, acc[i]);
    }
  });
}

// Sums (Product: products) along every line of x, into out of x's shape (Scan: the running ones)
// or of [outer, inner] (the totals), of fold_result_dtype(x.dtype()). Any dtype but bfloat16, which
// its callers compute in float32 (bfloat16_compute.hpp).
template <bool Scan, bool Product>
void sum_or_multiply_lines(const Tensor& x, Tensor& out, const AlongDim& layout, bool reverse, const char* op) {
  dispatch<DTypes<kFloat32, kFloat64, kInt64, kBool>>(op, x.dtype(), [&]<typename T>() {
    using Acc = FoldAccumulator<T>;
    const T* in = x.data<T>();
    FoldResult<T>* result = out.mutable_data<FoldResult<T>>();
    walk_lines<Scan>(
        layout, reverse, Acc{Product ? 1 : 0},
        [in](Acc acc, int64_t at) { return Product ? acc * static_cast<Acc>(in[at]) : acc + static_cast<Acc>(in[at]); },
        [result](int64_t at, Acc acc) { result[at] = static_cast<FoldResult<T>>(acc); });
  });
}

}  // namespace tg::detail
