// The large-product GEMM: GotoBLAS's three blocked loops and our own packing, around one
// micro-kernel: tapegrad's own (ops/gemm_micro_kernels.cpp), or BLIS's of a chosen context.
//
// Why not bli_?gemm_ex for BLIS's: BLIS 0.9 packs op(A) into micro-panels of MR rows with a packm
// kernel of that MR, and has them only up to 31 rows; skx's sgemm MR is 32, so it falls back to
// bli_sscal2v, one function call per scalar element, which can cost more than the product. Here
// the packing is ours (a copy, or a transposition by vector tiles: ops/gemm_pack_kernels.cpp).
//
// The loops, for the kernel's problem C'[m, n] = A'[m, K] · B'[K, n]:
//   for jc in n step NC:              B' block [KC, NC] packed into panels of NR columns (L3)
//     for pc in K step KC:
//       for ic in m step MC:          A' block [MC, KC] packed into panels of MR rows (L2)
//         for jr, ir:                 C'[MR, NR] += A' panel · B' panel (the micro-kernel, L1)
//
// On several threads (parallel_blocked_gemm) the ic loop is split, as BLIS and OpenBLAS split it
// (unless B' is read in place: then the columns are split): all of B' is packed once, ahead, by
// all threads together, and each piece of rows packs its own A' blocks and streams the shared B'
// from L3. Two independent tiles of C would each pack the whole
// operand they share (a third more packing at two threads) and split the work in two fixed halves,
// so a thread slowed by another process left the other idle.
#include "ops/gemm_blocked.hpp"

#include <tbb/task_arena.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <type_traits>
#include <vector>

#include "ops/gemm_bf16.hpp"
#include "ops/gemm_micro_kernels.hpp"
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

#ifdef TG_HAVE_BLIS
// BLIS's micro-kernel type: C[MR, NR] = α·A panel·B panel + β·C.
template <typename T>
using BlisMicroKernel = std::conditional_t<std::is_same_v<T, float>, sgemm_ukr_ft, dgemm_ukr_ft>;
#endif

// The largest micro-tile (MR · NR) of any kernel (BLIS's skx sgemm: 32 × 12).
constexpr int64_t kMaxMicroTile = 1024;
// B' is read in place (BlockedProduct::direct_b) when at most this many A' panels read it, A'
// when at most kDirectAPanels B' panels do.
constexpr int64_t kDirectBPanels = 4;
constexpr int64_t kDirectAPanels = 16;

// One product C'[m, n] = A'[m, K]·B'[K, n] in the kernel's terms, with the kernel's block sizes,
// split into pieces the loops below run independently. Every piece keeps the micro-tile grid of the
// whole product (pieces start on multiples of MR rows and NR columns; MC and NC are multiples of
// them), and each C'[i, j] is the micro-kernel's sum over the same K blocks: which piece, and which
// thread, computes an element never changes its bits.
// The packed panels hold elements of T, or bf16 pairs (Panel = Bf16Pair) for the AVX512-BF16
// kernel: a panel of depth kc then holds depth_of(kc) = ⌈kc/2⌉ rows of pairs.
template <typename T, typename Panel = T>
struct BlockedProduct {
  static constexpr bool kBf16 = !std::is_same_v<Panel, T>;
  static_assert(!kBf16 || (std::is_same_v<T, float> && std::is_same_v<Panel, Bf16Pair>));
  static constexpr int64_t depth_of(int64_t k) { return kBf16 ? (k + 1) / 2 : k; }
  const GemmMicroKernels<T>* ours = nullptr;  // tapegrad's micro-kernel, the AVX512-BF16 one, or BLIS's:
  const Bf16MicroKernel* bf16 = nullptr;
#ifdef TG_HAVE_BLIS
  static constexpr num_t dt = std::is_same_v<T, float> ? BLIS_FLOAT : BLIS_DOUBLE;
  cntx_t* context = nullptr;
  BlisMicroKernel<T> blis_kernel = nullptr;
#endif
  int64_t MR, NR, pack_mr, pack_nr, KC, MC, NC, KC_max, MC_max, NC_max;
  Strided<T> a_rows, b_columns;  // A'[m, K] and B'ᵀ[n, K]
  int64_t m, n, K;
  T* C;
  int64_t rs_c, cs_c;
  bool transpose_c = false, accumulate;
  // Operands read in place instead of packed (tapegrad's kernel only). B', when its rows are
  // contiguous (op(B) = B row-major) and few A' panels read each of its panels: packing B' would
  // cost about as much as the products that read it (an LSTM's h·W_hh at a batch of 32: as much
  // again). A', when few B' panels read each of its panels: its packing is a transposition when
  // op(A) = A row-major, a tenth of a Linear's time at K = 128 (the kernel broadcasts A's elements
  // one at a time, from any strides, so in place costs it nothing).
  bool direct_a = false, direct_b = false;
  // A bf16 product on the float32 kernel (ops/gemm_bf16.hpp): the packed panels rounded to bf16
  // (in cache, just written; so both operands are packed), the tiles run with FTZ and DAZ.
  bool round_to_bf16 = false;

