// The softmax family's and cross-entropy's float32 row passes, compiled once per vector level by
// tg_add_isa_kernels (TG_ISA = v2, v3 or avx512) into tg::detail::<level>. Each float is shifted
// and exponentiated in float lanes (simd_exp.hpp's exp_float, a register of floats at a time),
// with the shift's rounding error carried into the exp; the sum widens each e_k to double into 16
// interleaved double accumulators (term k into k mod 16, whatever the register width), folded as a
// fixed tree. So every level gives the same bits, and so does any thread count (a row is one
// task's, and a row's result does not depend on which rows share its call).
#include "ops/exp_row_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "deterministic_sum.hpp"
#include "ops/softmax_rows.hpp"
#include "simd_exp.hpp"
#include "simd_lanes.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"  // see simd_lanes.hpp

namespace tg::detail::TG_ISA {

namespace {

// A block of 16 floats (one 64-byte vector, the lanes of the sums and of the max at every level)
// is read as kParts vectors of the level's register width: GCC keeps those in registers, where it
// copies wider vectors through the stack.
using FloatPart = VectorLane<float, kRegisterBytes>;
using FloatVec = FloatPart::Vec;
constexpr int64_t kBlock = Simd<float>::kWidth;
constexpr int64_t kParts = kBlock / FloatPart::kWidth;

// f folded over the lanes of v as a fixed tree, lane j with lane j + Lanes/2 first, down to one
// lane (simd_lanes.hpp's reduce_add with f for +).
template <int64_t Lanes, typename V, typename F>
[[gnu::always_inline]] inline auto fold_lanes(V v, const F& f) {
  if constexpr (Lanes == 1) {
    return v[0];
  } else {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return fold_lanes<Lanes / 2>(f(__builtin_shufflevector(v, v, I...), __builtin_shufflevector(v, v, (I + Lanes / 2)...)), f);
    }(std::make_index_sequence<Lanes / 2>{});
  }
}

float max(const float* x, int64_t n) {
  // best = max(best, x) as std::max: a NaN x_k leaves best as it is. Lane j of the block keeps the
  // running max of the elements j, j + 16, ...; the 16 lanes are then folded as a fixed tree (lane
  // j with j + 8, then j + 4, j + 2, j + 1: a few dependent steps instead of 16), and the tail
  // taken in order, so which of +0 and −0 wins is the same at every level.
  auto keep_larger = [](auto best, auto v) { return best < v ? v : best; };
  constexpr float kLowest = -std::numeric_limits<float>::infinity();
  FloatVec best[kParts];
  for (FloatVec& part : best) part = FloatVec{} + kLowest;
  int64_t k = 0;
  for (; k + kBlock <= n; k += kBlock)
    for (int64_t s = 0; s < kParts; ++s) best[s] = keep_larger(best[s], FloatPart{k + s * FloatPart::kWidth}(x));
  for (int64_t half = kParts / 2; half >= 1; half /= 2)
    for (int64_t s = 0; s < half; ++s) best[s] = keep_larger(best[s], best[s + half]);
  FloatVec folded = best[0];
  float result = fold_lanes<FloatPart::kWidth>(folded, keep_larger);
  for (; k < n; ++k) result = keep_larger(result, x[k]);
  return result;
}

// The shift as two floats, high + low, with high + low = shift to 2^-48 relative.
struct FloatShift {
  float high, low;
  explicit FloatShift(double shift)
      : high(static_cast<float>(shift)), low(static_cast<float>(shift - static_cast<double>(high))) {}
};

// A lane of floats as doubles: one double for a float; one vector for a vector narrower than a
// register; for a register of floats (or wider), its two halves, each as wide in doubles.
using DoubleHalf = VectorLane<float, kRegisterBytes / 2>::Wide;  // half a register of floats, widened
template <typename F>
[[gnu::always_inline]] inline auto widen(F e) {
  if constexpr (std::is_same_v<F, float>) {
    return static_cast<double>(e);
  } else if constexpr (sizeof(F) < kRegisterBytes) {
    return widen_to_double(e);
  } else {
    constexpr size_t kHalf = sizeof(F) / sizeof(float) / 2;
    return [&]<size_t... I>(std::index_sequence<I...>) {
      struct {
        decltype(widen_to_double(__builtin_shufflevector(e, e, I...))) low, high;
      } halves{widen_to_double(__builtin_shufflevector(e, e, I...)),
               widen_to_double(__builtin_shufflevector(e, e, (I + kHalf)...))};
      return halves;
    }(std::make_index_sequence<kHalf>{});
  }
}

// e_k = exp(x_k − shift) in float for one lane (a vector of floats or one float), stored to out
// unless out is null. x_k − shift.high is rounded to float and its rounding error, less
// shift.low, goes to exp_float as the correction.
template <typename Lane>
[[gnu::always_inline]] inline auto exp_lane(const Lane& at, const float* x, FloatShift shift, float* out) {
  using F = std::remove_cvref_t<decltype(at(x))>;
  const ExactSum<F> difference = exact_sum(at(x), F{} - shift.high);
  const F e = exp_float(difference.value, difference.error - shift.low);
  if (out) at.store(out, e);
  return e;
}

// Σ_k t_k in double over the whole blocks of 16 in [0, n): term k into accumulator k mod 16, the
// accumulators added as a fixed tree (the caller adds the terms from
// whole_blocks(n) on, one by one). The 16 accumulators are 2 · kParts registers of doubles;
// terms(part) gives a register part's terms as widen gives them, two halves of doubles.
constexpr int64_t whole_blocks(int64_t n) { return n / kBlock * kBlock; }

template <typename Terms>
[[gnu::always_inline]] inline double sum_whole_blocks(int64_t n, const Terms& terms) {
  static_assert(kLanes == kBlock, "a block is one vector of 16 floats");
  DoubleHalf sums[2 * kParts] = {};
  const auto add_block = [&](int64_t k) {
    for (int64_t s = 0; s < kParts; ++s) {
      const auto t = terms(FloatPart{k + s * FloatPart::kWidth});
      sums[2 * s] += t.low;
      sums[2 * s + 1] += t.high;
    }
  };
  int64_t k = 0;
  // Two blocks per step: independent exps in flight hide the polynomial's latency better than the
  // out-of-order core does on its own; the adds keep their order.
  for (; k + 2 * kBlock <= n; k += 2 * kBlock) {
    add_block(k);
    add_block(k + kBlock);
  }
  if (k + kBlock <= n) add_block(k);
  // the 16 lanes as deterministic_sum.hpp's tree: lane j with j + 8, then j + 4, j + 2, j + 1
  return reduce_parts<double>(sums);
}

double sum_exp(const float* x, double shift, float* out, int64_t n) {
  const FloatShift float_shift(shift);
  const double blocks =
      sum_whole_blocks(n, [&](FloatPart part) { return widen(exp_lane(part, x, float_shift, out)); });
  // The tail's exps in the vectors that fit, added one by one.
  return fold_tail_lanes<float>(whole_blocks(n), n, blocks, [&](double sum, auto at) {
    const auto e = exp_lane(at, x, float_shift, out);
    if constexpr (std::is_same_v<std::remove_const_t<decltype(e)>, float>) {
      sum += e;
    } else {
      for (int64_t j = 0; j < decltype(at)::kWidth; ++j) sum += e[j];
    }
    return sum;
  });
}

// softmax_rows.hpp's line sums for a contiguous row of floats, in the level's vectors: the same
// terms as StridedLine's, exact in double (a float, or the product of two), in sum_whole_blocks'
// order (the tail one by one).
struct FloatRow {
  int64_t n;
  static constexpr std::integral_constant<int64_t, 1> stride{};
  double sum(const float* v) const {
    double total = sum_whole_blocks(n, [&](FloatPart part) { return widen(part(v)); });
    for (int64_t k = whole_blocks(n); k < n; ++k) total += static_cast<double>(v[k]);
    return total;
  }
  double dot(const float* a, const float* b) const {
    double total = sum_whole_blocks(n, [&](FloatPart part) {
      const auto wide_a = widen(part(a)), wide_b = widen(part(b));
      return decltype(wide_a){wide_a.low * wide_b.low, wide_a.high * wide_b.high};
    });
    for (int64_t k = whole_blocks(n); k < n; ++k) total += static_cast<double>(a[k]) * static_cast<double>(b[k]);
    return total;
  }
  void exp_into(const float* v, float* r) const { sum_exp(v, 0.0, r, n); }  // y ≤ 0: no shift
};

// scale · e in double, rounded once to float, for a lane of floats (a register in halves: widen).
template <typename F>
[[gnu::always_inline]] inline F scaled_in_double(F e, double scale) {
  if constexpr (std::is_same_v<F, float>) {
    return static_cast<float>(static_cast<double>(e) * scale);
  } else if constexpr (sizeof(F) < kRegisterBytes) {
    return __builtin_convertvector(widen(e) * scale, F);
  } else {
    using FloatHalf = typename VectorLane<float, sizeof(F) / 2>::Vec;
    const auto halves = widen(e);
    const FloatHalf low = __builtin_convertvector(halves.low * scale, FloatHalf);
    const FloatHalf high = __builtin_convertvector(halves.high * scale, FloatHalf);
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return F(__builtin_shufflevector(low, high, I...));
    }(std::make_index_sequence<sizeof(F) / sizeof(float)>{});
  }
}

