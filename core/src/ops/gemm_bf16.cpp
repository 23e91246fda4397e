// The AVX512-BF16 micro-kernel and its packing (ops/gemm_bf16.hpp), compiled for AVX512-BF16 by
// function attributes inside the baseline library and called only when the CPU has it; and the
// rounding and MXCSR guard the float32 kernels use to compute the same bits elsewhere.
//
// The tile is the float32 AVX-512 kernel's (ops/gemm_micro_kernels.cpp): 8 rows × 2 vectors of 16
// float32 accumulators, for the same reasons (16 independent chains cover the multiply-add latency;
// 0.63 loads per multiply-add instruction). Each vdpbf16ps does two multiply-adds per lane, so the
// tile runs at twice the float32 rate from panels half the size.
#include "ops/gemm_bf16.hpp"

#include <immintrin.h>

#include <algorithm>
#include <bit>

#include "cpu/features.hpp"
#include "cpu/vector_isa.hpp"

// GCC 12's AVX-512 intrinsic headers start some vectors from _mm512_undefined_ps(), which it then
// reports as maybe uninitialised once inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define TG_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,fma")))

namespace tg::detail {

namespace {

constexpr int64_t kRows = 8;
constexpr int64_t kColumns = 32;

// The words of 16 lanes: lane i holds bf16(even[i]) high and bf16(odd[i]) low. One conversion
// of both vectors (odd in elements 0..15, even in 16..31), then one interleaving permutation.
TG_BF16_TARGET inline __m512i pair_words(__m512 even, __m512 odd) {
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(interleave, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(even, odd)));
}

// A panel whose rows are contiguous in the source (k strided): 16 rows of a pair of k at a time,
// two row loads, one conversion, one permutation, one store.
TG_BF16_TARGET void pack_rows_contiguous(const float* source, int64_t col_step, int64_t rows, int64_t depth,
                                         int64_t pack_rows, uint16_t pad, Bf16Pair* out) {
  const int64_t pairs = (depth + 1) / 2;
  const __m512 pad_value = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(uint32_t{pad} << 16)));
  for (int64_t j = 0; j < pairs; ++j) {
    const float* even = source + 2 * j * col_step;
    const bool has_odd = 2 * j + 1 < depth;
    for (int64_t r0 = 0; r0 < pack_rows; r0 += 16) {
      const int64_t present = std::clamp<int64_t>(rows - r0, 0, 16);
      const __mmask16 in = static_cast<__mmask16>((1u << present) - 1);
      const __mmask16 out_lanes = static_cast<__mmask16>((1u << std::min<int64_t>(16, pack_rows - r0)) - 1);
      // An odd depth's last pair takes the pad (a bf16 value, exact) in place of k + 1.
      const __m512 odd = has_odd ? _mm512_maskz_loadu_ps(in, even + col_step + r0) : _mm512_maskz_mov_ps(in, pad_value);
      _mm512_mask_storeu_epi32(out + j * pack_rows + r0, out_lanes, pair_words(_mm512_maskz_loadu_ps(in, even + r0), odd));
    }
  }
}

// rows[r] (16 vectors of 16 words) transposed in place: rows[c] then holds word c of every row. Two
// rounds of unpacks transpose the 4 × 4 blocks inside each 128-bit lane, two of lane shuffles move
// the blocks.
TG_BF16_TARGET inline void transpose_16x16(__m512i (&rows)[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(rows[i], rows[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(rows[i], rows[i + 1]);
  }
  // u[4g + c], 128-bit lane L: word 4L + c of rows 4g..4g+3.
  for (int g = 0; g < 16; g += 4) {
    u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i even_lanes_low = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88);   // lanes 0, 2 of rows 0..7
    const __m512i odd_lanes_low = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xDD);    // lanes 1, 3 of rows 0..7
    const __m512i even_lanes_high = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
    const __m512i odd_lanes_high = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xDD);
    rows[c] = _mm512_shuffle_i32x4(even_lanes_low, even_lanes_high, 0x88);       // word c
    rows[8 + c] = _mm512_shuffle_i32x4(even_lanes_low, even_lanes_high, 0xDD);   // word 8 + c
    rows[4 + c] = _mm512_shuffle_i32x4(odd_lanes_low, odd_lanes_high, 0x88);     // word 4 + c
    rows[12 + c] = _mm512_shuffle_i32x4(odd_lanes_low, odd_lanes_high, 0xDD);    // word 12 + c
  }
}

// A panel whose k is contiguous in the source (rows strided): 16 rows × 32 k at a time, each row
// converted to 16 pairs, the 16 × 16 words transposed, 16 stores of a pair for 16 rows.
TG_BF16_TARGET void pack_depth_contiguous(const float* source, int64_t row_step, int64_t rows, int64_t depth,
                                          int64_t pack_rows, uint16_t pad, Bf16Pair* out) {
  const __m512i high_halves = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)), pad_word = _mm512_set1_epi32(pad);
  for (int64_t r0 = 0; r0 < pack_rows; r0 += 16) {
    const int64_t present = std::clamp<int64_t>(rows - r0, 0, 16);
    const __mmask16 out_lanes = static_cast<__mmask16>((1u << std::min<int64_t>(16, pack_rows - r0)) - 1);
    for (int64_t k0 = 0; k0 < depth; k0 += 32) {
      const int64_t present_k = std::min<int64_t>(32, depth - k0);
      const int64_t pairs = (present_k + 1) / 2;
      const __mmask16 low_lanes = static_cast<__mmask16>((1u << std::min<int64_t>(16, present_k)) - 1);
      const __mmask16 high_lanes = static_cast<__mmask16>((1u << std::max<int64_t>(0, present_k - 16)) - 1);
      // An odd depth's last pair: its low half is the pad.
      const __mmask16 padded = present_k % 2 ? static_cast<__mmask16>(1u << (pairs - 1)) : 0;
      __m512i words[16];
      for (int64_t r = 0; r < 16; ++r) {
        if (r >= present) {
          words[r] = _mm512_setzero_si512();
          continue;
        }
        const float* row = source + (r0 + r) * row_step + k0;
        const __m512 low = _mm512_maskz_loadu_ps(low_lanes, row);
        const __m512 high = _mm512_maskz_loadu_ps(high_lanes, row + 16);
        // bf16 elements k0..k0+31 in order, then each lane's halves swapped: k even high.
        words[r] = _mm512_rol_epi32(reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(high, low)), 16);
        words[r] = _mm512_mask_or_epi32(words[r], padded, _mm512_and_si512(words[r], high_halves), pad_word);
      }
      transpose_16x16(words);
      for (int64_t j = 0; j < pairs; ++j)
        _mm512_mask_storeu_epi32(out + (k0 / 2 + j) * pack_rows + r0, out_lanes, words[j]);
    }
  }
}