  BlockedProduct(const GemmKernel& kernel, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K_, const T* A,
                 int64_t lda, const T* B, int64_t ldb, T* C_, int64_t ldc, bool accumulate_)
      : K(K_), C(C_), accumulate(accumulate_) {
#ifdef TG_HAVE_BLIS
    if (kernel.blis) {
      context = kernel.blis;
      blis_kernel = reinterpret_cast<BlisMicroKernel<T>>(bli_cntx_get_l3_nat_ukr_dt(dt, BLIS_GEMM_UKR, context));
      MR = bli_cntx_get_blksz_def_dt(dt, BLIS_MR, context);
      NR = bli_cntx_get_blksz_def_dt(dt, BLIS_NR, context);
      // The packed panels' leading dimensions, which BLIS's tables may pad beyond MR and NR.
      pack_mr = bli_cntx_get_blksz_max_dt(dt, BLIS_MR, context);
      pack_nr = bli_cntx_get_blksz_max_dt(dt, BLIS_NR, context);
      KC = bli_cntx_get_blksz_def_dt(dt, BLIS_KC, context);
      MC = bli_cntx_get_blksz_def_dt(dt, BLIS_MC, context);
      NC = bli_cntx_get_blksz_def_dt(dt, BLIS_NC, context);
      KC_max = bli_cntx_get_blksz_max_dt(dt, BLIS_KC, context);
      MC_max = bli_cntx_get_blksz_max_dt(dt, BLIS_MC, context);
      NC_max = bli_cntx_get_blksz_max_dt(dt, BLIS_NC, context);
      // A micro-kernel that keeps columns of C in its registers (skx) writes a column-major C
      // fastest: then it computes Cᵀ = op(B)ᵀ·op(A)ᵀ, as BLIS itself does, with C row-major seen
      // as Cᵀ column-major.
      transpose_c = bli_cntx_l3_nat_ukr_prefers_cols_dt(dt, BLIS_GEMM_UKR, context);
    } else
#endif
        if constexpr (kBf16) {
      bf16 = kernel.bf16;
      MR = pack_mr = bf16->mr;
      NR = pack_nr = bf16->nr;
      KC = KC_max = bf16->kc;
      MC = MC_max = bf16->mc;
      NC = NC_max = bf16->nc;
    } else {
      ours = &gemm_micro_kernels_for_cpu().of<T>();
      MR = pack_mr = ours->mr;
      NR = pack_nr = ours->nr;
      KC = KC_max = ours->kc;
      MC = MC_max = ours->mc;
      NC = NC_max = ours->nc;
    }
    check(MR * NR <= kMaxMicroTile, "gemm", "micro-tile ", MR, "x", NR, " is larger than ", kMaxMicroTile);
    check(MC % MR == 0 && NC % NR == 0, "gemm", "blocks MC ", MC, ", NC ", NC, " are not multiples of MR ", MR,
          ", NR ", NR);
    // op(A)[i, k] and op(B)[k, j] as strided views of the stored row-major matrices. The packed
    // operands are A' by rows and B' by columns, both as "panel rows".
    const Strided<T> op_a{A, trans_a ? 1 : lda, trans_a ? lda : 1};
    const Strided<T> op_b{B, trans_b ? 1 : ldb, trans_b ? ldb : 1};
    a_rows = transpose_c ? op_b.transposed() : op_a;
    b_columns = transpose_c ? op_a : op_b.transposed();
    m = transpose_c ? N : M;
    n = transpose_c ? M : N;
    rs_c = transpose_c ? 1 : ldc;
    cs_c = transpose_c ? ldc : 1;
    round_to_bf16 = kernel.flush_denormals && !kBf16 && !kernel.factors_bf16;
    direct_b = ours != nullptr && !round_to_bf16 && b_columns.row_step == 1 && ceil_div(m, MR) <= kDirectBPanels;
    direct_a = ours != nullptr && !round_to_bf16 && ceil_div(n, NR) <= kDirectAPanels;
  }

