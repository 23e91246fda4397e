// tg::set_float32_matmul_precision (core/src/ops/matmul_precision.cpp) and the bf16 products of
// "medium" (core/src/ops/gemm_bf16.cpp, gemm.cpp, gemm_blocked.cpp) against a scalar model of the
// arithmetic written here from its definition: factors rounded to bf16 (round to nearest even,
// denormals to zero), then one chain of fused multiply-adds per element with denormal results
// flushed. Tagged [matmul], so gemm_kernel_test runs it again under every kernel this CPU has.
#include <tbb/task_arena.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core_test_util.hpp"
#include "cpu/features.hpp"
#include "ops/gemm.hpp"
#include "support/bf16_chain_model.hpp"
#include "support/random_values.hpp"
#include "support/vector_isa_levels.hpp"

#ifdef TG_TEST_HAVE_BLIS
#define TG_HAVE_BLIS  // GemmKernel::blis exists only with BLIS: the same definition as the library's
#endif
#include "cpu/gemm_kernel.hpp"
#include "ops/gemm_bf16.hpp"
#include "ops/gemm_blocked.hpp"

using tg::testing::bf16_chain_model;
using tg::testing::bits_of;
using tg::testing::PrecisionScope;
using tg::testing::uniform_values;

namespace {

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Factors with a few special values among uniform ones: ties of the bf16 rounding, denormals
// (read as zero), values that round up to the next power of two.
std::vector<float> factors(int64_t n, std::mt19937& rng) {
  std::vector<float> values = uniform_values<float>(n, rng);
  const float specials[] = {std::bit_cast<float>(0x3F808000u), std::bit_cast<float>(0x3F818000u),
                            std::bit_cast<float>(0xBF7FFFFFu), 1e-39f, -3e-40f, std::bit_cast<float>(0x3E7F8001u)};
  for (int64_t i = 0; i < n; i += 37) values[i] = specials[(i / 37) % 6];
  return values;
}

}  // namespace

TEST_CASE("set_float32_matmul_precision: PyTorch's three names, \"highest\" by default", "[core][matmul]") {
  CHECK(tg::get_float32_matmul_precision() == "highest");
  for (const char* name : {"medium", "high", "highest"}) {
    tg::set_float32_matmul_precision(name);
    CHECK(tg::get_float32_matmul_precision() == name);
  }
  tg::set_float32_matmul_precision("medium");
  CHECK_THROWS_WITH(tg::set_float32_matmul_precision("low"),
                    Catch::Contains("set_float32_matmul_precision: unknown precision 'low'") &&
                        Catch::Contains("\"highest\", \"high\" or \"medium\""));
  CHECK(tg::get_float32_matmul_precision() == "medium");  // a refused name changes nothing
  tg::set_float32_matmul_precision("highest");
}

TEST_CASE("round_to_bf16: round to nearest even, NaN quiet, denormals to zero, as vcvtneps2bf16", "[core][matmul]") {
  using tg::detail::round_to_bf16;
  const std::pair<uint32_t, uint32_t> cases[] = {
      {0x3F800000u, 0x3F800000u},  // 1
      {0x3F808000u, 0x3F800000u},  // 1 + 2^-8, a tie: down to the even 1
      {0x3F818000u, 0x3F820000u},  // 1 + 3·2^-8, a tie: up to the even 1 + 2^-6
      {0x3F808001u, 0x3F810000u},  // just above the tie: up
      {0xBF807FFFu, 0xBF800000u},  // just below the tie, negative: down in magnitude
      {0x7F7FFFFFu, 0x7F800000u},  // float32's largest rounds to +inf
      {0xFF800000u, 0xFF800000u},  // −inf
      {0x00000001u, 0x00000000u},  // the smallest denormal: +0
      {0x807FFFFFu, 0x80000000u},  // the largest negative denormal: −0, not −FLT_MIN
      {0x00800000u, 0x00800000u},  // FLT_MIN stays
      {0x7FA00001u, 0x7FE00000u},  // a signalling NaN becomes quiet, its high payload kept
  };
  for (const auto& [in, out] : cases) {
    CAPTURE(in);
    CHECK(bits_of(round_to_bf16(std::bit_cast<float>(in))) == out);
  }
}

TEST_CASE("medium matmul precision: every route gives the bf16 chain's bits, at 1, 2 and 3 threads",
          "[core][matmul]") {
  // Small products (the small-product kernel on rounded copies), products in the blocked loops
  // (AVX512-BF16 panels, or float32 panels of rounded copies), an odd K (a padded pair), K over
  // several K blocks, edges off the micro-tile.
  const auto [M, N, K] = GENERATE(std::array<int64_t, 3>{1, 1, 1}, std::array<int64_t, 3>{13, 33, 7},
                                  std::array<int64_t, 3>{45, 29, 401}, std::array<int64_t, 3>{70, 50, 901},
                                  std::array<int64_t, 3>{300, 260, 257});
  const bool trans_a = GENERATE(false, true), trans_b = GENERATE(false, true), accumulate = GENERATE(false, true);
  CAPTURE(M, N, K, trans_a, trans_b, accumulate);
  std::mt19937 rng(5);
  const std::vector<float> A = factors(M * K, rng), B = factors(K * N, rng), C0 = uniform_values<float>(M * N, rng);
  const int64_t lda = trans_a ? M : K, ldb = trans_b ? K : N;
  const std::vector<float> expected = bf16_chain_model(trans_a, trans_b, M, N, K, A, lda, B, ldb, C0, N, accumulate);
  const PrecisionScope medium("medium");
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    std::vector<float> C = C0;
    tbb::task_arena(threads).execute(
        [&] { tg::detail::gemm(trans_a, trans_b, M, N, K, A.data(), B.data(), C.data(), accumulate); });
    CHECK(same_bits(C, expected));
  }
}

