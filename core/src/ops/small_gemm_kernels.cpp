// The GEMM of small products, compiled once per vector level by tg_add_isa_kernels (TG_ISA = v2,
// v3 or avx512) into tg::detail::<level>.
//
// Why our own: below the blocked loops' break-even (2^24 multiply-adds, 2^15 with Bᵀ, at v3 and
// avx512; BLIS's at v2; measured in bench/README.md) packing costs more than it saves, and Eigen is compiled with the library's flags, SSE2
// in the portable build, a quarter of AVX-512's width or less; Eigen cannot be compiled per level,
// because its templates would be merged by the linker across levels. This kernel keeps a block of
// rows of C in registers, two vectors of columns wide (then one, then the row's tail), and streams
// the matching columns of op(B) through it:
//   C[i, j..j+W) = Σ_k op(A)[i, k] · op(B)[k, j..j+W)     (one broadcast of op(A)[i, k] per row)
// op(B) = Bᵀ is first copied to [K, N] so that its rows are contiguous.
//
// Each step of the sum is a fused multiply-add where the level has FMA (v3, avx512): a separate
// multiply and add take two instructions on the same two ports, which halves the speed of a
// product. v2 has no FMA, so its sums round each product first; its results differ from v3's and
// avx512's in the last bits (docs/performance.md, "One build for every x86-64 CPU"). The sums are
// the large products' micro-kernel's (ops/gemm_micro_kernels.hpp), step for step: a product gets
// the same bits whichever of the two computes it.
#include "ops/small_gemm_kernels.hpp"

#include <type_traits>

#include "kernel_buffer.hpp"
#include "simd_lanes.hpp"

// The kernels' lambdas pass SIMD vectors (see simd_lanes.hpp on -Wpsabi).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tg::detail::TG_ISA {

namespace {

// The block of C in registers: kRowBlock rows of kBlockVectors vectors of the level's widest
// register (kRegisterBytes, simd_lanes.hpp; each C[i, j] is its own sum over k, so the vector
// width does not change the bits). The accumulators and a row of op(B) must fit in the level's
// registers, and fused multiply-adds (latency 4, two a cycle) need at least 8 independent sums in
// flight: 8 rows × 2 vectors = 16 of AVX-512's 32 registers; 4 rows × 2 = 8 of AVX2's (and
// SSE's) 16.
#if defined(__AVX512F__)
constexpr int64_t kRowBlock = 8;
#else
constexpr int64_t kRowBlock = 4;
#endif
constexpr int64_t kBlockVectors = 2;

// op(A)[i, k] of A stored [M, K] (or [K, M] when transposed) with row stride lda.
template <typename T>
struct OperandA {
  const T* data;
  int64_t row_step, col_step;  // strides of op(A)'s i and k
  T operator()(int64_t i, int64_t k) const { return data[i * row_step + k * col_step]; }
};

// The vector (or scalar) V with every lane s: a vector-scalar operation broadcasts the scalar, and
// s − (+0) is s exactly, for every s (−0 and NaN included), so the subtraction folds away.
template <typename V, typename T>
V splat(T s) {
  return s - V{};
}

// Rows [i0, i0 + Rows) of C: op(B): [K, N] with row stride ldb; C with row stride ldc.
template <int64_t Rows, bool kAccumulate, typename T>
void row_block(const OperandA<T>& a, int64_t i0, int64_t N, int64_t K, const T* B, int64_t ldb, T* C, int64_t ldc) {
  // Columns of `Lanes` consecutive lanes of one type, starting with `first`.
  const auto columns = [&]<int64_t Lanes>(auto first, std::integral_constant<int64_t, Lanes>) {
    using Lane = decltype(first);
    using Vec = decltype(first(B));
    Lane lanes[Lanes] = {first};
    if constexpr (Lanes > 1)
      for (int64_t c = 1; c < Lanes; ++c) lanes[c] = Lane{first.i + c * Lane::kWidth};
    // Each sum starts from C when accumulating: one chain, as the micro-kernel's (below).
    Vec sum[Rows][Lanes] = {};
    if constexpr (kAccumulate)
      for (int64_t r = 0; r < Rows; ++r)
        for (int64_t c = 0; c < Lanes; ++c) sum[r][c] = lanes[c](C + (i0 + r) * ldc);
    for (int64_t k = 0; k < K; ++k) {
      Vec b[Lanes];
      for (int64_t c = 0; c < Lanes; ++c) b[c] = lanes[c](B + k * ldb);
      for (int64_t r = 0; r < Rows; ++r) {
        const Vec a_rk = splat<Vec>(a(i0 + r, k));
        for (int64_t c = 0; c < Lanes; ++c) sum[r][c] = multiply_add(a_rk, b[c], sum[r][c]);
      }
    }
    for (int64_t r = 0; r < Rows; ++r)
      for (int64_t c = 0; c < Lanes; ++c) lanes[c].store(C + (i0 + r) * ldc, sum[r][c]);
  };
  using Lane = VectorLane<T, kRegisterBytes>;
  int64_t j = 0;
  for (; j + kBlockVectors * Lane::kWidth <= N; j += kBlockVectors * Lane::kWidth)
    columns(Lane{j}, std::integral_constant<int64_t, kBlockVectors>{});
  for (; j + Lane::kWidth <= N; j += Lane::kWidth) columns(Lane{j}, std::integral_constant<int64_t, 1>{});
  // Narrower vectors, then scalars (the tail is narrower than one register here).
  for_each_tail_lane<T>(j, N, [&](auto lane) { columns(lane, std::integral_constant<int64_t, 1>{}); });
}

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
          int64_t ldb, T* C, int64_t ldc, bool accumulate) {
  const OperandA<T> a{A, trans_a ? 1 : lda, trans_a ? lda : 1};
  KernelBuffer<T> b_transposed(trans_b ? K * N : 0);
  if (trans_b) {
    // B stored [N, K] -> op(B) = Bᵀ as [K, N]
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k) b_transposed[static_cast<size_t>(k * N + j)] = B[j * ldb + k];
    B = b_transposed.data();
    ldb = N;
  }
  // The two forms compiled apart: with `accumulate` tested at run time inside the row blocks, the
  // fused attention that calls this kernel ran 1.1–1.2× slower (Zen 5, bench/README.md).
  const auto rows = [&]<bool kAccumulate>(std::bool_constant<kAccumulate>) {
    int64_t i = 0;
    for (; i + kRowBlock <= M; i += kRowBlock) row_block<kRowBlock, kAccumulate>(a, i, N, K, B, ldb, C, ldc);
    for (; i < M; ++i) row_block<1, kAccumulate>(a, i, N, K, B, ldb, C, ldc);
  };
  if (accumulate) rows(std::true_type{});
  else rows(std::false_type{});
}

}  // namespace

const DtypeKernels<SmallGemmKernels> small_gemm_kernels = {.f32 = {.gemm = gemm<float>}, .f64 = {.gemm = gemm<double>}};

}  // namespace tg::detail::TG_ISA

#pragma GCC diagnostic pop
