// Helpers shared by the nn tests.
#pragma once

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <tapegrad/tapegrad.hpp>

#include "support/fixtures.hpp"

namespace tg::nn_test {

inline DType fixture_dtype(const std::string& suffix) { return suffix == "_f32" ? kFloat32 : kFloat64; }
// The tolerance against PyTorch's fixtures: 1e-5 in float32, 1e-12 in float64.
inline double fixture_atol(const std::string& suffix) { return suffix == "_f32" ? 1e-5 : 1e-12; }

// A fresh leaf with the fixture's values (the cached fixture tensor itself stays untouched).
inline Tensor leaf(const Tensor& values) { return values.clone().requires_grad_(); }

inline Tensor randn_leaf(const Shape& shape, DType dtype) { return randn(shape, dtype).requires_grad_(); }

// The raw bytes of a tensor, for bitwise comparisons across thread counts.
inline std::vector<unsigned char> bytes(const Tensor& t) {
  REQUIRE(t.defined());
  std::vector<unsigned char> out(static_cast<size_t>(t.numel()) * element_size(t.dtype()));
  if (t.dtype() == kFloat32) std::memcpy(out.data(), t.data<float>(), out.size());
  else std::memcpy(out.data(), t.data<double>(), out.size());
  return out;
}

// Runs fn() inside a oneTBB arena of `threads` threads. The global_control lets oneTBB create
// that many threads even on a machine with fewer cores, so 8 threads really means 8.
template <typename Fn>
auto with_threads(int threads, const Fn& fn) {
  tbb::global_control allow(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(threads));
  tbb::task_arena arena(threads);
  return arena.execute(fn);
}

// Runs `run` — which returns the bytes of named results, e.g. {"y", bytes(y)}, {"dx", ...} — on
// 1 thread and on 2, 3 and 8, and REQUIREs every result to be bitwise identical to 1 thread's.
template <typename Run>
void require_bitwise_identical_across_threads(const Run& run) {
  const auto one_thread = with_threads(1, run);
  for (int threads : {2, 3, 8}) {
    CAPTURE(threads);
    REQUIRE(with_threads(threads, [] { return tbb::this_task_arena::max_concurrency(); }) == threads);
    const auto results = with_threads(threads, run);
    REQUIRE(results.size() == one_thread.size());
    for (size_t i = 0; i < results.size(); ++i) {
      INFO(results[i].first);
      REQUIRE(results[i].second == one_thread[i].second);
    }
  }
}

// max |actual − reference| / max |reference|: a relative error for a whole tensor, immune to the
// elements that happen to be near 0.
inline double relative_error(const Tensor& actual, const Tensor& reference) {
  const std::vector<double> a = actual.to(kFloat64).to_vector<double>();
  const std::vector<double> r = reference.to(kFloat64).to_vector<double>();
  REQUIRE(a.size() == r.size());
  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::isfinite(a[i]) ? std::fabs(a[i] - r[i]) : INFINITY);
    scale = std::max(scale, std::fabs(r[i]));
  }
  return worst / scale;
}

inline bool all_finite(const Tensor& t) {
  for (double v : t.to(kFloat64).to_vector<double>())
    if (!std::isfinite(v)) return false;
  return true;
}

}  // namespace tg::nn_test
