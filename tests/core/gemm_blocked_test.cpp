// The large-product GEMM (core/src/ops/gemm_blocked.cpp: our blocked loops and packing around
// tapegrad's micro-kernel or BLIS's) against a triple loop in higher precision, through
// tg::detail::gemm at sizes that take it, and directly with strided operands. Tagged [matmul], so
// gemm_kernel_test runs it again under every kernel this CPU has (TG_GEMM_KERNEL=tapegrad,
// blis-haswell, blis-skx, ...).
#include <tbb/task_arena.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "core_test_util.hpp"
#include "ops/gemm.hpp"
#include "ops/gemm_pack_kernels.hpp"
#include "support/random_values.hpp"
#include "support/vector_isa_levels.hpp"

#ifdef TG_TEST_HAVE_BLIS
// GemmKernel::blis exists only with BLIS: the same definition as the library's.
#define TG_HAVE_BLIS
#endif
#include "cpu/gemm_kernel.hpp"
#include "ops/gemm_blocked.hpp"
#include "ops/gemm_micro_kernels.hpp"
#include "ops/small_gemm_kernels.hpp"

using tg::testing::random_values;
using tg::testing::uniform_values;

namespace {

// op(X)[i, k] of X stored row-major with row stride ld ([rows, cols], or [cols, rows] when transposed).
template <typename T>
T element(const T* X, int64_t ld, bool trans, int64_t i, int64_t k) {
  return trans ? X[k * ld + i] : X[i * ld + k];
}

// Σ_k op(A)[i, k]·op(B)[k, j] and Σ_k |op(A)[i, k]·op(B)[k, j]| in long double, [M, N] row-major.
struct ExactProduct {
  std::vector<long double> sum, magnitude;
};

// The rows of op(A) and the columns of op(B) are copied out first, so that the inner loop reads both
// contiguously (strided, a [1021, 2503] B missed the cache on every read).
template <typename T>
ExactProduct triple_loop(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda,
                         const T* B, int64_t ldb) {
  std::vector<T> a_rows(static_cast<size_t>(M * K)), b_columns(static_cast<size_t>(N * K));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) a_rows[i * K + k] = element(A, lda, trans_a, i, k);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) b_columns[j * K + k] = element(B, ldb, trans_b, k, j);
  ExactProduct exact{std::vector<long double>(static_cast<size_t>(M * N)),
                     std::vector<long double>(static_cast<size_t>(M * N))};
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      const T *a = &a_rows[i * K], *b = &b_columns[j * K];
      long double sum = 0.0L, magnitude = 0.0L;
      for (int64_t k = 0; k < K; ++k) {
        const long double product = static_cast<long double>(a[k]) * static_cast<long double>(b[k]);
        sum += product;
        magnitude += std::fabs(product);
      }
      exact.sum[i * N + j] = sum;
      exact.magnitude[i * N + j] = magnitude;
    }
  return exact;
}

// Checks C (row stride ldc) against the exact product (+ C0), within the rounding bound of a float
// sum of K products in any order: (K + 2)·u·(Σ|a·b| + |c0|).
template <typename T>
void check_product(const ExactProduct& exact, int64_t M, int64_t N, int64_t K, const T* C0, const T* C, int64_t ldc,
                   bool accumulate) {
  const long double u = std::numeric_limits<T>::epsilon() / 2;
  int64_t failures = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      const long double c0 = accumulate ? C0[i * ldc + j] : 0.0L;
      const long double sum = exact.sum[i * N + j] + c0, magnitude = exact.magnitude[i * N + j] + std::fabs(c0);
      const long double error = std::fabs(static_cast<long double>(C[i * ldc + j]) - sum);
      if (!(error <= static_cast<long double>(K + 2) * u * magnitude) && failures++ < 5)
        FAIL_CHECK("C[" << i << ", " << j << "] = " << C[i * ldc + j] << ", expected " << static_cast<double>(sum));
    }
  REQUIRE(failures == 0);
}

}  // namespace

