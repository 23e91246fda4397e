// A scalar model of "medium" matmul precision's arithmetic (core/src/ops/gemm_bf16.hpp), written from
// its definition, for the tests of every op that runs products: factors rounded to bf16 (round to
// nearest even, denormals to zero), then one chain of fused multiply-adds per element with denormal
// results flushed.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <tapegrad/matmul_precision.hpp>
#include <vector>

namespace tg::testing {

// Sets a matmul precision for one scope and restores "highest" after it.
struct PrecisionScope {
  explicit PrecisionScope(const char* precision) { tg::set_float32_matmul_precision(precision); }
  ~PrecisionScope() { tg::set_float32_matmul_precision("highest"); }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;
};

inline uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }

// A denormal becomes a zero of its sign (FTZ on a result, DAZ on an input).
inline float flush(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }

// The bf16 value nearest to x, ties to even, from the definition (not the library's bit trick):
// among the two bf16 neighbours of x (x with its low 16 bits cleared, and the next one up in
// magnitude), the nearer; on a tie the one whose last kept bit is 0.
inline float bf16_model(float x) {
  x = flush(x);
  if (std::isnan(x)) return x;
  const uint32_t down = bits_of(x) & 0xFFFF0000u;
  const uint32_t up = down + 0x10000u;
  const double below = std::fabs(static_cast<double>(std::bit_cast<float>(down)) - x);
  const double above = std::fabs(static_cast<double>(std::bit_cast<float>(up)) - x);
  if (below < above) return std::bit_cast<float>(down);
  if (above < below) return std::bit_cast<float>(up);
  return std::bit_cast<float>((down & 0x10000u) ? up : down);
}

// C[i, j] = chain over k of flush(fma(bf16(a), bf16(b), acc)), from flush(C) or 0.
inline std::vector<float> bf16_chain_model(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                                           const std::vector<float>& A, int64_t lda, const std::vector<float>& B,
                                           int64_t ldb, std::vector<float> C, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = accumulate ? flush(C[i * ldc + j]) : 0.0f;
      for (int64_t k = 0; k < K; ++k) {
        const float a = bf16_model(trans_a ? A[k * lda + i] : A[i * lda + k]);
        const float b = bf16_model(trans_b ? B[j * ldb + k] : B[k * ldb + j]);
        acc = flush(std::fma(a, b, acc));
      }
      C[i * ldc + j] = acc;
    }
  return C;
}

}  // namespace tg::testing
