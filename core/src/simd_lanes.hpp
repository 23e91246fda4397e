// The SIMD vocabulary of the row kernels (LayerNorm, reductions). Private to the library.
//
// A kernel writes each per-element formula once, as a function of a *lane*: a position in the row
// that reads and writes one vector of T as wide as the level's registers (kRegisterBytes: 64, 32
// or 16 bytes; cpu/vector_isa.hpp) or, for the tail of the row, a narrower vector or one scalar.
// for_each_lane runs the formula over a row; GCC/Clang vector extensions keep it portable, and the
// arithmetic, lane for lane, is the same at every width. Sums along a row
// (deterministic_sum.hpp) keep the lanes of one 64-byte vector at every level, so that their
// order, and their bits, do not depend on the level.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "cpu/isa_namespace.hpp"

// Lanes pass vectors by value between inlined functions private to one file; compiled without
// AVX-512, GCC would warn that a 64-byte vector argument has another ABI there.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tg::detail {
inline namespace TG_ISA_HELPERS {

template <typename T>
struct Simd {
  static constexpr int64_t kWidth = 64 / sizeof(T);  // lanes of a full vector: 16 floats or 8 doubles
};

// The sum of a vector's lanes, as a fixed tree: halves added pairwise down to one lane.
template <typename T, int64_t Lanes, typename V>
T reduce_add(V v) {
  if constexpr (Lanes == 1) {
    return v[0];
  } else {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return reduce_add<T, Lanes / 2>(__builtin_shufflevector(v, v, I...) +
                                      __builtin_shufflevector(v, v, (I + Lanes / 2)...));
    }(std::make_index_sequence<Lanes / 2>{});
  }
}

// The level's widest vector register, in bytes.
#if defined(__AVX512F__)
inline constexpr size_t kRegisterBytes = 64;
#elif defined(__AVX__)
inline constexpr size_t kRegisterBytes = 32;
#else
inline constexpr size_t kRegisterBytes = 16;
#endif

// Stores the vector v at `to` (unaligned). A vector wider than the level's registers is stored a
// register at a time, its halves taken by shuffles: GCC copies a whole wider vector through the
// stack, 16 bytes at a time (at AVX2 that tripled LayerNorm's time).
template <typename T, typename V>
void store_vector(T* to, V v) {
  if constexpr (sizeof(V) <= kRegisterBytes) {
    std::memcpy(to, &v, sizeof v);
  } else {
    constexpr size_t kHalf = sizeof(V) / sizeof(T) / 2;
    [&]<size_t... I>(std::index_sequence<I...>) {
      store_vector(to, __builtin_shufflevector(v, v, I...));
      store_vector(to + kHalf, __builtin_shufflevector(v, v, (I + kHalf)...));
    }(std::make_index_sequence<kHalf>{});
  }
}

// The floats of v as doubles, exactly (a vector of n floats to one of n doubles). GCC 12 lowers
// __builtin_convertvector from float to double in 4-float pieces at AVX-512, 2-float ones at AVX2
// and one float at a time for SSE's upper half, with inserts to put them together (10 instructions
// for what one vcvtps2pd does); the level's conversion instruction is spelled out instead, on
// half a register of floats at a time.
template <typename V>
[[gnu::always_inline]] inline auto widen_to_double(V v) {
  constexpr size_t kFloats = sizeof(V) / sizeof(float);
  typedef double Wide __attribute__((vector_size(kFloats * sizeof(double))));
  if constexpr (kFloats == 2) {
    return Wide(_mm_cvtps_pd(__m128(__builtin_shufflevector(v, v, 0, 1, 0, 1))));
#if defined(__AVX__)
  } else if constexpr (kFloats == 4) {
    return Wide(_mm256_cvtps_pd(__m128(v)));
#endif
#if defined(__AVX512F__)
  } else if constexpr (kFloats == 8) {
    // All eight lanes kept; the zero-masking form, because the plain intrinsic's undefined
    // passthrough makes GCC 12 warn (-Wmaybe-uninitialized). Compiles to the plain vcvtps2pd.
    return Wide(_mm512_maskz_cvtps_pd(0xFF, __m256(v)));
#endif
  } else {
    static_assert(kFloats % 2 == 0 && std::is_same_v<std::remove_cvref_t<decltype(v[0])>, float>);
    constexpr size_t kHalf = kFloats / 2;
    return [&]<size_t... I>(std::index_sequence<I...>) {
      const auto low = widen_to_double(__builtin_shufflevector(v, v, I...));
      const auto high = widen_to_double(__builtin_shufflevector(v, v, (I + kHalf)...));
      return Wide(__builtin_shufflevector(low, high, I..., (I + kHalf)...));
    }(std::make_index_sequence<kHalf>{});
  }
}