TEMPLATE_TEST_CASE("gemm packing: BLIS's micro-panel layout, zero-padded, at every vector level",
                   "[core][gemm][vector_isa]", float, double) {
  // Panel heights of skx (32, 16), haswell (6) and NR (12, 14), rows and depths off the 8 × 8 tiles.
  const int64_t panel_rows = GENERATE(32, 16, 12, 6), rows = GENERATE(1, 7, 45, 64), depth = GENERATE(1, 9, 37);
  const int layout = GENERATE(0, 1, 2);  // rows contiguous, columns contiguous, neither
  CAPTURE(panel_rows, rows, depth, layout);
  const int64_t pack_rows = panel_rows + (panel_rows == 6 ? 2 : 0);  // a padded leading dimension too
  const int64_t row_step = layout == 0 ? depth + 3 : layout == 1 ? 1 : 2 * depth + 1;
  const int64_t col_step = layout == 0 ? 1 : layout == 1 ? rows + 2 : 2;
  std::mt19937 rng(5);
  const std::vector<TestType> source = random_values<TestType>(rows * row_step + depth * col_step, rng);
  const int64_t panels = (rows + panel_rows - 1) / panel_rows, panel_step = depth * pack_rows + 4;
  std::vector<TestType> expected(static_cast<size_t>(panels * panel_step), TestType(-1));
  for (int64_t i = 0; i < panels * panel_rows; ++i)
    for (int64_t p = 0; p < depth; ++p)
      expected[i / panel_rows * panel_step + p * pack_rows + i % panel_rows] =
          i < rows ? source[i * row_step + p * col_step] : TestType(0);
  for (const auto& [level, packed] : tg::testing::at_every_supported_level([&] {
         std::vector<TestType> out(expected.size(), TestType(-1));
         tg::detail::gemm_pack_kernels_for_cpu().of<TestType>().pack_panels(
             source.data(), row_step, col_step, rows, depth, panel_rows, pack_rows, panel_step, out.data());
         return out;
       })) {
    CAPTURE(level);
    // Rows in [panel_rows, pack_rows) of each column and the gap after each panel stay unwritten.
    for (size_t k = 0; k < expected.size(); ++k)
      if ((static_cast<int64_t>(k) % panel_step) % pack_rows >= panel_rows ||
          static_cast<int64_t>(k) % panel_step >= depth * pack_rows)
        expected[k] = packed[k];
    REQUIRE(std::memcmp(packed.data(), expected.data(), expected.size() * sizeof(TestType)) == 0);
  }
}

TEMPLATE_TEST_CASE("gemm: large products, every transpose, odd sizes, accumulate, against the triple loop",
                   "[core][matmul][gemm]", float, double) {
  // At least 2^21 multiply-adds (the blocked path from any kernel's threshold, op(B) = Bᵀ too):
  // M, N and K of 1, primes and sizes just off the micro-tile (MR 32, 16, 6; NR 12, 14, 16) and off
  // KC (256, 384), single and split into two tiles: by rows (521 × 263 × 97) and, with M too short
  // for a row tile, by columns (37 × 521 × 443, just over the 2 × 2^22 multiply-adds that split).
  const auto [M, N, K] = GENERATE(std::array<int64_t, 3>{67, 131, 389}, std::array<int64_t, 3>{1, 2503, 1021},
                                  std::array<int64_t, 3>{2003, 1, 1049}, std::array<int64_t, 3>{33, 13, 5003},
                                  std::array<int64_t, 3>{2099, 1031, 1}, std::array<int64_t, 3>{37, 521, 443},
                                  std::array<int64_t, 3>{521, 263, 97});
  const bool trans_a = GENERATE(false, true), trans_b = GENERATE(false, true);
  CAPTURE(M, N, K, trans_a, trans_b);
  std::mt19937 rng(static_cast<unsigned>(M * 7 + N * 3 + K));
  const std::vector<TestType> A = uniform_values<TestType>(M * K, rng), B = uniform_values<TestType>(K * N, rng);
  const std::vector<TestType> C0 = uniform_values<TestType>(M * N, rng);
  const int64_t lda = trans_a ? M : K, ldb = trans_b ? K : N;
  const ExactProduct exact = triple_loop(trans_a, trans_b, M, N, K, A.data(), lda, B.data(), ldb);
  for (const bool accumulate : {false, true}) {
    CAPTURE(accumulate);
    std::vector<TestType> C = C0;
    tg::detail::gemm(trans_a, trans_b, M, N, K, A.data(), B.data(), C.data(), accumulate);
    check_product(exact, M, N, K, C0.data(), C.data(), N, accumulate);
  }
}