  // Packs `source`'s rows [0, rows), columns [0, depth) into micro-panels; B's bf16 panels pad an
  // odd depth with −0 (ops/gemm_bf16.hpp).
  void pack(Strided<T> source, int64_t rows, int64_t depth, int64_t panel_rows, int64_t pack_rows,
            int64_t panel_step, Panel* packed, bool is_b) const {
    if constexpr (kBf16)
      bf16->pack_panels(source.data, source.row_step, source.col_step, rows, depth, panel_rows, pack_rows,
                        panel_step, is_b ? 0x8000 : 0, packed);
    else {
      pack_panels(source, rows, depth, panel_rows, pack_rows, panel_step, packed);
      if constexpr (std::is_same_v<T, float>)
        if (round_to_bf16) {
          // The panels are contiguous (panel_step = depth·pack_rows), or one (panel_step 0).
          const int64_t panels = panel_step == 0 ? 1 : ceil_div(rows, panel_rows);
          round_to_bf16_in_place(packed, panels * depth * pack_rows);
        }
    }
  }

  // A whole operand packed ahead (`rows` rows of `source` in panels of `panel_rows`, padded to
  // `pack_rows`), every K block of it: the block starting at depth pc holds Σ(earlier kc) = pc
  // columns' worth of panels before it, so it begins at pc·panels·pack_rows, and its panel q at
  // q·kc·pack_rows from there, the layout pack_panels writes for one block.
  struct Packed {
    const Panel* data;
    int64_t panels, pack_rows;
    const Panel* block(int64_t pc, int64_t kc, int64_t first_panel) const {
      return data + depth_of(pc) * panels * pack_rows + first_panel * depth_of(kc) * pack_rows;
    }
  };

  // Packs panels [first, last) of `source` (all of its K blocks) into `to`'s layout.
  void pack_ahead(Strided<T> source, bool is_b, int64_t rows, int64_t panel_rows, const Packed& to, int64_t first,
                  int64_t last) const {
    const int64_t row0 = first * panel_rows, row1 = std::min(rows, last * panel_rows);
    for (int64_t pc = 0, kc; pc < K; pc += kc) {
      kc = next_block(K - pc, KC, KC_max);
      pack(source.at(row0, pc), row1 - row0, kc, panel_rows, to.pack_rows, depth_of(kc) * to.pack_rows,
           const_cast<Panel*>(to.block(pc, kc, first)), is_b);
    }
  }

