// Random numbers: one global 64-bit Mersenne Twister behind every random function, so that
// manual_seed(s) makes a whole program reproducible. The transforms are written out here (not
// std::*_distribution, whose algorithms differ between standard libraries).
#include <cmath>
#include <mutex>
#include <numbers>
#include <random>

#include "dispatch.hpp"
#include "tapegrad/autograd.hpp"
#include "tensor_impl.hpp"

namespace tg {

namespace {

struct Generator {
  std::mutex mutex;
  std::mt19937_64 engine{0x5eedULL};
};

Generator& generator() {
  static Generator instance;
  return instance;
}

// Uniform in [0, 1) with the full precision of T: 24 random bits for float, 53 for double, so the
// result can never round up to 1.
template <typename T>
T uniform01(std::mt19937_64& engine) {
  constexpr int bits = std::numeric_limits<T>::digits;
  return static_cast<T>(engine() >> (64 - bits)) * (T(1) / static_cast<T>(uint64_t{1} << bits));
}

template <typename Fill>
Tensor& fill_random(Tensor& t, const char* op, const Fill& fill) {
  check(t.defined(), op, "called on an undefined tensor");
  check(!(is_grad_enabled() && t.requires_grad()), op, "a tensor that requires grad (shape ", t.shape(),
        ") cannot be modified in place while grad mode is on; use a tg::NoGradGuard");
  Generator& gen = generator();
  std::lock_guard lock(gen.mutex);
  detail::dispatch_floating(op, t.dtype(), [&]<typename T>() { fill(t.mutable_data<T>(), t.numel(), gen.engine); });
  detail::bump_version(t);
  return t;
}

}  // namespace

void manual_seed(uint64_t seed) {
  Generator& gen = generator();
  std::lock_guard lock(gen.mutex);
  gen.engine.seed(seed);
}

Tensor& Tensor::uniform_(double low, double high) {
  check(low <= high, "uniform_", "expected low <= high, got low = ", low, ", high = ", high);
  return fill_random(*this, "uniform_", [&]<typename T>(T* out, int64_t n, std::mt19937_64& engine) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<T>(low + (high - low) * static_cast<double>(uniform01<T>(engine)));
  });
}

Tensor& Tensor::normal_(double mean, double stddev) {
  check(stddev >= 0, "normal_", "expected stddev >= 0, got ", stddev);
  return fill_random(*this, "normal_", [&]<typename T>(T* out, int64_t n, std::mt19937_64& engine) {
    // Box–Muller: two uniforms give two independent standard normals.
    for (int64_t i = 0; i < n; i += 2) {
      const double u1 = 1.0 - uniform01<double>(engine);  // (0, 1]: log(u1) is finite
      const double u2 = uniform01<double>(engine);
      const double radius = std::sqrt(-2.0 * std::log(u1));
      out[i] = static_cast<T>(mean + stddev * radius * std::cos(2.0 * std::numbers::pi * u2));
      if (i + 1 < n) out[i + 1] = static_cast<T>(mean + stddev * radius * std::sin(2.0 * std::numbers::pi * u2));
    }
  });
}

Tensor rand(const Shape& shape, DType dtype) {
  Tensor out = make_tensor(shape, dtype, "rand");
  return out.uniform_(0.0, 1.0);
}

Tensor randn(const Shape& shape, DType dtype) {
  Tensor out = make_tensor(shape, dtype, "randn");
  return out.normal_(0.0, 1.0);
}

}  // namespace tg
