// The softmax family's and cross-entropy's float32 row passes, compiled once per vector level by
// tg_add_isa_kernels (TG_ISA = v2, v3 or avx512) into tg::detail::<level>. Each float is widened to
// double, shifted and exponentiated in double lanes (simd_exp.hpp); the sum takes 16 interleaved
// double accumulators, exactly lane_sum's order. So every level gives the same bits, and so does
// any thread count (a row is one task's).
#include "ops/exp_rows.hpp"

#include <cstring>
#include <limits>

#include "deterministic_sum.hpp"
#include "ops/softmax_rows.hpp"
#include "simd_exp.hpp"
#include "simd_lanes.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"  // see simd_lanes.hpp

namespace tg::detail::TG_ISA {

namespace {

float max(const float* x, int64_t n) {
  // best = max(best, x) as std::max: a NaN x_k leaves best as it is
  auto keep_larger = [](auto best, auto v) { return best < v ? v : best; };
  using Vec = VectorLane<float>::Vec;
  constexpr float kLowest = -std::numeric_limits<float>::infinity();
  Vec best = Vec{} + kLowest;
  constexpr int64_t W = Simd<float>::kWidth;
  int64_t k = 0;
  for (; k + W <= n; k += W) {
    const Vec v = VectorLane<float>{k}(x);
    best = best < v ? v : best;
  }
  float result = kLowest;
  for (int64_t lane = 0; lane < W; ++lane) result = keep_larger(result, best[lane]);
  for (; k < n; ++k) result = keep_larger(result, x[k]);
  return result;
}

// e_k = exp(x_k − shift) in double for one lane (a vector of floats or one), stored to out
// (rounded to float, or as the doubles) unless out is null.
template <typename Lane, typename Out>
auto exp_lane(const Lane& at, const float* x, double shift, Out* out) {
  const auto e = in_register_halves(at.wide(x) - shift, [](auto v) { return exp_nonpositive(v); });
  if constexpr (std::is_same_v<Out, float>) {
    if (out) at.store(out, to_float<Lane>(e));
  } else {
    std::memcpy(out + at.i, &e, sizeof e);
  }
  return e;
}

double sum_exp(const float* x, double shift, float* out, int64_t n) {
  // lane_sum's order: term k into accumulator k mod 16 over the whole blocks of 16, the
  // accumulators added in order, then the remaining terms one by one. The 16 accumulators are two
  // vectors of 8 doubles (64 bytes each, as the level's registers hold them), fed by the two halves
  // of each block.
  static_assert(kLanes == 16, "a block is two halves of 8 floats");
  using Half = VectorLane<float, 32>;
  Half::Wide low{}, high{};
  int64_t k = 0;
  // Two blocks per step: four independent exps in flight hide the polynomial's latency better
  // than the out-of-order core does on its own (~1.5x here); the adds keep their order.
  for (; k + 32 <= n; k += 32) {
    const auto e0 = exp_lane(Half{k}, x, shift, out), e1 = exp_lane(Half{k + 8}, x, shift, out);
    const auto e2 = exp_lane(Half{k + 16}, x, shift, out), e3 = exp_lane(Half{k + 24}, x, shift, out);
    low += e0;
    high += e1;
    low += e2;
    high += e3;
  }
  for (; k + 16 <= n; k += 16) {
    low += exp_lane(Half{k}, x, shift, out);
    high += exp_lane(Half{k + 8}, x, shift, out);
  }
  double total = 0.0;
  for (int64_t j = 0; j < 8; ++j) total += low[j];
  for (int64_t j = 0; j < 8; ++j) total += high[j];
  return fold_tail_lanes<float>(k, n, total, [&](double sum, auto at) {
    const auto e = exp_lane(at, x, shift, out);
    if constexpr (std::is_same_v<std::remove_const_t<decltype(e)>, double>) {
      sum += e;
    } else {
      for (int64_t j = 0; j < decltype(at)::kWidth; ++j) sum += e[j];
    }
    return sum;
  });
}

void exp_wide(const float* x, double shift, double* out, int64_t n) {
  // in vectors of 8 floats, whose 8 doubles fill one 64-byte register (as in sum_exp)
  int64_t k = 0;
  for (; k + 32 <= n; k += 32)  // four independent exps per step, as in sum_exp
    for (int64_t j = 0; j < 32; j += 8) exp_lane(VectorLane<float, 32>{k + j}, x, shift, out);
  for (; k + 8 <= n; k += 8) exp_lane(VectorLane<float, 32>{k}, x, shift, out);
  for_each_tail_lane<float>(k, n, [&](auto at) { exp_lane(at, x, shift, out); });
}

void softmax_backward(const float* dy, const float* y, float* dx, int64_t n, bool log) {
  const auto one = std::integral_constant<int64_t, 1>{};
  const auto exp_into = [&](const float* in, float* out) { sum_exp(in, 0.0, out, n); };  // y ≤ 0
  if (log) softmax_backward_line<true>(dy, y, dx, n, one, exp_into);
  else softmax_backward_line<false>(dy, y, dx, n, one, exp_into);
}

}  // namespace

const ExpRowKernels exp_row_kernels = {.max = max, .sum_exp = sum_exp, .exp_wide = exp_wide, .softmax_backward = softmax_backward};

}  // namespace tg::detail::TG_ISA

#pragma GCC diagnostic pop