void scaled_exp(const float* x, double shift, double scale, float* out, int64_t n) {
  const FloatShift float_shift(shift);
  for_each_lane<float>(n, [&](auto at) {
    at.store(out, scaled_in_double(exp_lane(at, x, float_shift, nullptr), scale));
  });
}

void scale(const float* e, double scale, float* out, int64_t n) {
  const float factor = static_cast<float>(scale);
  for_each_lane<float>(n, [&](auto at) { at.store(out, at(e) * factor); });
}

// The row kernels below take a range of rows per call: the loop over rows runs inside the level's
// code, and the core overlaps one row's reductions with the next row's loads. (Passes over a group
// of rows, each before the next, measured slower at AVX2 and AVX-512: the rows' data went through
// L1 twice.)
void softmax_forward(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * n;
    float* out = y + r * n;
    const float shift = max(in, n);
    const double sum = sum_exp(in, shift, log ? nullptr : out, n);
    if (log) {
      const float log_sum = static_cast<float>(std::log(sum));
      for_each_lane<float>(n, [&](auto at) { at.store(out, (at(in) - shift) - log_sum); });
    } else {
      const float inverse = static_cast<float>(1.0 / sum);
      for_each_lane<float>(n, [&](auto at) { at.store(out, at(out) * inverse); });
    }
  }
}