TEST_CASE("gemm: large products are bitwise the same at 1, 2 and 3 threads", "[core][matmul][gemm]") {
  // Split into two tiles by rows, and by columns (M too short for row tiles).
  // Named copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const std::array<int64_t, 3> size =
      GENERATE(std::array<int64_t, 3>{600, 300, 500}, std::array<int64_t, 3>{128, 784, 512});
  const int64_t M = size[0], N = size[1], K = size[2];
  const bool trans_a = GENERATE(false, true), trans_b = GENERATE(false, true);
  CAPTURE(M, N, K, trans_a, trans_b);
  std::mt19937 rng(7);
  const std::vector<float> A = uniform_values<float>(M * K, rng), B = uniform_values<float>(K * N, rng);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    std::vector<float> C(static_cast<size_t>(M * N));
    tbb::task_arena(threads).execute(
        [&] { tg::detail::gemm(trans_a, trans_b, M, N, K, A.data(), B.data(), C.data(), false); });
    results.push_back(std::move(C));
  }
  CHECK(std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)) == 0);
  CHECK(std::memcmp(results[0].data(), results[2].data(), results[0].size() * sizeof(float)) == 0);
}

namespace {

// A product on strided operands: each stored matrix has 5 more columns than it uses, and C is a
// block inside a wider matrix (what ops/gemm.cpp's column tiles pass).
template <typename T>
struct StridedProblem {
  int64_t M, N, lda, ldb, ldc;
  std::vector<T> A, B, C0;
  StridedProblem(int64_t M_, int64_t N_, int64_t K, bool trans_a, bool trans_b)
      : M(M_), N(N_), lda((trans_a ? M_ : K) + 5), ldb((trans_b ? K : N_) + 5), ldc(N_ + 7) {
    std::mt19937 rng(11);
    A = random_values<T>((trans_a ? K : M) * lda, rng);
    B = random_values<T>((trans_b ? N : K) * ldb, rng);
    C0 = random_values<T>(M * ldc, rng);
  }
  // The columns of C beyond N keep C0's bits.
  void require_padding_untouched(const std::vector<T>& C) const {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = N; j < ldc; ++j) REQUIRE(std::memcmp(&C[i * ldc + j], &C0[i * ldc + j], sizeof(T)) == 0);
  }
};

// tapegrad's micro-kernel in the blocked loops (a GemmKernel without a BLIS context), whatever
// kernel the process chose.
const tg::detail::GemmKernel& tapegrad_kernel() {
  static const tg::detail::GemmKernel kernel{.name = "tapegrad", .reason = "the test's", .packed = true};
  return kernel;
}

}  // namespace

TEMPLATE_TEST_CASE("gemm: tapegrad's blocked kernel on strided operands and an inner block of C is one chain over k",
                   "[core][matmul][gemm][vector_isa]", float, double) {
  // K of one block, of several with a short last one (kc = 192 or 384 at AVX-512, 256 or 512 at
  // AVX2), and sizes off the micro-tile (8 × 32 or 6 × 16 floats; 8 × 16 or 6 × 8 doubles). M of
  // at most 4 panels with op(B) = B reads B in place, its last, narrow panel packed (1 × 1,
  // 13 × 33, 20 × 70, 21 × 700); N of at most 16 panels reads A in place, its last, short panel
  // packed (all but 21 × 700 and 50 × 600, whose A is packed).
  const auto [M, N, K] = GENERATE(std::array<int64_t, 3>{45, 29, 401}, std::array<int64_t, 3>{1, 1, 1},
                                  std::array<int64_t, 3>{97, 61, 3}, std::array<int64_t, 3>{70, 50, 900},
                                  std::array<int64_t, 3>{13, 33, 1100}, std::array<int64_t, 3>{20, 70, 300},
                                  std::array<int64_t, 3>{21, 700, 300}, std::array<int64_t, 3>{50, 600, 200});
  const bool trans_a = GENERATE(false, true), trans_b = GENERATE(false, true), accumulate = GENERATE(false, true);
  CAPTURE(M, N, K, trans_a, trans_b, accumulate);
  const StridedProblem<TestType> problem(M, N, K, trans_a, trans_b);
  const int64_t lda = problem.lda, ldb = problem.ldb, ldc = problem.ldc;
  const std::vector<TestType>&A = problem.A, &B = problem.B, &C0 = problem.C0;
  const ExactProduct exact = triple_loop(trans_a, trans_b, M, N, K, A.data(), lda, B.data(), ldb);
  // Per level: the blocked loops' C, and the small-product kernel's, which sums each element in
  // the same one chain over k (from C when accumulating): the blocked loops split K into blocks and
  // C into tiles, and must still give its bits.
  for (const auto& [level, results] : tg::testing::at_every_supported_level([&] {
         std::pair<std::vector<TestType>, std::vector<TestType>> out{C0, C0};
         tg::detail::blocked_gemm(tapegrad_kernel(), trans_a, trans_b, M, N, K, A.data(), lda, B.data(), ldb,
                                  out.first.data(), ldc, accumulate);
         tg::detail::small_gemm_kernels_for_cpu().of<TestType>().gemm(trans_a, trans_b, M, N, K, A.data(), lda,
                                                                    B.data(), ldb, out.second.data(), ldc, accumulate);
         return out;
       })) {
    CAPTURE(level);
    const std::vector<TestType>& C = results.first;
    check_product(exact, M, N, K, C0.data(), C.data(), ldc, accumulate);
    CHECK(std::memcmp(C.data(), results.second.data(), C.size() * sizeof(TestType)) == 0);
    problem.require_padding_untouched(C);
  }
}

