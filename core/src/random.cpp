// The random functions: PyTorch's CPU algorithms on a tg::Generator (the default one unless one is
// given), so that the same seed gives PyTorch's numbers. The draws are serial, in row-major order,
// with the generator locked; only the Box–Muller transform of whole blocks runs in parallel, and
// it depends on the values alone, so results never depend on the number of threads.
//
// This file is compiled with -ffp-contract=off: PyTorch's reference (its scalar CPU build) rounds
// each multiply and add separately, and an FMA would change the last bit of x·(to − from) + from.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <type_traits>
#include <utility>
#include <vector>

#include "dispatch.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"
#include "random_draws.hpp"
#include "tapegrad/autograd.hpp"
#include "tapegrad/generator.hpp"
#include "tensor_impl.hpp"

namespace tg {

namespace {

using detail::LockedGenerator;

// Checks that `t` may be overwritten in place, then calls fill.operator()<T>(data, numel, gen)
// with the generator locked, for the dtypes in `Supported`.
template <typename Supported, typename Fill>
Tensor& fill_random(Tensor& t, const char* op, Generator* generator, const Fill& fill) {
  check(t.defined(), op, "called on an undefined tensor");
  detail::check_dtype<Supported>(op, t.dtype());
  check(!(is_grad_enabled() && t.requires_grad()), op, "a tensor that requires grad (shape ", t.shape(),
        ") cannot be modified in place while grad mode is on; use a tg::NoGradGuard");
  detail::check_inplace(t, op, false);  // the source of a narrow/select/slice/index result too
  LockedGenerator gen(generator);
  detail::dispatch<Supported>(op, t.dtype(), [&]<typename T>() {
    fill.template operator()<T>(t.mutable_data<T>(), t.numel(), gen);
  });
  detail::finish_inplace(t, op);  // moves the version, writes back a narrow/select/slice/index result
  return t;
}

// Every integer up to 2^digits in magnitude is exact in the floating type T.
template <typename T>
constexpr int64_t exact_integer_limit() {
  return int64_t{1} << std::numeric_limits<T>::digits;
}

using IntegerDTypes = detail::DTypes<kInt64, kFloat32, kFloat64>;

// The dtypes of the floating-point fills: bfloat16 draws as PyTorch's bfloat16 kernels do.
using RandomFloatDTypes = detail::DTypes<kFloat32, kFloat64, kBFloat16>;

// Box–Muller on a block of 16 uniforms in place, PyTorch's normal_fill_16: the first 8 values
// give u₁ = 1 − d[j] (in (0, 1], so the log is finite), the last 8 give u₂ = d[j + 8].
//   r = √(−2 ln u₁),  θ = 2π·u₂ (computed in double, rounded to T),
//   d[j] = r cos θ · std + mean,  d[j + 8] = r sin θ · std + mean
// Every step is rounded to T (`in_t`), as c10::BFloat16's operators and math functions round each
// result: a no-op for float and double, whose arithmetic already rounds there.
inline constexpr int64_t kNormalBlock = 16;

template <typename T>
void box_muller_block(T* d, T mean, T std) {
  const auto in_t = [](auto value) { return static_cast<T>(value); };
  for (int64_t j = 0; j < kNormalBlock / 2; ++j) {
    const T u1 = in_t(T(1) - d[j]);
    const T u2 = d[j + kNormalBlock / 2];
    const T radius = in_t(std::sqrt(in_t(T(-2) * in_t(std::log(u1)))));
    const T theta = static_cast<T>(2.0 * std::numbers::pi * static_cast<double>(u2));
    d[j] = in_t(in_t(in_t(radius * in_t(std::cos(theta))) * std) + mean);
    d[j + kNormalBlock / 2] = in_t(in_t(in_t(radius * in_t(std::sin(theta))) * std) + mean);
  }
}

// data: [n], n ≥ 16. PyTorch's normal_fill: n uniforms, Box–Muller per block of 16; when n is not
// a multiple of 16, 16 fresh uniforms overwrite the last 16 slots and are transformed again.
template <typename T>
void normal_fill(T* data, int64_t n, T mean, T std, LockedGenerator& gen) {
  for (int64_t i = 0; i < n; ++i) data[i] = gen.uniform<T>(0, 1);
  const int64_t blocks = n / kNormalBlock;
  detail::parallel_for(blocks, detail::kElementwiseGrain / kNormalBlock, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) box_muller_block(data + b * kNormalBlock, mean, std);
  });
  if (n % kNormalBlock != 0) {
    T* tail = data + n - kNormalBlock;
    for (int64_t i = 0; i < kNormalBlock; ++i) tail[i] = gen.uniform<T>(0, 1);
    box_muller_block(tail, mean, std);
  }
}

}  // namespace

