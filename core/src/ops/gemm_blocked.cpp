// The large-product GEMM: GotoBLAS's three blocked loops and our own packing, around BLIS's
// micro-kernel of the chosen context.
//
// Why not bli_?gemm_ex: BLIS 0.9 packs op(A) into micro-panels of MR rows with a packm kernel of
// that MR, and has them only up to 31 rows; skx's sgemm MR is 32, so it falls back to
// bli_sscal2v, one function call per scalar element, which can cost more than the product. Here
// the packing is ours (a copy, or a transposition by vector tiles: ops/gemm_pack_kernels.cpp), and
// BLIS still does all the arithmetic.
//
// The loops, for the kernel's problem C'[m, n] = A'[m, K] · B'[K, n]:
//   for jc in n step NC:              B' block [KC, NC] packed into panels of NR columns (L3)
//     for pc in K step KC:
//       for ic in m step MC:          A' block [MC, KC] packed into panels of MR rows (L2)
//         for jr, ir:                 C'[MR, NR] += A' panel · B' panel (the micro-kernel, L1)
#include "ops/gemm_blocked.hpp"

#include <algorithm>
#include <new>
#include <type_traits>

#include "ops/gemm_pack_kernels.hpp"
#include "parallel_for.hpp"
#include "tapegrad/error.hpp"