// A non-temporal store of the vector v (a whole number of the level's registers) to an address
// aligned to a register, in the level's widest instructions (SSE2's are in every x86-64 CPU).
template <typename T, typename V>
void stream_vector(T* to, V v) {
  constexpr bool kFloat = std::is_same_v<T, float>;
  constexpr int64_t kStep = kRegisterBytes / sizeof(T);
  for (int64_t k = 0; k < static_cast<int64_t>(sizeof(V) / sizeof(T)); k += kStep) {
    const T* from = reinterpret_cast<const T*>(&v) + k;
#if defined(__AVX512F__)
    if constexpr (kFloat) _mm512_stream_ps(to + k, _mm512_loadu_ps(from));
    else _mm512_stream_pd(to + k, _mm512_loadu_pd(from));
#elif defined(__AVX__)
    if constexpr (kFloat) _mm256_stream_ps(to + k, _mm256_loadu_ps(from));
    else _mm256_stream_pd(to + k, _mm256_loadu_pd(from));
#else
    if constexpr (kFloat) _mm_stream_ps(to + k, _mm_loadu_ps(from));
    else _mm_stream_pd(to + k, _mm_loadu_pd(from));
#endif
  }
}

// Elements [i, i + kWidth) of every row array the formula touches; a narrower Bytes serves the
// tail of a row.
template <typename T, int64_t Bytes = 64>
struct VectorLane {
  typedef T Vec __attribute__((vector_size(Bytes)));
  static constexpr int64_t kWidth = Bytes / sizeof(T);
  int64_t i;
  Vec operator()(const T* row) const {  // unaligned load
    Vec v;
    std::memcpy(&v, row + i, sizeof v);
    return v;
  }
  // The same elements converted to double, one double lane per lane of T.
  typedef double Wide __attribute__((vector_size(kWidth * sizeof(double))));
  Wide wide(const T* row) const {
    if constexpr (std::is_same_v<T, float>) return widen_to_double((*this)(row));
    else return __builtin_convertvector((*this)(row), Wide);
  }
  void store(T* row, Vec v) const { store_vector(row + i, v); }
  // A non-temporal store (straight to memory, no read of the line first) for a full vector (of
  // the level's registers or 64 bytes) at an address aligned to its size; a plain store for tail
  // vectors. After streaming, a kernel calls streaming_fence() before its results may be read.
  void stream(T* row, Vec v) const {
    if constexpr (Bytes >= kRegisterBytes) stream_vector(row + i, v);
    else store(row, v);
  }
  static T reduce(Vec v) { return reduce_add<T, kWidth>(v); }
  static double reduce(Wide v) requires(!std::is_same_v<T, double>) { return reduce_add<double, kWidth>(v); }
};

// Orders a chunk's streaming stores before whatever follows (the end of the parallel loop, which
// publishes the results): non-temporal stores are not ordered by the usual x86 store ordering.
inline void streaming_fence() { _mm_sfence(); }

// Writes v to a lane of row: a streaming store when kStream, else a plain one.
template <bool kStream, typename Lane, typename T, typename V>
void put(const Lane& at, T* row, V v) {
  if constexpr (kStream) at.stream(row, v);
  else at.store(row, v);
}

// Element i, for the last elements of a row.
template <typename T>
struct ScalarLane {
  int64_t i;
  T operator()(const T* row) const { return row[i]; }
  double wide(const T* row) const { return static_cast<double>(row[i]); }
  void store(T* row, T v) const { row[i] = v; }
  void stream(T* row, T v) const { row[i] = v; }
  static T reduce(T v) { return v; }
  static double reduce(double v) requires(!std::is_same_v<T, double>) { return v; }
};