TEMPLATE_TEST_CASE("gemm: the micro-kernel's batch-reduce form is the chain over its pairs, in order",
                   "[core][matmul][gemm][vector_isa]", float, double) {
  for (const auto& [level, same] : tg::testing::at_every_supported_level([&] {
         const auto& kernel = tg::detail::gemm_micro_kernels_for_cpu().of<TestType>();
         const int64_t mr = kernel.mr, nr = kernel.nr, depth = 7, count = 3;
         std::mt19937 rng(17);
         // Three pairs of panels, and the same pairs laid end to end as one panel pair of depth 21:
         // C += A₀B₀ + A₁B₁ + A₂B₂ must be the single product over the concatenated depth, bit for bit.
         const std::vector<TestType> a = random_values<TestType>(count * depth * mr, rng);
         const std::vector<TestType> b = random_values<TestType>(count * depth * nr, rng);
         const std::vector<TestType> c0 = random_values<TestType>(mr * (nr + 3), rng);
         const TestType* a_panels[count] = {a.data(), a.data() + depth * mr, a.data() + 2 * depth * mr};
         const TestType* b_panels[count] = {b.data(), b.data() + depth * nr, b.data() + 2 * depth * nr};
         std::vector<TestType> reduced = c0, whole = c0;
         kernel.tile(count, a_panels, 1, mr, b_panels, nr, depth, reduced.data(), nr + 3, true);
         const TestType* a_whole = a.data();
         const TestType* b_whole = b.data();
         kernel.tile(1, &a_whole, 1, mr, &b_whole, nr, count * depth, whole.data(), nr + 3, true);
         // And against the chain written out: c = c0 + Σ a·b, step by step, with the level's rounding.
         bool matches = std::memcmp(reduced.data(), whole.data(), reduced.size() * sizeof(TestType)) == 0;
         for (int64_t r = 0; r < mr; ++r)
           for (int64_t j = 0; j < nr + 3; ++j) {
             if (j >= nr) {
               matches = matches && std::memcmp(&reduced[r * (nr + 3) + j], &c0[r * (nr + 3) + j], sizeof(TestType)) == 0;
               continue;
             }
             long double exact = c0[r * (nr + 3) + j], magnitude = std::fabs(exact);
             for (int64_t p = 0; p < count * depth; ++p) {
               const long double product = static_cast<long double>(a[p * mr + r]) * b[p * nr + j];
               exact += product;
               magnitude += std::fabs(product);
             }
             const long double u = std::numeric_limits<TestType>::epsilon() / 2;
             matches = matches && std::fabs(reduced[r * (nr + 3) + j] - exact) <= (count * depth + 2) * u * magnitude;
           }
         return matches;
       })) {
    CAPTURE(level);
    CHECK(same);
  }
}