TEST_CASE("medium matmul precision: the AVX512-BF16 kernel and the float32 kernels on rounded factors agree bitwise",
          "[core][matmul][vector_isa]") {
  // At each level: the blocked loops with this level's bf16 kernel (AVX512-BF16 panels at avx512 on
  // a CPU that has it; float32 panels rounded as they are packed, with FTZ and DAZ, elsewhere), on
  // strided operands, against the model.
  const auto [M, N, K] = GENERATE(std::array<int64_t, 3>{97, 61, 3}, std::array<int64_t, 3>{20, 70, 385},
                                  std::array<int64_t, 3>{50, 600, 200});
  const bool trans_a = GENERATE(false, true), trans_b = GENERATE(false, true);
  CAPTURE(M, N, K, trans_a, trans_b);
  std::mt19937 rng(9);
  const int64_t lda = (trans_a ? M : K) + 3, ldb = (trans_b ? K : N) + 3, ldc = N + 5;
  const std::vector<float> A = factors((trans_a ? K : M) * lda, rng), B = factors((trans_b ? N : K) * ldb, rng);
  const std::vector<float> C0 = uniform_values<float>(M * ldc, rng);
  const std::vector<float> expected = bf16_chain_model(trans_a, trans_b, M, N, K, A, lda, B, ldb, C0, ldc, true);
  bool exercised_avx512_bf16 = false;
  for (const auto& [level, C] : tg::testing::at_every_supported_level([&] {
         const tg::detail::Bf16MicroKernel* bf16 = tg::detail::bf16_micro_kernel();
         exercised_avx512_bf16 |= bf16 != nullptr;
         const tg::detail::GemmKernel kernel{
             .name = "test", .reason = "", .packed = true, .flush_denormals = true, .bf16 = bf16};
         std::vector<float> out = C0;
         tg::detail::blocked_gemm(kernel, trans_a, trans_b, M, N, K, A.data(), lda, B.data(), ldb, out.data(), ldc,
                                  true);
         return out;
       })) {
    CAPTURE(level);
    CHECK(same_bits(C, expected));
  }
  if (!tg::detail::cpu_features().avx512bf16) WARN("SKIPPED: the AVX512-BF16 kernel (this CPU has no AVX512-BF16)");
  else CHECK(exercised_avx512_bf16);
}

TEST_CASE("medium matmul precision: within bf16's bound of the exact product, and not float32's result",
          "[core][matmul]") {
  // Each factor rounded to bf16 is within 2^-9 of itself, so a product of two within ~2^-8, and the
  // float32 sum adds K·2^-24: |C − exact| ≤ (2^-8 + K·2^-24)·Σ|a·b|. The float32 product is far
  // closer; "medium" must not be it.
  const int64_t M = 64, N = 96, K = 200;
  const tg::Tensor a = tg::randn({M, K}), b = tg::randn({K, N});
  const tg::Tensor highest = tg::matmul(a, b);
  tg::Tensor medium;
  {
    const PrecisionScope scope("medium");
    medium = tg::matmul(a, b);
  }
  const tg::Tensor exact = tg::matmul(a.to(tg::kFloat64), b.to(tg::kFloat64));
  const tg::Tensor magnitude = tg::matmul(a.abs().to(tg::kFloat64), b.abs().to(tg::kFloat64));
  const auto m = medium.to(tg::kFloat64).contiguous(), h = highest.to(tg::kFloat64).contiguous();
  const double *pm = m.data<double>(), *ph = h.data<double>(), *pe = exact.data<double>(), *pa = magnitude.data<double>();
  double largest_medium_error = 0.0, largest_highest_error = 0.0;
  for (int64_t i = 0; i < M * N; ++i) {
    const double bound = (std::ldexp(1.0, -8) + K * std::ldexp(1.0, -24)) * pa[i];
    REQUIRE(std::fabs(pm[i] - pe[i]) <= bound);
    largest_medium_error = std::max(largest_medium_error, std::fabs(pm[i] - pe[i]) / pa[i]);
    largest_highest_error = std::max(largest_highest_error, std::fabs(ph[i] - pe[i]) / pa[i]);
  }
  CHECK(largest_medium_error > 16 * largest_highest_error);
  // "high" is float32 on every CPU without AMX kernels: bitwise "highest".
  const PrecisionScope high("high");
  const tg::Tensor high_result = tg::matmul(a, b);
  CHECK(std::memcmp(high_result.data<float>(), highest.data<float>(), sizeof(float) * M * N) == 0);
}

TEST_CASE("cpu_info names the bf16 kernel: vdpbf16ps where the CPU has AVX512-BF16 at vector level avx512",
          "[core][matmul]") {
  const tg::CpuInfo info = tg::cpu_info();
  const bool hardware = tg::detail::cpu_features().avx512bf16 &&
                        tg::detail::vector_isa() == tg::detail::VectorIsa::avx512;
  CHECK(info.bf16_gemm_kernel == (hardware ? "tapegrad-avx512bf16" : "tapegrad-bf16-emulated"));
  CHECK(!info.bf16_gemm_reason.empty());
  CHECK_THAT(tg::to_string(info), Catch::Contains("; bf16 GEMM " + info.bf16_gemm_kernel + ": "));
  const bool listed = std::find(info.features.begin(), info.features.end(), "avx512bf16") != info.features.end();
  CHECK(listed == tg::detail::cpu_features().avx512bf16);
}