// An output of at least this many bytes is written with streaming stores: it does not fit in the
// caches anyway, and a plain store would first read every line it writes (a third more traffic
// for LayerNorm's forward, which reads x and writes y).
inline constexpr int64_t kStreamingMinBytes = int64_t{16} << 20;

// Whether an [M, N] output at `out` is written with streaming stores: large enough, and every row
// starts 64-byte aligned, so that rows are whole aligned vectors with no tail.
template <typename T>
bool use_streaming_stores(const T* out, int64_t M, int64_t N) {
  return M * N * static_cast<int64_t>(sizeof(T)) >= kStreamingMinBytes && N * sizeof(T) % 64 == 0 &&
         reinterpret_cast<uintptr_t>(out) % 64 == 0;
}

// f(std::bool_constant<b>{}): a kernel is compiled once with streaming stores and once without.
template <typename F>
void with_streaming(bool stream, const F& f) {
  if (stream) f(std::true_type{});
  else f(std::false_type{});
}

// The tail of a row, [i, n) with n − i < one 64-byte vector: one 32-byte vector, one 16-byte
// vector, then single elements, as far as each fits (rows of 4 or 8 floats need no scalar code).
// acc = f(acc, lane) for each in order; returns acc. (A fold, so that a sum along the tail is a
// value in registers rather than a captured variable in memory.)
template <typename T, typename Acc, typename F>
Acc fold_tail_lanes(int64_t i, int64_t n, Acc acc, const F& f) {
  constexpr int64_t W = Simd<T>::kWidth;
  if (i + W / 2 <= n) {
    acc = f(acc, VectorLane<T, 32>{i});
    i += W / 2;
  }
  if (i + W / 4 <= n) {
    acc = f(acc, VectorLane<T, 16>{i});
    i += W / 4;
  }
  for (; i < n; ++i) acc = f(acc, ScalarLane<T>{i});
  return acc;
}

template <typename T, typename F>
void for_each_tail_lane(int64_t i, int64_t n, const F& f) {
  fold_tail_lanes<T>(i, n, 0, [&](int none, auto lane) {
    f(lane);
    return none;
  });
}

// f(lane) for every element of [0, n): vectors of the level's register width first, then the
// tail. For a formula applied lane by lane the width does not change a bit, and GCC keeps vectors
// of one register in registers, where it copies wider ones through the stack (lane_sums keeps the
// 64-byte lane order of its sums with register-wide vectors too).
template <typename T, typename F>
void for_each_lane(int64_t n, const F& f) {
  using Lane = VectorLane<T, kRegisterBytes>;
  int64_t i = 0;
  for (; i + Lane::kWidth <= n; i += Lane::kWidth) f(Lane{i});
  for_each_tail_lane<T>(i, n, f);  // less than one register is left: its 32-byte step is skipped at AVX2
}

// sum + a·b lane by lane, for a scalar or a vector of at most one register: rounded once (a fused
// multiply-add) where the level has FMA, else the rounded product added (the per-level kernels are
// compiled with -ffp-contract=off, so a*b + c stays two roundings). The GEMM kernels' step.
template <typename V>
[[gnu::always_inline]] inline V multiply_add(V a, V b, V sum) {
#if defined(__FMA__)
  if constexpr (std::is_same_v<V, float>) {
    return __builtin_fmaf(a, b, sum);
  } else if constexpr (std::is_same_v<V, double>) {
    return __builtin_fma(a, b, sum);
  } else {
    constexpr bool kFloat = std::is_same_v<std::remove_cvref_t<decltype(a[0])>, float>;
    if constexpr (sizeof(V) == 16) {
      if constexpr (kFloat) return _mm_fmadd_ps(a, b, sum);
      else return _mm_fmadd_pd(a, b, sum);
    } else if constexpr (sizeof(V) == 32) {
      if constexpr (kFloat) return _mm256_fmadd_ps(a, b, sum);
      else return _mm256_fmadd_pd(a, b, sum);
    } else {
      static_assert(sizeof(V) == 64 && kRegisterBytes == 64);
      if constexpr (kFloat) return _mm512_fmadd_ps(a, b, sum);
      else return _mm512_fmadd_pd(a, b, sum);
    }
  }
#else
  return a * b + sum;
#endif
}

}  // namespace TG_ISA_HELPERS
}  // namespace tg::detail

#pragma GCC diagnostic pop
