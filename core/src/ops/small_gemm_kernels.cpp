// The GEMM of small products, compiled once per vector level by tg_add_isa_kernels (TG_ISA = v2,
// v3 or avx512) into tg::detail::<level>.
//
// Why our own: below ~2^20 multiply-adds BLIS's packing costs more than the product (skx runs
// 64×64×32 at ~58 GFLOP/s), and Eigen is compiled with the library's flags, SSE2 in the portable
// build (~40 GFLOP/s); Eigen cannot be compiled per level, because its templates would be merged
// by the linker across levels. This kernel keeps a block of rows of C in registers, one vector of
// columns wide, and streams the matching columns of op(B) through it:
//   C[i, j..j+W) = Σ_k op(A)[i, k] · op(B)[k, j..j+W)     (one broadcast of op(A)[i, k] per row)
// op(B) = Bᵀ is first copied to [K, N] so that its rows are contiguous.
#include "ops/small_gemm_kernels.hpp"

#include <new>

#include "simd_lanes.hpp"

// The kernels' lambdas pass SIMD vectors (see simd_lanes.hpp on -Wpsabi).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tg::detail::TG_ISA {

namespace {

// Rows of C per block: their accumulators (one 64-byte vector each) and one row of op(B) must fit
// in the level's vector registers (32 with AVX-512, 16 below, where a 64-byte vector takes 2 or 4).
#if defined(__AVX512F__)
constexpr int64_t kRowBlock = 8;
#else
constexpr int64_t kRowBlock = 4;
#endif

// op(A)[i, k] of A stored [M, K] (or [K, M] when transposed) with row stride lda.
template <typename T>
struct OperandA {
  const T* data;
  int64_t row_step, col_step;  // strides of op(A)'s i and k
  T operator()(int64_t i, int64_t k) const { return data[i * row_step + k * col_step]; }
};

// Rows [i0, i0 + Rows) of C: op(B): [K, N] with row stride ldb; C with row stride ldc.
template <int64_t Rows, typename T>
void row_block(const OperandA<T>& a, int64_t i0, int64_t N, int64_t K, const T* B, int64_t ldb, T* C, int64_t ldc,
               bool accumulate) {
  for_each_lane<T>(N, [&](auto lane) {
    using Vec = decltype(lane(B));
    Vec sum[Rows] = {};
    for (int64_t k = 0; k < K; ++k) {
      const Vec b = lane(B + k * ldb);
      for (int64_t r = 0; r < Rows; ++r) sum[r] += a(i0 + r, k) * b;  // separate multiply and add: no FMA
    }
    for (int64_t r = 0; r < Rows; ++r) {
      T* c = C + (i0 + r) * ldc;
      lane.store(c, accumulate ? lane(c) + sum[r] : sum[r]);
    }
  });
}

// An uninitialised buffer of n elements. Not a std::vector: its member functions are templates
// outside this level's namespace, so their AVX copies from this unit would be weak symbols the
// linker may pick for the whole library (tests/core/check_isa_objects.cmake).
template <typename T>
struct Scratch {
  T* data;
  explicit Scratch(size_t n) : data(static_cast<T*>(::operator new(n * sizeof(T)))) {}
  ~Scratch() { ::operator delete(data); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
          int64_t ldb, T* C, int64_t ldc, bool accumulate) {
  const OperandA<T> a{A, trans_a ? 1 : lda, trans_a ? lda : 1};
  Scratch<T> b_transposed(trans_b ? static_cast<size_t>(K * N) : 0);
  if (trans_b) {
    // B stored [N, K] -> op(B) = Bᵀ as [K, N]
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k) b_transposed.data[k * N + j] = B[j * ldb + k];
    B = b_transposed.data;
    ldb = N;
  }
  int64_t i = 0;
  for (; i + kRowBlock <= M; i += kRowBlock) row_block<kRowBlock>(a, i, N, K, B, ldb, C, ldc, accumulate);
  for (; i < M; ++i) row_block<1>(a, i, N, K, B, ldb, C, ldc, accumulate);
}

}  // namespace

const DtypeKernels<SmallGemmKernels> small_gemm_kernels = {.f32 = {.gemm = gemm<float>}, .f64 = {.gemm = gemm<double>}};

}  // namespace tg::detail::TG_ISA

#pragma GCC diagnostic pop