  // C'[m0..m1, n0..n1] by GotoBLAS's loops; an operand given as `ahead` is read from it, the other
  // packed here block by block into this thread's buffers. m0 and n0 are multiples of MR and NR.
  void run(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const Packed* a_ahead, const Packed* b_ahead) const {
    // Per-thread buffers for this piece's largest blocks (a last block may reach the maximum size;
    // never the whole MC × KC when the product is smaller).
    thread_local PackBuffer a_buffer, b_buffer;
    std::optional<FlushDenormals> flushed;
    if (round_to_bf16) flushed.emplace();
    const int64_t kc_most = depth_of(std::min(K, KC_max));
    Panel* a_packed =
        a_ahead ? nullptr : a_buffer.get<Panel>(ceil_div(std::min(m1 - m0, MC_max), MR) * kc_most * pack_mr);
    Panel* b_packed =
        b_ahead ? nullptr : b_buffer.get<Panel>(ceil_div(std::min(n1 - n0, NC_max), NR) * kc_most * pack_nr);
    alignas(64) T edge[kMaxMicroTile];  // an edge tile, MR × NR in the kernel's preferred storage
    const int64_t edge_rs = transpose_c ? 1 : NR, edge_cs = transpose_c ? MR : 1;
    TileCall call(*this);
    for (int64_t jc = n0, nc; jc < n1; jc += nc) {
      nc = next_block(n1 - jc, NC, NC_max);
      for (int64_t pc = 0, kc; pc < K; pc += kc) {
        kc = next_block(K - pc, KC, KC_max);
        // The first K block overwrites C unless accumulating; the later ones continue from it.
        const bool load_c = pc > 0 || accumulate;
        const int64_t kp = depth_of(kc);  // the panels' depth: kc, or its pairs
        const Panel* b_block = b_packed;
        if (b_ahead) b_block = b_ahead->block(pc, kc, jc / NR);
        else if (!direct_b) pack(b_columns.at(jc, pc), nc, kc, NR, pack_nr, kp * pack_nr, b_packed, true);
        // (a B' read in place has only its last, narrow panel packed, below)
        for (int64_t ic = m0, mc; ic < m1; ic += mc) {
          mc = next_block(m1 - ic, MC, MC_max);
          const Panel* a_block = a_packed;
          if (a_ahead) a_block = a_ahead->block(pc, kc, ic / MR);
          else if (!direct_a) pack(a_rows.at(ic, pc), mc, kc, MR, pack_mr, kp * pack_mr, a_packed, false);
          call.set_blocks(kc);
          const int64_t a_panels = ceil_div(mc, MR), b_panels = ceil_div(nc, NR);
          for (int64_t jr = 0; jr < b_panels; ++jr) {
            const Panel* b_panel = b_block + jr * kp * pack_nr;
            int64_t b_step = pack_nr;
            if constexpr (!kBf16)  // (bf16 panels are always packed)
              if (direct_b && !b_ahead) {
              // A whole panel in place; the last, narrower one packed once per K block (its
              // padding columns zero) into the buffer no other panel uses.
              const Strided<T> panel = b_columns.at(jc + jr * NR, pc);
              const int64_t columns = std::min(NR, n - jc - jr * NR);
              b_panel = panel.data;
              b_step = panel.col_step;
              if (columns < NR) {
                if (ic == m0) pack(panel, columns, kc, NR, pack_nr, 0, b_packed, true);
                b_panel = b_packed;
                b_step = pack_nr;
              }
            }
            for (int64_t ir = 0; ir < a_panels; ++ir) {
              const Panel* a_panel = a_block + ir * kp * pack_mr;
              int64_t a_row_step = 1, a_col_step = pack_mr;
              if constexpr (!kBf16)
                if (direct_a && !a_ahead) {
                // As B' above: a whole panel in place, the last, shorter one packed (once per
                // block of A', at the first panel of B').
                const Strided<T> panel = a_rows.at(ic + ir * MR, pc);
                const int64_t rows = std::min(MR, m - ic - ir * MR);
                a_panel = panel.data;
                a_row_step = panel.row_step;
                a_col_step = panel.col_step;
                if (rows < MR) {
                  if (jr == 0) pack(panel, rows, kc, MR, pack_mr, 0, a_packed, false);
                  a_panel = a_packed;
                  a_row_step = 1;
                  a_col_step = pack_mr;
                }
              }
              // The panels the kernel may prefetch next: the next of A, or the first with the next B.
              const bool last_a = ir + 1 == a_panels;
              call.set_next(last_a ? a_block : a_panel + kp * pack_mr,
                            last_a && jr + 1 < b_panels ? b_panel + kp * pack_nr : b_panel);
              const int64_t i0 = ic + ir * MR, j0 = jc + jr * NR;
              const int64_t rows = std::min(MR, m - i0), cols = std::min(NR, n - j0);
              T* c = C + i0 * rs_c + j0 * cs_c;
              if (rows == MR && cols == NR) {
                call(kc, a_panel, a_row_step, a_col_step, b_panel, b_step, load_c, c, rs_c, cs_c);
                continue;
              }
              // An edge: the full tile computed in `edge` (its padding rows and columns are zero
              // products) from the part inside C, then that part copied back.
              auto at = [&](int64_t i, int64_t j) -> T& { return edge[i * edge_rs + j * edge_cs]; };
              if (load_c) {
                std::fill(edge, edge + MR * NR, T(0));
                for (int64_t i = 0; i < rows; ++i)
                  for (int64_t j = 0; j < cols; ++j) at(i, j) = c[i * rs_c + j * cs_c];
              }
              call(kc, a_panel, a_row_step, a_col_step, b_panel, b_step, load_c, edge, edge_rs, edge_cs);
              for (int64_t i = 0; i < rows; ++i)
                for (int64_t j = 0; j < cols; ++j) c[i * rs_c + j * cs_c] = at(i, j);
            }
          }
        }
      }
    }
  }