TEMPLATE_TEST_CASE("gemm: the parallel blocked kernel is bitwise the serial one at 1, 2 and 3 threads",
                   "[core][matmul][gemm]", float, double) {
  const tg::detail::GemmKernel& chosen = tg::detail::gemm_kernel();
  const tg::detail::GemmKernel& kernel = chosen.packed ? chosen : tapegrad_kernel();
  CAPTURE(kernel.name);
  // Split by the rows of A' and, where A' is too short for the threads (37 rows: 2 panels of skx's 32
  // for N = 37, 7 of the AVX2 kernels' 6 for M = 37), by the columns of B'; K of one block, and of
  // several with a short last one.
  const auto [M, N, K] = GENERATE(std::array<int64_t, 3>{521, 263, 97}, std::array<int64_t, 3>{37, 2503, 401},
                                  std::array<int64_t, 3>{2503, 37, 401}, std::array<int64_t, 3>{300, 200, 900});
  const bool trans_a = GENERATE(false, true), trans_b = GENERATE(false, true), accumulate = GENERATE(false, true);
  CAPTURE(M, N, K, trans_a, trans_b, accumulate);
  const int64_t lda = trans_a ? M : K, ldb = trans_b ? K : N;
  std::mt19937 rng(13);
  const std::vector<TestType> A = random_values<TestType>(M * K, rng), B = random_values<TestType>(K * N, rng);
  const std::vector<TestType> C0 = random_values<TestType>(M * N, rng);
  std::vector<TestType> serial = C0;
  tg::detail::blocked_gemm(kernel, trans_a, trans_b, M, N, K, A.data(), lda, B.data(), ldb, serial.data(), N,
                           accumulate);
  for (const int threads : {1, 2, 3}) {
    CAPTURE(threads);
    std::vector<TestType> C = C0;
    tbb::task_arena(threads).execute([&] {
      tg::detail::parallel_blocked_gemm(kernel, trans_a, trans_b, M, N, K, A.data(), lda, B.data(), ldb, C.data(), N,
                                        accumulate);
    });
    REQUIRE(std::memcmp(C.data(), serial.data(), C.size() * sizeof(TestType)) == 0);
  }
}

#ifdef TG_TEST_HAVE_BLIS
TEMPLATE_TEST_CASE("gemm: the blocked loops on BLIS's micro-kernel, bitwise BLIS's gemm", "[core][matmul][gemm]", float,
                   double) {
  cntx_t* context = tg::detail::gemm_kernel().blis;
  if (context == nullptr) {
    WARN("skipped: the chosen kernel (" << tg::detail::gemm_kernel().name << ") is not BLIS's");
    return;
  }
  const tg::detail::GemmKernel& kernel = tg::detail::gemm_kernel();
  // K = 401 and 900: one K block, or two (BLIS merges a short last block into the one before).
  const auto [M, N, K] = GENERATE(std::array<int64_t, 3>{45, 29, 401}, std::array<int64_t, 3>{1, 1, 1},
                                  std::array<int64_t, 3>{97, 61, 3}, std::array<int64_t, 3>{70, 50, 900});
  const bool trans_a = GENERATE(false, true), trans_b = GENERATE(false, true), accumulate = GENERATE(false, true);
  CAPTURE(M, N, K, trans_a, trans_b, accumulate);
  const StridedProblem<TestType> problem(M, N, K, trans_a, trans_b);
  const int64_t lda = problem.lda, ldb = problem.ldb, ldc = problem.ldc;
  const std::vector<TestType>&A = problem.A, &B = problem.B, &C0 = problem.C0;
  std::vector<TestType> C = C0;
  tg::detail::blocked_gemm(kernel, trans_a, trans_b, M, N, K, A.data(), lda, B.data(), ldb, C.data(), ldc, accumulate);
  check_product(triple_loop(trans_a, trans_b, M, N, K, A.data(), lda, B.data(), ldb), M, N, K, C0.data(), C.data(),
                ldc, accumulate);
  // Bitwise what BLIS's own bli_?gemm_ex gives with the same context: the same micro-kernel, K split
  // into the same blocks (its packed path: the AVX2 configurations would send these sizes to their
  // unpacked "sup" kernels, other arithmetic).
  std::vector<TestType> by_blis = C0;
  rntm_t one_thread = BLIS_RNTM_INITIALIZER;
  bli_rntm_set_num_threads(1, &one_thread);
  bli_rntm_disable_l3_sup(&one_thread);
  TestType alpha = 1, beta = accumulate ? 1 : 0;
  const trans_t ta = trans_a ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, tb = trans_b ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE;
  auto* a = const_cast<TestType*>(A.data());
  auto* b = const_cast<TestType*>(B.data());
  if constexpr (std::is_same_v<TestType, float>)
    bli_sgemm_ex(ta, tb, M, N, K, &alpha, a, lda, 1, b, ldb, 1, &beta, by_blis.data(), ldc, 1, context, &one_thread);
  else
    bli_dgemm_ex(ta, tb, M, N, K, &alpha, a, lda, 1, b, ldb, 1, &beta, by_blis.data(), ldc, 1, context, &one_thread);
  CHECK(std::memcmp(C.data(), by_blis.data(), C.size() * sizeof(TestType)) == 0);
  problem.require_padding_untouched(C);
}
#endif
