// float32 products on bf16-rounded factors ("medium" matmul precision, tapegrad/matmul_precision.hpp):
// the AVX512-BF16 micro-kernel and its packing, and what the other CPUs need to compute the same
// bits with float32 instructions. Private to core.
//
// The arithmetic, on every CPU: each factor rounded to bf16 (round to nearest even; NaN stays NaN;
// a float32 denormal becomes a signed zero), then for each C[i, j] one chain over k = 0..K−1 of
//   acc = fma(a[i, k], b[k, j], acc)
// with denormal inputs read as zero and denormal results flushed to zero (FTZ and DAZ). This is
// what vdpbf16ps computes: it multiplies the two bf16 pairs of each 32-bit lane exactly and adds
// them to the accumulator one after the other, each add rounded, the high pair first, with FTZ and
// DAZ whatever MXCSR says (Intel's pseudo-code; checked bit for bit on AMD Zen 5 over 48 million
// random lanes in the normal, denormal and mixed ranges). Packing k's even element in the high half
// of each pair makes its order k = 0, 1, 2, …; the float32 micro-kernel and small-product kernel
// with MXCSR's FTZ and DAZ set (FlushDenormals) run the same chain, because the product of two
// bf16 values is exact in float32: the same bits on every CPU with FMA. The one exception is a CPU
// without FMA (vector level v2), which rounds each product before adding it: the same value
// unless a product's magnitude is below 2^−126 (float32's smallest normal number), where rounding
// flushes it and the fused chain does not.
#pragma once

#include <cstdint>

namespace tg::detail {

// Two bf16 values of consecutive k (k even in the high 16 bits, k + 1 in the low), as vdpbf16ps
// reads them: one 32-bit lane of a packed bf16 panel.
using Bf16Pair = uint32_t;

struct Bf16MicroKernel {
  // The register tile (mr rows × nr columns of C) and the blocked loops' block sizes, in elements
  // of k (kc even: every K block but the last starts on a pair).
  int64_t mr, nr, kc, mc, nc;
  // Packs rows [0, rows), columns [0, depth) of a strided float32 matrix (element (i, p) at
  // source[i·row_step + p·col_step]; row_step or col_step is 1) into panels of `panel_rows` rows of
  // bf16 pairs: panel q holds rows q·panel_rows.., the pair of columns (2j, 2j + 1) of row r at
  // packed[q·panel_step + j·pack_rows + r]. Rows beyond `rows` are zero; an odd depth's last pair
  // has `pad` in its low half: +0 for A's panels and −0 for B's, so that the padding product is −0
  // and adds nothing, to −0 either.
  void (*pack_panels)(const float* source, int64_t row_step, int64_t col_step, int64_t rows, int64_t depth,
                      int64_t panel_rows, int64_t pack_rows, int64_t panel_step, uint16_t pad, Bf16Pair* packed);
  // C[mr, nr] = (load_c ? C : 0) + A panel · B panel over `pairs` pairs of k (packed panels: A's
  // rows one pair apart, B's rows nr pairs apart), C with row stride ldc.
  void (*tile)(const Bf16Pair* a, const Bf16Pair* b, int64_t pairs, float* c, int64_t ldc, bool load_c);
};

// The AVX512-BF16 kernel when the CPU has AVX512-BF16 and the vector level in force is avx512
// (TG_CPU_ISA=v3 turns it off, as it turns off every AVX-512 kernel), else null.
const Bf16MicroKernel* bf16_micro_kernel();

// x rounded to a bf16 value, as vcvtneps2bf16: round to nearest even, a NaN quietened, a denormal
// flushed to a zero of its sign.
float round_to_bf16(float x);

// dst[i·ld_dst + j] = round_to_bf16(src[i·ld_src + j]) for i < rows, j < cols.
void round_matrix_to_bf16(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst, int64_t ld_dst);

// values[i] = round_to_bf16(values[i]) for i < n.
void round_to_bf16_in_place(float* values, int64_t n);

// MXCSR's flush-to-zero and denormals-are-zero on this thread while it lives, as vdpbf16ps
// computes: for the float32 kernels running a bf16 product.
class FlushDenormals {
 public:
  FlushDenormals();
  ~FlushDenormals();
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

 private:
  unsigned saved_;
};

}  // namespace tg::detail