  // One call of the micro-kernel on a full tile; for BLIS's, with the auxiliary information its
  // kernels read (panel strides, the panels to prefetch next).
  class TileCall {
   public:
    explicit TileCall(const BlockedProduct& product) : product_(product) {
#ifdef TG_HAVE_BLIS
      bli_auxinfo_set_schema_a(BLIS_PACKED_ROW_PANELS, &aux_);
      bli_auxinfo_set_schema_b(BLIS_PACKED_COL_PANELS, &aux_);
      bli_auxinfo_set_is_a(1, &aux_);
      bli_auxinfo_set_is_b(1, &aux_);
#endif
    }
    void set_blocks([[maybe_unused]] int64_t kc) {
#ifdef TG_HAVE_BLIS
      bli_auxinfo_set_ps_a(kc * product_.pack_mr, &aux_);
      bli_auxinfo_set_ps_b(kc * product_.pack_nr, &aux_);
#endif
    }
    void set_next([[maybe_unused]] const Panel* a, [[maybe_unused]] const Panel* b) {
#ifdef TG_HAVE_BLIS
      bli_auxinfo_set_next_a(const_cast<Panel*>(a), &aux_);
      bli_auxinfo_set_next_b(const_cast<Panel*>(b), &aux_);
#endif
    }
    // C (+)= A panel · B panel over depth kc, C at `c` with strides rs, cs (cs = 1 for ours); the A
    // panel's element (r, p) at r·a_row_step + p·a_col_step, the B panel's rows b_step apart
    // (BLIS's kernel: both always packed).
    void operator()(int64_t kc, const Panel* a_panel, int64_t a_row_step, int64_t a_col_step, const Panel* b_panel,
                    int64_t b_step, bool load_c, T* c, int64_t rs, [[maybe_unused]] int64_t cs) {
      if constexpr (kBf16) {
        product_.bf16->tile(a_panel, b_panel, depth_of(kc), c, rs, load_c);
        return;
      } else {
#ifdef TG_HAVE_BLIS
      if (product_.blis_kernel) {
        T one = T(1), zero = T(0);
        product_.blis_kernel(product_.MR, product_.NR, kc, &one, const_cast<T*>(a_panel), const_cast<T*>(b_panel),
                             load_c ? &one : &zero, c, rs, cs, &aux_, product_.context);
        return;
      }
#endif
      product_.ours->tile(1, &a_panel, a_row_step, a_col_step, &b_panel, b_step, kc, c, rs, load_c);
      }
    }

