// The GEMM's packing into micro-panels, compiled once per vector level by tg_add_isa_kernels
// (TG_ISA = v2, v3 or avx512) into tg::detail::<level>.
//
// Why by hand: a micro-panel stores MR rows of a column side by side, so packing a matrix whose
// rows are contiguous (op(A) = A row-major, as in every Linear's forward) is a transposition. Done
// element by element it costs as much as BLIS's scalar packm it replaces; here it runs on 8 × 8
// tiles held in vectors (8 row loads, 3 rounds of shuffles, 8 column stores).
#include "ops/gemm_pack_kernels.hpp"

// The tiles are vectors of 8 elements (32 or 64 bytes) passed between inlined helpers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tg::detail::TG_ISA {

namespace {

constexpr int64_t kTile = 8;

// 8 elements of T in one vector (GCC ignores vector_size on a dependent alias: one per type).
template <typename T>
struct Vec8Of;
template <>
struct Vec8Of<float> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct Vec8Of<double> {
  typedef double type __attribute__((vector_size(64)));
};
template <typename T>
using Vec8 = typename Vec8Of<T>::type;

// Rows [0, 8) × columns [0, 8) of `rows` (row stride row_step, contiguous columns) written
// transposed: column c to out[c·out_step .. + 8).
template <typename T>
void transpose_tile(const T* rows, int64_t row_step, T* out, int64_t out_step) {
  using V = Vec8<T>;
  V r[kTile];
  for (int64_t i = 0; i < kTile; ++i) __builtin_memcpy(&r[i], rows + i * row_step, sizeof(V));
  // Round 1: pairs of rows interleaved element by element: t[2i] holds columns 0,1,4,5 of rows
  // 2i, 2i+1; t[2i+1] columns 2,3,6,7.
  V t[kTile], u[kTile];
  for (int64_t i = 0; i < kTile; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  // Round 2: pairs of pairs: u[4h + c] holds rows 4h..4h+3 of column c (low half) and c + 4 (high).
  for (int64_t h = 0; h < 2; ++h) {
    const V* s = t + 4 * h;
    u[4 * h + 0] = __builtin_shufflevector(s[0], s[2], 0, 1, 8, 9, 4, 5, 12, 13);
    u[4 * h + 1] = __builtin_shufflevector(s[0], s[2], 2, 3, 10, 11, 6, 7, 14, 15);
    u[4 * h + 2] = __builtin_shufflevector(s[1], s[3], 0, 1, 8, 9, 4, 5, 12, 13);
    u[4 * h + 3] = __builtin_shufflevector(s[1], s[3], 2, 3, 10, 11, 6, 7, 14, 15);
  }
  // Round 3: the halves of rows 0..3 and 4..7 joined: whole columns.
  for (int64_t c = 0; c < 4; ++c) {
    const V low = __builtin_shufflevector(u[c], u[4 + c], 0, 1, 2, 3, 8, 9, 10, 11);
    const V high = __builtin_shufflevector(u[c], u[4 + c], 4, 5, 6, 7, 12, 13, 14, 15);
    __builtin_memcpy(out + c * out_step, &low, sizeof(V));
    __builtin_memcpy(out + (c + 4) * out_step, &high, sizeof(V));
  }
}

// Rows [0, 4) × columns [0, 8) written transposed, as transpose_tile: column c (4 elements) to
// out[c·out_step .. + 4). The panels' rows beyond a multiple of 8 (MR = 12 or 6) take this path.
template <typename T>
void transpose_tile_4(const T* rows, int64_t row_step, T* out, int64_t out_step) {
  using V = Vec8<T>;
  V r[4];
  for (int64_t i = 0; i < 4; ++i) __builtin_memcpy(&r[i], rows + i * row_step, sizeof(V));
  // t[0], t[2]: columns 0,1 and 4,5 of rows (0, 1) and (2, 3), interleaved; t[1], t[3]: 2,3 and 6,7.
  const V t0 = __builtin_shufflevector(r[0], r[1], 0, 8, 1, 9, 4, 12, 5, 13);
  const V t1 = __builtin_shufflevector(r[0], r[1], 2, 10, 3, 11, 6, 14, 7, 15);
  const V t2 = __builtin_shufflevector(r[2], r[3], 0, 8, 1, 9, 4, 12, 5, 13);
  const V t3 = __builtin_shufflevector(r[2], r[3], 2, 10, 3, 11, 6, 14, 7, 15);
  // Two whole columns per vector: (c, c + 1) from the pairs' halves.
  const V columns[4] = {__builtin_shufflevector(t0, t2, 0, 1, 8, 9, 2, 3, 10, 11),   // 0, 1
                        __builtin_shufflevector(t1, t3, 0, 1, 8, 9, 2, 3, 10, 11),   // 2, 3
                        __builtin_shufflevector(t0, t2, 4, 5, 12, 13, 6, 7, 14, 15),  // 4, 5
                        __builtin_shufflevector(t1, t3, 4, 5, 12, 13, 6, 7, 14, 15)}; // 6, 7
  for (int64_t c = 0; c < 4; ++c) {
    const T* pair = reinterpret_cast<const T*>(&columns[c]);
    __builtin_memcpy(out + 2 * c * out_step, pair, 4 * sizeof(T));
    __builtin_memcpy(out + (2 * c + 1) * out_step, pair + 4, 4 * sizeof(T));
  }
}

template <typename T>
void pack_panels(const T* source, int64_t row_step, int64_t col_step, int64_t rows, int64_t depth, int64_t panel_rows,
                 int64_t pack_rows, int64_t panel_step, T* packed) {
  for (int64_t i0 = 0; i0 < rows; i0 += panel_rows) {
    const int64_t height = rows - i0 < panel_rows ? rows - i0 : panel_rows;
    const T* panel = source + i0 * row_step;
    T* out = packed + i0 / panel_rows * panel_step;
    if (row_step == 1) {
      // The panel's columns are contiguous: one copy per column.
      for (int64_t p = 0; p < depth; ++p) {
        const T* column = panel + p * col_step;
        T* to = out + p * pack_rows;
        for (int64_t r = 0; r < height; ++r) to[r] = column[r];
        for (int64_t r = height; r < pack_rows; ++r) to[r] = T(0);
      }
      continue;
    }
    // Its rows are contiguous (col_step 1) or neither: a transposition, by 8 × 8 tiles (then 4 × 8)
    // where they fit.
    int64_t p = 0;
    if (col_step == 1)
      for (; p + kTile <= depth; p += kTile) {
        int64_t r = 0;
        for (; r + kTile <= height; r += kTile)
          transpose_tile(panel + r * row_step + p, row_step, out + p * pack_rows + r, pack_rows);
        for (; r + 4 <= height; r += 4)
          transpose_tile_4(panel + r * row_step + p, row_step, out + p * pack_rows + r, pack_rows);
        for (; r < height; ++r)
          for (int64_t c = 0; c < kTile; ++c) out[(p + c) * pack_rows + r] = panel[r * row_step + p + c];
      }
    for (; p < depth; ++p)
      for (int64_t r = 0; r < height; ++r) out[p * pack_rows + r] = panel[r * row_step + p * col_step];
    for (p = 0; p < depth; ++p)
      for (int64_t r = height; r < pack_rows; ++r) out[p * pack_rows + r] = T(0);
  }
}

}  // namespace

const DtypeKernels<GemmPackKernels> gemm_pack_kernels = {.f32 = {.pack_panels = pack_panels<float>},
                                                         .f64 = {.pack_panels = pack_panels<double>}};

}  // namespace tg::detail::TG_ISA

#pragma GCC diagnostic pop