Tensor& Tensor::uniform_(double low, double high, Generator* generator) {
  check(low <= high, "uniform_", "expected low <= high, got low = ", low, ", high = ", high);
  return fill_random<RandomFloatDTypes>(*this, "uniform_", generator, [&]<typename T>(T* out, int64_t n, LockedGenerator& gen) {
    // PyTorch converts the bounds to the tensor's type first and computes in it.
    const T from = static_cast<T>(low), to = static_cast<T>(high);
    for (int64_t i = 0; i < n; ++i) out[i] = gen.uniform<T>(from, to);
  });
}

Tensor& Tensor::normal_(double mean, double stddev, Generator* generator) {
  check(stddev >= 0, "normal_", "expected stddev >= 0, got ", stddev);
  return fill_random<RandomFloatDTypes>(*this, "normal_", generator, [&]<typename T>(T* out, int64_t n, LockedGenerator& gen) {
    if (n >= kNormalBlock) {
      normal_fill<T>(out, n, static_cast<T>(mean), static_cast<T>(stddev), gen);
    } else {
      // Small tensors: one double normal per element, the cached second value of a pair first.
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(gen.normal(mean, stddev));
    }
  });
}

Tensor& Tensor::bernoulli_(double p, Generator* generator) {
  check(p >= 0.0 && p <= 1.0, "bernoulli_", "expected a probability p in [0, 1], got ", p);
  return fill_random<detail::AllDTypes>(*this, "bernoulli_", generator, [&]<typename T>(T* out, int64_t n, LockedGenerator& gen) {
    // 1 with probability p: a double uniform (53 bits) below p, as PyTorch's scalar-p kernel.
    for (int64_t i = 0; i < n; ++i) out[i] = gen.uniform<double>(0.0, 1.0) < p ? T(1) : T(0);
  });
}

Tensor rand(const Shape& shape, DType dtype, Generator* generator) {
  Tensor out = make_tensor(shape, dtype, "rand");
  return out.uniform_(0.0, 1.0, generator);
}

Tensor rand(const Shape& shape, Generator& generator, DType dtype) { return rand(shape, dtype, &generator); }

Tensor randn(const Shape& shape, DType dtype, Generator* generator) {
  Tensor out = make_tensor(shape, dtype, "randn");
  return out.normal_(0.0, 1.0, generator);
}

Tensor randn(const Shape& shape, Generator& generator, DType dtype) { return randn(shape, dtype, &generator); }

Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype, Generator* generator) {
  check(low < high, "randint", "expected low < high, got low = ", low, ", high = ", high);
  detail::check_dtype_argument<IntegerDTypes>("randint", dtype);
  Tensor out = make_tensor(shape, dtype, "randint");
  // The range as PyTorch computes it, in 64 unsigned bits (high − low can exceed int64's range).
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  return fill_random<IntegerDTypes>(out, "randint", generator, [&]<typename T>(T* values, int64_t n, LockedGenerator& gen) {
    if constexpr (std::is_floating_point_v<T>)
      check(-exact_integer_limit<T>() <= low && high - 1 <= exact_integer_limit<T>(), "randint", "bounds [", low,
            ", ", high, ") are not all exact in ", dtype);
    // PyTorch's random_from_to: one word when the range fits in 32 bits, two otherwise, then
    // (bits mod range) + low.
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t bits = range >= (uint64_t{1} << 32) ? gen.random64() : gen.random();
      values[i] = static_cast<T>(static_cast<int64_t>(bits % range + static_cast<uint64_t>(low)));
    }
  });
}