   private:
    const BlockedProduct& product_;
#ifdef TG_HAVE_BLIS
    auxinfo_t aux_{};
#endif
  };
};

// Buffers for an operand packed ahead, shared by the threads of one product: taken from this pool
// for the product and given back after, so each keeps its pages (no page faults per product) and
// a product started while another waits for its threads (oneTBB may run one inside the other's
// wait) gets a buffer of its own.
class SharedPackPool {
 public:
  std::unique_ptr<PackBuffer> take() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) return std::make_unique<PackBuffer>();
    std::unique_ptr<PackBuffer> buffer = std::move(free_.back());
    free_.pop_back();
    return buffer;
  }
  void give_back(std::unique_ptr<PackBuffer> buffer) {
    // A buffer larger than kKeepBytes goes back to the allocator: the pool must not hold a giant
    // product's operand for the rest of the process (its page faults cost little next to its product).
    if (buffer->bytes > kKeepBytes) return;
    std::lock_guard lock(mutex_);
    // Two are kept (the largest products' operands; more only when products nest).
    if (free_.size() < 2) free_.push_back(std::move(buffer));
  }

 private:
  static constexpr size_t kKeepBytes = size_t{64} << 20;  // B' of a 4096 × 4096 float operand
  std::mutex mutex_;
  std::vector<std::unique_ptr<PackBuffer>> free_;
};

SharedPackPool& shared_pack_pool() {
  static SharedPackPool pool;
  return pool;
}

// Splits `panels` panels into `pieces` runs as equal as whole panels allow: piece p is
// [p·panels/pieces, (p+1)·panels/pieces).
int64_t piece_start(int64_t piece, int64_t panels, int64_t pieces) { return piece * panels / pieces; }

