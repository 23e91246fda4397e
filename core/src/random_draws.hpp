// PyTorch's CPU transforms from the generator's 32-bit words to uniform and normal values
// (ATen's DistributionsHelper.h and TransformationHelper.h), for tapegrad's random functions.
// Each one is a statement of what PyTorch computes, operation by operation and in the same
// precision, because the goal is PyTorch's bits, not merely the same distribution.
#pragma once

#include <cmath>
#include <cstdint>
#include <mutex>
#include <numbers>
#include <type_traits>

#include "tapegrad/bfloat16.hpp"
#include "tapegrad/generator.hpp"

namespace tg::detail {

// The next tempered word of the twister in `state` (generator.cpp).
uint32_t next_word(GeneratorState& state);
// out: [n], the next n words, as n calls of next_word give them.
void next_words(GeneratorState& state, uint32_t* out, int64_t n);

// A generator (the default one when given null) held locked for the lifetime of this object:
// every draw of one fill comes from one uninterrupted stretch of its sequence.
class LockedGenerator {
 public:
  explicit LockedGenerator(Generator* generator)
      : generator_(generator ? *generator : default_generator()), lock_(generator_.mutex_) {}

  uint32_t random() { return next_word(generator_.state_); }
  // words: [n], the next n words in order.
  void random_words(uint32_t* words, int64_t n) { next_words(generator_.state_, words, n); }
  // Two words, the first one the high half (PyTorch's random64).
  uint64_t random64() {
    const uint64_t high = random();
    return (high << 32) | random();
  }

  // U[from, to) in T. float: 24 bits of one word, scaled in float; double: 53 bits of two words;
  // BFloat16: 8 bits of one word, computed in float (its accumulation type) with to − from rounded
  // to bfloat16 first (c10::BFloat16's subtraction), the result rounded once.
  //   x = (bits & (2^digits − 1)) · 2^−digits,  x·(to − from) + from
  template <typename T>
  T uniform(T from, T to) {
    return uniform_of<T>(std::is_same_v<T, double> ? random64() : random(), from, to);
  }
  // The uniform of `bits` (random64()'s value for double, random()'s for float).
  template <typename T>
  static T uniform_of(uint64_t bits, T from, T to) {
    constexpr int digits = std::numeric_limits<T>::digits;
    constexpr uint64_t mask = (uint64_t{1} << digits) - 1;
    const T x = static_cast<T>(bits & mask) * (T(1) / static_cast<T>(uint64_t{1} << digits));
    return x * static_cast<T>(to - from) + from;
  }

  // One N(mean, std) value in double, PyTorch's normal_distribution<double>: Box–Muller on two
  // uniforms gives a pair; the first is returned and the second kept for the next call.
  //   r = √(−2 ln(1 − u₂)),  θ = 2π·u₁,  (r cos θ, r sin θ)
  double normal(double mean, double std) {
    GeneratorState& state = generator_.state_;
    if (state.has_cached_normal) {
      state.has_cached_normal = false;
      return state.cached_normal * std + mean;
    }
    const double u1 = uniform<double>(0.0, 1.0);
    const double u2 = uniform<double>(0.0, 1.0);
    const double radius = std::sqrt(-2.0 * std::log(1.0 - u2));
    const double theta = 2.0 * std::numbers::pi * u1;
    state.cached_normal = radius * std::sin(theta);
    state.has_cached_normal = true;
    return radius * std::cos(theta) * std + mean;
  }

 private:
  Generator& generator_;
  std::lock_guard<std::mutex> lock_;
};

}  // namespace tg::detail
