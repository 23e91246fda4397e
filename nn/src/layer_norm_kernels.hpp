// The SIMD vocabulary of LayerNorm's row kernels (nn/src/layer_norm.cpp). Private to nn/.
//
// A kernel writes each per-element formula once, as a function of a *lane*: a position in the row
// that reads and writes one 64-byte vector of T (16 floats or 8 doubles: one AVX-512 register)
// or, for the tail of the row, a 32- or 16-byte vector or one scalar. for_each_lane runs the formula over a row;
// lane_sums adds up two per-element terms along a row. GCC/Clang vector extensions keep this
// portable: without AVX-512 the compiler splits a 64-byte vector into narrower instructions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

// Lanes pass vectors by value between inlined functions private to one file; in builds without
// AVX-512 (TG_NATIVE=OFF) GCC would warn that a 64-byte vector argument has another ABI there.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tg::nn::detail {

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
  void store(T* row, Vec v) const { std::memcpy(row + i, &v, sizeof v); }
  // A non-temporal store (straight to memory, no read of the line first) for a full vector at a
  // 64-byte aligned address; a plain store where AVX-512 is not available or for tail vectors.
  // After streaming, a kernel calls streaming_fence() before its results may be read.
  void stream(T* row, Vec v) const {
#if defined(__AVX512F__)
    if constexpr (Bytes == 64 && std::is_same_v<T, float>) {
      _mm512_stream_ps(row + i, reinterpret_cast<__m512>(v));
      return;
    } else if constexpr (Bytes == 64 && std::is_same_v<T, double>) {
      _mm512_stream_pd(row + i, reinterpret_cast<__m512d>(v));
      return;
    }
#endif
    store(row, v);
  }
  static T reduce(Vec v) { return reduce_add<T, kWidth>(v); }
};

// Orders a chunk's streaming stores before whatever follows (the end of the parallel loop, which
// publishes the results): non-temporal stores are not ordered by the usual x86 store ordering.
inline void streaming_fence() {
#if defined(__AVX512F__)
  _mm_sfence();
#endif
}

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
  void store(T* row, T v) const { row[i] = v; }
  void stream(T* row, T v) const { row[i] = v; }
  static T reduce(T v) { return v; }
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

// f(lane) for every element of [0, n): whole vectors first, then the tail.
template <typename T, typename F>
void for_each_lane(int64_t n, const F& f) {
  constexpr int64_t W = Simd<T>::kWidth;
  int64_t i = 0;
  for (; i + W <= n; i += W) f(VectorLane<T>{i});
  for_each_tail_lane<T>(i, n, f);
}

// {Σ a(i), Σ b(i)} over [0, n) in double, where terms(lane) returns the pair {a, b} for a lane.
//
// Accumulated in T vectors, kAccumulators independent ones per sum (to hide the add latency), for
// blocks of at most kBlockSteps × kAccumulators vectors; each block's vectors are then added
// pairwise into one T and that goes into a double. So in float32 no float sum spans more than
// kBlockSteps terms per lane plus a 6-level tree (relative error ≲ 20 ulp of Σ|term| per block),
// and the blocks, however long the row, add up in double. Each piece of the tail (< one vector)
// is reduced the same way and added in double. The order of every add is fixed by n alone.
inline constexpr int64_t kAccumulators = 4;
inline constexpr int64_t kBlockSteps = 16;
static_assert(kAccumulators == 4, "lane_sums adds its four accumulators by name");

// Two double sums side by side in one register: lane_sums returns {Σa, Σb} as this, not as a
// std::pair, which GCC returned through a stack slot (a 16-byte store, then two 8-byte loads
// that wait for it: the hottest instruction of the forward on rows of 64 floats, once per row).
typedef double SumPair __attribute__((vector_size(16)));

template <typename T, typename Terms>
SumPair lane_sums(int64_t n, const Terms& terms) {
  using Vec = typename VectorLane<T>::Vec;
  constexpr int64_t W = Simd<T>::kWidth;
  constexpr int64_t kStep = kAccumulators * W;
  SumPair sums = {0.0, 0.0};
  int64_t i = 0;
  while (i + W <= n) {
    Vec a[kAccumulators] = {}, b[kAccumulators] = {};
    const int64_t block_end = std::min(n, i + kBlockSteps * kStep);
    for (; i + kStep <= block_end; i += kStep)
      for (int64_t k = 0; k < kAccumulators; ++k) {
        const auto [term_a, term_b] = terms(VectorLane<T>{i + k * W});
        a[k] += term_a;
        b[k] += term_b;
      }
    for (; i + W <= block_end; i += W) {  // the last < kAccumulators vectors of the row
      const auto [term_a, term_b] = terms(VectorLane<T>{i});
      a[0] += term_a;
      b[0] += term_b;
    }
    sums += SumPair{static_cast<double>(VectorLane<T>::reduce((a[0] + a[1]) + (a[2] + a[3]))),
                    static_cast<double>(VectorLane<T>::reduce((b[0] + b[1]) + (b[2] + b[3])))};
  }
  return fold_tail_lanes<T>(i, n, sums, [&](SumPair acc, auto lane) {
    const auto [term_a, term_b] = terms(lane);
    return acc + SumPair{static_cast<double>(decltype(lane)::reduce(term_a)),
                         static_cast<double>(decltype(lane)::reduce(term_b))};
  });
}

}  // namespace tg::nn::detail

#pragma GCC diagnostic pop