// The product on the threads of the current arena (parallel_blocked_gemm's contract).
template <typename Product>
void run_in_parallel(const Product& product) {
  const int64_t threads = tbb::this_task_arena::max_concurrency();
  const int64_t m_panels = ceil_div(product.m, product.MR), n_panels = ceil_div(product.n, product.NR);
  // Split the rows of A' (BLIS's ic loop, as BLIS and OpenBLAS do): each thread packs its own A'
  // blocks into its L2 and all of them stream the one B' through the shared L3, packed ahead once.
  // Splitting the columns instead would re-read A' from L3 for every piece; only when A' has too
  // few rows for the threads (a product with a short m) are the columns split, with A' packed
  // ahead and each piece packing its own B'.
  // A B' read in place (direct_b) is never packed ahead: then the columns are split.
  const bool split_rows = !product.direct_b && (m_panels >= 4 * threads || product.m >= product.n);
  const int64_t split_panels = split_rows ? m_panels : n_panels;
  if (threads <= 1 || split_panels < 2) {
    product.run(0, product.m, 0, product.n, nullptr, nullptr);
    return;
  }
  // Pieces: about one MC (or NC) block each, a multiple of the thread count so that equal pieces
  // keep the threads equally busy, and at least two per thread, so that a thread slowed by another
  // process hands the rest to the others.
  const int64_t block_panels = split_rows ? product.MC / product.MR : product.NC / product.NR;
  const int64_t per_thread = std::max<int64_t>(2, ceil_div(ceil_div(split_panels, block_panels), threads));
  const int64_t pieces = std::min(split_panels, per_thread * threads);

  // The shared operand, packed ahead by all threads (by runs of panels), then the pieces; an A'
  // read in place is not packed.
  if (!split_rows && product.direct_a) {
    parallel_for(pieces, 1, [&](int64_t begin, int64_t end) {
      for (int64_t piece = begin; piece < end; ++piece) {
        const int64_t first = piece_start(piece, split_panels, pieces);
        const int64_t last = piece_start(piece + 1, split_panels, pieces);
        product.run(0, product.m, first * product.NR, std::min(product.n, last * product.NR), nullptr, nullptr);
      }
    });
    return;
  }
  using Panel = std::remove_const_t<std::remove_pointer_t<decltype(Product::Packed::data)>>;
  std::unique_ptr<PackBuffer> buffer = shared_pack_pool().take();
  const int64_t ahead_panels = split_rows ? n_panels : m_panels;
  const int64_t ahead_rows = split_rows ? product.pack_nr : product.pack_mr;
  const typename Product::Packed ahead{buffer->get<Panel>(ahead_panels * Product::depth_of(product.K) * ahead_rows),
                                       ahead_panels, ahead_rows};
  const int64_t ahead_pieces = std::min(ahead_panels, 4 * threads);
  parallel_for(ahead_pieces, 1, [&](int64_t begin, int64_t end) {
    for (int64_t piece = begin; piece < end; ++piece) {
      const int64_t first = piece_start(piece, ahead_panels, ahead_pieces);
      const int64_t last = piece_start(piece + 1, ahead_panels, ahead_pieces);
      if (split_rows) product.pack_ahead(product.b_columns, true, product.n, product.NR, ahead, first, last);
      else product.pack_ahead(product.a_rows, false, product.m, product.MR, ahead, first, last);
    }
  });
  parallel_for(pieces, 1, [&](int64_t begin, int64_t end) {
    for (int64_t piece = begin; piece < end; ++piece) {
      const int64_t first = piece_start(piece, split_panels, pieces);
      const int64_t last = piece_start(piece + 1, split_panels, pieces);
      if (split_rows)
        product.run(first * product.MR, std::min(product.m, last * product.MR), 0, product.n, nullptr, &ahead);
      else
        product.run(0, product.m, first * product.NR, std::min(product.n, last * product.NR), &ahead, nullptr);
    }
  });
  shared_pack_pool().give_back(std::move(buffer));
}

// Runs `body` on the BlockedProduct of this kernel: on bf16 panels for the AVX512-BF16 kernel.
template <typename T, typename Body>
void with_product(const GemmKernel& kernel, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A,
                  int64_t lda, const T* B, int64_t ldb, T* C, int64_t ldc, bool accumulate, Body&& body) {
  if constexpr (std::is_same_v<T, float>)
    if (kernel.bf16) {
      body(BlockedProduct<float, Bf16Pair>(kernel, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate));
      return;
    }
  body(BlockedProduct<T>(kernel, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate));
}

}  // namespace

template <typename T>
void blocked_gemm(const GemmKernel& kernel, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A,
                  int64_t lda, const T* B, int64_t ldb, T* C, int64_t ldc, bool accumulate) {
  with_product(kernel, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate,
               [](const auto& product) { product.run(0, product.m, 0, product.n, nullptr, nullptr); });
}

template <typename T>
void parallel_blocked_gemm(const GemmKernel& kernel, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A,
                           int64_t lda, const T* B, int64_t ldb, T* C, int64_t ldc, bool accumulate) {
  with_product(kernel, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate,
               [](const auto& product) { run_in_parallel(product); });
}

template void blocked_gemm<float>(const GemmKernel&, bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*,
                                  int64_t, float*, int64_t, bool);
template void blocked_gemm<double>(const GemmKernel&, bool, bool, int64_t, int64_t, int64_t, const double*, int64_t,
                                   const double*, int64_t, double*, int64_t, bool);
template void parallel_blocked_gemm<float>(const GemmKernel&, bool, bool, int64_t, int64_t, int64_t, const float*, int64_t,
                                           const float*, int64_t, float*, int64_t, bool);
template void parallel_blocked_gemm<double>(const GemmKernel&, bool, bool, int64_t, int64_t, int64_t, const double*, int64_t,
                                            const double*, int64_t, double*, int64_t, bool);

}  // namespace tg::detail
