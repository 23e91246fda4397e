// The core's float32 FMA peak, measured: a loop of independent FMAs on registers only (no loads,
// no stores), in the widest vectors the CPU runs. kFmaChains accumulators cover the FMA latency
// (4 cycles) times the FMA units (2) with room to spare. Compiled for its instruction set with
// target attributes, so that it measures AVX-512 even in a portable build, and chosen at run time.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "harness.hpp"

namespace bench {

template <size_t Lanes>
float sum_lanes(const float (&lanes)[Lanes]) {
  float total = 0.0f;
  for (float lane : lanes) total += lane;
  return total;
}

// Runs `fmas` FMA instructions (rounded down to whole rounds of kFmaChains) and returns a value
// that depends on all of them, so that the compiler cannot drop the loop.
__attribute__((target("avx512f"))) inline float fma_loop_avx512(int64_t fmas, float seed) {
  __m512 acc[kFmaChains];
  for (auto& a : acc) a = _mm512_set1_ps(seed);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t round = 0; round < fmas / kFmaChains; ++round)
    for (auto& a : acc) a = _mm512_fmadd_ps(a, x, y);  // a = a·x + y: stays finite
  __m512 sum = acc[0];
  for (int64_t i = 1; i < kFmaChains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return sum_lanes(lanes);
}

__attribute__((target("avx2,fma"))) inline float fma_loop_avx2(int64_t fmas, float seed) {
  __m256 acc[kFmaChains];
  for (auto& a : acc) a = _mm256_set1_ps(seed);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t round = 0; round < fmas / kFmaChains; ++round)
    for (auto& a : acc) a = _mm256_fmadd_ps(a, x, y);
  __m256 sum = acc[0];
  for (int64_t i = 1; i < kFmaChains; ++i) sum = _mm256_add_ps(sum, acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  return sum_lanes(lanes);
}

// FLOPs of one FMA instruction in the widest vectors this CPU runs (2 per lane), 0 without FMA.
inline int64_t flops_per_fma() {
  if (__builtin_cpu_supports("avx512f")) return 2 * 16;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 2 * 8;
  return 0;
}

inline float fma_loop(int64_t fmas, float seed) {
  if (__builtin_cpu_supports("avx512f")) return fma_loop_avx512(fmas, seed);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return fma_loop_avx2(fmas, seed);
  return seed;
}

}  // namespace bench