Tensor randint(int64_t high, const Shape& shape, DType dtype, Generator* generator) {
  return randint(0, high, shape, dtype, generator);
}

Tensor randperm(int64_t n, DType dtype, Generator* generator) try {
  check(n >= 0, "randperm", "expected n >= 0, got ", n);
  detail::check_dtype_argument<IntegerDTypes>("randperm", dtype);
  Tensor out = make_tensor({n}, dtype, "randperm");
  return fill_random<IntegerDTypes>(out, "randperm", generator, [&]<typename T>(T* values, int64_t, LockedGenerator& gen) {
    if constexpr (std::is_floating_point_v<T>)
      check(n <= exact_integer_limit<T>(), "randperm", "n = ", n, " is too large for ", dtype);
    // PyTorch's randperm_cpu: the identity, then a forward Fisher–Yates shuffle in which position
    // i swaps with i + (one 32-bit word mod (n − i)). Checked against torch 1.13 up to n = 1000;
    // the 32-bit word leaves positions beyond 2^32 out of the early swaps, as torch 1.13 does.
    for (int64_t i = 0; i < n; ++i) values[i] = static_cast<T>(i);
    for (int64_t i = 0; i + 1 < n; ++i) {
      const int64_t offset = static_cast<int64_t>(gen.random()) % (n - i);
      std::swap(values[i], values[i + offset]);
    }
  });
} catch (...) {
  detail::rethrow_out_of_memory_as("randperm");
}

Tensor randperm(int64_t n, Generator& generator, DType dtype) { return randperm(n, dtype, &generator); }

