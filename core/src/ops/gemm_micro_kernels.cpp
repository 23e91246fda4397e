// The GEMM micro-kernel, compiled once per vector level by tg_add_isa_kernels (TG_ISA = v2, v3 or
// avx512) into tg::detail::<level>.
//
// The tile of C lives in registers for the whole depth: kRows rows × kVectors vectors of the
// level's widest register. Each step of the depth loads kVectors vectors of the B panel, broadcasts
// kRows elements of the A panel and issues kRows·kVectors multiply-adds, all independent: a fused
// multiply-add has a latency of 4 cycles and two issue each cycle, so at least 8 chains must be in
// flight, and the tile, the B vectors and a broadcast must fit in the register file:
//   AVX-512 (32 registers): 8 rows × 2 vectors = 16 accumulators + 2 + 1. 12 rows would fit as
//   well, but 8 divides the row counts of real products (batch × tokens, channels) where 12 leaves
//   a third of a tile idle at 32 or 64 rows, and it is the packing's transposition tile.
//   AVX2 and SSE (16 registers): 6 rows × 2 vectors = 12 accumulators + 2 + 1.
// With 2 vectors of B per row, the loads per multiply-add are (2 + rows) / (2 · rows): 0.63 at
// AVX-512, below the 1.5 loads a cycle every target CPU sustains next to its two FMAs. Measured
// alone on panels in L1 (Zen 5), the AVX-512 tile runs at 100% of the FMA peak, the AVX2 one at
// 100% of the 256-bit peak.
#include "ops/gemm_micro_kernels.hpp"

#include <cstring>

#include "simd_lanes.hpp"

// The kernel passes vectors between inlined helpers (see simd_lanes.hpp on -Wpsabi).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tg::detail::TG_ISA {

namespace {

#if defined(__AVX512F__)
constexpr int64_t kRows = 8;
#else
constexpr int64_t kRows = 6;
#endif
constexpr int64_t kVectors = 2;

template <typename T>
struct Register {
  typedef T type __attribute__((vector_size(kRegisterBytes)));
};

template <typename V>
[[gnu::always_inline]] inline V load(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The depth loop of one pair: sum += A panel · B panel. A's element (r, p) at a_rows[r][p·a_step]
// (a packed panel: rows one element apart, a_step = kRows; a matrix read in place: a pointer per
// row, a_step its column stride).
template <typename V, typename T>
[[gnu::always_inline]] inline void accumulate_pair(V (&sum)[kRows][kVectors], const T* const (&a_rows)[kRows],
                                                   int64_t a_step, const T* b_panel, int64_t b_step, int64_t depth) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(T);
#pragma GCC unroll 2
  for (int64_t p = 0; p < depth; ++p) {
    V b_row[kVectors];
#pragma GCC unroll 4
    for (int64_t v = 0; v < kVectors; ++v) b_row[v] = load<V>(b_panel + p * b_step + v * kLanes);
#pragma GCC unroll 16
    for (int64_t r = 0; r < kRows; ++r) {
      // a − (+0) is a, exactly, for every a: the scalar broadcast to every lane.
      const V a_rp = a_rows[r][p * a_step] - V{};
#pragma GCC unroll 4
      for (int64_t v = 0; v < kVectors; ++v) sum[r][v] = multiply_add(a_rp, b_row[v], sum[r][v]);
    }
  }
}

template <typename T>
void tile(int64_t count, const T* const* a, int64_t a_row_step, int64_t a_col_step, const T* const* b, int64_t b_step,
          int64_t depth, T* c, int64_t ldc, bool load_c) {
  using V = typename Register<T>::type;
  constexpr int64_t kLanes = sizeof(V) / sizeof(T), kColumns = kVectors * kLanes;
  V sum[kRows][kVectors];
#pragma GCC unroll 16
  for (int64_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int64_t v = 0; v < kVectors; ++v) sum[r][v] = load_c ? load<V>(c + r * ldc + v * kLanes) : V{};
  // The blocked loops' next tile is usually the next kRows rows of C: start fetching them now, so
  // that its loads of C find them in cache (prefetches never fault, past the matrix's end either).
#pragma GCC unroll 16
  for (int64_t r = kRows; r < 2 * kRows; ++r) {
    __builtin_prefetch(c + r * ldc, 1, 3);
    __builtin_prefetch(c + r * ldc + kColumns - 1, 1, 3);
  }
  const bool packed_a = a_row_step == 1 && a_col_step == kRows;
  for (int64_t i = 0; i < count; ++i) {
    const T* a_rows[kRows];
#pragma GCC unroll 16
    for (int64_t r = 0; r < kRows; ++r) a_rows[r] = a[i] + r * a_row_step;
    // The packed panel's steps as constants: its broadcasts then address one register plus offsets.
    if (packed_a) accumulate_pair(sum, a_rows, kRows, b[i], b_step, depth);
    else accumulate_pair(sum, a_rows, a_col_step, b[i], b_step, depth);
  }
#pragma GCC unroll 16
  for (int64_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int64_t v = 0; v < kVectors; ++v) store_vector(c + r * ldc + v * kLanes, sum[r][v]);
}

// Block sizes (gemm_micro_kernels.hpp): a B panel of kc × nr elements in ~24 KiB of L1 (every
// target CPU has 32 KiB or more), an A block of mc × kc in ~192 KiB of L2 (512 KiB or more).
template <typename T>
constexpr GemmMicroKernels<T> kernels_of() {
  constexpr int64_t nr = kVectors * static_cast<int64_t>(kRegisterBytes / sizeof(T));
  constexpr int64_t kc = (24 << 10) / (nr * static_cast<int64_t>(sizeof(T)));
  constexpr int64_t mc = (192 << 10) / (kc * static_cast<int64_t>(sizeof(T))) / kRows * kRows;
  return {.mr = kRows, .nr = nr, .kc = kc, .mc = mc, .nc = 4096 / nr * nr, .tile = tile<T>};
}

}  // namespace

const DtypeKernels<GemmMicroKernels> gemm_micro_kernels = {.f32 = kernels_of<float>(), .f64 = kernels_of<double>()};

}  // namespace tg::detail::TG_ISA

#pragma GCC diagnostic pop