// For each row of x: [rows, n]: shift[r] = max_k x_rk, sum[r] = sum_exp of the row at that shift,
// and e: [rows, n] its e_rk unless null.
void max_sum_exp(const float* x, int64_t rows, int64_t n, float* e, double* shift, double* sum) {
  for (int64_t r = 0; r < rows; ++r) {
    shift[r] = max(x + r * n, n);
    sum[r] = sum_exp(x + r * n, shift[r], e ? e + r * n : nullptr, n);
  }
}

void softmax_backward(const float* dy, const float* y, float* dx, int64_t rows, int64_t n, bool log) {
  const FloatRow line{n};
  for (int64_t r = 0; r < rows; ++r) {
    if (log) softmax_backward_line<true>(dy + r * n, y + r * n, dx + r * n, line);
    else softmax_backward_line<false>(dy + r * n, y + r * n, dx + r * n, line);
  }
}

}  // namespace

const ExpRowKernels exp_row_kernels = {.max = max,
                                       .sum_exp = sum_exp,
                                       .scaled_exp = scaled_exp,
                                       .scale = scale,
                                       .max_sum_exp = max_sum_exp,
                                       .softmax_forward = softmax_forward,
                                       .softmax_backward = softmax_backward};

}  // namespace tg::detail::TG_ISA

#pragma GCC diagnostic pop