TG_BF16_TARGET void pack_panels(const float* source, int64_t row_step, int64_t col_step, int64_t rows, int64_t depth,
                                int64_t panel_rows, int64_t pack_rows, int64_t panel_step, uint16_t pad,
                                Bf16Pair* packed) {
  for (int64_t q = 0, row0 = 0; row0 < rows; ++q, row0 += panel_rows) {
    const float* panel = source + row0 * row_step;
    const int64_t panel_rows_present = std::min(panel_rows, rows - row0);
    if (row_step == 1)
      pack_rows_contiguous(panel, col_step, panel_rows_present, depth, pack_rows, pad, packed + q * panel_step);
    else
      pack_depth_contiguous(panel, row_step, panel_rows_present, depth, pack_rows, pad, packed + q * panel_step);
  }
}

TG_BF16_TARGET void tile(const Bf16Pair* a, const Bf16Pair* b, int64_t pairs, float* c, int64_t ldc, bool load_c) {
  __m512 sum[kRows][2];
#pragma GCC unroll 8
  for (int64_t r = 0; r < kRows; ++r) {
    sum[r][0] = load_c ? _mm512_loadu_ps(c + r * ldc) : _mm512_setzero_ps();
    sum[r][1] = load_c ? _mm512_loadu_ps(c + r * ldc + 16) : _mm512_setzero_ps();
  }
  // The next tile is usually the next rows of C (see the float32 kernel).
#pragma GCC unroll 8
  for (int64_t r = kRows; r < 2 * kRows; ++r) {
    __builtin_prefetch(c + r * ldc, 1, 3);
    __builtin_prefetch(c + r * ldc + kColumns - 1, 1, 3);
  }
#pragma GCC unroll 2
  for (int64_t j = 0; j < pairs; ++j) {
    const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + j * kColumns));
    const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + j * kColumns + 16));
#pragma GCC unroll 8
    for (int64_t r = 0; r < kRows; ++r) {
      const __m512bh a_rj = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(a[j * kRows + r])));
      sum[r][0] = _mm512_dpbf16_ps(sum[r][0], a_rj, b0);
      sum[r][1] = _mm512_dpbf16_ps(sum[r][1], a_rj, b1);
    }
  }
#pragma GCC unroll 8
  for (int64_t r = 0; r < kRows; ++r) {
    _mm512_storeu_ps(c + r * ldc, sum[r][0]);
    _mm512_storeu_ps(c + r * ldc + 16, sum[r][1]);
  }
}

// Block sizes as the float32 kernel's (gemm_micro_kernels.cpp), for 2-byte elements: a B panel of
// kc × 32 in 24 KiB of L1, an A block of mc × kc in 192 KiB of L2.
constexpr int64_t kDepthBlock = (24 << 10) / (kColumns * 2);
constexpr Bf16MicroKernel kAvx512Bf16{.mr = kRows,
                                      .nr = kColumns,
                                      .kc = kDepthBlock,
                                      .mc = (192 << 10) / (kDepthBlock * 2) / kRows * kRows,
                                      .nc = 4096,
                                      .pack_panels = pack_panels,
                                      .tile = tile};
static_assert(kDepthBlock % 2 == 0, "K blocks must start on a pair");

}  // namespace

const Bf16MicroKernel* bf16_micro_kernel() {
  if (!cpu_features().avx512bf16 || vector_isa() != VectorIsa::avx512) return nullptr;
  return &kAvx512Bf16;
}

// Branch-free, so that the loop below vectorises: every case computed, one kept.
float round_to_bf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t nearest = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;  // ties to the even bf16
  const uint32_t quiet_nan = (bits | 0x00400000u) & 0xFFFF0000u;
  const uint32_t signed_zero = bits & 0x80000000u;  // for a zero or a denormal
  const uint32_t finite_or_inf = (bits & 0x7F800000u) == 0 ? signed_zero : nearest;
  return std::bit_cast<float>((bits & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : finite_or_inf);
}

void round_matrix_to_bf16(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst, int64_t ld_dst) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* __restrict from = src + i * ld_src;
    float* __restrict to = dst + i * ld_dst;
    for (int64_t j = 0; j < cols; ++j) to[j] = round_to_bf16(from[j]);
  }
}

void round_to_bf16_in_place(float* values, int64_t n) {
  for (int64_t i = 0; i < n; ++i) values[i] = round_to_bf16(values[i]);
}

// MXCSR bit 15 is flush-to-zero, bit 6 denormals-are-zero.
FlushDenormals::FlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
FlushDenormals::~FlushDenormals() { _mm_setcsr(saved_); }

}  // namespace tg::detail