namespace {

// PyTorch keeps category indices exact in float32: at most 2^24 categories.
constexpr int64_t kMaxCategories = int64_t{1} << 24;

// weights: [rows, categories]. tg::Error naming the first entry that is negative, infinite or NaN,
// or the first row whose weights are all zero: such a row is no distribution.
template <typename T>
void check_weights(const T* weights, int64_t rows, int64_t categories, const Shape& shape) {
  for (int64_t row = 0; row < rows; ++row) {
    const T* w = weights + row * categories;
    bool positive = false;
    for (int64_t c = 0; c < categories; ++c) {
      check(std::isfinite(w[c]) && w[c] >= 0, "multinomial", "expected finite weights >= 0, got ", w[c],
            " at row ", row, ", category ", c, " of the weights of shape ", shape);
      positive = positive || w[c] > 0;
    }
    check(positive, "multinomial", "row ", row, " of the weights of shape ", shape,
          " sums to 0 (invalid multinomial distribution): give every row a positive weight");
  }
}

// weights: [rows, categories] -> out: [rows, num_samples], num_samples <= categories, without
// replacement. The exponential trick (Gumbel-max, exponentiated): with Eᵢ ~ Exp(1) independent,
// argmax_i wᵢ / Eᵢ is category i with probability wᵢ / Σw, and the k largest of wᵢ / Eᵢ in order
// are k draws without replacement. PyTorch's CPU draws: one E per weight in row-major order,
// E = −log(1 − u) in double from a 53-bit uniform u, rounded to T; then the ratio in T.
template <typename T>
void draw_without_replacement(const T* weights, int64_t rows, int64_t categories, int64_t num_samples,
                              int64_t* out, LockedGenerator& gen) {
  Tensor ratio = make_tensor({rows, categories}, dtype_of<T>(), "multinomial");
  T* r = ratio.mutable_data<T>();
  const int64_t n = rows * categories;
  for (int64_t i = 0; i < n; ++i) r[i] = static_cast<T>(-std::log(1.0 - gen.uniform<double>(0.0, 1.0)));
  for (int64_t i = 0; i < n; ++i) r[i] = weights[i] / r[i];
  // topk takes ties lower index first; PyTorch's order among equal ratios (the zero weights, once
  // the positive ones are used up) is unspecified.
  const Tensor chosen = ratio.topk(num_samples, 1).indices;
  std::copy_n(chosen.data<int64_t>(), rows * num_samples, out);
}

// weights: [rows, categories] -> out: [rows, num_samples], with replacement, PyTorch's CPU kernel:
// the row's cumulative sums in T divided by their total (the last forced to 1), then per sample
// one 53-bit uniform u and the first category c with cdf[c] >= u (a binary search).
template <typename T>
void draw_with_replacement(const T* weights, int64_t rows, int64_t categories, int64_t num_samples, int64_t* out,
                           LockedGenerator& gen) {
  std::vector<T> cdf(static_cast<size_t>(categories));
  for (int64_t row = 0; row < rows; ++row) {
    const T* w = weights + row * categories;
    T total = 0;
    for (int64_t c = 0; c < categories; ++c) cdf[c] = total += w[c];
    for (int64_t c = 0; c < categories; ++c) cdf[c] /= total;
    cdf[categories - 1] = 1;
    for (int64_t s = 0; s < num_samples; ++s) {
      const double u = gen.uniform<double>(0.0, 1.0);
      // The first c with cdf[c] >= u (cdf is non-decreasing and cdf[last] = 1 > u), halving
      // [low, high) at low + (high − low) / 2 as PyTorch does.
      int64_t low = 0, high = categories;
      while (low < high) {
        const int64_t mid = low + (high - low) / 2;
        if (static_cast<double>(cdf[mid]) < u)
          low = mid + 1;
        else
          high = mid;
      }
      out[row * num_samples + s] = low;
    }
  }
}

}  // namespace

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator* generator) try {
  const char* op = "multinomial";
  check(probs.defined(), op, "undefined input");
  check(probs.dim() == 1 || probs.dim() == 2, op, "expected 1-D or 2-D weights (prob_dist), got shape ", probs.shape());
  detail::check_dtype<detail::FloatingDTypes>(op, probs.dtype());
  check(num_samples > 0, op, "expected num_samples > 0, got ", num_samples);
  const int64_t categories = probs.size(-1);
  const int64_t rows = probs.dim() == 2 ? probs.size(0) : 1;
  check(replacement || num_samples <= categories, op, "cannot draw num_samples = ", num_samples,
        " without replacement from ", categories, " categories (weights of shape ", probs.shape(),
        "): pass replacement = true or at most ", categories, " samples");
  check(categories <= kMaxCategories, op, "at most 2^24 categories, got ", categories);
  Tensor out = make_tensor(probs.dim() == 2 ? Shape{rows, num_samples} : Shape{num_samples}, kInt64, op);
  if (rows == 0) return out;
  detail::dispatch<detail::FloatingDTypes>(op, probs.dtype(), [&]<typename T>() {
    const T* weights = probs.data<T>();
    check_weights(weights, rows, categories, probs.shape());
    LockedGenerator gen(generator);
    if (!replacement)
      draw_without_replacement(weights, rows, categories, num_samples, out.mutable_data<int64_t>(), gen);
    else
      draw_with_replacement(weights, rows, categories, num_samples, out.mutable_data<int64_t>(), gen);
  });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("multinomial");
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator& generator) {
  return multinomial(probs, num_samples, replacement, &generator);
}

Tensor Tensor::multinomial(int64_t num_samples, bool replacement, Generator* generator) const {
  return tg::multinomial(*this, num_samples, replacement, generator);
}

}  // namespace tg
