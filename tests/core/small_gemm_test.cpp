// The small-product GEMM kernel (core/src/ops/small_gemm_kernels.cpp), called directly at every
// vector level: its contract is the plain triple loop's bits (each C[i, j] one chain over k in
// order, from C when accumulating, else from zero; each step one fused multiply-add at the levels
// with FMA, v3 and avx512, a rounded product and a rounded sum at v2), so the reference here is
// that loop, written each way.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core_test_util.hpp"
#include "ops/small_gemm_kernels.hpp"
#include "support/random_values.hpp"
#include "support/vector_isa_levels.hpp"

using tg::testing::random_values;

namespace {

// C[M, N] (+)= op(A)·op(B), the definition: Σ_k in order from C (accumulate) or 0, each step
// sum + a·b rounded once when `fused`, else the product rounded to T first.
template <typename T>
void triple_loop(bool fused, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, const T* B,
                 T* C, bool accumulate) {
  const int64_t lda = trans_a ? M : K, ldb = trans_b ? K : N;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      T sum = accumulate ? C[i * N + j] : T(0);
      for (int64_t k = 0; k < K; ++k) {
        const T a = trans_a ? A[k * lda + i] : A[i * lda + k];
        const T b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
        if (fused) {
          sum = std::fma(a, b, sum);
        } else {
          const T product = a * b;  // a separate statement: rounded before the add
          sum += product;
        }
      }
      C[i * N + j] = sum;
    }
}

}  // namespace

TEMPLATE_TEST_CASE("small gemm kernel: bitwise the triple loop at every vector level", "[core][gemm][vector_isa]",
                   float, double) {
  // Rows around the row blocks (4, 8) and columns around each vector and tail width.
  const auto [M, N, K] = GENERATE(std::array<int64_t, 3>{1, 1, 1}, std::array<int64_t, 3>{2, 6, 5},
                                  std::array<int64_t, 3>{9, 31, 7}, std::array<int64_t, 3>{64, 64, 32},
                                  std::array<int64_t, 3>{13, 50, 64}, std::array<int64_t, 3>{17, 40, 9},
                                  std::array<int64_t, 3>{5, 3, 0});
  const bool trans_a = GENERATE(false, true), trans_b = GENERATE(false, true), accumulate = GENERATE(false, true);
  CAPTURE(M, N, K, trans_a, trans_b, accumulate);
  std::mt19937 rng(static_cast<unsigned>(M * 1000 + N * 10 + K));
  const std::vector<TestType> A = random_values<TestType>(M * K, rng), B = random_values<TestType>(K * N, rng);
  const std::vector<TestType> C0 = random_values<TestType>(M * N, rng);
  // The reference each way: at v2 (no FMA) and at the levels with FMA.
  std::vector<TestType> separate = C0, fused = C0;
  triple_loop(false, trans_a, trans_b, M, N, K, A.data(), B.data(), separate.data(), accumulate);
  triple_loop(true, trans_a, trans_b, M, N, K, A.data(), B.data(), fused.data(), accumulate);
  if (M * N * K >= 4096) REQUIRE(separate != fused);  // the two references tell the levels apart
  const auto results = tg::testing::at_every_supported_level([&] {
    std::vector<TestType> C = C0;
    tg::detail::small_gemm_kernels_for_cpu().of<TestType>().gemm(trans_a, trans_b, M, N, K, A.data(),
                                                                 trans_a ? M : K, B.data(), trans_b ? K : N,
                                                                 C.data(), N, accumulate);
    return C;
  });
  for (const auto& [level, C] : results) {
    CAPTURE(level);
    const std::vector<TestType>& expected = level == "v2" ? separate : fused;
    REQUIRE(std::memcmp(C.data(), expected.data(), C.size() * sizeof(TestType)) == 0);
  }
}