namespace tg::detail {

namespace {

// A strided matrix view: element (i, p) at data[i * row_step + p * col_step].
template <typename T>
struct Strided {
  const T* data;
  int64_t row_step, col_step;
  Strided transposed() const { return {data, col_step, row_step}; }
  Strided at(int64_t i, int64_t p) const { return {data + i * row_step + p * col_step, row_step, col_step}; }
};

// Packs `source`'s rows [0, rows), columns [0, depth) into micro-panels (ops/gemm_pack_kernels.hpp).
template <typename T>
void pack_panels(Strided<T> source, int64_t rows, int64_t depth, int64_t panel_rows, int64_t pack_rows,
                 int64_t panel_step, T* packed) {
  gemm_pack_kernels_for_cpu().of<T>().pack_panels(source.data, source.row_step, source.col_step, rows, depth,
                                                  panel_rows, pack_rows, panel_step, packed);
}

// A 64-byte-aligned buffer that keeps its largest size: one per thread, so a GEMM allocates (and
// page-faults) only when a product needs more than any before it on this thread.
struct PackBuffer {
  void* data = nullptr;
  size_t bytes = 0;
  PackBuffer() = default;
  PackBuffer(const PackBuffer&) = delete;
  PackBuffer& operator=(const PackBuffer&) = delete;
  ~PackBuffer() { ::operator delete(data, std::align_val_t{64}); }
  template <typename T>
  T* get(int64_t count) {
    const size_t needed = static_cast<size_t>(count) * sizeof(T);
    if (needed > bytes) {
      ::operator delete(data, std::align_val_t{64});
      data = nullptr;
      bytes = 0;
      data = ::operator new(needed, std::align_val_t{64});
      bytes = needed;
    }
    return static_cast<T*>(data);
  }
};

// The size of the next block of a dimension with `remaining` elements left: BLIS's own rule
// (bli_determine_blocksize): the default size, or all that is left when that is at most the
// table's maximum, so no tiny last block follows. For KC this keeps the sums over k in the same
// blocks as bli_?gemm's, hence the same bits.
int64_t next_block(int64_t remaining, int64_t default_size, int64_t max_size) {
  return remaining <= max_size ? remaining : default_size;
}

// BLIS's micro-kernel type: C[MR, NR] = α·A panel·B panel + β·C.
template <typename T>
using MicroKernel = std::conditional_t<std::is_same_v<T, float>, sgemm_ukr_ft, dgemm_ukr_ft>;

// The largest micro-tile (MR · NR) of any BLIS configuration (skx sgemm: 32 × 12).
constexpr int64_t kMaxMicroTile = 1024;

}  // namespace

template <typename T>
void blocked_gemm(cntx_t* context, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A,
                  int64_t lda, const T* B, int64_t ldb, T* C, int64_t ldc, bool accumulate) {
  constexpr num_t dt = std::is_same_v<T, float> ? BLIS_FLOAT : BLIS_DOUBLE;
  const auto micro_kernel = reinterpret_cast<MicroKernel<T>>(bli_cntx_get_l3_nat_ukr_dt(dt, BLIS_GEMM_UKR, context));
  const int64_t MR = bli_cntx_get_blksz_def_dt(dt, BLIS_MR, context);
  const int64_t NR = bli_cntx_get_blksz_def_dt(dt, BLIS_NR, context);
  // The packed panels' leading dimensions, which BLIS's tables may pad beyond MR and NR.
  const int64_t pack_mr = bli_cntx_get_blksz_max_dt(dt, BLIS_MR, context);
  const int64_t pack_nr = bli_cntx_get_blksz_max_dt(dt, BLIS_NR, context);
  const int64_t KC = bli_cntx_get_blksz_def_dt(dt, BLIS_KC, context);
  const int64_t MC = bli_cntx_get_blksz_def_dt(dt, BLIS_MC, context);
  const int64_t NC = bli_cntx_get_blksz_def_dt(dt, BLIS_NC, context);
  const int64_t KC_max = bli_cntx_get_blksz_max_dt(dt, BLIS_KC, context);
  const int64_t MC_max = bli_cntx_get_blksz_max_dt(dt, BLIS_MC, context);
  const int64_t NC_max = bli_cntx_get_blksz_max_dt(dt, BLIS_NC, context);
  check(MR * NR <= kMaxMicroTile, "gemm", "BLIS micro-tile ", MR, "x", NR, " is larger than ", kMaxMicroTile);

  // op(A)[i, k] and op(B)[k, j] as strided views of the stored row-major matrices.
  const Strided<T> op_a{A, trans_a ? 1 : lda, trans_a ? lda : 1};
  const Strided<T> op_b{B, trans_b ? 1 : ldb, trans_b ? ldb : 1};
  // A micro-kernel that keeps columns of C in its registers (skx) writes a column-major C fastest:
  // then it computes Cᵀ = op(B)ᵀ·op(A)ᵀ, as BLIS itself does, with C row-major seen as Cᵀ
  // column-major. The packed operands are A' by rows and B' by columns, both as "panel rows".
  const bool transpose_c = bli_cntx_l3_nat_ukr_prefers_cols_dt(dt, BLIS_GEMM_UKR, context);
  const Strided<T> a_rows = transpose_c ? op_b.transposed() : op_a;  // A'[m, K]
  const Strided<T> b_columns = transpose_c ? op_a : op_b.transposed();  // B'ᵀ[n, K]
  const int64_t m = transpose_c ? N : M, n = transpose_c ? M : N;
  const inc_t rs_c = transpose_c ? 1 : ldc, cs_c = transpose_c ? ldc : 1;

  // Per-thread buffers for this product's largest blocks (a last block may reach the maximum size;
  // never BLIS's whole MC × KC when the product is smaller).
  thread_local PackBuffer a_buffer, b_buffer;
  const int64_t kc_most = std::min(K, KC_max);
  T* a_packed = a_buffer.get<T>(ceil_div(std::min(m, MC_max), MR) * kc_most * pack_mr);
  T* b_packed = b_buffer.get<T>(ceil_div(std::min(n, NC_max), NR) * kc_most * pack_nr);
  alignas(64) T edge[kMaxMicroTile];  // an edge tile, MR × NR in the kernel's preferred storage
  const inc_t edge_rs = transpose_c ? 1 : NR, edge_cs = transpose_c ? MR : 1;

  T one = T(1), zero = T(0);
  auxinfo_t aux{};
  bli_auxinfo_set_schema_a(BLIS_PACKED_ROW_PANELS, &aux);
  bli_auxinfo_set_schema_b(BLIS_PACKED_COL_PANELS, &aux);
  bli_auxinfo_set_is_a(1, &aux);
  bli_auxinfo_set_is_b(1, &aux);
  for (int64_t jc = 0, nc; jc < n; jc += nc) {
    nc = next_block(n - jc, NC, NC_max);
    for (int64_t pc = 0, kc; pc < K; pc += kc) {
      kc = next_block(K - pc, KC, KC_max);
      // The first K block overwrites C unless accumulating; the later ones add to it.
      T* beta = pc == 0 && !accumulate ? &zero : &one;
      pack_panels(b_columns.at(jc, pc), nc, kc, NR, pack_nr, kc * pack_nr, b_packed);
      bli_auxinfo_set_ps_b(kc * pack_nr, &aux);
      for (int64_t ic = 0, mc; ic < m; ic += mc) {
        mc = next_block(m - ic, MC, MC_max);
        pack_panels(a_rows.at(ic, pc), mc, kc, MR, pack_mr, kc * pack_mr, a_packed);
        bli_auxinfo_set_ps_a(kc * pack_mr, &aux);
        const int64_t a_panels = ceil_div(mc, MR), b_panels = ceil_div(nc, NR);
        for (int64_t jr = 0; jr < b_panels; ++jr) {
          T* b_panel = b_packed + jr * kc * pack_nr;
          for (int64_t ir = 0; ir < a_panels; ++ir) {
            T* a_panel = a_packed + ir * kc * pack_mr;
            // The panels the kernel may prefetch next: the next of A, or the first with the next B.
            const bool last_a = ir + 1 == a_panels;
            bli_auxinfo_set_next_a(last_a ? a_packed : a_panel + kc * pack_mr, &aux);
            bli_auxinfo_set_next_b(last_a && jr + 1 < b_panels ? b_panel + kc * pack_nr : b_panel, &aux);
            const int64_t i0 = ic + ir * MR, j0 = jc + jr * NR;
            const int64_t rows = std::min(MR, m - i0), cols = std::min(NR, n - j0);
            T* c = C + i0 * rs_c + j0 * cs_c;
            if (rows == MR && cols == NR) {
              micro_kernel(MR, NR, kc, &one, a_panel, b_panel, beta, c, rs_c, cs_c, &aux, context);
              continue;
            }
            // An edge: the full tile into `edge` (its padding rows and columns are zero products),
            // then only the part inside C, added as the kernel would (c·β + ab, β ∈ {0, 1}).
            micro_kernel(MR, NR, kc, &one, a_panel, b_panel, &zero, edge, edge_rs, edge_cs, &aux, context);
            for (int64_t i = 0; i < rows; ++i)
              for (int64_t j = 0; j < cols; ++j) {
                T& to = c[i * rs_c + j * cs_c];
                const T product = edge[i * edge_rs + j * edge_cs];
                to = beta == &zero ? product : to + product;
              }
          }
        }
      }
    }
  }
}

template void blocked_gemm<float>(cntx_t*, bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*,
                                  int64_t, float*, int64_t, bool);
template void blocked_gemm<double>(cntx_t*, bool, bool, int64_t, int64_t, int64_t, const double*, int64_t,
                                   const double*, int64_t, double*, int64_t, bool);

}  // namespace tg::detail
